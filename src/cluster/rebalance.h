// Rowan-KV's hotspot policy (docs/papers/rowan.md §3.7) as pure functions of
// one statistics period, so they are tested without processes: which shards
// to move where, and the configuration that starts a move.
//
//   A node's load is what the shards it is primary of served in the period
//   (each primary also counts the replication writes it sent for them, as
//   Rowan does). A node above mean x (1 + overloaded) is overloaded [paper:
//   30%]; then the hottest shards move from the most loaded node to the
//   least loaded one that holds no replica of them, one at a time, while a
//   move lowers the busier of the two, until every node is within
//   mean x (1 + balanced) [paper: 5%].
//
// The migration's data path (the source streams the shard's entries, the
// target installs them while serving) is the nodes' business; these only
// decide and describe it in the configuration.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_config.h"

namespace slip::cluster {

struct RebalanceOptions {
  double overloaded = 0.30;  // above mean x (1 + this): overloaded
  double balanced = 0.05;    // moves go on until every node is within mean x (1 + this)
};

struct ShardMove {
  ShardId shard = 0;
  NodeId from = 0, to = 0;
  double load = 0;  // the shard's, in the period
  bool operator==(const ShardMove&) const = default;
};

// `load[s]`: shard s's load in the period (missing entries count 0). Only up
// members take part; shards with a migration under way stay where they are.
// Empty when no node is overloaded, or no move would help.
std::vector<ShardMove> PlanRebalance(const ClusterConfig& config, const std::vector<double>& load,
                                     const RebalanceOptions& options = {});

// Growing and shrinking a sharded design's cluster (MovesShards): a node
// joins holding nothing and PlanSpread moves replicas to it; a node leaves
// once PlanDrain's moves took every replica off it. Each move is started
// with StartMigration and ends as any move does.

// `node` joins at `address`: term + 1, an up member holding nothing.
// InvalidArgument if it is a member already; NotSupported unless the
// design moves shards (MovesShards).
Result<ClusterConfig> AddMember(const ClusterConfig& config, NodeId node, const std::string& address);
// `node`, an up member holding no replica and in no move, leaves the
// membership: term + 1. InvalidArgument otherwise.
Result<ClusterConfig> DropMember(const ClusterConfig& config, NodeId node);
// Moves that even out the up nodes outside `exclude`: first primaries, then
// replicas, until every node has within one of every other's. Each takes a
// shard's primary (or complete backup) from the node with the most to the
// one with the fewest that holds no replica of the shard. Shards already
// moving stay; nodes in `exclude` (being drained) take nothing.
std::vector<ShardMove> PlanSpread(const ClusterConfig& config, const std::set<NodeId>& exclude = {});
// Moves that take every replica off `node` (to be removed): each to the up
// node outside `exclude` holding the fewest replicas (then primaries) among
// those holding none of the shard. Shards already moving are skipped (plan
// again once they are done). InvalidArgument naming a shard that no node
// can take.
Result<std::vector<ShardMove>> PlanDrain(const ClusterConfig& config, NodeId node,
                                         const std::set<NodeId>& exclude = {});

// The configuration that starts moving `shard`'s replica on `from` to `to`:
// term + 1 and a pending migration recorded; a primary's move puts `to` in
// `from`'s place, a backup's adds `to` as a syncing backup beside `from`
// (cluster_config.h). InvalidArgument unless `from` holds a replica of
// `shard` (a complete one, if a backup), `to` is an up member holding none,
// and no migration of `shard` is under way.
Result<ClusterConfig> StartMigration(const ClusterConfig& config, ShardId shard, NodeId from, NodeId to);

}  // namespace slip::cluster
