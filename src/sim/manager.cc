// The configuration manager in the simulation: cluster::Manager (failure
// detection and reassignment, as `slip manager` runs it) on the CM's
// executor over an in-memory store, plus what reaches the CM by message
// here: lease renewals (a real node writes its lease to the store itself),
// rejoins and seeded-backup reports.
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
  if (!RecordLease(id, sent)) return;  // taken meanwhile: no grant
  if (isolated_.count(id) || rt_.Rng().Bernoulli(o_.drop_probability)) return;
  Node* np = nodes_[id].get();
  rt_.Schedule(rt_.Now() + Latency(), np->exec, kEventControl, "lease", id, [this, np, inc, sent] {
    if (!np->up || np->incarnation != inc) return;
    np->lease_expiry = std::max(np->lease_expiry, sent + static_cast<Nanos>(o_.lease_us) * kMicrosecond);
  });
}

bool World::RecordLease(NodeId id, Nanos sent) {
  auto last = lease_sent_.find(id);
  if (last != lease_sent_.end() && sent <= last->second) return true;
  const std::string name = cluster::NodeLeaseName(id);
  if (!cm_store_->AcquireLease(name, name, static_cast<Nanos>(o_.lease_us) * kMicrosecond, sent).ok()) return false;
  lease_sent_[id] = sent;
  return true;
}

void World::StartManager() {
  cluster::ManagerOptions mo;
  mo.lease = static_cast<Nanos>(o_.lease_us) * kMicrosecond;
  mo.holder = "cm" + std::to_string(managers_.size());
  mo.log = o_.trace;  // its decisions in the trace's log lines
  managers_.push_back(std::make_unique<cluster::Manager>(cm_store_.get(), cm_, mo));
  cluster::Manager* m = managers_.back().get();
  cm_->Post([this, m] {
    m->Start([this](const cluster::Manager::Reassigned& r) { OnReassigned(r); },
             [this](Status s) { failure_ = "the configuration manager stopped: " + s.ToString(); });
  });
}

// The manager replaced a node whose lease expired (a new term).
void World::OnReassigned(const cluster::Manager::Reassigned& r) {
  down_.insert(r.failed);
  CountEndedMoves(r.before.config, r.after.config, /*failure=*/true);
  std::vector<uint32_t> moved;
  for (uint32_t sh = 0; sh < r.before.config.num_shards(); ++sh) {
    if (r.before.config.shards[sh].primary == r.failed) moved.push_back(sh);
  }
  failovers_ += moved.size();
  Adopt(r.after);
  for (uint32_t sh = 0; sh < config_.num_shards(); ++sh) {
    if (config_.nodes[config_.shards[sh].primary].state != cluster::NodeState::kUp) {
      failure_ = "shard " + std::to_string(sh) + " lost every in-sync replica";
      return;
    }
  }
  if (failover_crashes_left_ > 0 && !moved.empty()) {
    --failover_crashes_left_;
    const uint32_t sh = moved[rt_.Rng().Uniform(moved.size())];
    CrashSoon(config_.shards[sh].primary, 2 * kMillisecond, "crash-in-failover");
  }
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

// Writes `next` to the CM's store (the CM is its only writer here) and
// publishes it.
Status World::SetConfig(Result<cluster::ClusterConfig> next) {
  if (!next.ok()) return next.status();
  SLIP_ASSIGN_OR_RETURN(uint64_t version, cm_store_->CompareAndSwap(cm_version_, *next));
  Adopt(cluster::VersionedConfig{std::move(*next), version});
  return Status::Ok();
}

void World::Adopt(const cluster::VersionedConfig& stored) {
  const cluster::ClusterConfig& next = stored.config;
  for (uint32_t sh = 0; sh < next.num_shards(); ++sh) {
    for (NodeId b : next.shards[sh].syncing) {
      const auto& old = config_.shards[sh].syncing;
      if (std::find(old.begin(), old.end(), b) == old.end()) seeded_since_[{sh, b}] = next.term;
    }
  }
  config_ = next;
  cm_version_ = stored.version;
  if (o_.trace) {
    // The map as the CM stored it: shard primary[backups, syncing*], moves.
    std::string line = "t=" + std::to_string(rt_.Now()) + " cm: term " + std::to_string(config_.term) + ":";
    for (uint32_t sh = 0; sh < config_.num_shards(); ++sh) {
      const auto& r = config_.shards[sh];
      line += " " + std::to_string(sh) + ":" + std::to_string(r.primary) + "[";
      for (NodeId b : r.backups) {
        line += std::to_string(b);
        if (std::find(r.syncing.begin(), r.syncing.end(), b) != r.syncing.end()) line += "*";
        line += ",";
      }
      line += "]";
    }
    for (const auto& m : config_.migrations) {
      line += " move " + std::to_string(m.shard) + ":" + std::to_string(m.from) + "->" + std::to_string(m.to);
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  auto v = server::ViewFromConfig(config_);
  Publish(std::const_pointer_cast<server::NodeView>(v));
}

// CM: a primary reports that a new backup holds the whole shard.
void World::OnSeeded(uint32_t shard, NodeId backup, uint64_t term) {
  if (cold_) return;
  auto& sync = config_.shards[shard].syncing;
  if (std::find(sync.begin(), sync.end(), backup) == sync.end()) return;
  // Only if the report is about the replica set as it still is: the backup
  // must have been a replica without interruption since `term`.
  if (term < seeded_since_[{shard, backup}]) return;
  const cluster::ClusterConfig before = config_;
  Status st = SetConfig(cluster::MarkSynced(config_, shard, backup));
  if (!st.ok()) failure_ = "mark synced: " + st.ToString();
  CountEndedMoves(before, config_, /*failure=*/false);
}

void World::CountEndedMoves(const cluster::ClusterConfig& before, const cluster::ClusterConfig& after, bool failure) {
  for (const cluster::Migration& m : before.migrations) {
    const bool still = std::any_of(after.migrations.begin(), after.migrations.end(),
                                   [&](const cluster::Migration& a) { return a.shard == m.shard; });
    if (still) continue;
    move_since_.erase(m.shard);
    ++(failure ? migrations_failed_ : migrations_done_);
  }
}

// CM: move a random shard's replica to a node holding none (as `slip
// cluster move` or the rebalancer would).
void World::StartRandomMigration() {
  if (cold_ || !failure_.empty()) return;
  Random& rng = rt_.Rng();
  const uint32_t shard = static_cast<uint32_t>(rng.Uniform(config_.num_shards()));
  const cluster::ShardReplicas& rep = config_.shards[shard];
  NodeId from = rep.primary;
  if (rng.Uniform(3) == 0) {
    std::vector<NodeId> complete;
    for (NodeId b : rep.backups) {
      if (std::find(rep.syncing.begin(), rep.syncing.end(), b) == rep.syncing.end()) complete.push_back(b);
    }
    if (!complete.empty()) from = complete[rng.Uniform(complete.size())];
  }
  std::vector<NodeId> targets;
  const auto holders = config_.Replicas(shard);
  for (const auto& [id, info] : config_.nodes) {
    if (info.state == cluster::NodeState::kUp && !down_.count(id) &&
        std::find(holders.begin(), holders.end(), id) == holders.end()) {
      targets.push_back(id);
    }
  }
  if (targets.empty()) return;
  const NodeId to = targets[rng.Uniform(targets.size())];
  auto next = cluster::StartMigration(config_, shard, from, to);
  if (!next.ok()) return;  // the shard is moving already, or the source is syncing
  if (Status st = SetConfig(std::move(next)); !st.ok()) {
    failure_ = "starting a move: " + st.ToString();
    return;
  }
  ++migrations_started_;
  move_since_[shard] = config_.term;
  if (o_.migration_faults && rng.Bernoulli(0.5)) {
    switch (rng.Uniform(3)) {
      case 0: CrashSoon(from, 3 * kMillisecond, "crash-move-source"); break;
      case 1: CrashSoon(to, 3 * kMillisecond, "crash-move-target"); break;
      default:
        rt_.Schedule(rt_.Now() + static_cast<Nanos>(rng.Uniform(3000)) * kMicrosecond, cm_, kEventFault,
                     "restart-cm", 0, [this] { RestartManager(); });
    }
  }
}

// A node's report: the store's compare-and-swap, made by the node itself
// in a real cluster (node_process.cc), so it works with no manager up.
void World::OnMigrated(uint32_t shard, NodeId to, uint64_t term) {
  if (cold_) return;
  auto since = move_since_.find(shard);
  if (since == move_since_.end() || term < since->second) return;
  const cluster::ClusterConfig before = config_;
  auto next = cluster::FinishMigration(config_, shard, to);
  if (!next.ok()) return;  // not this move any more
  if (Status st = SetConfig(std::move(next)); !st.ok()) {
    failure_ = "finishing a move: " + st.ToString();
    return;
  }
  CountEndedMoves(before, config_, /*failure=*/false);
}

// The CM's process dies and a new one takes over: no failure detection in
// between, and the new one starts with the boot grace.
void World::RestartManager() {
  if (cold_) return;
  ++faults_;
  managers_.back()->Stop();
  rt_.Schedule(rt_.Now() + static_cast<Nanos>(o_.lease_us) * kMicrosecond, cm_, kEventFault, "cm-back", 0,
               [this] {
                 if (!cold_) StartManager();
               });
}

}  // namespace slip::sim::detail
