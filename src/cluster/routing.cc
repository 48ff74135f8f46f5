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
  t.direct = DirectAccessOf(config.design);
  return t;
}

RoutingTable::Direct DirectAccessOf(std::string_view design) {
  if (design == "erda") return {.gets = true, .puts = true};
  if (design == "erda-raw") return {.puts = true};
  return {};
}

}  // namespace slip::cluster
