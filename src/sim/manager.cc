// The simulated configuration manager: leases granted by message,
// failure detection, reassignment, rejoin and seeded-backup reports.
#include "sim/world.h"

namespace slip::sim::detail {

// Node side: ask the CM for a lease every lease/4. The lease runs from when
// the request was SENT, so the node's idea of it never outlasts the CM's.
void World::RenewLoop(NodeId id, uint64_t inc) {
  Node& n = *nodes_[id];
  if (!n.up || n.incarnation != inc) return;
  const Nanos sent = rt_.Now();
  if (!isolated_.count(id) && !rt_.Rng().Bernoulli(o_.drop_probability)) {
    rt_.Schedule(rt_.Now() + Latency(), cm_, kEventControl, "renew", id,
                 [this, id, inc, sent] { OnRenew(id, inc, sent); });
  }
  n.exec->After(static_cast<Nanos>(o_.lease_us) * kMicrosecond / 4, [this, id, inc] { RenewLoop(id, inc); });
}

// CM side of a renewal.
void World::OnRenew(NodeId id, uint64_t inc, Nanos sent) {
  if (cold_) return;
  auto known = member_inc_.find(id);
  const bool evicted = down_.count(id) > 0;
  if (known != member_inc_.end() && known->second != inc && !evicted) {
    // A new incarnation of a member: the old one is dead. Wait for its lease.
    return;
  }
  if (evicted && known != member_inc_.end() && known->second == inc) {
    // An evicted member that was only cut off: it must rejoin empty.
    rt_.Schedule(rt_.Now() + Latency(), nodes_[id]->exec, kEventControl, "evicted", id, [this, id, inc] {
      Node& n = *nodes_[id];
      if (!n.up || n.incarnation != inc) return;
      ++faults_;
      n.up = false;
      StartNode(n, /*fresh=*/true);
      n.live->parts->agent->Adopt(view_);
    });
    return;
  }
  if (evicted) {
    // Back, empty: a member again, topping up under-replicated shards.
    if (config_.nodes.count(id) && config_.nodes[id].state == cluster::NodeState::kDown) {
      Status st = SetConfig(cluster::Rejoin(config_, id));
      if (!st.ok()) {
        failure_ = "rejoin of node " + std::to_string(id) + ": " + st.ToString();
        return;
      }
    }
    down_.erase(id);
    member_inc_[id] = inc;
  }
  last_grant_[id] = rt_.Now();
  if (isolated_.count(id) || rt_.Rng().Bernoulli(o_.drop_probability)) return;
  Node* np = nodes_[id].get();
  rt_.Schedule(rt_.Now() + Latency(), np->exec, kEventControl, "lease", id, [this, np, inc, sent] {
    if (!np->up || np->incarnation != inc) return;
    np->lease_expiry = std::max(np->lease_expiry, sent + static_cast<Nanos>(o_.lease_us) * kMicrosecond);
  });
}

// CM: a member whose last grant is older than a lease (plus slack for the
// grant's flight) has lost its lease and no longer serves: replace it.
void World::CheckLeases() {
  if (!cold_) {
    const Nanos lease = static_cast<Nanos>(o_.lease_us) * kMicrosecond;
    bool any = false;
    for (auto& [id, granted] : last_grant_) {
      if (down_.count(id)) continue;
      if (rt_.Now() > granted + lease + 2 * static_cast<Nanos>(o_.latency_max_us) * kMicrosecond) {
        down_.insert(id);
        any = true;
      }
    }
    if (any) Reconfigure();
  }
  cm_->After(kMillisecond, [this] { CheckLeases(); });
}

void World::Publish(std::shared_ptr<server::NodeView> v) {
  view_ = v;
  // Configuration messages are reliable here (the CM retries until acked);
  // their delay differs per node, so nodes disagree for a while.
  for (auto& n : nodes_) SendConfig(n.get(), v);
}

void World::SendConfig(Node* np, std::shared_ptr<const server::NodeView> v) {
  rt_.Schedule(rt_.Now() + Latency(), np->exec, kEventControl, "config", v->term, [this, np, v] {
    if (isolated_.count(np->id)) {
      // Cut off: the CM retries until the node answers.
      cm_->After(kMillisecond, [this, np, v] { SendConfig(np, v); });
      return;
    }
    if (np->up) np->live->parts->agent->Adopt(v);
  });
}

// The configuration manager: one change at a time, each a new term.
void World::Reconfigure() {
  if (cold_) return;
  // Every node the manager has declared failed that the configuration still
  // lists as up: one Reassign each (a new term each).
  for (NodeId n : down_) {
    auto it = config_.nodes.find(n);
    if (it == config_.nodes.end() || it->second.state != cluster::NodeState::kUp) continue;
    const uint64_t before = failovers_;
    std::vector<uint32_t> moved;
    for (uint32_t sh = 0; sh < config_.num_shards(); ++sh) {
      if (config_.shards[sh].primary == n) moved.push_back(sh);
    }
    failovers_ += moved.size();
    Status st = SetConfig(cluster::Reassign(config_, n));
    if (!st.ok()) {
      failovers_ = before;
      failure_ = "reassign after node " + std::to_string(n) + " failed: " + st.ToString();
      return;
    }
    if (failover_crashes_left_ > 0 && !moved.empty()) {
      --failover_crashes_left_;
      const uint32_t sh = moved[rt_.Rng().Uniform(moved.size())];
      CrashSoon(config_.shards[sh].primary, 2 * kMillisecond, "crash-in-failover");
    }
  }
  for (uint32_t sh = 0; sh < config_.num_shards(); ++sh) {
    if (config_.nodes[config_.shards[sh].primary].state != cluster::NodeState::kUp) {
      failure_ = "shard " + std::to_string(sh) + " lost every in-sync replica";
      return;
    }
  }
}

// Adopts `next` as the manager's configuration and publishes it.
Status World::SetConfig(Result<cluster::ClusterConfig> next) {
  if (!next.ok()) return next.status();
  for (uint32_t sh = 0; sh < next->num_shards(); ++sh) {
    for (NodeId b : next->shards[sh].syncing) {
      const auto& old = config_.shards[sh].syncing;
      if (std::find(old.begin(), old.end(), b) == old.end()) seeded_since_[{sh, b}] = next->term;
    }
  }
  config_ = std::move(*next);
  auto v = server::ViewFromConfig(config_);
  Publish(std::const_pointer_cast<server::NodeView>(v));
  return Status::Ok();
}

// CM: a primary reports that a new backup holds the whole shard.
void World::OnSeeded(uint32_t shard, NodeId backup, uint64_t term) {
  if (cold_) return;
  auto& sync = config_.shards[shard].syncing;
  if (std::find(sync.begin(), sync.end(), backup) == sync.end()) return;
  // Only if the report is about the replica set as it still is: the backup
  // must have been a replica without interruption since `term`.
  if (term < seeded_since_[{shard, backup}]) return;
  Status st = SetConfig(cluster::MarkSynced(config_, shard, backup));
  if (!st.ok()) failure_ = "mark synced: " + st.ToString();
}

}  // namespace slip::sim::detail
