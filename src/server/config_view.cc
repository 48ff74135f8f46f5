#include "server/config_view.h"

namespace slip::server {

std::shared_ptr<const NodeView> ViewFromConfig(const cluster::ClusterConfig& config) {
  auto v = std::make_shared<NodeView>();
  v->term = config.term;
  for (const auto& s : config.shards) v->shards.push_back(ShardReplicas{s.primary, s.backups, s.syncing});
  v->blocked.assign(v->shards.size(), false);
  return v;
}


}  // namespace slip::server
