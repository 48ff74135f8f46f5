// RoutingTable: what a client needs of the cluster configuration — the term
// and each shard's primary — derived from the stored ClusterConfig, so the
// configuration stays the one source of truth.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "cluster/cluster_config.h"

namespace slip::cluster {

struct RoutingTable {
  uint64_t term = 0;
  std::vector<NodeId> primaries;  // index = shard id
  // Clients read and write primaries one-sidedly (the erda design; see
  // DesignHasDirectClients), besides the two-sided calls every design takes.
  bool direct_clients = false;
  // The shard a key hash belongs to (common/hash.h ShardOfHash, as the
  // store and the configuration compute it). REQUIRES: primaries non-empty.
  uint32_t ShardOf(uint64_t hash) const;
};

RoutingTable RoutingFromConfig(const ClusterConfig& config);

// Whether clients of a cluster of `design` access primaries directly. The
// configuration names the design; the registry (replication/registry.h,
// Design::direct_clients) is the source this mirrors, and its test checks
// the two agree (the client links no replication code).
bool DesignHasDirectClients(std::string_view design);

}  // namespace slip::cluster
