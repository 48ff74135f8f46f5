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

Result<ClusterConfig> AddMember(const ClusterConfig& config, NodeId node, const std::string& address) {
  if (!MovesShards(config.design)) {
    return Status::NotSupported("the " + config.design + " design does not move shards to a new node");
  }
  if (config.nodes.contains(node)) return Status::InvalidArgument("node " + std::to_string(node) + " is a member already");
  if (address.empty()) return Status::InvalidArgument("node " + std::to_string(node) + " has no address");
  ClusterConfig next = config;
  next.nodes[node] = NodeInfo{address, NodeState::kUp};
  ++next.term;
  SLIP_RETURN_IF_ERROR(next.Validate());
  return next;
}

Result<ClusterConfig> DropMember(const ClusterConfig& config, NodeId node) {
  const auto it = config.nodes.find(node);
  if (it == config.nodes.end() || it->second.state != NodeState::kUp) {
    return Status::InvalidArgument("node " + std::to_string(node) + " is not an up member");
  }
  for (ShardId s = 0; s < config.num_shards(); ++s) {
    if (HoldsReplica(config.shards[s], node)) {
      return Status::InvalidArgument("node " + std::to_string(node) + " still holds shard " + std::to_string(s));
    }
  }
  for (const auto& m : config.migrations) {
    if (m.from == node || m.to == node) {
      return Status::InvalidArgument("node " + std::to_string(node) + " is in the move of shard " +
                                     std::to_string(m.shard));
    }
  }
  ClusterConfig next = config;
  next.nodes.erase(node);
  ++next.term;
  SLIP_RETURN_IF_ERROR(next.Validate());
  return next;
}

namespace {

// Per-node counts as a plan of moves goes (up nodes only).
struct Spread {
  std::map<NodeId, uint32_t> primaries, replicas;
  std::vector<ShardReplicas> shards;
  std::set<ShardId> moving;

  Spread(const ClusterConfig& c, const std::set<NodeId>& exclude) : shards(c.shards) {
    for (const auto& [id, info] : c.nodes) {
      if (info.state == NodeState::kUp && !exclude.contains(id)) primaries[id] = replicas[id] = 0;
    }
    for (const auto& s : c.shards) {
      if (primaries.contains(s.primary)) ++primaries[s.primary], ++replicas[s.primary];
      for (NodeId b : s.backups) {
        if (replicas.contains(b)) ++replicas[b];
      }
    }
    for (const auto& m : c.migrations) moving.insert(m.shard);
  }
  bool Syncing(ShardId s, NodeId n) const {
    return std::find(shards[s].syncing.begin(), shards[s].syncing.end(), n) != shards[s].syncing.end();
  }
  void Apply(const ShardMove& m) {
    ShardReplicas& r = shards[m.shard];
    if (r.primary == m.from) {
      r.primary = m.to;
      if (primaries.contains(m.from)) --primaries[m.from];
      ++primaries[m.to];
    } else {
      std::replace(r.backups.begin(), r.backups.end(), m.from, m.to);
    }
    if (replicas.contains(m.from)) --replicas[m.from];
    ++replicas[m.to];
    moving.insert(m.shard);
  }
  // One move from the node with the most of `count` to one with fewer (by
  // at least two) that holds no replica of the shard: of a primary, or of a
  // complete backup (the primaries are even by then); nullopt if none.
  std::optional<ShardMove> Next(const std::map<NodeId, uint32_t>& count, bool primary) const {
    std::vector<NodeId> order;
    for (const auto& [n, c] : count) order.push_back(n);
    std::stable_sort(order.begin(), order.end(), [&](NodeId a, NodeId b) { return count.at(a) > count.at(b); });
    for (NodeId from : order) {
      for (auto to = order.rbegin(); to != order.rend(); ++to) {
        if (count.at(from) < count.at(*to) + 2) break;
        for (ShardId s = 0; s < shards.size(); ++s) {
          if (moving.contains(s) || HoldsReplica(shards[s], *to)) continue;
          const bool is_primary = shards[s].primary == from;
          const bool is_backup = !is_primary && HoldsReplica(shards[s], from) && !Syncing(s, from);
          if (primary ? is_primary : is_backup) return ShardMove{s, from, *to, 0};
        }
      }
    }
    return std::nullopt;
  }
};

}  // namespace

std::vector<ShardMove> PlanSpread(const ClusterConfig& config, const std::set<NodeId>& exclude) {
  Spread sp(config, exclude);
  std::vector<ShardMove> moves;
  for (bool primary : {true, false}) {
    while (moves.size() < size_t{config.num_shards()} * config.replication_factor) {
      auto m = sp.Next(primary ? sp.primaries : sp.replicas, primary);
      if (!m) break;
      sp.Apply(*m);
      moves.push_back(*m);
    }
  }
  return moves;
}

Result<std::vector<ShardMove>> PlanDrain(const ClusterConfig& config, NodeId node, const std::set<NodeId>& exclude) {
  std::set<NodeId> out = exclude;
  out.insert(node);
  Spread sp(config, out);
  std::vector<ShardMove> moves;
  for (ShardId s = 0; s < config.num_shards(); ++s) {
    if (!HoldsReplica(config.shards[s], node) || sp.moving.contains(s)) continue;
    std::optional<NodeId> best;
    for (const auto& [n, c] : sp.replicas) {
      if (HoldsReplica(sp.shards[s], n)) continue;
      if (!best || c < sp.replicas[*best] || (c == sp.replicas[*best] && sp.primaries[n] < sp.primaries[*best])) {
        best = n;
      }
    }
    if (!best) {
      return Status::InvalidArgument("no node can take node " + std::to_string(node) + "'s replica of shard " +
                                     std::to_string(s) + ": every other up node holds one (add a node first)");
    }
    ShardMove m{s, node, *best, 0};
    sp.Apply(m);
    moves.push_back(m);
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
