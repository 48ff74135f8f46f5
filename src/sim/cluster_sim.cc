// A simulation run: the fault schedule, the checks (linearizability,
// versions, acknowledged writes) and the result.
#include "sim/cluster_sim.h"

#include "sim/linearizability.h"
#include "sim/chain_perf.h"
#include "sim/pool_perf.h"
#include "sim/world.h"

namespace slip::sim {
namespace detail {

// Whether taking `victim` away (crash or partition) leaves every shard a
// live, in-sync replica: the harness injects only faults the design is
// meant to survive (RF - 1 failures of in-sync replicas).
bool World::SafeToFail(NodeId victim) const {
  for (uint32_t sh = 0; sh < view_->shards.size(); ++sh) {
    const auto& rep = view_->shards[sh];
    std::vector<NodeId> all = rep.backups;
    all.push_back(rep.primary);
    // A primary's move: the target holds only what it copied so far.
    const server::PrimaryMove* move = view_->MoveOf(sh);
    bool ok = false;
    for (NodeId n : all) {
      const bool syncing = std::find(rep.syncing.begin(), rep.syncing.end(), n) != rep.syncing.end() ||
                           (move != nullptr && move->to == n);
      // A node that has not renewed its lease lately may be about to be
      // evicted (e.g. just healed from a partition): it does not count.
      auto g = last_grant_.find(n);
      const bool fresh = g != last_grant_.end() &&
                         rt_.Now() - g->second < static_cast<Nanos>(o_.lease_us) * kMicrosecond / 2;
      if (n != victim && !syncing && fresh && nodes_[n]->up && !down_.count(n) && !isolated_.count(n)) {
        ok = true;
      }
    }
    if (!ok) return false;
  }
  return true;
}

// The cluster's state in one line, for a stuck run's report.
std::string World::Describe() const {
  std::string d = "term " + std::to_string(view_->term) + "; down {";
  for (NodeId n : down_) d += " " + std::to_string(n);
  d += " }; isolated {";
  for (NodeId n : isolated_) d += " " + std::to_string(n);
  d += " }; blocked shards {";
  for (const auto& n : nodes_) {
    if (!n->up) continue;
    auto v = n->views.Get();
    for (uint32_t sh = 0; sh < v->blocked.size(); ++sh) {
      if (v->blocked[sh]) d += " " + std::to_string(sh) + "@node" + std::to_string(n->id);
    }
  }
  d += " }; clients done";
  for (const auto& c : clients_) d += " " + std::to_string(c.done);
  d += "; nodes up";
  for (const auto& n : nodes_) d += n->up ? " 1" : " 0";
  return d;
}

void World::CountDirect(ClusterSimResult& res) const {
  for (const Client& cl : clients_) {
    if (cl.erda) res.direct += cl.erda->stats();
  }
}

ClusterSimResult World::Run() {
  ClusterSimResult res;
  cm_ = rt_.CreateExecutor("cm");
  for (NodeId i = 0; i < o_.nodes; ++i) {
    auto n = std::make_unique<Node>();
    n->id = i;
    n->exec = rt_.CreateExecutor("node" + std::to_string(i));
    n->workers.push_back(n->exec);
    for (uint32_t w = 1; w < o_.workers; ++w) {
      n->workers.push_back(rt_.CreateExecutor("node" + std::to_string(i) + "/worker" + std::to_string(w)));
    }
    if (fabric_) StartNodeRoles(*n);
    nodes_.push_back(std::move(n));
  }
  // Term 1: shard s on nodes s, s+1, ..., primary first.
  // Term 1: cluster::Place, as a real manager bootstraps a cluster.
  std::map<NodeId, std::string> members;
  for (NodeId i = 0; i < o_.nodes; ++i) members[i] = "sim:node" + std::to_string(i);
  auto placed = cluster::Place(members, o_.shards, o_.replication);
  if (!placed.ok()) {
    res.ok = false;
    res.failure = "placement: " + placed.status().ToString();
    return res;
  }
  placed->design = replication::DesignName(o_.protocol);
  auto stored = cm_store_->CompareAndSwap(cluster::kNoVersion, *placed);
  if (!stored.ok()) {
    res.ok = false;
    res.failure = "storing the first configuration: " + stored.status().ToString();
    return res;
  }
  config_ = std::move(*placed);
  cm_version_ = *stored;
  auto v = server::ViewFromConfig(config_);
  view_ = v;
  for (auto& n : nodes_) {
    StartNode(*n, true);
    n->live->parts->agent->Start(v);
    member_inc_[n->id] = n->incarnation;
    last_grant_[n->id] = 0;
    n->lease_expiry = static_cast<Nanos>(o_.lease_us) * kMicrosecond;  // the first grant
    RecordLease(n->id, 0);
  }
  StartManager();
  failover_crashes_left_ = o_.failover_crashes;
  if (!failure_.empty()) {
    res.ok = false;
    res.failure = failure_;
    return res;
  }

  for (uint32_t c = 0; c < o_.clients; ++c) {
    Client cl;
    cl.exec = rt_.CreateExecutor("client" + std::to_string(c));
    cl.caller = std::make_unique<Caller>(this, cl.exec, kClientBase + c, 0);
    cl.routing = std::make_unique<RoutingFromCm>(this, cl.exec);
    client::CoreOptions co;
    co.limits.max_key = 256;
    co.limits.max_value = 4096;
    cl.core = std::make_unique<client::ClientCore>(cl.caller.get(), cl.routing.get(), cl.exec, co);
    if (!o_.perf) cl.core->set_recorder([this, c](const client::OpRecord& r) { Record(c, r); });
    if (DirectClients()) {
      fabric::EndpointOptions eo{.name = "client" + std::to_string(c)};
      eo.op_timeout = std::chrono::microseconds(o_.call_timeout_us);
      auto ep = fabric_->CreateEndpoint(kClientBase + c, cl.exec, eo);
      if (!ep.ok()) {
        res.ok = false;
        res.failure = "client endpoint: " + ep.status().ToString();
        return res;
      }
      cl.ep = std::move(*ep);
      client::ErdaPathOptions po;
      po.limits = co.limits;
      cl.erda = std::make_unique<client::ErdaPath>(cl.caller.get(), cl.ep.get(), cl.exec, po);
      cl.core->set_direct_path(cl.erda.get());
      cl.exec->AddPoller([p = cl.erda.get()] { return p->Poll(); });
    }
    clients_.push_back(std::move(cl));
  }
  if (o_.perf) {
    // The loading clients need a generator for keys and values.
    for (Client& cl : clients_) cl.gen = std::make_unique<ycsb::OpGenerator>(o_.perf->workload, nullptr);
    RunPerf(res);
    CountDirect(res);
    return res;
  }
  for (uint32_t c = 0; c < o_.clients; ++c) {
    clients_[c].exec->Post([this, c] { ClientLoop(c); });
  }

  // Faults: crash a random up node at a random time, restart it later; never
  // more than replication - 1 down at once (one at a time here).
  Random& rng = rt_.Rng();
  Nanos t = 2 * kMillisecond;
  for (uint32_t i = 0; i < o_.crashes; ++i) {
    t += static_cast<Nanos>(rng.Uniform(20'000)) * kMicrosecond;
    const NodeId victim = static_cast<NodeId>(rng.Uniform(o_.nodes));
    rt_.Schedule(t, nullptr, kEventFault, "crash", victim, [this, victim] {
      if (SafeToFail(victim)) Crash(victim);
    });
    const Nanos back = t + 4 * static_cast<Nanos>(o_.lease_us) * kMicrosecond +
                       static_cast<Nanos>(rng.Uniform(10'000)) * kMicrosecond;
    rt_.Schedule(back, nullptr, kEventFault, "restart", victim, [this, victim] {
      if (!nodes_[victim]->up) Restart(victim);
    });
    t = back;
  }

  for (uint32_t i = 0; i < o_.partitions; ++i) {
    const Nanos at = 2 * kMillisecond + static_cast<Nanos>(rng.Uniform(40'000)) * kMicrosecond;
    const NodeId victim = static_cast<NodeId>(rng.Uniform(o_.nodes));
    const Nanos length = static_cast<Nanos>(o_.lease_us) * kMicrosecond * static_cast<Nanos>(1 + rng.Uniform(4));
    rt_.Schedule(at, nullptr, kEventFault, "partition", victim, [this, victim] {
      // One fault at a time keeps a majority of every shard's replicas up.
      if (!SafeToFail(victim) || isolated_.count(victim)) return;
      ++faults_;
      Isolate(victim, true);
    });
    rt_.Schedule(at + length, nullptr, kEventFault, "heal", victim, [this, victim] {
      if (isolated_.count(victim)) Isolate(victim, false);
    });
    t = std::max(t, at + length);
  }

  for (uint32_t i = 0; i < o_.slow_nodes; ++i) {
    const Nanos at = static_cast<Nanos>(rng.Uniform(40'000)) * kMicrosecond;
    const NodeId victim = static_cast<NodeId>(rng.Uniform(o_.nodes));
    const Nanos length = static_cast<Nanos>(rng.Uniform(30'000)) * kMicrosecond;
    rt_.Schedule(at, nullptr, kEventFault, "slow", victim, [this, victim] {
      ++faults_;
      SetSlow(victim, true);
    });
    rt_.Schedule(at + length, nullptr, kEventFault, "fast", victim, [this, victim] { SetSlow(victim, false); });
    t = std::max(t, at + length);
  }

  for (uint32_t i = 0; i < o_.migrations; ++i) {
    const Nanos at = 2 * kMillisecond + static_cast<Nanos>(rng.Uniform(40'000)) * kMicrosecond;
    rt_.Schedule(at, cm_, kEventFault, "move", i, [this] { StartRandomMigration(); });
    t = std::max(t, at + 5 * static_cast<Nanos>(o_.lease_us) * kMicrosecond);
  }

  if (o_.cold_start) {
    t += static_cast<Nanos>(rng.Uniform(20'000)) * kMicrosecond;
    rt_.Schedule(t, nullptr, kEventFault, "power-loss", 0, [this] { PowerLoss(); });
    t += 5 * kMillisecond;
    rt_.Schedule(t, cm_, kEventFault, "cold-start", 0, [this] { ColdStart(); });
  }

  auto clients_done = [this] {
    for (auto& c : clients_) {
      if (c.done < o_.ops_per_client) return false;
    }
    return true;
  };
  const Nanos limit = 60 * runtime::kSecond;
  // Let the workload finish and every fault play out, then let the cluster
  // settle (restarts, promotions, re-replication).
  rt_.RunUntil([&] { return !failure_.empty() || (clients_done() && rt_.Now() > t); }, limit);
  rt_.RunUntil(rt_.Now() + 200 * kMillisecond);
  if (failure_.empty() && !clients_done()) {
    failure_ = "clients did not finish within the virtual time limit (" + Describe() + ")";
  }

  // Final reads of every key, recorded like any other operation.
  if (failure_.empty()) {
    final_phase_ = true;
    uint32_t pending = o_.keys;
    for (uint32_t k = 0; k < o_.keys; ++k) {
      clients_[0].core->Get("k" + std::to_string(k), [&pending](Result<std::string>) { --pending; });
    }
    rt_.RunUntil([&] { return pending == 0; }, rt_.Now() + 20 * runtime::kSecond);
    if (pending != 0) failure_ = "final reads did not finish";
  }

  res.operations = history_.size();
  res.unknown_outcomes = unknown_;
  res.faults = faults_;
  res.failovers = failovers_;
  std::optional<uint64_t> least;
  for (const auto& n : nodes_) {
    std::vector<uint64_t> per_worker(o_.workers, 0);  // over the node's incarnations
    auto count = [&res, &per_worker](const Incarnation& i) {
      if (!i.parts) return;
      res.requests_hopped += i.parts->pool->hopped();
      for (size_t k = 0; k < i.parts->workers.size(); ++k) {
        const auto& w = i.parts->workers[k];
        if (!w.core) continue;
        res.replicate_served += w.core->counters().replicated_in;
        res.commit_records += w.core->counters().commit_records;
        res.gets_elsewhere += w.core->counters().gets_elsewhere;
        const auto& c = w.core->counters();
        if (k < per_worker.size()) per_worker[k] += c.puts + c.dels;
      }
      const auto& a = i.parts->agent->counters();
      res.promotions += a.promotions;
      res.promotion_entries += a.pulled_entries + a.pushed_entries;
      res.promotions_with_floor += a.promotions_with_floor;
      res.migration_copied += a.copied_entries;
      res.shards_dropped += a.shards_dropped;
      for (const auto& w : i.parts->workers) {
        if (w.core) res.migration_fetches += w.core->counters().migration_fetches;
      }
    };
    if (n->live) count(*n->live);
    for (const auto& d : n->dead) count(*d);
    for (uint64_t r : per_worker) least = std::min(least.value_or(r), r);
  }
  res.least_worker_writes = least.value_or(0);
  CountDirect(res);
  if (fabric_) {
    res.fabric_ops = fabric_->stats().ops;
    res.fabric_timeouts = fabric_->stats().timeouts;
  }
  res.migrations_started = migrations_started_;
  res.migrations_done = migrations_done_;
  res.migrations_failed = migrations_failed_;
  res.trace_hash = rt_.TraceHash();
  res.virtual_ns = rt_.Now();
  if (!failure_.empty()) {
    res.ok = false;
    res.failure = failure_;
    return res;
  }
  res.check = CheckLinearizable(history_);
  if (!res.check.linearizable) {
    res.ok = false;
    res.failure = res.check.violation;
  } else if (std::string mono = CheckVersionsMonotonic(); !mono.empty()) {
    res.ok = false;
    res.failure = "versions not monotonic: " + mono;
  }
  return res;
}

}  // namespace detail

ClusterSimResult RunClusterSim(const ClusterSimOptions& options) {
  if (!options.pool_design.empty()) return RunPoolPerf(options);
  if (!options.chain_design.empty()) return RunChainPerf(options);
  if (options.perf && options.perf->workload.scan > 0) {
    ClusterSimResult res;
    res.ok = false;
    res.failure = "performance runs do not take scans (YCSB e)";
    return res;
  }
  detail::World w(options);
  return w.Run();
}

}  // namespace slip::sim
