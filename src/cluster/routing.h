// RoutingTable: what a client needs of the cluster configuration — the term
// and each shard's primary — derived from the stored ClusterConfig, so the
// configuration stays the one source of truth.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/cluster_config.h"

namespace slip::cluster {

struct RoutingTable {
  uint64_t term = 0;
  std::vector<NodeId> primaries;  // index = shard id
  // The shard a key hash belongs to (common/hash.h ShardOfHash, as the
  // store and the configuration compute it). REQUIRES: primaries non-empty.
  uint32_t ShardOf(uint64_t hash) const;
};

RoutingTable RoutingFromConfig(const ClusterConfig& config);

}  // namespace slip::cluster
