// Growing, shrinking and rebalancing a cluster of a sharded design by moving
// shards while it serves (docs/papers/rowan.md §3.7; cluster/rebalance.h
// plans, the nodes move the data): `slip cluster move`, `add-node`,
// `remove-node` and `rebalance`. The pool designs (dinomo) add and remove
// nodes their own way (cluster_command.h).
#pragma once

#include "cli/cluster_command.h"
#include "cluster/config_store.h"

namespace slip::cli {

// Moves `shard`'s replica on `from` (default: its primary) to node `node`
// and waits until the move is over: done, or rolled back because the source
// or the target failed.
int ClusterMove(const ClusterCommandOptions& o);
// Starts node `id` (ClusterAddNode chose it from `config`, the newest in
// `store`), which joins holding nothing, then moves replicas to it until the
// up nodes' primaries and replicas are even (cluster::PlanSpread).
int ReshardAddNode(const ClusterCommandOptions& o, cluster::ConfigStore& store, const cluster::ClusterConfig& config,
                   uint32_t id);
// Moves every replica off node `node` (cluster::PlanDrain), drops it from
// the membership and stops its process.
int ReshardRemoveNode(const ClusterCommandOptions& o);
// Rowan's hotspot policy as a supervisor: every period it reads each node's
// per-shard load, and when a node is above mean + overloaded it moves the
// hottest shards (cluster::PlanRebalance). One line per period.
int ClusterRebalance(const ClusterCommandOptions& o);

}  // namespace slip::cli
