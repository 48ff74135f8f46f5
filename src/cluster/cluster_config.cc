#include "cluster/cluster_config.h"

#include "common/hash.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

#include "cluster/config_json.h"

namespace slip::cluster {

namespace {
__extension__ using U128 = unsigned __int128;

std::string N(uint64_t v) { return std::to_string(v); }
}  // namespace

uint64_t RangeStart(ShardId shard, uint32_t num_shards) {
  assert(num_shards > 0 && shard < num_shards);
  // ceil(shard * 2^64 / num_shards): the smallest h with ShardOfHash(h) == shard.
  const U128 num = static_cast<U128>(shard) << 64;
  return static_cast<uint64_t>((num + num_shards - 1) / num_shards);
}

ShardId ClusterConfig::ShardOf(uint64_t hash) const {
  assert(num_shards() > 0);
  return slip::ShardOfHash(hash, num_shards());
}

std::vector<NodeId> ClusterConfig::Replicas(ShardId shard) const {
  assert(shard < shards.size());
  const ShardReplicas& s = shards[shard];
  std::vector<NodeId> r;
  r.reserve(1 + s.backups.size());
  r.push_back(s.primary);
  r.insert(r.end(), s.backups.begin(), s.backups.end());
  return r;
}

std::map<NodeId, uint32_t> ClusterConfig::PrimaryCounts() const {
  std::map<NodeId, uint32_t> c;
  for (const auto& [id, info] : nodes) c[id] = 0;
  for (const auto& s : shards) c[s.primary]++;
  return c;
}

std::map<NodeId, uint32_t> ClusterConfig::BackupCounts() const {
  std::map<NodeId, uint32_t> c;
  for (const auto& [id, info] : nodes) c[id] = 0;
  for (const auto& s : shards) {
    for (NodeId b : s.backups) c[b]++;
  }
  return c;
}

Status ClusterConfig::Validate() const {
  auto bad = [](std::string m) { return Status::InvalidArgument("cluster config: " + m); };
  if (term == 0) return bad("term 0 (terms start at 1)");
  if (nodes.empty()) return bad("no nodes");
  if (shards.empty()) return bad("no shards");
  if (replication_factor == 0 || replication_factor > nodes.size()) {
    return bad("replication factor " + N(replication_factor) + " not in 1.." + N(nodes.size()));
  }
  for (const auto& [id, info] : nodes) {
    if (info.address.empty()) return bad("node " + N(id) + " has no address");
    if (info.workers.size() > kMaxWorkerEntries) {
      return bad("node " + N(id) + " lists " + N(info.workers.size()) + " worker entries (at most " +
                 N(kMaxWorkerEntries) + ")");
    }
    if (!info.workers.empty() && info.workers[0] != info.address) {
      return bad("node " + N(id) + ": its first worker's entry is not its address");
    }
    for (const std::string& w : info.workers) {
      if (w.empty()) return bad("node " + N(id) + " has a worker without an address");
    }
    if (info.state == NodeState::kLeaving && !UsesPool(design)) {
      return bad("node " + N(id) + " is leaving, which only designs with a pool know");
    }
    if (UsesPool(design) && id > kMaxPoolNodeId) {
      return bad("node " + N(id) + ": a " + design + " cluster takes node ids up to " + N(kMaxPoolNodeId));
    }
  }
  for (ShardId s = 0; s < shards.size(); s++) {
    const std::vector<NodeId> r = Replicas(s);
    const std::string where = "shard " + N(s) + ": ";
    // A backup on the move is held twice until its target is seeded.
    const bool backup_moving = std::any_of(migrations.begin(), migrations.end(), [&](const Migration& m) {
      return m.shard == s && m.to != shards[s].primary;
    });
    if (r.size() > replication_factor + (backup_moving ? 1 : 0)) {
      return bad(where + N(r.size()) + " replicas, above the replication factor " +
                 N(replication_factor));
    }
    for (size_t i = 0; i < r.size(); i++) {
      auto it = nodes.find(r[i]);
      if (it == nodes.end()) return bad(where + "replica " + N(r[i]) + " is not a member");
      if (std::find(r.begin(), r.begin() + static_cast<ptrdiff_t>(i), r[i]) !=
          r.begin() + static_cast<ptrdiff_t>(i)) {
        return bad(where + "node " + N(r[i]) + " holds two replicas");
      }
      if (it->second.state == NodeState::kLeaving) return bad(where + "replica " + N(r[i]) + " is leaving");
      if (it->second.state == NodeState::kDown && r.size() > 1) {
        return bad(where + "replica " + N(r[i]) +
                   " is down (allowed only as a shard's sole, stranded replica)");
      }
    }
    const auto& sync = shards[s].syncing;
    for (size_t i = 0; i < sync.size(); i++) {
      if (std::find(shards[s].backups.begin(), shards[s].backups.end(), sync[i]) ==
          shards[s].backups.end()) {
        return bad(where + "syncing node " + N(sync[i]) + " is not a backup");
      }
      if (std::find(sync.begin(), sync.begin() + static_cast<ptrdiff_t>(i), sync[i]) !=
          sync.begin() + static_cast<ptrdiff_t>(i)) {
        return bad(where + "syncing node " + N(sync[i]) + " listed twice");
      }
    }
  }
  if (!shared.empty() && !UsesPool(design)) return bad("shared keys, which only designs with a pool know");
  for (const auto& [key, owners] : shared) {
    if (key.empty() || key.size() > kMaxSharedKeyBytes) {
      return bad("a shared key of " + N(key.size()) + " bytes (1.." + N(kMaxSharedKeyBytes) + ")");
    }
    for (size_t i = 0; i < owners.size(); i++) {
      auto it = nodes.find(owners[i]);
      if (it == nodes.end() || it->second.state != NodeState::kUp) {
        return bad("a shared key's owner " + N(owners[i]) + " is not an up member");
      }
      if (std::find(owners.begin(), owners.begin() + static_cast<ptrdiff_t>(i), owners[i]) !=
          owners.begin() + static_cast<ptrdiff_t>(i)) {
        return bad("a shared key lists owner " + N(owners[i]) + " twice");
      }
    }
  }
  std::set<ShardId> migrating;
  for (const Migration& m : migrations) {
    const std::string where = "migration of shard " + N(m.shard) + ": ";
    if (m.shard >= shards.size()) return bad(where + "no such shard");
    if (!migrating.insert(m.shard).second) return bad(where + "shard migrates twice");
    if (m.from == m.to) return bad(where + "from == to");
    for (NodeId n : {m.from, m.to}) {
      auto it = nodes.find(n);
      if (it == nodes.end()) return bad(where + "node " + N(n) + " is not a member");
      if (it->second.state != NodeState::kUp) return bad(where + "node " + N(n) + " is down");
    }
    const std::vector<NodeId> r = Replicas(m.shard);
    if (std::find(r.begin(), r.end(), m.to) == r.end()) {
      return bad(where + "target " + N(m.to) + " is not a replica");
    }
    const ShardReplicas& sh = shards[m.shard];
    auto syncing = [&](NodeId n) { return std::find(sh.syncing.begin(), sh.syncing.end(), n) != sh.syncing.end(); };
    if (m.to == sh.primary) {
      if (std::find(r.begin(), r.end(), m.from) != r.end()) {
        return bad(where + "source " + N(m.from) + " is still a replica");
      }
    } else {
      // A backup's move: the target is seeded beside the source, which stays until then.
      if (!syncing(m.to)) return bad(where + "target " + N(m.to) + " is a backup not syncing");
      if (std::find(sh.backups.begin(), sh.backups.end(), m.from) == sh.backups.end() || syncing(m.from)) {
        return bad(where + "source " + N(m.from) + " is not a complete backup");
      }
    }
    if (static_cast<uint8_t>(m.state) > static_cast<uint8_t>(MigrationState::kDone)) {
      return bad(where + "unknown state");
    }
  }
  return Status::Ok();
}

Result<ClusterConfig> Place(const std::map<NodeId, std::string>& nodes, uint32_t num_shards,
                            uint32_t rf) {
  if (nodes.empty()) return Status::InvalidArgument("Place: no nodes");
  if (num_shards == 0) return Status::InvalidArgument("Place: no shards");
  if (rf == 0 || rf > nodes.size()) {
    return Status::InvalidArgument("Place: replication factor " + N(rf) + " not in 1.." +
                                   N(nodes.size()));
  }
  ClusterConfig c;
  c.term = 1;
  c.replication_factor = rf;
  std::vector<NodeId> ids;
  for (const auto& [id, addr] : nodes) {
    if (addr.empty()) return Status::InvalidArgument("Place: node " + N(id) + " has no address");
    c.nodes[id] = NodeInfo{addr, NodeState::kUp};
    ids.push_back(id);
  }
  const size_t n = ids.size();
  std::vector<uint32_t> replicas(n, 0);                                      // by index into ids
  std::vector<std::vector<uint32_t>> first(n, std::vector<uint32_t>(n, 0));  // [primary][backup0]
  const size_t full_rounds = num_shards / n;
  // The partial round's primaries count from the start, so its backups avoid
  // the nodes that are going to be primaries in it.
  for (size_t p = 0; p < num_shards % n; p++) replicas[p]++;
  c.shards.resize(num_shards);
  for (ShardId s = 0; s < num_shards; s++) {
    const size_t p = s % n, round = s / n;
    std::vector<size_t> chosen{p};
    if (round < full_rounds) {
      // A full round gives every node one primary; backup j of primary p is
      // p + offset_j with the same distinct non-zero offsets for all p, so
      // each node also gets exactly rf-1 backups per round. The first
      // offset advances every round: a node's primaries have every other
      // node as first backup in turn, and its failure spreads promotions.
      size_t offset = 1 + round % std::max<size_t>(n - 1, 1);
      for (uint32_t j = 1; j < rf; j++, offset++) {
        if (offset % n == 0) offset++;
        chosen.push_back((p + offset) % n);
      }
    } else {
      // The partial last round: fill greedily — fewest replicas first; then,
      // for the first backup, the rarest successor of this primary; then the
      // nearest node after the primary (determinism).
      for (uint32_t pos = 1; pos < rf; pos++) {
        size_t best = n;
        std::tuple<uint32_t, uint32_t, size_t> best_key{};
        for (size_t cand = 0; cand < n; cand++) {
          if (std::find(chosen.begin(), chosen.end(), cand) != chosen.end()) continue;
          const std::tuple<uint32_t, uint32_t, size_t> key{
              replicas[cand], pos == 1 ? first[p][cand] : 0, (cand + n - p) % n};
          if (best == n || key < best_key) {
            best = cand;
            best_key = key;
          }
        }
        chosen.push_back(best);
      }
    }
    for (size_t i = round < full_rounds ? 0 : 1; i < chosen.size(); i++) replicas[chosen[i]]++;
    if (chosen.size() > 1) first[p][chosen[1]]++;
    c.shards[s].primary = ids[p];
    for (size_t i = 1; i < chosen.size(); i++) c.shards[s].backups.push_back(ids[chosen[i]]);
  }
  assert(c.Validate().ok());
  return c;
}

// Re-replicate: top up every shard below the replication factor with the
// least-loaded live node that holds no replica of it yet (as a syncing
// backup: it has nothing of the shard until its primary seeds it).
static void TopUp(ClusterConfig& next) {
  std::map<NodeId, std::pair<uint32_t, uint32_t>> load;  // live node -> (replicas, primaries)
  for (const auto& [id, info] : next.nodes) {
    if (info.state == NodeState::kUp) load[id] = {0, 0};
  }
  for (const ShardReplicas& s : next.shards) {
    if (auto l = load.find(s.primary); l != load.end()) {
      l->second.first++;
      l->second.second++;
    }
    for (NodeId b : s.backups) load[b].first++;
  }
  for (ShardId sh = 0; sh < next.shards.size(); ++sh) {
    ShardReplicas& s = next.shards[sh];
    if (next.nodes[s.primary].state != NodeState::kUp) continue;  // stranded: nothing to copy from
    // The source of a move of this shard's primary holds it still (until it
    // is done) though it is no replica: not a candidate.
    std::optional<NodeId> handing_over;
    for (const Migration& m : next.migrations) {
      if (m.shard == sh && m.to == s.primary) handing_over = m.from;
    }
    while (1 + s.backups.size() < next.replication_factor) {
      NodeId best = 0;
      bool found = false;
      for (const auto& [id, l] : load) {
        if (id == s.primary || std::find(s.backups.begin(), s.backups.end(), id) != s.backups.end() ||
            id == handing_over) {
          continue;
        }
        if (!found || l < load[best]) {  // (replicas, primaries); map order breaks ties by id
          best = id;
          found = true;
        }
      }
      if (!found) break;  // no spare live node: under-replicated until one joins
      s.backups.push_back(best);
      s.syncing.push_back(best);  // until its primary has seeded it
      load[best].first++;
    }
  }
}

namespace {
// A node no longer up serves no shared key.
void DropSharedOwner(ClusterConfig& c, NodeId node) {
  for (auto& [key, owners] : c.shared) std::erase(owners, node);
}
}  // namespace

Result<ClusterConfig> Reassign(const ClusterConfig& config, NodeId failed) {
  SLIP_RETURN_IF_ERROR(config.Validate());
  auto it = config.nodes.find(failed);
  if (it == config.nodes.end()) {
    return Status::InvalidArgument("Reassign: node " + N(failed) + " is not a member");
  }
  if (it->second.state != NodeState::kUp) {
    return Status::InvalidArgument("Reassign: node " + N(failed) + " is already down");
  }
  if (config.term == std::numeric_limits<uint64_t>::max()) {
    return Status::InvalidArgument("Reassign: term exhausted");
  }
  ClusterConfig next = config;
  next.term = config.term + 1;
  next.nodes[failed].state = NodeState::kDown;
  DropSharedOwner(next, failed);

  // Interrupted migrations go back to where they started (docs/papers/rowan.md
  // §3.7): the target's copy is incomplete, the source's is not.
  // A backup's move just ends: the failed one of the two drops out below as
  // any failed backup does, and the other is the shard's replica.
  std::vector<Migration> kept;
  for (const Migration& m : next.migrations) {
    if (m.from != failed && m.to != failed) {
      kept.push_back(m);
      continue;
    }
    ShardReplicas& s = next.shards[m.shard];
    if (m.state == MigrationState::kDone || s.primary != m.to) continue;  // the target has everything
    s.primary = m.from;
  }
  next.migrations = std::move(kept);

  // Promote, and drop the failed node from every replica set that has
  // another complete copy.
  for (ShardReplicas& s : next.shards) {
    auto syncing = [&](NodeId n) {
      return std::find(s.syncing.begin(), s.syncing.end(), n) != s.syncing.end();
    };
    if (s.primary == failed) {
      auto heir = std::find_if(s.backups.begin(), s.backups.end(),
                               [&](NodeId b) { return !syncing(b); });
      if (heir == s.backups.end()) {
        // No complete copy but the failed node's: keep it, drop the partial ones.
        s.backups.clear();
        s.syncing.clear();
        continue;
      }
      s.primary = *heir;
      s.backups.erase(heir);
    } else {
      std::erase(s.backups, failed);
      std::erase(s.syncing, failed);
    }
  }

  // A backup's move whose source was just promoted is over: its target
  // stays as the shard's new (syncing) backup.
  std::erase_if(next.migrations, [&](const Migration& m) { return next.shards[m.shard].primary == m.from; });

  TopUp(next);
  SLIP_RETURN_IF_ERROR(next.Validate());
  return next;
}

bool UsesPool(std::string_view design) {
  return design == "dinomo" || design == "dinomo-s" || design == "dinomo-n" || design == "clover";
}

bool AnyNodeServes(std::string_view design) { return design == "clover"; }

bool UsesChain(std::string_view design) { return design == "rubble" || design == "rubble-all-compact"; }

NodeId ChainTail(const ShardReplicas& shard) {
  NodeId tail = shard.primary;
  for (NodeId b : shard.backups) {
    if (std::find(shard.syncing.begin(), shard.syncing.end(), b) == shard.syncing.end()) tail = b;
  }
  return tail;
}

Result<ClusterConfig> Resync(const ClusterConfig& config, NodeId node) {
  SLIP_RETURN_IF_ERROR(config.Validate());
  auto it = config.nodes.find(node);
  if (it == config.nodes.end() || it->second.state != NodeState::kUp) {
    return Status::InvalidArgument("Resync: node " + N(node) + " is not an up member");
  }
  ClusterConfig next = config;
  next.term++;
  for (ShardReplicas& s : next.shards) {
    if (s.primary == node) {
      s.syncing = s.backups;
      continue;
    }
    auto b = std::find(s.backups.begin(), s.backups.end(), node);
    if (b == s.backups.end()) continue;
    s.backups.erase(b);
    s.backups.push_back(node);
    if (std::find(s.syncing.begin(), s.syncing.end(), node) == s.syncing.end()) s.syncing.push_back(node);
  }
  SLIP_RETURN_IF_ERROR(next.Validate());
  return next;
}

Result<ClusterConfig> ReassignOwners(const ClusterConfig& config, NodeId failed) {
  SLIP_RETURN_IF_ERROR(config.Validate());
  auto it = config.nodes.find(failed);
  if (it == config.nodes.end()) return Status::InvalidArgument("ReassignOwners: node " + N(failed) + " is not a member");
  if (it->second.state == NodeState::kDown) {
    return Status::InvalidArgument("ReassignOwners: node " + N(failed) + " is already down");
  }
  if (config.term == std::numeric_limits<uint64_t>::max()) {
    return Status::InvalidArgument("ReassignOwners: term exhausted");
  }
  ClusterConfig next = config;
  next.term = config.term + 1;
  next.nodes[failed].state = NodeState::kDown;
  DropSharedOwner(next, failed);
  std::map<NodeId, uint32_t> owned;
  for (const auto& [id, info] : next.nodes) {
    if (info.state == NodeState::kUp) owned[id] = 0;
  }
  for (const ShardReplicas& s : next.shards) {
    if (owned.contains(s.primary)) ++owned[s.primary];
  }
  for (ShardReplicas& s : next.shards) {
    if (s.primary != failed || owned.empty()) continue;
    auto heir = std::min_element(owned.begin(), owned.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    s.primary = heir->first;
    ++heir->second;
    s.backups.clear();
    s.syncing.clear();
  }
  SLIP_RETURN_IF_ERROR(next.Validate());
  return next;
}

std::optional<ClusterConfig> BalanceOwners(const ClusterConfig& config, const std::set<NodeId>& live) {
  // Shards held by live nodes or leaving ones are dealt out again; each
  // live node keeps what it has up to its quota (the largest holders get
  // the quotas rounded up), the rest goes to those below theirs.
  std::map<NodeId, std::vector<ShardId>> held;  // live node -> its shards
  for (NodeId n : live) {
    auto it = config.nodes.find(n);
    if (it != config.nodes.end() && it->second.state == NodeState::kUp) held[n];
  }
  if (held.empty()) return std::nullopt;
  std::vector<ShardId> loose;  // shards to hand out
  uint32_t dealt = 0;
  for (ShardId s = 0; s < config.num_shards(); ++s) {
    const NodeId owner = config.shards[s].primary;
    const auto info = config.nodes.find(owner);
    if (auto h = held.find(owner); h != held.end()) {
      h->second.push_back(s);
      ++dealt;
    } else if (info != config.nodes.end() && info->second.state == NodeState::kLeaving) {
      loose.push_back(s);
      ++dealt;
    }
  }
  const uint32_t k = static_cast<uint32_t>(held.size());
  std::vector<NodeId> by_load;
  for (const auto& [n, shards] : held) by_load.push_back(n);
  std::stable_sort(by_load.begin(), by_load.end(),
                   [&](NodeId a, NodeId b) { return held[a].size() > held[b].size(); });
  std::map<NodeId, uint32_t> quota;
  for (uint32_t i = 0; i < k; ++i) quota[by_load[i]] = dealt / k + (i < dealt % k ? 1 : 0);
  for (auto& [n, shards] : held) {
    while (shards.size() > quota[n]) {
      loose.push_back(shards.back());
      shards.pop_back();
    }
  }
  if (loose.empty() || config.term == std::numeric_limits<uint64_t>::max()) return std::nullopt;
  ClusterConfig next = config;
  next.term = config.term + 1;
  std::sort(loose.begin(), loose.end());
  size_t i = 0;
  for (auto& [n, shards] : held) {
    while (shards.size() < quota[n] && i < loose.size()) {
      next.shards[loose[i]].primary = n;
      next.shards[loose[i]].backups.clear();
      next.shards[loose[i]].syncing.clear();
      shards.push_back(loose[i++]);
    }
  }
  return next;
}

Result<ClusterConfig> JoinOwner(const ClusterConfig& config, NodeId node, const std::string& address) {
  SLIP_RETURN_IF_ERROR(config.Validate());
  if (!UsesPool(config.design)) {
    return Status::InvalidArgument("JoinOwner: design " + config.design + " does not take new nodes this way");
  }
  if (config.nodes.contains(node)) return Status::InvalidArgument("JoinOwner: node " + N(node) + " is a member");
  if (address.empty()) return Status::InvalidArgument("JoinOwner: no address");
  if (config.term == std::numeric_limits<uint64_t>::max()) return Status::InvalidArgument("JoinOwner: term exhausted");
  ClusterConfig next = config;
  next.term++;
  next.nodes[node] = NodeInfo{address, NodeState::kUp};
  SLIP_RETURN_IF_ERROR(next.Validate());
  return next;
}

Result<ClusterConfig> ShareKey(const ClusterConfig& config, const std::string& key, std::vector<NodeId> secondaries) {
  SLIP_RETURN_IF_ERROR(config.Validate());
  if (!UsesPool(config.design) || config.design == "dinomo-n" || AnyNodeServes(config.design)) {
    return Status::NotSupported("ShareKey: the " + config.design + " design does not share keys through the pool");
  }
  if (key.empty() || key.size() > kMaxSharedKeyBytes) {
    return Status::InvalidArgument("ShareKey: a key of " + N(key.size()) + " bytes (1.." + N(kMaxSharedKeyBytes) + ")");
  }
  ClusterConfig next = config;
  next.term++;
  std::sort(secondaries.begin(), secondaries.end());
  secondaries.erase(std::unique(secondaries.begin(), secondaries.end()), secondaries.end());
  next.shared[key] = std::move(secondaries);
  SLIP_RETURN_IF_ERROR(next.Validate());
  return next;
}

Result<ClusterConfig> UnshareKey(const ClusterConfig& config, const std::string& key) {
  SLIP_RETURN_IF_ERROR(config.Validate());
  if (!config.shared.contains(key)) return Status::InvalidArgument("UnshareKey: the key is not shared");
  ClusterConfig next = config;
  next.term++;
  next.shared.erase(key);
  return next;
}

bool SharesKey(const ClusterConfig& config, const std::string& key, NodeId node) {
  auto it = config.shared.find(key);
  return it != config.shared.end() && std::find(it->second.begin(), it->second.end(), node) != it->second.end();
}

Result<ClusterConfig> RemoveOwner(const ClusterConfig& config, NodeId node) {
  SLIP_RETURN_IF_ERROR(config.Validate());
  if (!UsesPool(config.design)) {
    return Status::InvalidArgument("RemoveOwner: design " + config.design + " does not remove nodes this way");
  }
  auto it = config.nodes.find(node);
  if (it == config.nodes.end() || it->second.state != NodeState::kUp) {
    return Status::InvalidArgument("RemoveOwner: node " + N(node) + " is not an up member");
  }
  std::set<NodeId> others;
  for (const auto& [id, info] : config.nodes) {
    if (id != node && info.state == NodeState::kUp) others.insert(id);
  }
  if (others.empty()) return Status::InvalidArgument("RemoveOwner: node " + N(node) + " is the last up node");
  ClusterConfig marked = config;
  marked.nodes[node].state = NodeState::kLeaving;
  DropSharedOwner(marked, node);
  std::optional<ClusterConfig> next = BalanceOwners(marked, others);
  if (!next) {  // it owned nothing
    next = marked;
    next->term++;
  }
  SLIP_RETURN_IF_ERROR(next->Validate());
  return *next;
}

Result<ClusterConfig> DropLeaving(const ClusterConfig& config, NodeId node) {
  SLIP_RETURN_IF_ERROR(config.Validate());
  auto it = config.nodes.find(node);
  if (it == config.nodes.end() || it->second.state != NodeState::kLeaving) {
    return Status::InvalidArgument("DropLeaving: node " + N(node) + " is not leaving");
  }
  if (config.nodes.size() == 1) return Status::InvalidArgument("DropLeaving: the last member");
  ClusterConfig next = config;
  next.term++;
  next.nodes.erase(node);
  next.replication_factor = std::min<uint32_t>(next.replication_factor, static_cast<uint32_t>(next.nodes.size()));
  SLIP_RETURN_IF_ERROR(next.Validate());
  return next;
}

// Down member `node` comes back: up in a new term, under-replicated shards
// topped up. `with_data`: it must hold a stranded shard's last copy
// (ReturnWithData); without: it must hold none, since it returns empty (Rejoin).
static Result<ClusterConfig> ComeBack(const ClusterConfig& config, NodeId node, bool with_data) {
  const std::string op = with_data ? "ReturnWithData: node " : "Rejoin: node ";
  SLIP_RETURN_IF_ERROR(config.Validate());
  auto it = config.nodes.find(node);
  if (it == config.nodes.end()) return Status::InvalidArgument(op + N(node) + " is not a member");
  if (it->second.state != NodeState::kDown) return Status::InvalidArgument(op + N(node) + " is not down");
  std::optional<ShardId> stranded;  // Reassign kept it as this shard's last copy
  for (ShardId sh = 0; sh < config.num_shards() && !stranded; ++sh) {
    if (config.shards[sh].primary == node) stranded = sh;
  }
  if (!with_data && stranded) {
    return Status::InvalidArgument(op + N(node) + " held the last copy of shard " + N(*stranded) +
                                   " and returns empty");
  }
  if (with_data && !stranded) {
    return Status::InvalidArgument(op + N(node) + " holds no shard's last copy; it rejoins empty");
  }
  if (config.term == std::numeric_limits<uint64_t>::max()) return Status::InvalidArgument(op + "term exhausted");
  ClusterConfig next = config;
  next.term++;
  next.nodes[node].state = NodeState::kUp;
  TopUp(next);
  SLIP_RETURN_IF_ERROR(next.Validate());
  return next;
}

Result<ClusterConfig> Rejoin(const ClusterConfig& config, NodeId node) { return ComeBack(config, node, false); }

Result<ClusterConfig> ReturnWithData(const ClusterConfig& config, NodeId node) {
  return ComeBack(config, node, true);
}

Result<ClusterConfig> MarkSynced(const ClusterConfig& config, ShardId shard, NodeId backup) {
  SLIP_RETURN_IF_ERROR(config.Validate());
  if (shard >= config.num_shards()) {
    return Status::InvalidArgument("MarkSynced: no shard " + N(shard));
  }
  const auto& sync = config.shards[shard].syncing;
  if (std::find(sync.begin(), sync.end(), backup) == sync.end()) {
    return Status::InvalidArgument("MarkSynced: node " + N(backup) + " is not a syncing backup of shard " +
                                   N(shard));
  }
  if (config.term == std::numeric_limits<uint64_t>::max()) {
    return Status::InvalidArgument("MarkSynced: term exhausted");
  }
  ClusterConfig next = config;
  next.term++;
  std::erase(next.shards[shard].syncing, backup);
  // The target of a backup's move is complete: the source retires.
  for (auto m = next.migrations.begin(); m != next.migrations.end(); ++m) {
    if (m->shard == shard && m->to == backup) {
      std::erase(next.shards[shard].backups, m->from);
      next.migrations.erase(m);
      break;
    }
  }
  return next;
}

bool MovesShards(std::string_view design) { return !UsesPool(design) && !UsesChain(design); }

bool MovesPrimary(const ClusterConfig& config, const Migration& m) {
  return m.shard < config.num_shards() && config.shards[m.shard].primary == m.to;
}

Result<ClusterConfig> FinishMigration(const ClusterConfig& config, ShardId shard, NodeId to) {
  SLIP_RETURN_IF_ERROR(config.Validate());
  if (config.term == std::numeric_limits<uint64_t>::max()) {
    return Status::InvalidArgument("FinishMigration: term exhausted");
  }
  ClusterConfig next = config;
  for (auto m = next.migrations.begin(); m != next.migrations.end(); ++m) {
    if (m->shard != shard || m->to != to || !MovesPrimary(config, *m)) continue;
    next.migrations.erase(m);
    next.term++;
    return next;
  }
  return Status::InvalidArgument("FinishMigration: no move of shard " + N(shard) + "'s primary to node " + N(to));
}

std::string_view NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kUp: return "up";
    case NodeState::kDown: return "down";
    case NodeState::kLeaving: return "leaving";
  }
  return "?";
}

std::string_view MigrationStateName(MigrationState s) {
  switch (s) {
    case MigrationState::kPending: return "pending";
    case MigrationState::kCopying: return "copying";
    case MigrationState::kDone: return "done";
  }
  return "?";
}

// ---- JSON ------------------------------------------------------------------

namespace internal {

using nlohmann::json;

namespace {
Status Bad(std::string m) { return Status::Corruption("cluster config json: " + std::move(m)); }
}  // namespace

std::string Dump(const json& j, int indent) {
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

Result<uint64_t> GetUint(const json& obj, const char* field, uint64_t max) {
  auto it = obj.find(field);
  if (it == obj.end()) return Bad(std::string("missing \"") + field + "\"");
  // nlohmann stores non-negative integers as unsigned; negative ones and
  // floats (even 3.0) are refused.
  if (!it->is_number_unsigned()) {
    return Bad(std::string("\"") + field + "\" is not a non-negative integer");
  }
  const uint64_t v = it->get<uint64_t>();
  if (v > max) return Bad(std::string("\"") + field + "\" = " + N(v) + " exceeds " + N(max));
  return v;
}

Result<std::string> GetString(const json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end()) return Bad(std::string("missing \"") + field + "\"");
  if (!it->is_string()) return Bad(std::string("\"") + field + "\" is not a string");
  return it->get<std::string>();
}

Status OnlyFields(const json& obj, std::initializer_list<const char*> allowed,
                  std::string_view what) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (std::none_of(allowed.begin(), allowed.end(),
                     [&](const char* a) { return it.key() == a; })) {
      return Bad(std::string(what) + ": unknown field \"" + it.key() + "\"");
    }
  }
  return Status::Ok();
}

namespace {
std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : bytes) {
    out.push_back(kDigits[ch >> 4]);
    out.push_back(kDigits[ch & 15]);
  }
  return out;
}
}  // namespace

json ToJson(const ClusterConfig& c) {
  json nodes = json::array();
  for (const auto& [id, info] : c.nodes) {
    json node = {{"id", id}, {"address", info.address}, {"state", NodeStateName(info.state)}};
    if (!info.workers.empty()) node["workers"] = info.workers;
    nodes.push_back(std::move(node));
  }
  json shards = json::array();
  for (ShardId s = 0; s < c.shards.size(); s++) {
    shards.push_back({{"id", s},
                      {"primary", c.shards[s].primary},
                      {"backups", c.shards[s].backups},
                      {"syncing", c.shards[s].syncing}});
  }
  json migrations = json::array();
  for (const Migration& m : c.migrations) {
    migrations.push_back({{"shard", m.shard},
                          {"from", m.from},
                          {"to", m.to},
                          {"state", MigrationStateName(m.state)}});
  }
  const bool entries = std::any_of(c.nodes.begin(), c.nodes.end(), [](const auto& n) { return !n.second.workers.empty(); });
  json doc{{"format", "slipstream.cluster_config"},
              {"format_version", entries ? kConfigFormatVersion : 1},
              {"term", c.term},
              {"replication_factor", c.replication_factor},
              {"design", c.design},
              {"provider", c.provider},
              {"pm", c.pm},
              {"nodes", std::move(nodes)},
              {"shards", std::move(shards)},
              {"migrations", std::move(migrations)}};
  if (!c.pool.empty()) doc["pool"] = c.pool;  // pool designs only
  if (!c.shared.empty()) {
    json shared = json::array();
    for (const auto& [key, owners] : c.shared) shared.push_back({{"key_hex", ToHex(key)}, {"owners", owners}});
    doc["shared"] = std::move(shared);
  }
  return doc;
}

namespace {
constexpr uint64_t kU32 = std::numeric_limits<uint32_t>::max();

Result<std::string> FromHex(std::string_view hex) {
  auto nibble = [](char ch) -> int {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return Bad("a key_hex of odd length");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return Bad("a key_hex that is not lower-case hex");
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

Result<const json*> GetArray(const json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end()) return Bad(std::string("missing \"") + field + "\"");
  if (!it->is_array()) return Bad(std::string("\"") + field + "\" is not an array");
  return &*it;
}

Result<ClusterConfig> FromJsonUnchecked(const json& j) {
  if (!j.is_object()) return Bad("top level is not an object");
  SLIP_ASSIGN_OR_RETURN(std::string format, GetString(j, "format"));
  if (format != "slipstream.cluster_config") return Bad("format is \"" + format + "\"");
  SLIP_ASSIGN_OR_RETURN(uint64_t version, GetUint(j, "format_version", kU32));
  if (version < 1 || version > kConfigFormatVersion) {
    return Status::NotSupported("cluster config json: format_version " + N(version) +
                                " (this build reads 1 to " + N(kConfigFormatVersion) + ")");
  }
  SLIP_RETURN_IF_ERROR(OnlyFields(j,
                                  {"format", "format_version", "term", "replication_factor",
                                   "design", "provider", "pm", "pool", "shared", "nodes", "shards", "migrations"},
                                  "config"));
  ClusterConfig c;
  SLIP_ASSIGN_OR_RETURN(c.term, GetUint(j, "term", std::numeric_limits<uint64_t>::max()));
  SLIP_ASSIGN_OR_RETURN(uint64_t rf, GetUint(j, "replication_factor", kU32));
  c.replication_factor = static_cast<uint32_t>(rf);
  // Absent in configurations written before designs were selectable.
  if (j.contains("design")) {
    SLIP_ASSIGN_OR_RETURN(c.design, GetString(j, "design"));
  }
  // Absent in configurations written before the provider was recorded: tcp.
  if (j.contains("provider")) {
    SLIP_ASSIGN_OR_RETURN(c.provider, GetString(j, "provider"));
    if (c.provider.empty()) return Bad("provider is empty");
  }
  // Absent (or empty) before the durability class was recorded.
  if (j.contains("pm")) {
    SLIP_ASSIGN_OR_RETURN(c.pm, GetString(j, "pm"));
    if (!c.pm.empty() && c.pm != "dram" && c.pm != "dax" && c.pm != "file") {
      return Bad("pm is \"" + c.pm + "\" (dram, dax or file)");
    }
  }

  // Absent before pool designs existed.
  if (j.contains("pool")) {
    SLIP_ASSIGN_OR_RETURN(c.pool, GetString(j, "pool"));
  }

  // Absent when no key is shared.
  if (j.contains("shared")) {
    SLIP_ASSIGN_OR_RETURN(const json* shared, GetArray(j, "shared"));
    for (const json& e : *shared) {
      if (!e.is_object()) return Bad("a shared key is not an object");
      SLIP_RETURN_IF_ERROR(OnlyFields(e, {"key_hex", "owners"}, "shared key"));
      SLIP_ASSIGN_OR_RETURN(std::string hex, GetString(e, "key_hex"));
      SLIP_ASSIGN_OR_RETURN(std::string key, FromHex(hex));
      SLIP_ASSIGN_OR_RETURN(const json* owners, GetArray(e, "owners"));
      std::vector<NodeId>& out = c.shared[key];
      for (const json& o : *owners) {
        if (!o.is_number_unsigned() || o.get<uint64_t>() > kU32) return Bad("a shared key's owner is not a node id");
        out.push_back(static_cast<NodeId>(o.get<uint64_t>()));
      }
    }
  }

  SLIP_ASSIGN_OR_RETURN(const json* nodes, GetArray(j, "nodes"));
  for (const json& n : *nodes) {
    if (!n.is_object()) return Bad("a node is not an object");
    if (version >= 2) {
      SLIP_RETURN_IF_ERROR(OnlyFields(n, {"id", "address", "state", "workers"}, "node"));
    } else {
      SLIP_RETURN_IF_ERROR(OnlyFields(n, {"id", "address", "state"}, "node"));
    }
    SLIP_ASSIGN_OR_RETURN(uint64_t id, GetUint(n, "id", kU32));
    NodeInfo info;
    SLIP_ASSIGN_OR_RETURN(info.address, GetString(n, "address"));
    if (const auto w = n.find("workers"); w != n.end()) {
      if (!w->is_array()) return Bad("node " + N(id) + ": workers is not a list");
      for (const json& a : *w) {
        if (!a.is_string()) return Bad("node " + N(id) + ": a worker's address is not a string");
        info.workers.push_back(a.get<std::string>());
      }
    }
    SLIP_ASSIGN_OR_RETURN(std::string state, GetString(n, "state"));
    if (state == "up") {
      info.state = NodeState::kUp;
    } else if (state == "down") {
      info.state = NodeState::kDown;
    } else if (state == "leaving") {
      info.state = NodeState::kLeaving;
    } else {
      return Bad("node " + N(id) + ": unknown state \"" + state + "\"");
    }
    if (!c.nodes.emplace(static_cast<NodeId>(id), std::move(info)).second) {
      return Bad("node " + N(id) + " listed twice");
    }
  }

  SLIP_ASSIGN_OR_RETURN(const json* shards, GetArray(j, "shards"));
  if (shards->size() > kU32) return Bad("too many shards");
  for (const json& s : *shards) {
    if (!s.is_object()) return Bad("a shard is not an object");
    SLIP_RETURN_IF_ERROR(OnlyFields(s, {"id", "primary", "backups", "syncing"}, "shard"));
    SLIP_ASSIGN_OR_RETURN(uint64_t id, GetUint(s, "id", kU32));
    if (id != c.shards.size()) {
      return Bad("shard at position " + N(c.shards.size()) + " has id " + N(id));
    }
    ShardReplicas r;
    SLIP_ASSIGN_OR_RETURN(uint64_t primary, GetUint(s, "primary", kU32));
    r.primary = static_cast<NodeId>(primary);
    for (auto [field, out] : {std::pair{"backups", &r.backups}, std::pair{"syncing", &r.syncing}}) {
      SLIP_ASSIGN_OR_RETURN(const json* ids, GetArray(s, field));
      for (const json& b : *ids) {
        if (!b.is_number_unsigned() || b.get<uint64_t>() > kU32) {
          return Bad("shard " + N(id) + ": an entry of \"" + field + "\" is not a node id");
        }
        out->push_back(static_cast<NodeId>(b.get<uint64_t>()));
      }
    }
    c.shards.push_back(std::move(r));
  }

  SLIP_ASSIGN_OR_RETURN(const json* migrations, GetArray(j, "migrations"));
  for (const json& m : *migrations) {
    if (!m.is_object()) return Bad("a migration is not an object");
    SLIP_RETURN_IF_ERROR(OnlyFields(m, {"shard", "from", "to", "state"}, "migration"));
    Migration mig;
    SLIP_ASSIGN_OR_RETURN(uint64_t shard, GetUint(m, "shard", kU32));
    SLIP_ASSIGN_OR_RETURN(uint64_t from, GetUint(m, "from", kU32));
    SLIP_ASSIGN_OR_RETURN(uint64_t to, GetUint(m, "to", kU32));
    SLIP_ASSIGN_OR_RETURN(std::string state, GetString(m, "state"));
    mig.shard = static_cast<ShardId>(shard);
    mig.from = static_cast<NodeId>(from);
    mig.to = static_cast<NodeId>(to);
    if (state == "pending") {
      mig.state = MigrationState::kPending;
    } else if (state == "copying") {
      mig.state = MigrationState::kCopying;
    } else if (state == "done") {
      mig.state = MigrationState::kDone;
    } else {
      return Bad("migration of shard " + N(shard) + ": unknown state \"" + state + "\"");
    }
    c.migrations.push_back(mig);
  }
  if (Status s = c.Validate(); !s.ok()) return Bad(s.message());
  return c;
}
}  // namespace

Result<ClusterConfig> FromJson(const json& j) {
  // Every access above is type-checked first; the catch is a backstop so that
  // no input can turn into an exception crossing the module boundary.
  try {
    return FromJsonUnchecked(j);
  } catch (const std::exception& e) {
    return Bad(std::string("unexpected: ") + e.what());
  }
}

}  // namespace internal

std::string EncodeJson(const ClusterConfig& config) {
  return internal::Dump(internal::ToJson(config), 2) + "\n";
}

Result<ClusterConfig> DecodeJson(std::string_view text) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded()) return internal::Bad("not well-formed JSON");
  return internal::FromJson(j);
}

}  // namespace slip::cluster
