// NodeCore: what a node does with one request — the request path of a
// sharded primary-backup store (docs/papers/rowan.md §3), without threads, sockets
// or clocks, so the same code serves real processes and the simulator.
//
//   PUT/DEL at a primary: check term and ownership, Store::Prepare (the entry
//     is persistent locally, not yet visible), replicate to every backup,
//     Store::Commit, reply with the version. Replication failure: Abandon and
//     reply Unavailable (the outcome is unknown, never "not written").
//   GET at a primary: check term and ownership, read the store.
//   REPLICATE at a backup: check term and membership, Store::Apply, reply.
//   SHARD_TAIL at any replica: a page of the shard's entries above a version
//     (promotion gathers them; see promoter.h).
//
// Every refusal is a clear status and changes nothing: StaleTerm when the
// request's term or shard does not match this node's view (the payload then
// carries the node's term, so the client refreshes its routing), Busy while a
// shard is blocked for reconfiguration or out of space, InvalidArgument /
// TooLarge / Corruption for malformed input.
//
// Threading: one NodeCore per worker executor (it owns one store writer id);
// all of a node's NodeCores share the Store, the ViewHolder and NodeShared.
// A shard's writes all go to one of them; its GETs to any (server/worker_pool.h).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/histogram.h"
#include "common/status.h"
#include "proto/kv.h"
#include "replication/backup_log.h"
#include "replication/replicator.h"
#include "rpc/peer_caller.h"
#include "runtime/runtime.h"
#include "server/commit_tracker.h"
#include "server/erda_heads.h"
#include "store/store.h"

namespace slip::server {

using replication::NodeId;

struct ShardReplicas {
  NodeId primary = 0;
  std::vector<NodeId> backups;
  // Backups still being seeded with the shard (a subset of `backups`): they
  // receive every new write, but lack older entries, so they must never be
  // promoted; the primary reports when seeding is done.
  std::vector<NodeId> syncing;
};

// A shard's primary moving from one node to another (docs/papers/rowan.md
// §3.7): `to` is the shard's primary in the view; `from` hands it over.
// (A backup's move is re-replication: the target is a syncing backup.)
struct PrimaryMove {
  uint32_t shard = 0;
  NodeId from = 0, to = 0;
};

// The part of the cluster configuration a node acts on.
struct NodeView {
  uint64_t term = 0;
  std::vector<ShardReplicas> shards;  // index = shard id
  std::vector<bool> blocked;          // per shard: refuse requests (Busy)
  std::vector<PrimaryMove> moves;     // primaries' moves under way

  // The move of `shard`'s primary, if one is under way.
  const PrimaryMove* MoveOf(uint32_t shard) const {
    for (const PrimaryMove& m : moves) {
      if (m.shard == shard) return &m;
    }
    return nullptr;
  }
};

// Publishes the current view to every worker. A mutex rather than
// std::atomic<std::shared_ptr>: GCC 12's lock-bit implementation of the
// latter is reported as racy by ThreadSanitizer, and the seeding handshake
// (NodeCore::Write) wants plain happens-before reasoning; one uncontended
// lock per request costs nothing next to a request.
class ViewHolder {
 public:
  std::shared_ptr<const NodeView> Get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return view_;
  }
  void Set(std::shared_ptr<const NodeView> v) {
    std::lock_guard<std::mutex> lock(mu_);
    view_ = std::move(v);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const NodeView> view_ = std::make_shared<NodeView>();
};

// Keys with a DEL in flight at this primary, shared by the node's workers.
// A DEL answers "found" from the committed state, so a second DEL of the
// same key must wait until the first commits or is abandoned; otherwise both
// would report found (not linearizable). It gets Busy and the client retries.
// PUTs need no such care: their versions order them.
class DeleteGuard {
 public:
  bool TryAcquire(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    return keys_.insert(key).second;
  }
  void Release(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    keys_.erase(key);
  }

 private:
  std::mutex mu_;
  std::unordered_set<std::string> keys_;
};

// Writes a primary has prepared and not yet finished, per shard and by the
// term they started in. Seeding a new backup must wait until every write
// that started before the backup was added has finished: those replicate to
// the old backup list, and a seed walk (committed entries only) could miss
// one still in flight.
class InFlightWrites {
 public:
  void Begin(uint32_t shard, uint64_t term) {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_[{shard, term}];
  }
  void End(uint32_t shard, uint64_t term) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = count_.find({shard, term});
    if (it != count_.end() && --it->second == 0) count_.erase(it);
  }
  // Writes in flight on every shard (metrics).
  uint64_t Total() const {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t n = 0;
    for (const auto& [k, c] : count_) n += c;
    return n;
  }
  // Whether a write of `shard` that started in a term below `term` is in flight.
  bool AnyBefore(uint32_t shard, uint64_t term) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = count_.lower_bound({shard, 0});
    return it != count_.end() && it->first.first == shard && it->first.second < term;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> count_;
};

// Shards this node serves as the target of a primary's move while their
// entries are still being copied from the source: a key not found here may
// be there (NodeCore fetches it first).
class MigrationsIn {
 public:
  void Copying(uint32_t shard, NodeId source) {
    std::lock_guard<std::mutex> lock(mu_);
    copying_[shard] = source;
    any_ = true;
  }
  void Done(uint32_t shard) {
    std::lock_guard<std::mutex> lock(mu_);
    copying_.erase(shard);
    any_ = !copying_.empty();
  }
  // Asked on every GET and DEL: no lock while nothing is being copied.
  std::optional<NodeId> SourceOf(uint32_t shard) const {
    if (!any_.load(std::memory_order_acquire)) return std::nullopt;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = copying_.find(shard);
    if (it == copying_.end()) return std::nullopt;
    return it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, NodeId> copying_;
  std::atomic<bool> any_{false};
};

// Shards this process handed over as a move's source (MIGRATE_BEGIN). It
// serves their entries to the target (copy, fetches) only then: a new
// incarnation of the node may not hold what the one that was primary held,
// so the target must get the hand-over again (which needs a valid lease).
class HandedOver {
 public:
  void Add(uint32_t shard) {
    std::lock_guard<std::mutex> lock(mu_);
    shards_.insert(shard);
  }
  bool Contains(uint32_t shard) const {
    std::lock_guard<std::mutex> lock(mu_);
    return shards_.contains(shard);
  }

 private:
  mutable std::mutex mu_;
  std::set<uint32_t> shards_;
};

// erda: how long the grants this node gave for each shard may still be
// used (clients read its table one-sidedly until then). A move's source
// hands a shard over only once they have all run out.
class GrantsOut {
 public:
  void Extend(uint32_t shard, runtime::Nanos until) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& u = until_[shard];
    u = std::max(u, until);
  }
  runtime::Nanos Until(uint32_t shard) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = until_.find(shard);
    return it == until_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, runtime::Nanos> until_;
};

// State every worker of a node shares.
// Keys with a write prepared at this primary and not yet committed or
// abandoned (any kind: PUT, DEL, conditional). A conditional PUT decides on
// the committed state, so it must not run while a write of its key is in
// flight: that write, with a lower version, would be acknowledged and then
// hidden by the conditional one (not linearizable). It gets Busy and the
// client retries.
class KeysInFlight {
 public:
  void Begin(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_[key];
  }
  void End(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = count_.find(key);
    if (it != count_.end() && --it->second == 0) count_.erase(it);
  }
  bool Has(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_.contains(key);
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint32_t> count_;
};

struct NodeShared {
  DeleteGuard deletes;
  KeysInFlight writing;
  InFlightWrites writes;
  CommitTracker commits;
  MigrationsIn migrations_in;
  HandedOver handed_over;
  GrantsOut grants_out;
};

// The node-wide part of an ERDA_GRANT answer (its term and grant_ns are per
// request), and how long a grant may run at most.
struct ErdaLayout {
  proto::ErdaGrantResponse grant;  // grant.address views `address`
  std::string address;
  runtime::Nanos max_grant = 100 * runtime::kMillisecond;
  // The copying baselines (erda-raw, erda-redo): a PUT's entry is staged in
  // a head place — by the client one-sidedly, or by the node from a
  // two-sided PUT — checked, and copied into the log, where erda adopts it.
  bool copy_puts = false;
};

// How a NodeCore is wired into its node; defaults suit a single-node test.
struct NodeCoreOptions {
  // This core is worker `worker_index` of `worker_count` (WorkerPool): it
  // writes the CommitVer records of the shards it owns (WorkerOfShard).
  uint32_t worker_index = 0, worker_count = 1;
  // One-sided designs: REPL_OPEN / REPL_CLOSE are served by this node's
  // backup log, and SHARD_TAIL first indexes everything peers wrote into
  // this node's PM (BackupLog::CatchUp). Null (rpc-kv): both are refused.
  replication::BackupLog* backup = nullptr;
  // A primary serves clients only while its lease from the configuration
  // manager is valid: the manager promotes a replacement only after the old
  // primary's lease has expired, so a partitioned primary never serves a
  // stale read. Returns how long the lease still runs (<= 0: expired).
  // Empty: always valid (single-node tests).
  std::function<runtime::Nanos()> lease_left;
  // The calling thread's CPU clock (ns), to account the CPU this node spends
  // as a backup (REPLICATE, REPL_OPEN, REPL_CLOSE, REPL_PERSIST):
  // Counters::backup_cpu_ns (REPLICATEs sampled, one in 17).
  std::function<int64_t()> cpu_clock;
  // A monotonic clock (ns) to time client requests by, from arrival to
  // reply (Counters::latency_ns). Empty: not timed.
  std::function<runtime::Nanos()> clock;
  // Largest response to a SHARD_TAIL request (entries beyond it go in the
  // next page). Must fit one RPC message; the default fits an 8 KiB frame.
  size_t tail_page_bytes = 6 << 10;
  // A CommitVer record only once the CommitVersion moved by this many
  // versions. Each record is a replicated write: one per shard per interval
  // doubled the writes of a loaded cluster on a machine where a write costs
  // an msync (bench/results/2026-11-23-commitver.md). The price: a promotion
  // may exchange up to this many committed entries per shard beyond the tail.
  uint64_t commit_record_step = 64;
  // Group commit. Runs `fn` on this core's executor once the requests of
  // the current loop turn were handled (thread runtime: tasks posted from a
  // poller run on the next turn, after everything that poll returned).
  // Writes and backup applies of the turn then share one persist
  // (Store::Flush), so a file-backed node pays one msync per batch. Unset:
  // every write persists on its own (a node whose persists cost nothing —
  // dram, dax — and unit tests that drive a core by hand).
  std::function<void(std::function<void()>)> defer;
  // The erda design: this worker serves clients' direct access (ERDA_GRANT,
  // ERDA_RESERVE, ERDA_COMMIT) with these heads on this executor; null: the
  // requests are refused (NotSupported).
  ErdaHeads* erda_heads = nullptr;
  runtime::Executor* erda_exec = nullptr;
  // What ERDA_GRANT answers besides the term and the grant's length: the
  // node's one-sided endpoint, registrations and table (node-wide).
  std::shared_ptr<const ErdaLayout> erda_layout;
  // The target of a primary's move fetches keys it has not copied yet from
  // the source through these (the worker's). Null: it cannot, so it answers
  // Busy until the copy is done.
  rpc::PeerCaller* peers = nullptr;
};

class NodeCore {
 public:
  // `payload` of a response; on an error status it is a KvResponse whose
  // value is the error text (and whose term is the node's).
  using Reply = std::function<void(Code status, std::string payload)>;

  // `shared` is shared by all NodeCores of a node (null: a private one).
  NodeCore(NodeId self, store::Store* store, uint32_t writer, replication::Replicator* replicator,
           const ViewHolder* views, std::shared_ptr<NodeShared> shared = nullptr, NodeCoreOptions options = {});
  ~NodeCore();
  NodeCore(const NodeCore&) = delete;
  NodeCore& operator=(const NodeCore&) = delete;

  // CommitVer records (commit_tracker.h): for every shard this node serves
  // as primary whose CommitVersion moved, writes it to the shard's backups
  // as a write of the shard's CommitKey. Called every commit interval.
  void WriteCommitRecords();
  // The CommitVersion recorded in this node's store for `shard` (0: none).
  uint64_t RecordedCommitVersion(uint32_t shard) const;

  // Handles one request; `reply` runs exactly once, possibly later (after
  // replication), on the same executor. `payload` need only live during the
  // call.
  void Handle(uint16_t method, std::span<const std::byte> payload, Reply reply);

  struct Counters {
    uint64_t puts = 0, dels = 0, gets = 0, replicated_in = 0;
    uint64_t gets_elsewhere = 0;  // GETs served here of a shard another worker owns
    uint64_t stale = 0, busy = 0, malformed = 0, replication_failures = 0;
    uint64_t backup_requests = 0;  // REPLICATE + REPL_OPEN + REPL_CLOSE + REPL_PERSIST served
    uint64_t commit_records = 0;   // CommitVer records written as primary
    int64_t backup_cpu_ns = 0;     // their CPU time (with a cpu clock; REPLICATEs' sampled)
    uint64_t group_commits = 0;    // deferred flushes that found work
    uint64_t group_committed = 0;  // replies they released
    uint64_t erda_commits = 0;     // PUTs whose entry a client wrote one-sidedly
    uint64_t erda_copies = 0;      // PUTs staged, then copied (erda-raw, erda-redo)
    uint64_t migration_fetches = 0;  // keys fetched from a move's source (GET/DEL misses)
    uint64_t conditional_unmet = 0;  // PUT_IFs whose condition did not hold (nothing written)
    // Per shard served as primary: its load as Rowan's hotspot policy
    // counts it (cluster/rebalance.h) — a GET 1, a PUT or DEL 1 plus the
    // replication writes it sends (one per backup). Index = shard.
    std::vector<uint64_t> shard_load;
    // Client requests from arrival to reply (a write's includes its
    // replication), in ns, by kind; with a clock only.
    enum Op : uint8_t { kPutOp, kGetOp, kDelOp };
    std::array<Histogram, 3> latency_ns;
  };
  const Counters& counters() const { return counters_; }

 private:
  void HandleWrite(proto::Method m, std::span<const std::byte> payload, Reply reply, bool fetched = false);
  // Prepare, replicate to the shard's backups, commit or abandon; reply.
  void Write(const NodeView& view, uint32_t shard, log::EntryType type, std::string_view key,
             std::string_view value, std::shared_ptr<std::string> guarded, Reply reply);
  // `fetched`: the key was fetched from a move's source already (no second time).
  void HandleGet(std::span<const std::byte> payload, Reply reply, bool fetched = false);
  // A primary's move (docs/papers/rowan.md §3.7). At the source: hand over
  // (MIGRATE_BEGIN) and answer fetches (MIGRATE_FETCH). At the target:
  // fetch a key not copied yet, apply it here, then `then` (with the
  // outcome) — a GET or DEL that missed reads or deletes it afterwards.
  void HandleMigrateBegin(std::span<const std::byte> payload, Reply reply);
  void HandleMigrateFetch(std::span<const std::byte> payload, Reply reply);
  void HandleMigratePush(std::span<const std::byte> payload, Reply reply);
  // The move of `shard` this node hands over in the request's `term`, or a
  // refusal already replied (Busy: behind, or not handed over by this process).
  const PrimaryMove* HandingOver(const NodeView& view, uint64_t term, uint32_t shard, const Reply& reply);
  void FetchFromSource(uint64_t term, uint32_t shard, NodeId source, std::string key,
                       std::function<void(Status)> then);
  // Whether `key` of `shard` may still be at a move's source only: nothing
  // of it here and the shard's copy unfinished. The source, if so.
  std::optional<NodeId> MayBeAtSource(uint32_t shard, std::string_view key) const;
  void HandleReplicate(std::span<const std::byte> payload, Reply reply);
  void HandleShardTail(std::span<const std::byte> payload, Reply reply);
  // A page of `shard`'s entries above `min_version` after `skip` walked
  // (tail_page_bytes): what SHARD_TAIL sends and MIGRATE_PUSH writes.
  struct ShardPage {
    std::vector<store::Store::ShardEntry> entries;
    uint64_t walked = 0;  // the next page's skip
    bool more = false;
  };
  Result<ShardPage> ReadShardPage(uint32_t shard, uint64_t min_version, uint64_t skip) const;
  void HandleReplControl(proto::Method m, std::span<const std::byte> payload, Reply reply);
  // Term and primary ownership of req.shard; replies and returns false if not.
  bool CheckPrimary(const NodeView& v, const proto::KvRequest& req, const Reply& reply);
  // CheckPrimary without a key: term, ownership, lease, not blocked.
  bool CheckServing(const NodeView& v, uint64_t term, uint32_t shard, const Reply& reply);
  // After Prepare (or an erda entry adopted): replicate, commit or abandon, reply.
  void ReplicateAndCommit(const NodeView& view, uint32_t shard, std::shared_ptr<store::Store::PendingWrite> pending,
                          std::string_view value, std::shared_ptr<std::string> guarded, Reply reply,
                          std::function<void(Status)> on_done = nullptr);
  // erda (node_core_erda.cc)
  void HandleErdaGrant(std::span<const std::byte> payload, Reply reply);
  void HandleErdaReserve(std::span<const std::byte> payload, Reply reply);
  void HandleErdaCommit(std::span<const std::byte> payload, Reply reply);
  // erda-redo's PUT: the node stages the entry in a head place (the redo
  // log record), then copies it in as CopyIn does.
  void WriteStaged(const NodeView& view, const proto::KvRequest& req, Reply reply);
  // The copying baselines: the staged entry of `r` checked, written into
  // this worker's t-log under its reserved version, replicated, committed.
  // REQUIRES: writes.Begin(r.shard, view.term) ran.
  void CopyIn(const NodeView& view, const ErdaHeads::Reservation& r, Reply reply);
  void ErdaTick();
  void StartErdaTicks();
  bool lease_ok() const { return !lease_left_ || lease_left_() > 0; }
  void CountLoad(uint32_t shard, uint64_t n) {
    if (counters_.shard_load.size() <= shard) counters_.shard_load.resize(shard + 1);
    counters_.shard_load[shard] += n;
  }
  void Fail(const Reply& reply, const Status& s, uint64_t term);
  // Group commit: runs `after` once this turn's deferred writes are
  // persistent (at once, with nothing deferred, when there is no `defer`).
  void AfterFlush(std::function<void()> after);
  void ScheduleFlush();
  void FlushGroup();
  store::Store::Persist persist_mode() const {
    return defer_ ? store::Store::Persist::kDeferred : store::Store::Persist::kNow;
  }

  const NodeId self_;
  store::Store* const store_;
  const uint32_t writer_;
  replication::Replicator* const replicator_;
  const ViewHolder* const views_;
  std::shared_ptr<NodeShared> shared_;
  std::function<runtime::Nanos()> lease_left_;
  replication::BackupLog* const backup_;
  std::function<int64_t()> cpu_clock_;
  // REPLICATEs whose CPU is sampled: one in kReplicateSample, counted for
  // all (the clock is a system call); replicates_ counts them. A prime, so
  // the sample does not lock onto a batch of 16 (threads, frames, depth).
  static constexpr int64_t kReplicateSample = 17;
  uint64_t replicates_ = 0;
  std::function<runtime::Nanos()> clock_;
  // `reply`, recording the request's latency when it runs.
  Reply Timed(Counters::Op op, Reply reply);
  Counters counters_;
  const size_t tail_page_bytes_;
  const std::vector<std::string> commit_keys_;  // CommitKeys, by shard
  const uint64_t commit_record_step_;
  const uint32_t worker_index_, worker_count_;
  std::function<void(std::function<void()>)> defer_;
  std::vector<std::function<void()>> after_flush_;
  bool flush_scheduled_ = false;
  ErdaHeads* const erda_heads_;
  runtime::Executor* const erda_exec_;
  std::shared_ptr<const ErdaLayout> erda_layout_;
  rpc::PeerCaller* const peers_;
  runtime::TimerId erda_tick_ = 0;
  runtime::Nanos last_segment_release_ = 0;
};

}  // namespace slip::server
