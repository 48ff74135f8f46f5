// RubbleServer: a node of a RubbleDB cluster (designs `rubble`; docs/
// papers/rubbledb.md "In the cluster"). For every shard it replicates it
// runs one LSM engine in the shard's chain: the configuration's primary is
// the head, its backups follow in order (those still being seeded last).
//
//   - The head takes PUTs and DELs (WAL synced, group-committed over a few
//     writer threads), flushes and compacts, writes each finished table
//     into the same slot of every follower's slot image (rubble/slots.h:
//     the image is opened by the head itself, standing in for NVMe-oF) and
//     passes writes and version edits down the chain (RUBBLE_APPLY).
//   - A follower applies them in the head's MemTables, installs edits in
//     order, never flushes or compacts, passes on what took effect, and
//     reports the slots it holds to the head (RUBBLE_SLOTS; the head frees
//     a slot only when no follower can still read it, rubble/ledger.h).
//   - The chain's last member acknowledges: a write is answered once every
//     member applied it. GETs go to the last member that is not being
//     seeded (the read tail); while members behind it are still being
//     seeded it answers Busy for a key with a write not yet acknowledged,
//     so no read returns what a later read could miss.
//   - Failures: an item whose call fails is sent again to whoever follows
//     now (a middle's failure; resent writes and edits are recognised). A
//     head's successor is promoted in place (its held work dropped, its
//     MemTables flushed into tables of its own and shipped). A member being
//     seeded gets a fresh image and engine (RUBBLE_LINK), the head's tables
//     copied into its slots and its MemTables sent (RUBBLE_SEED); until
//     then it refuses items, and its predecessor keeps sending them. A
//     head that opened or was promoted first links fresh every follower
//     listed as syncing, and passes nothing on before (ResetStale).
//
// Every call on the node's executor; the engines' blocking calls run on
// the server's own threads (writers, and one applying followers' items), or
// all on one executor of the simulator's (RubbleServerEnv::jobs).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/cluster_config.h"
#include "lsm/db.h"
#include "rpc/peer_caller.h"
#include "rubble/slots.h"
#include "rubble/wire.h"
#include "runtime/runtime.h"
#include "server/pool_node.h"

namespace slip::server {

struct RubbleShape {
  lsm::DbOptions db;  // each replica's engine (its fs, role and hooks are set per replica)
  rubble::SlotGeometry slots;
};
// A cluster's default: 2 MB MemTables and tables, 64 slots of 2.125 MB
// (136 MB of image per follower and shard).
RubbleShape DefaultRubbleShape();
// For tests and the simulator: 8 KB MemTables and tables, so every few
// writes flush, compact and ship; `slot_count` slots of 16 KB; no direct I/O.
RubbleShape TinyRubbleShape(uint32_t slot_count);

// The largest key plus value a rubble cluster takes: a table holding it
// must still fit one slot (a key's versions are never split over tables).
inline constexpr size_t kMaxEntryBytes = 1 << 20;

struct RubbleServerEnv {
  uint32_t self = 0;
  runtime::Executor* exec = nullptr;
  rpc::PeerCaller* calls = nullptr;
  std::string dir;  // this node's replicas: shard-<s>/ and shard-<s>.slots
  std::function<void(const cluster::ClusterConfig&)> set_peers;
  // The head finished seeding `node` with `shard`: publish it (the
  // server learns the outcome from Adopt).
  std::function<void(cluster::ShardId shard, uint32_t node)> mark_synced;
  // Thread-safe (the engine's jobs ask it before they ship).
  std::function<runtime::Nanos()> lease_left;
  std::function<void(Status)> fatal;
  RubbleShape shape = DefaultRubbleShape();
  // The paper's baseline (design rubble-all-compact): every replica
  // flushes and compacts for itself; the chain carries writes only, which
  // followers write at the head's sequences. Seeding is the same (the
  // head's tables copied into the new replica's image, which it then
  // compacts away like any table of its own).
  bool all_compact = false;
  int writer_threads = 4;
  // Where the engines' blocking work runs. Null: the server's own threads
  // (writers, one applier) and each engine's flush and compaction threads.
  // An executor (the whole-cluster simulator's): every job is posted there,
  // engines run without threads, and nothing ever waits — a table that
  // cannot be shipped yet (a follower not linked, no free slot, a seed
  // being taken) puts its flush or compaction off, tried again shortly.
  runtime::Executor* jobs = nullptr;
};

class RubbleServer final : public PoolNode {
 public:
  explicit RubbleServer(RubbleServerEnv env);
  ~RubbleServer() override;

  void Adopt(const cluster::ClusterConfig& config) override;
  void Handle(uint16_t method, std::span<const std::byte> payload, Reply reply) override;
  // Nothing to poll: the engines' completions arrive as posted tasks.
  bool Poll() override { return false; }
  uint64_t serving_term() const override { return term_; }
  Counters counters() const override;
  HotWindow hot_keys() override { return window_.Last(env_.exec->Now()); }

  // CPU of the server's threads (the node executor's is the caller's).
  struct Cpu {
    uint64_t writers_ns = 0, apply_ns = 0, flush_ns = 0, compaction_ns = 0;
  };
  Cpu cpu() const;
  // The chain order of `shard`: primary, complete backups, backups being seeded.
  static std::vector<uint32_t> ChainOf(const cluster::ClusterConfig& c, cluster::ShardId shard);

 private:
  class Jobs;
  class Threads;
  class ExecutorJobs;
  struct Replica;
  struct Ship;
  struct Out;
  struct SyncGate;
  using ReplicaPtr = std::shared_ptr<Replica>;

  Status Open(Replica& r, bool head);
  lsm::DbOptions::EditLogged EditHook(std::shared_ptr<Ship> ship, cluster::ShardId shard);
  void Place(const ReplicaPtr& r, const cluster::ClusterConfig& c);
  void Promote(const ReplicaPtr& r);
  // Without threads (env.jobs): runs a head's put-off flushes and
  // compactions again until none is left; `then` once they are done.
  void Catch(const ReplicaPtr& r, std::function<void()> then = nullptr);
  void Drop(const ReplicaPtr& r);

  // Head.
  void Write(const ReplicaPtr& r, proto::Method m, std::string key, std::string value, Reply reply);
  void Sequenced(const ReplicaPtr& r, lsm::WriteBatch batch, lsm::WriteTicket ticket, Reply reply, bool found);
  void LinkFollowers(const ReplicaPtr& r);
  void Link(const ReplicaPtr& r, uint32_t node, bool fresh);
  void SeedNext(const ReplicaPtr& r);
  // Links fresh every follower that may still run an engine of an earlier
  // life of the head; nothing is passed on until each was.
  void ResetStale(const ReplicaPtr& r);
  // Whether a follower seeded by this head, listed as syncing, still holds
  // its seed; seeds it again if not.
  void CheckSeeded(const ReplicaPtr& r, uint32_t node);
  // Runs `then` once `node`'s predecessor has every write up to `sequence`
  // and every edit up to `edit`.
  void AfterPredecessorHas(const ReplicaPtr& r, uint32_t node, uint64_t sequence, uint64_t edit,
                           std::function<void()> then, int tries = 0);
  void SendSeed(const ReplicaPtr& r, uint32_t node, uint64_t seed_id, std::shared_ptr<std::string> bytes,
                uint64_t offset);
  void SeedFailed(const ReplicaPtr& r, uint32_t node, const Status& s);

  // Every member: the stream of items passed on and not acknowledged.
  // Passes `item` on (or, at the chain's end, acknowledges it); `done`
  // runs once the rest of the chain has it.
  void Emit(const ReplicaPtr& r, rubble::ChainItem item, std::vector<std::function<void(Status)>> done);
  void Send(const ReplicaPtr& r, const std::shared_ptr<Out>& o);
  void Acked(const ReplicaPtr& r, const std::shared_ptr<Out>& o);
  void ResendLater(const ReplicaPtr& r);
  void ResendAll(const ReplicaPtr& r);

  // Follower.
  void OnApply(std::span<const std::byte> payload, Reply reply);
  // An all-compact follower: writes in the head's order, each once.
  void ApplyInOrder(const ReplicaPtr& r, rubble::ChainItem item, Reply reply);
  void OnLink(std::span<const std::byte> payload, Reply reply);
  void OnSeed(std::span<const std::byte> payload, Reply reply);
  void OnSlots(std::span<const std::byte> payload, Reply reply);
  void ReportLater(const ReplicaPtr& r);
  // Applier thread: syncs `r`'s log soon (once for all applied by then).
  void SyncLater(const ReplicaPtr& r);
  // Callers answered once the chain after this replica has the item and
  // the sync covering apply `job` is done.
  std::vector<std::function<void(Status)>> AnsweringWhenSynced(const ReplicaPtr& r, uint64_t job,
                                                               std::vector<Reply> replies);
  // Whether `sender` may send items of `shard` to this node in `term`.
  Status Accepts(cluster::ShardId shard, uint64_t term, uint32_t sender, const char* what) const;

  void Refuse(const Reply& reply, const Status& s) const;
  ReplicaPtr Find(cluster::ShardId shard) const;

  const RubbleServerEnv env_;
  std::unique_ptr<Jobs> writers_;  // the heads' blocking writes
  std::unique_ptr<Jobs> applier_;  // followers' items, links, seeds, opening and closing engines
  cluster::ClusterConfig config_;
  uint64_t term_ = 0;
  std::map<cluster::ShardId, ReplicaPtr> replicas_;
  RequestWindow window_;
  std::atomic<uint64_t> gets_{0}, writes_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace slip::server
