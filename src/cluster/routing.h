// RoutingTable: what a client needs of the cluster configuration — the term
// and each shard's primary — derived from the stored ClusterConfig, so the
// configuration stays the one source of truth.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_config.h"

namespace slip::cluster {

struct RoutingTable {
  uint64_t term = 0;
  std::vector<NodeId> primaries;  // index = shard id
  // How clients reach primaries besides the two-sided calls every design
  // takes (the erda family; DirectAccessOf).
  struct Direct {
    bool gets = false;  // READ the bucket word and the entry
    bool puts = false;  // RESERVE, WRITE the entry, COMMIT
    bool any() const { return gets || puts; }
  };
  Direct direct = {};
  // Shared keys (pool designs, ClusterConfig::shared): every node serving
  // one, its shard's owner first; a client spreads its requests over them.
  std::map<std::string, std::vector<NodeId>, std::less<>> shared = {};
  // Designs where any node serves any key (AnyNodeServes: clover): the up
  // nodes, one picked at random per request; empty otherwise.
  std::vector<NodeId> any_node = {};
  // Chain designs (UsesChain: rubble): each shard's reader, the tail;
  // writes still go to the primary, the head. Empty otherwise.
  std::vector<NodeId> readers = {};
  // The shard a key hash belongs to (common/hash.h ShardOfHash, as the
  // store and the configuration compute it). REQUIRES: primaries non-empty.
  uint32_t ShardOf(uint64_t hash) const;
};

RoutingTable RoutingFromConfig(const ClusterConfig& config);

// How clients of a cluster of `design` access primaries directly. The
// configuration names the design; the registry (replication/registry.h,
// Design::clients) is the source this mirrors, and its test checks the two
// agree (the client links no replication code).
RoutingTable::Direct DirectAccessOf(std::string_view design);

}  // namespace slip::cluster
