#include "cluster/routing.h"

#include "common/hash.h"

namespace slip::cluster {

uint32_t RoutingTable::ShardOf(uint64_t hash) const {
  return ShardOfHash(hash, static_cast<uint32_t>(primaries.size()));
}

RoutingTable RoutingFromConfig(const ClusterConfig& config) {
  RoutingTable t;
  t.term = config.term;
  for (const auto& s : config.shards) t.primaries.push_back(s.primary);
  t.direct_clients = DesignHasDirectClients(config.design);
  return t;
}

bool DesignHasDirectClients(std::string_view design) { return design == "erda"; }

}  // namespace slip::cluster
