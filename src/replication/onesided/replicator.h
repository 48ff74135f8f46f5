// OneSidedReplicator: the primary side that every one-sided design shares.
// A PUT's entry reaches every backup's PM with no backup worker involved,
// and is acknowledged when a Read that follows it on the same connection
// completes (fabric.h: "Write then Read" = persistent at the target;
// docs/papers/rowan.md §2.2).
//
// What differs between designs is only how an entry is *placed* in a
// backup's memory — a Send into the backup's shared multi-receive log
// (rowan), a Write at this sender's tail in a private buffer (rwrite),
// gathered Writes (batch), a Write at a reserved offset of a buffer shared
// by a node's workers (share), entry + running checksum in one Write
// (tailwind). That is a Placement (below), supplied by the design's folder
// through the registry (replication/registry.h). Everything else is here:
//
// Control path: the first write to a backup asks it (REPL_OPEN, over the
// PeerCaller) for its replication endpoint, registered memory and, for
// private buffers, a segment; a full buffer is closed (REPL_CLOSE) once every
// write into it completed — never earlier, or the backup could digest it
// before the last entries land — and a new one is opened meanwhile.
//
// A failed or timed-out operation fails the writes that used it (their
// outcome is unknown; NodeCore abandons them) and the link reopens on the
// next write, on a fresh buffer.
//
// Threading: everything runs on `exec`, which also polls the endpoint.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "fabric/fabric.h"
#include "replication/design.h"
#include "replication/replicator.h"
#include "replication/share/shared_logs.h"
#include "rpc/peer_caller.h"
#include "runtime/runtime.h"

namespace slip::replication {

struct OneSidedOptions {
  Protocol protocol = Protocol::kRowan;
  NodeId self = 0;
  // Largest single Send/Write: entries are split into log blocks of at most
  // this many bytes (the fabric's multi-receive message limit).
  size_t max_message = 16 << 10;
  // Entries larger than this are placed in pieces of whole blocks, which
  // may land in different buffers; well below a buffer (a store segment).
  size_t max_piece = 1 << 20;
  // batch-kv: flush once this many bytes are pending, or after the timeout.
  size_t batch_bytes = 256;
  runtime::Nanos batch_timeout = 5 * runtime::kMicrosecond;
  // REPL_OPEN refused with Busy (backup's admission limit): retry this often.
  runtime::Nanos open_retry = runtime::kMillisecond;
  int open_attempts = 200;
  // TEST ONLY (the simulation's injected bug): acknowledge a write once all
  // but one backup made it persistent. Never set outside tests.
  bool test_bug_ack_early = false;
  // The configuration term to put in control requests.
  std::function<uint64_t()> term;
  // share-kv: the logs this node's workers share; null gives the replicator
  // its own (a node with one worker).
  std::shared_ptr<SharedRemoteLogs> shared_logs;
};

class OneSidedReplicator;

namespace onesided {

// One Replicate call. `remaining` counts one hold per backup (released once
// that backup's flush Read is posted) plus one per operation posted for it:
// done(OK) only when every Send/Write and every Read completed cleanly (a
// torn Write can complete with an error after the Read behind it), done
// with the error at the first failure.
struct Pending {
  uint32_t remaining = 0;
  bool finished = false;
  std::function<void(Status)> done;
  runtime::Executor* exec = nullptr;

  void Ack();
  // Deferred: a failure can be found deep inside Replicate or a poll loop,
  // and `done` may start the next write.
  void Fail(const Status& s);
};
using PendingPtr = std::shared_ptr<Pending>;
// An encoded entry; operations keep it alive until they complete.
using Bytes = std::shared_ptr<const std::vector<std::byte>>;

// The connection to one backup and the buffer being written there.
struct Link {
  NodeId node = 0;
  enum class State { kIdle, kOpening, kReady } state = State::kIdle;
  fabric::PeerId peer = 0;
  fabric::RemoteMemory mem;
  uint64_t flush_offset = 0;
  // The backup persists landed bytes only on REPL_PERSIST (its PM is a file):
  // a flush Read's writes are acknowledged once it answers.
  bool persist_by_request = false;
  uint64_t incarnation = 0;  // the backup process's (ReplOpenResponse)
  uint64_t send_token = 0;  // shared log: starts every message (replication/seal.h)
  // The target buffer (private or shared): its id, place and size in `mem`,
  // and this sender's tail in it (private buffers).
  uint32_t buffer = 0;
  uint64_t buffer_offset = 0, buffer_len = 0, tail = 0;
  struct Queued {
    PendingPtr w;
    Bytes bytes;
  };
  std::deque<Queued> queue;  // waiting for the link to be ready
  uint64_t epoch = 0;        // bumps on every reset: late completions are ignored
  // Sends and Writes posted silently (fabric::kSilent) since the last flush
  // Read: that Read's completion is theirs too.
  std::vector<uint64_t> silent;
};

// One posted Send, Write or Read.
struct Op {
  NodeId node = 0;
  uint64_t epoch = 0;
  uint32_t buffer = UINT32_MAX;  // private buffer whose close waits for it, if any
  bool flush = false;            // the Read that acknowledges `writes`
  bool persist = false;          // ... once the backup answered REPL_PERSIST
  uint64_t incarnation = 0;      // the backup process the writes went to
  std::vector<PendingPtr> writes;
  Bytes keep;                    // bytes a Send/Write reads until it completes
  std::vector<std::byte> own;    // or its own copy (tailwind, batch)
  std::function<void()> release;  // runs once the operation is over (share: its reservation)
  uint8_t read_byte = 0;
  // A flush Read: the silent Sends/Writes posted before it on its link,
  // which complete with it (their failures are reported before it).
  std::vector<uint64_t> covers;
  // Dropped before its Read was posted (DropSilent): it may still land, so
  // its buffer's count and `release` wait until it is forgotten.
  bool orphan = false;
};

// How a design places entries in a backup's memory (the per-design half of
// the primary side). Runs on the replicator's executor.
class Placement {
 public:
  virtual ~Placement() = default;
  // What REPL_OPEN asks for: kNone (a shared log the backup's NIC fills,
  // rowan) or kPrivate (a segment for this sender).
  virtual proto::ReplBuffer buffer_kind() const { return proto::ReplBuffer::kPrivate; }
  // Whether flush Reads count as writes into this sender's private buffer
  // (its close waits for them).
  virtual bool flush_holds_buffer() const { return true; }
  // Bytes a transfer adds to an entry (tailwind: its checksum block); an
  // entry that cannot fit an empty buffer with them is TooLarge.
  virtual size_t framing_bytes() const { return 0; }
  // Posts `bytes` for `w` on ready link `l` (with r's primitives).
  virtual void Submit(OneSidedReplicator& r, Link& l, const PendingPtr& w, const Bytes& bytes) = 0;
  // REPL_OPEN answered for `l`: point the link at the buffer it names.
  virtual Status Adopt(OneSidedReplicator& r, Link& l, const proto::ReplOpenResponse& resp);
  // `l` is ready on a fresh buffer.
  virtual void Ready(Link& /*l*/) {}
  // `l` failed: drop its design state; returns writes it was holding back
  // (they fail before the queued ones).
  virtual std::vector<PendingPtr> Reset(OneSidedReplicator& /*r*/, Link& /*l*/) { return {}; }
  // The replicator is going away.
  virtual void Stop(OneSidedReplicator& /*r*/) {}
};

}  // namespace onesided

class OneSidedReplicator final : public Replicator {
 public:
  // `ep` is this sender's own endpoint; the replicator polls it on `exec`.
  OneSidedReplicator(runtime::Executor* exec, fabric::Endpoint* ep, rpc::PeerCaller* peers,
                     OneSidedOptions options, std::unique_ptr<onesided::Placement> placement);
  ~OneSidedReplicator() override;

  void Replicate(std::span<const NodeId> backups, const proto::ReplicateRequest& entry,
                 std::function<void(Status)> done) override;

  struct Stats {
    uint64_t sends = 0, writes = 0, flush_reads = 0, bytes = 0;
    uint64_t persist_requests = 0;  // REPL_PERSIST calls (file-backed backups)
    uint64_t opens = 0, closes = 0, failures = 0;
    uint64_t batches = 0, batch_timeouts = 0;  // batch-kv flushes, by timeout
  };
  const Stats& stats() const { return stats_; }

  // Primitives for placements.
  using Link = onesided::Link;
  using Op = onesided::Op;
  using PendingPtr = onesided::PendingPtr;
  using Bytes = onesided::Bytes;
  runtime::Executor* exec() const { return exec_; }
  const OneSidedOptions& options() const { return o_; }
  Stats& mutable_stats() { return stats_; }
  Link& LinkTo(NodeId node) { return links_[node]; }
  // Posts one Send of [data, data + len) (kept alive by `keep`) for `w`.
  Status PostSend(Link& l, const Bytes& keep, const std::byte* data, size_t len, const PendingPtr& w);
  // Posts a Write of `data.own` (or *data.keep) at this sender's tail of the
  // private buffer — or at `at` of a shared buffer — and the Read after it.
  void WriteAndFlush(Link& l, Op data, std::vector<PendingPtr> writes, std::optional<uint64_t> at = std::nullopt);
  // Posts the flush Read that acknowledges `writes` on `l`.
  void PostRead(Link& l, std::vector<PendingPtr> writes);
  // Asks `node` to persist what landed, then acknowledges `writes` (file-backed backups).
  void RequestPersist(NodeId node, uint64_t incarnation, std::vector<PendingPtr> writes);
  // The current buffer cannot take `bytes` more: close it when its writes
  // are done and open another; the entry waits in the queue.
  void Roll(Link& l, const PendingPtr& w, const Bytes& bytes);
  // Queues the entry and opens a (new) buffer for `l`.
  void Reopen(Link& l, const PendingPtr& w, const Bytes& bytes);
  void SendClose(NodeId node, uint32_t buffer, uint64_t used);
  // The peer id of a backup's replication endpoint (added on first use).
  Result<fabric::PeerId> PeerAt(const std::string& address);
  void Fail(Link& l, const Status& s);

 private:
  void ReplicateAckingEarly(std::span<const NodeId> backups, const Bytes& bytes, std::function<void(Status)> done);
  std::vector<Bytes> Pieces(const Bytes& bytes) const;
  void Submit(Link& l, const PendingPtr& w, const Bytes& bytes);
  void Open(Link& l, int attempt);
  void Opened(NodeId node, uint64_t epoch, Result<rpc::PeerResponse> r, int attempt);
  void MaybeClose(NodeId node, uint32_t buffer);
  bool PollOnce();
  using OpNode = std::unordered_map<uint64_t, Op>::node_type;
  // An operation is over with `status` (a flush Read's covered ones with it).
  void Finish(OpNode node, Code status, runtime::Nanos now,
              std::map<std::pair<NodeId, uint64_t>, std::vector<PendingPtr>>& to_persist);
  // The link failed before a Read was posted behind its silent operations:
  // their writes fail; nothing will report their end, so they are kept as
  // failed operations are, and only when they are forgotten does their
  // buffer stop waiting for them (a close before that could let the
  // backup digest and reuse a segment a late Write still lands in).
  void DropSilent(Link& l, const Status& s);
  // A kept failed operation is forgotten (kFailedOpsKept after it failed).
  void Forget(Op& op);
  // Registers an operation under a new context; one on a private buffer
  // keeps the buffer open until Untrack.
  uint64_t Track(Op op);
  void Untrack(const Op& op);

  runtime::Executor* const exec_;
  fabric::Endpoint* const ep_;
  rpc::PeerCaller* const peers_;
  const OneSidedOptions o_;
  const std::unique_ptr<onesided::Placement> placement_;
  runtime::PollerId poller_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::map<NodeId, Link> links_;
  std::unordered_map<uint64_t, Op> ops_;
  // Operations that failed (a timeout, a reset connection) may still be
  // under way at the provider, which reads their bytes (`keep`, `own`) and
  // writes their flush byte until it is done with them — and reports no
  // more (fabric.h). Their nodes are kept this long before they are freed.
  static constexpr runtime::Nanos kFailedOpsKept = 60 * runtime::kSecond;
  std::deque<std::pair<runtime::Nanos, OpNode>> failed_ops_;
  uint64_t next_context_ = 1;
  // Private buffers: operations still in flight into each, and which ones
  // are full (closed when their count drops to zero).
  std::map<std::pair<NodeId, uint32_t>, uint32_t> inflight_;
  std::map<std::pair<NodeId, uint32_t>, uint64_t> closing_;  // -> bytes used
  std::map<std::string, fabric::PeerId> peer_ids_;  // by endpoint address
  Stats stats_;
};

}  // namespace slip::replication
