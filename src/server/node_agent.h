// NodeAgent: what a node does when the cluster configuration changes — the
// node-side half of failover, re-replication and cold start
// (docs/papers/rowan.md §3.6 steps 2-3, §3.8). The configuration manager only
// computes configurations; every node adopts them on its own:
//
//   - a shard this node newly serves as primary is blocked (clients get
//     Busy) until the Promoter has gathered every replica's entries and
//     scattered the union; then it is unblocked;
//   - a backup newly added to a shard this node serves is seeded with the
//     whole shard (it already receives live writes: it is in the replica
//     set);
//   - at a cold start every shard this node serves is promoted first;
//   - the target of a primary's move (docs/papers/rowan.md §3.7) blocks the
//     shard until the source handed it over (Promoter::HandOver), then
//     serves it while copying the source's entries (keys not copied yet
//     are fetched by NodeCore) and reports when it holds them all;
//   - a shard this node no longer holds (moved away, a backup retired) is
//     dropped from its store; at a cold start, every shard it does not hold.
//
// Failed promotions and seeds are retried with backoff against the newest
// configuration; work for a shard this node no longer serves is dropped.
// Runs on one executor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "runtime/runtime.h"
#include "server/node_core.h"
#include "server/promoter.h"

namespace slip::server {

// What the agent reports, and how it lets go of a shard's data.
struct NodeAgentHooks {
  // A new backup of a shard this node serves holds the whole shard (to be
  // reported to the configuration manager, which then stops listing it as
  // syncing). Retried with every later configuration that still lists it.
  std::function<void(uint32_t shard, NodeId backup, uint64_t term)> on_seeded;
  // This node, the target of a move of `shard`'s primary, holds every entry
  // the source had (to be reported: cluster::FinishMigration). Retried with
  // every later configuration that still lists the move.
  std::function<void(uint32_t shard, uint64_t term)> on_migrated;
  // This node holds `shard` no more: free its entries (Store::DropShard).
  std::function<void(uint32_t shard)> drop_shard;
  // Every view this node is about to act on, before any worker sees it (a
  // one-sided backup fences senders that lost their roles: BackupLog::Fence).
  std::function<void(const NodeView& view)> on_view;
};

class NodeAgent {
 public:
  NodeAgent(NodeId self, ViewHolder* views, Promoter* promoter, runtime::Executor* exec,
            std::shared_ptr<NodeShared> shared, NodeAgentHooks hooks = {})
      : self_(self),
        views_(views),
        promoter_(promoter),
        exec_(exec),
        hooks_(std::move(hooks)),
        shared_(std::move(shared)) {}

  // The first configuration of a brand-new cluster: nothing to reconcile.
  void Start(std::shared_ptr<const NodeView> v);
  // A configuration arrived; older or equal terms are ignored. The blocked
  // flags of `v` are ignored: blocking is this node's own business.
  void Adopt(std::shared_ptr<const NodeView> v);
  // The first configuration after this node restarted from its PM: every
  // shard it serves is promoted before it serves (replicas may differ in
  // writes that were never acknowledged).
  void ColdStart(std::shared_ptr<const NodeView> v);

  struct Counters {
    uint64_t promotions = 0, promotion_failures = 0, seeds = 0, seed_failures = 0;
    uint64_t pulled_entries = 0, pushed_entries = 0;
    uint64_t promotions_with_floor = 0;  // exchanged only above a CommitVer
    uint64_t migrations_in = 0, copied_entries = 0;  // a primary's moves to here
    uint64_t handover_retries = 0, copy_failures = 0;
    uint64_t shards_dropped = 0, keys_dropped = 0;
  };
  const Counters& counters() const { return counters_; }
  bool busy() const { return !promoting_.empty() || !seeding_.empty() || !moving_in_.empty(); }
  // Shards being moved to this node whose copy is not finished.
  size_t moves_in_progress() const { return moving_in_.size(); }
  struct MoveIn {
    uint32_t shard;
    NodeId source;
    uint64_t copied;  // entries so far (the current attempt's)
  };
  std::vector<MoveIn> moves_in() const {
    std::vector<MoveIn> v;
    for (const auto& [shard, source] : moving_in_) {
      auto it = copy_progress_.find(shard);
      v.push_back({shard, source, it == copy_progress_.end() ? 0 : it->second});
    }
    return v;
  }

 private:
  void Publish();
  void StartPromotion(uint32_t shard);
  void StartSeed(uint32_t shard, NodeId backup);
  // A primary's move to this node: hand-over, then the copy.
  void StartMoveIn(uint32_t shard);
  void StartCopy(uint32_t shard);
  void EndMoveIn(uint32_t shard);
  void RestartMoveIn(uint32_t shard);
  // Whether the newest configuration still moves `shard`'s primary to this node (from `source`, if given).
  bool MovingHere(uint32_t shard, std::optional<NodeId> source = std::nullopt) const;
  // Whether `view` gives this node a replica of `shard`, or has it hand the shard over.
  bool Holds(const NodeView& view, uint32_t shard) const;
  void Drop(uint32_t shard);

  const NodeId self_;
  ViewHolder* views_;
  Promoter* promoter_;
  runtime::Executor* exec_;
  std::shared_ptr<const NodeView> config_;   // the newest configuration adopted
  std::set<uint32_t> blocked_;                // shards waiting for their promotion
  std::set<uint32_t> promoting_;              // promotions in flight
  std::set<std::pair<uint32_t, NodeId>> seeding_;
  // Moves to this node: shard -> source, from the hand-over until the copy
  // is done; `move_busy_` while a hand-over or copy request is running.
  std::map<uint32_t, NodeId> moving_in_;
  std::set<uint32_t> move_busy_;
  std::set<uint32_t> copied_;  // copy done, the move still listed (reported)
  std::map<uint32_t, runtime::Nanos> move_started_;  // for the log
  std::map<uint32_t, uint64_t> copy_progress_;       // entries copied so far
  Counters counters_;
  NodeAgentHooks hooks_;
  std::shared_ptr<NodeShared> shared_;
};

}  // namespace slip::server
