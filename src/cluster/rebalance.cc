#include "cluster/rebalance.h"

#include <algorithm>
#include <optional>
#include <map>
#include <set>

namespace slip::cluster {
namespace {

bool HoldsReplica(const ShardReplicas& s, NodeId n) {
  return s.primary == n || std::find(s.backups.begin(), s.backups.end(), n) != s.backups.end();
}

}  // namespace

std::vector<ShardMove> PlanRebalance(const ClusterConfig& config, const std::vector<double>& load,
                                     const RebalanceOptions& options) {
  std::map<NodeId, double> node_load;
  for (const auto& [id, info] : config.nodes) {
    if (info.state == NodeState::kUp) node_load[id] = 0;
  }
  if (node_load.size() < 2) return {};
  auto load_of = [&](ShardId s) { return s < load.size() ? load[s] : 0.0; };
  std::set<ShardId> moving;
  for (const auto& m : config.migrations) moving.insert(m.shard);
  double total = 0;
  for (ShardId s = 0; s < config.num_shards(); ++s) {
    auto it = node_load.find(config.shards[s].primary);
    if (it == node_load.end()) continue;
    it->second += load_of(s);
    total += load_of(s);
  }
  const double mean = total / static_cast<double>(node_load.size());
  auto busiest = [&] {
    return std::max_element(node_load.begin(), node_load.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; });
  };
  if (mean <= 0 || busiest()->second <= mean * (1 + options.overloaded)) return {};

  // Where each shard's primary is as the plan goes.
  std::vector<NodeId> primary(config.num_shards());
  for (ShardId s = 0; s < config.num_shards(); ++s) primary[s] = config.shards[s].primary;
  std::vector<ShardMove> moves;
  while (moves.size() < config.num_shards()) {
    const auto hot = busiest();
    if (hot->second <= mean * (1 + options.balanced)) break;
    // Its shards, hottest first; the first that some other node can take
    // with both ending below the busy node's load now.
    std::vector<ShardId> candidates;
    for (ShardId s = 0; s < config.num_shards(); ++s) {
      if (primary[s] == hot->first && !moving.contains(s) && load_of(s) > 0) candidates.push_back(s);
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](ShardId a, ShardId b) { return load_of(a) > load_of(b); });
    std::optional<ShardMove> chosen;
    for (ShardId s : candidates) {
      NodeId best = 0;
      double best_load = 0;
      bool found = false;
      for (const auto& [n, l] : node_load) {
        if (n == hot->first || HoldsReplica(config.shards[s], n)) continue;
        if (!found || l < best_load) {
          best = n;
          best_load = l;
          found = true;
        }
      }
      if (found && best_load + load_of(s) < hot->second) {
        chosen = ShardMove{s, hot->first, best, load_of(s)};
        break;
      }
    }
    if (!chosen) break;
    node_load[chosen->from] -= chosen->load;
    node_load[chosen->to] += chosen->load;
    primary[chosen->shard] = chosen->to;
    moving.insert(chosen->shard);
    moves.push_back(*chosen);
  }
  return moves;
}

Result<ClusterConfig> StartMigration(const ClusterConfig& config, ShardId shard, NodeId from, NodeId to) {
  if (!MovesShards(config.design)) {
    return Status::NotSupported("the " + config.design + " design does not move shards between nodes");
  }
  if (shard >= config.num_shards()) return Status::InvalidArgument("no shard " + std::to_string(shard));
  for (const auto& m : config.migrations) {
    if (m.shard == shard) return Status::InvalidArgument("shard " + std::to_string(shard) + " is already moving");
  }
  const auto target = config.nodes.find(to);
  if (target == config.nodes.end() || target->second.state != NodeState::kUp) {
    return Status::InvalidArgument("node " + std::to_string(to) + " is not an up member");
  }
  ClusterConfig next = config;
  ShardReplicas& s = next.shards[shard];
  if (HoldsReplica(s, to)) {
    return Status::InvalidArgument("node " + std::to_string(to) + " already holds shard " + std::to_string(shard));
  }
  if (s.primary == from) {
    s.primary = to;
  } else {
    if (std::find(s.backups.begin(), s.backups.end(), from) == s.backups.end()) {
      return Status::InvalidArgument("node " + std::to_string(from) + " holds no replica of shard " +
                                     std::to_string(shard));
    }
    if (std::find(s.syncing.begin(), s.syncing.end(), from) != s.syncing.end()) {
      return Status::InvalidArgument("node " + std::to_string(from) + " is still being seeded with shard " +
                                     std::to_string(shard));
    }
    // Re-replication: the target is seeded beside the source (MarkSynced retires it).
    s.backups.push_back(to);
    s.syncing.push_back(to);
  }
  next.migrations.push_back(Migration{shard, from, to, MigrationState::kPending});
  ++next.term;
  SLIP_RETURN_IF_ERROR(next.Validate());
  return next;
}

}  // namespace slip::cluster
