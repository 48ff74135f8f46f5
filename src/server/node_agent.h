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
//   - at a cold start every shard this node serves is promoted first.
//
// Failed promotions and seeds are retried with backoff against the newest
// configuration; work for a shard this node no longer serves is dropped.
// Runs on one executor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "runtime/runtime.h"
#include "server/node_core.h"
#include "server/promoter.h"

namespace slip::server {

class NodeAgent {
 public:
  // `on_seeded` is called when a new backup of a shard this node serves
  // holds the whole shard (to be reported to the configuration manager,
  // which then stops listing it as syncing). Retried with every later
  // configuration that still lists it as syncing.
  NodeAgent(NodeId self, ViewHolder* views, Promoter* promoter, runtime::Executor* exec,
            std::shared_ptr<NodeShared> shared,
            std::function<void(uint32_t shard, NodeId backup, uint64_t term)> on_seeded = nullptr)
      : self_(self),
        views_(views),
        promoter_(promoter),
        exec_(exec),
        on_seeded_(std::move(on_seeded)),
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
  };
  const Counters& counters() const { return counters_; }
  bool busy() const { return !promoting_.empty() || !seeding_.empty(); }

 private:
  void Publish();
  void StartPromotion(uint32_t shard);
  void StartSeed(uint32_t shard, NodeId backup);

  const NodeId self_;
  ViewHolder* views_;
  Promoter* promoter_;
  runtime::Executor* exec_;
  std::shared_ptr<const NodeView> config_;   // the newest configuration adopted
  std::set<uint32_t> blocked_;                // shards waiting for their promotion
  std::set<uint32_t> promoting_;              // promotions in flight
  std::set<std::pair<uint32_t, NodeId>> seeding_;
  Counters counters_;
  std::function<void(uint32_t, NodeId, uint64_t)> on_seeded_;
  std::shared_ptr<NodeShared> shared_;
};

}  // namespace slip::server
