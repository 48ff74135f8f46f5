// OneSidedReplicator: the primary side of the one-sided designs (rowan-kv,
// rwrite-kv, batch-kv, tailwind). A PUT's entry reaches every backup's PM
// with no backup worker involved, and is acknowledged when a Read that
// follows it on the same connection completes (fabric.h: "Write then Read"
// = persistent at the target; docs/papers/rowan.md §2.2).
//
//   rowan-kv   Send(entry) + Read(1 B): the backup's NIC puts it at the next
//              stride of its one shared b-log (backup_log.h).
//   rwrite-kv  Write(entry) at this sender's tail in a private remote
//              segment + Read. FaRM-style; many such streams per backup are
//              what drives PM write amplification.
//   batch-kv   rwrite-kv, but entries to one backup are gathered and written
//              together once 256 B are pending or 5 us passed.
//   share-kv   rwrite-kv, but all workers of a node share one remote log
//              per backup, reserving addresses with a local atomic
//              (shared_logs.h); reservations arrive out of order.
//   tailwind   rwrite-kv's private buffer per primary, each transfer being
//              entry + running-checksum block (tailwind_format.h), so the
//              backup can find the whole prefix after a crash without ever
//              having looked at the buffer.
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
#include "rpc/peer_caller.h"
#include "replication/shared_logs.h"
#include "replication/replicator.h"
#include "replication/tailwind_format.h"
#include "runtime/runtime.h"

namespace slip::replication {

struct OneSidedOptions {
  Protocol protocol = Protocol::kRowan;
  NodeId self = 0;
  // Largest single Send/Write: entries are split into log blocks of at most
  // this many bytes (the fabric's multi-receive message limit).
  size_t max_message = 16 << 10;
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

class OneSidedReplicator final : public Replicator {
 public:
  // `ep` is this sender's own endpoint; the replicator polls it on `exec`.
  OneSidedReplicator(runtime::Executor* exec, fabric::Endpoint* ep, rpc::PeerCaller* peers,
                     OneSidedOptions options);
  ~OneSidedReplicator() override;

  void Replicate(std::span<const NodeId> backups, const proto::ReplicateRequest& entry,
                 std::function<void(Status)> done) override;

  struct Stats {
    uint64_t sends = 0, writes = 0, flush_reads = 0, bytes = 0;
    uint64_t opens = 0, closes = 0, failures = 0;
    uint64_t batches = 0, batch_timeouts = 0;  // batch-kv flushes, by timeout
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Pending;  // one Replicate call
  using Bytes = std::shared_ptr<const std::vector<std::byte>>;
  struct Queued {
    std::shared_ptr<Pending> w;
    Bytes bytes;
  };
  struct Link {
    NodeId node = 0;
    enum class State { kIdle, kOpening, kReady } state = State::kIdle;
    fabric::PeerId peer = 0;
    fabric::RemoteMemory mem;
    uint64_t flush_offset = 0;
    // Private buffer (all but rowan).
    uint32_t buffer = 0;
    uint64_t buffer_offset = 0, buffer_len = 0, tail = 0;
    TailwindChain chain;
    std::shared_ptr<SharedRemoteLogs::Buffer> shared;  // share-kv
    std::deque<Queued> queue;  // waiting for the link to be ready
    // batch-kv: bytes gathered for one Write, and whose they are.
    std::vector<std::byte> batch;
    std::vector<std::shared_ptr<Pending>> batch_writes;
    runtime::TimerId batch_timer = 0;
    uint64_t epoch = 0;  // bumps on every reset: late completions are ignored
  };
  struct Op {
    NodeId node = 0;
    uint64_t epoch = 0;
    uint32_t buffer = UINT32_MAX;  // private buffer written, if any
    bool flush = false;            // the Read that acknowledges `writes`
    std::vector<std::shared_ptr<Pending>> writes;
    std::shared_ptr<SharedRemoteLogs::Buffer> shared;  // share-kv: the reservation it holds
    Bytes keep;                         // bytes a Send/Write reads until it completes
    std::vector<std::byte> own;         // or its own copy (tailwind, batch)
    uint8_t read_byte = 0;
  };

  void ReplicateAckingEarly(std::span<const NodeId> backups, const Bytes& bytes, std::function<void(Status)> done);
  void Submit(Link& l, const std::shared_ptr<Pending>& w, const Bytes& bytes);
  void Open(Link& l, int attempt);
  void Opened(NodeId node, uint64_t epoch, Result<rpc::PeerResponse> r, int attempt);
  // The current buffer cannot take `bytes` more: close it when its writes
  // are done and open another; the entry waits in the queue.
  void Roll(Link& l, const std::shared_ptr<Pending>& w, const Bytes& bytes);
  void FlushBatch(Link& l, bool by_timeout);
  // Posts a Write of `op.own` (or *op.keep) at the tail — or, share-kv, at
  // the `reserved` offset of the shared buffer — and the Read after it.
  void WriteAndFlush(Link& l, Op data, std::vector<std::shared_ptr<Pending>> writes,
                     std::optional<uint64_t> reserved = std::nullopt);
  // share-kv: reserve and write into the node's shared buffer for `l`, or
  // open the next one when it is full.
  void SubmitShared(Link& l, const std::shared_ptr<Pending>& w, const Bytes& bytes);
  Status UseShared(Link& l, std::shared_ptr<SharedRemoteLogs::Buffer> b);
  void ReleaseShared(NodeId node, const std::shared_ptr<SharedRemoteLogs::Buffer>& b);
  void SendClose(NodeId node, uint32_t buffer, uint64_t used);
  void PostRead(Link& l, std::vector<std::shared_ptr<Pending>> writes);
  void Fail(Link& l, const Status& s);
  void MaybeClose(NodeId node, uint32_t buffer);
  bool PollOnce();
  uint64_t Track(Op op);

  runtime::Executor* const exec_;
  fabric::Endpoint* const ep_;
  rpc::PeerCaller* const peers_;
  const OneSidedOptions o_;
  const std::shared_ptr<SharedRemoteLogs> shared_;
  runtime::PollerId poller_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::map<NodeId, Link> links_;
  std::unordered_map<uint64_t, Op> ops_;
  uint64_t next_context_ = 1;
  // Private buffers: operations still in flight into each, and which ones
  // are full (closed when their count drops to zero).
  std::map<std::pair<NodeId, uint32_t>, uint32_t> inflight_;
  std::map<std::pair<NodeId, uint32_t>, uint64_t> closing_;  // -> bytes used
  std::map<std::string, fabric::PeerId> peer_ids_;  // by endpoint address
  Stats stats_;
};

}  // namespace slip::replication
