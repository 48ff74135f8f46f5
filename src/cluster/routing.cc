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
  if (UsesChain(config.design)) {
    for (const auto& s : config.shards) t.readers.push_back(ChainTail(s));
  }
  t.direct = DirectAccessOf(config.design);
  if (AnyNodeServes(config.design)) {
    for (const auto& [id, info] : config.nodes) {
      if (info.state == NodeState::kUp) t.any_node.push_back(id);
    }
  }
  for (const auto& [key, secondaries] : config.shared) {
    std::vector<NodeId>& owners = t.shared[key];
    owners.push_back(t.primaries[config.ShardOf(HashKey(key))]);
    for (NodeId n : secondaries) {
      if (n != owners.front()) owners.push_back(n);
    }
  }
  return t;
}

RoutingTable::Direct DirectAccessOf(std::string_view design) {
  if (design == "erda") return {.gets = true, .puts = true};
  if (design == "erda-raw") return {.puts = true};
  return {};
}

}  // namespace slip::cluster
