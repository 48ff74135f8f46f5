#include "server/config_view.h"

namespace slip::server {

std::shared_ptr<const NodeView> ViewFromConfig(const cluster::ClusterConfig& config) {
  auto v = std::make_shared<NodeView>();
  v->term = config.term;
  for (const auto& s : config.shards) v->shards.push_back(ShardReplicas{s.primary, s.backups, s.syncing});
  v->blocked.assign(v->shards.size(), false);
  for (const auto& m : config.migrations) {
    if (cluster::MovesPrimary(config, m)) v->moves.push_back(PrimaryMove{m.shard, m.from, m.to});
  }
  return v;
}


}  // namespace slip::server
