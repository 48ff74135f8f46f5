#include "server/config_view.h"

namespace slip::server {

std::shared_ptr<const NodeView> ViewFromConfig(const cluster::ClusterConfig& config) {
  auto v = std::make_shared<NodeView>();
  v->term = config.term;
  for (const auto& s : config.shards) v->shards.push_back(ShardReplicas{s.primary, s.backups, s.syncing});
  v->blocked.assign(v->shards.size(), false);
  return v;
}

client::RoutingTable RoutingFromConfig(const cluster::ClusterConfig& config) {
  client::RoutingTable t;
  t.term = config.term;
  for (const auto& s : config.shards) t.primaries.push_back(s.primary);
  return t;
}

}  // namespace slip::server
