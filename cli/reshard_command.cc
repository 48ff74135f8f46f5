#include "cli/reshard_command.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/processes.h"
#include "cluster/cluster_config.h"
#include "cluster/config_access.h"
#include "cluster/rebalance.h"
#include "slip/client.h"

namespace slip::cli {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const char* what, const Status& s) {
  std::fprintf(stderr, "slip %s: %s\n", what, s.ToString().c_str());
  return 1;
}

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool Moving(const cluster::ClusterConfig& c, cluster::ShardId shard) {
  return std::any_of(c.migrations.begin(), c.migrations.end(),
                     [&](const cluster::Migration& m) { return m.shard == shard; });
}

bool Holds(const cluster::ClusterConfig& c, cluster::ShardId shard, cluster::NodeId node) {
  const auto r = c.Replicas(shard);
  return std::find(r.begin(), r.end(), node) != r.end();
}

struct MovesDone {
  size_t done = 0, failed = 0, skipped = 0;
};

// Starts `moves`, at most `parallel` under way at once, and waits until each
// is over: the target reported (a primary's move) or was seeded (a
// backup's), or it was rolled back (source or target failed). A move that
// cannot start any more (the map changed meanwhile) is skipped. One line per
// move with `log`.
Result<MovesDone> RunMoves(cluster::ConfigStore& store, std::vector<cluster::ShardMove> moves, size_t parallel,
                           bool log, Clock::time_point t0) {
  std::deque<cluster::ShardMove> pending(moves.begin(), moves.end());
  std::map<cluster::ShardId, cluster::ShardMove> active;
  std::map<cluster::ShardId, Clock::time_point> started;
  MovesDone out;
  const auto deadline = Clock::now() + std::chrono::seconds(600);
  for (;;) {
    SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc, store.Load());
    for (auto it = active.begin(); it != active.end();) {
      const cluster::ShardMove m = it->second;
      if (Moving(vc.config, m.shard)) {
        ++it;
        continue;
      }
      const bool ok = Holds(vc.config, m.shard, m.to) && !Holds(vc.config, m.shard, m.from);
      ++(ok ? out.done : out.failed);
      if (log) {
        std::printf("  %7.2f s  shard %u %s node %u -> node %u in %.2f s\n", Since(t0), m.shard,
                    ok ? "moved from" : "ROLLED BACK (a node failed):", m.from, m.to,
                    std::chrono::duration<double>(Clock::now() - started[m.shard]).count());
        std::fflush(stdout);
      }
      it = active.erase(it);
    }
    while (active.size() < parallel && !pending.empty()) {
      const cluster::ShardMove m = pending.front();
      auto next = cluster::StartMigration(vc.config, m.shard, m.from, m.to);
      if (!next.ok()) {
        pending.pop_front();
        ++out.skipped;
        if (log) std::printf("  %7.2f s  shard %u: not moved (%s)\n", Since(t0), m.shard, next.status().ToString().c_str());
        continue;
      }
      auto stored = store.CompareAndSwap(vc.version, *next);
      if (!stored.ok()) break;  // someone else wrote: load again
      pending.pop_front();
      vc = cluster::VersionedConfig{std::move(*next), *stored};
      active[m.shard] = m;
      started[m.shard] = Clock::now();
    }
    if (active.empty() && pending.empty()) return out;
    if (Clock::now() > deadline) return Status::Timeout(std::to_string(active.size()) + " moves still under way after 600 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string Counts(const cluster::ClusterConfig& c, cluster::NodeId node) {
  const uint32_t p = c.PrimaryCounts()[node], b = c.BackupCounts()[node];
  return std::to_string(p) + " primaries and " + std::to_string(p + b) + " replicas";
}

}  // namespace

int ClusterMove(const ClusterCommandOptions& o) {
  auto store = cluster::OpenConfigStore(o.dir, o.zookeeper);
  if (!store.ok()) return Fail("cluster move", store.status());
  auto vc = (*store)->Load();
  if (!vc.ok()) return Fail("cluster move", vc.status());
  if (o.shard >= vc->config.num_shards()) {
    return Fail("cluster move", Status::InvalidArgument("no shard " + std::to_string(o.shard)));
  }
  const cluster::NodeId from = o.from >= 0 ? static_cast<cluster::NodeId>(o.from) : vc->config.shards[o.shard].primary;
  // Checked here too, so a move that cannot be fails with the reason.
  if (auto next = cluster::StartMigration(vc->config, o.shard, from, o.node); !next.ok()) {
    return Fail("cluster move", next.status());
  }
  const auto t0 = Clock::now();
  auto r = RunMoves(**store, {{o.shard, from, o.node, 0}}, 1, false, t0);
  if (!r.ok()) return Fail("cluster move", r.status());
  if (r->skipped) return Fail("cluster move", Status::Aborted("the map changed; shard not moved"));
  if (r->failed) {
    return Fail("cluster move", Status::Aborted("the move of shard " + std::to_string(o.shard) + " was rolled back: node " +
                                                std::to_string(from) + " or " + std::to_string(o.node) + " failed"));
  }
  auto now = (*store)->Load();
  std::printf("slip cluster: shard %u moved from node %u to node %u in %.2f s (term %llu)\n", o.shard, from, o.node,
              Since(t0), static_cast<unsigned long long>(now.ok() ? now->config.term : 0));
  return 0;
}

int ReshardAddNode(const ClusterCommandOptions& o, cluster::ConfigStore& store, const cluster::ClusterConfig& config,
                   uint32_t id) {
  // What a join would be refused for, before a process is started.
  if (auto probe = cluster::AddMember(config, id, "probe"); !probe.ok()) return Fail("cluster add-node", probe.status());
  // Shards move only between running nodes, under a running manager.
  if (o.zookeeper.empty()) {
    bool manager = false;
    for (const auto& proc : ListProcesses(o.dir)) manager |= proc.name == "manager" && proc.alive;
    if (!manager) {
      return Fail("cluster add-node", Status::Unavailable("the cluster in " + o.dir +
                                                          " is not running (start it with slip cluster up)"));
    }
  }
  const auto t0 = Clock::now();
  // The node lists itself (cluster::AddMember) once it holds its lease.
  // Listed down, it was declared failed while starting and boots again:
  // moves are planned for up nodes only, so wait for it to be up.
  auto p = SpawnDetached(o.dir, NodeName(id), ServerArgs(o, id));
  if (!p.ok()) return Fail("cluster add-node", p.status());
  double listed_s = -1;
  while (listed_s < 0) {
    auto now = store.Load();
    if (now.ok() && now->config.nodes.contains(id) && now->config.nodes.at(id).state == cluster::NodeState::kUp) {
      listed_s = Since(t0);
    }
    bool alive = false;
    for (const auto& proc : ListProcesses(o.dir)) alive |= proc.name == NodeName(id) && proc.alive;
    if (listed_s < 0 && !alive) {
      return Fail("cluster add-node", Status::Aborted("node " + std::to_string(id) + " stopped while joining (see " +
                                                      o.dir + "/logs/" + NodeName(id) + ".log)"));
    }
    if (Since(t0) > 60) return Fail("cluster add-node", Status::Timeout("node " + std::to_string(id) + " not listed in 60 s"));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::printf("slip cluster: node %u listed after %.2f s; moving replicas to it\n", id, listed_s);
  MovesDone all;
  for (int round = 0; round < 4; ++round) {
    auto now = store.Load();
    if (!now.ok()) return Fail("cluster add-node", now.status());
    const auto plan = cluster::PlanSpread(now->config);
    if (plan.empty()) break;
    auto r = RunMoves(store, plan, o.parallel, true, t0);
    if (!r.ok()) return Fail("cluster add-node", r.status());
    all.done += r->done;
    all.failed += r->failed;
  }
  auto now = store.Load();
  if (!now.ok()) return Fail("cluster add-node", now.status());
  std::printf("slip cluster: node %u joined %s: holds %s after %.2f s (%zu moves, %zu rolled back; term %llu)\n", id,
              o.dir.c_str(), Counts(now->config, id).c_str(), Since(t0), all.done, all.failed,
              static_cast<unsigned long long>(now->config.term));
  return 0;
}

int ReshardRemoveNode(const ClusterCommandOptions& o) {
  auto store = cluster::OpenConfigStore(o.dir, o.zookeeper);
  if (!store.ok()) return Fail("cluster remove-node", store.status());
  const auto t0 = Clock::now();
  MovesDone all;
  for (int round = 0;; ++round) {
    auto vc = (*store)->Load();
    if (!vc.ok()) return Fail("cluster remove-node", vc.status());
    const auto it = vc->config.nodes.find(o.node);
    if (it == vc->config.nodes.end() || it->second.state != cluster::NodeState::kUp) {
      return Fail("cluster remove-node", Status::InvalidArgument("node " + std::to_string(o.node) + " is not an up member"));
    }
    auto plan = cluster::PlanDrain(vc->config, o.node);
    if (!plan.ok()) return Fail("cluster remove-node", plan.status());
    if (plan->empty()) {
      // Nothing left to move, unless a move of one of its shards is still under way.
      auto next = cluster::DropMember(vc->config, o.node);
      if (next.ok() && (*store)->CompareAndSwap(vc->version, *next).ok()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } else {
      if (round == 0) std::printf("slip cluster: moving node %u's %s away\n", o.node, Counts(vc->config, o.node).c_str());
      auto r = RunMoves(**store, *plan, o.parallel, true, t0);
      if (!r.ok()) return Fail("cluster remove-node", r.status());
      all.done += r->done;
      all.failed += r->failed;
    }
    if (Since(t0) > 900) return Fail("cluster remove-node", Status::Timeout("node " + std::to_string(o.node) + " still holds shards"));
  }
  // It stops by itself when it sees it is no longer a member.
  for (int i = 0; i < 500; ++i) {
    bool alive = false;
    for (const auto& proc : ListProcesses(o.dir)) alive |= proc.name == NodeName(o.node) && proc.alive;
    if (!alive) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (void)StopProcess(o.dir, NodeName(o.node));
  // The nodes left may have taken its primaries unevenly: even them out.
  if (auto now = (*store)->Load(); now.ok()) {
    const auto plan = cluster::PlanSpread(now->config);
    if (!plan.empty()) {
      auto r = RunMoves(**store, plan, o.parallel, true, t0);
      if (r.ok()) all.done += r->done, all.failed += r->failed;
    }
  }
  std::printf("slip cluster: node %u left %s after %.2f s (%zu moves, %zu rolled back)\n", o.node, o.dir.c_str(),
              Since(t0), all.done, all.failed);
  return 0;
}

namespace {
std::atomic<int> g_rebalance_stop{0};
void OnRebalanceSignal(int) { g_rebalance_stop = 1; }
}  // namespace

int ClusterRebalance(const ClusterCommandOptions& o) {
  auto store = cluster::OpenConfigStore(o.dir, o.zookeeper);
  if (!store.ok()) return Fail("cluster rebalance", store.status());
  if (auto c = (*store)->Load(); !c.ok() || !cluster::MovesShards(c->config.design)) {
    return Fail("cluster rebalance", c.ok() ? Status::NotSupported("the " + c->config.design +
                                                                   " design does not move shards between nodes")
                                            : c.status());
  }
  auto client = Client::Open(ClientOptions{.dir = o.dir, .zookeeper = o.zookeeper, .provider = "",
                                           .deadline = std::chrono::seconds(5), .bind_address = "", .secret_file = o.secret_file});
  if (!client.ok()) return Fail("cluster rebalance", client.status());
  signal(SIGTERM, OnRebalanceSignal);
  signal(SIGINT, OnRebalanceSignal);
  const cluster::RebalanceOptions ro{.overloaded = o.overloaded, .balanced = o.balanced};
  const auto t0 = Clock::now();
  std::vector<double> previous;
  std::printf("slip cluster rebalance: every %u ms, a node above mean + %.0f%% sheds shards until within %.0f%%\n",
              o.period_ms, o.overloaded * 100, o.balanced * 100);
  for (uint32_t epoch = 1; o.epochs == 0 || epoch <= o.epochs; ++epoch) {
    std::this_thread::sleep_for(std::chrono::milliseconds(o.period_ms));
    if (g_rebalance_stop) break;
    // Cumulative per-shard counts from every node (a shard is counted where
    // it was served); the period's load is the difference.
    auto stats = (*client)->NodeStats();
    auto vc = (*store)->Load();
    if (!stats.ok() || !vc.ok()) {
      std::printf("  %7.2f s  epoch %u: no statistics (%s)\n", Since(t0), epoch,
                  (!stats.ok() ? stats.status() : vc.status()).ToString().c_str());
      continue;
    }
    std::vector<double> total(vc->config.num_shards(), 0);
    for (const std::string& text : *stats) {
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded() || !j.contains("shard_load") || !j["shard_load"].is_array()) continue;
      const auto& a = j["shard_load"];
      for (size_t s = 0; s < a.size() && s < total.size(); ++s) total[s] += a[s].get<double>();
    }
    std::vector<double> load(total.size());
    for (size_t s = 0; s < total.size(); ++s) {
      const double before = s < previous.size() ? previous[s] : 0;
      load[s] = total[s] >= before ? total[s] - before : total[s];  // a restarted node counts from 0
    }
    const bool first = previous.empty();
    previous = total;
    if (first) continue;
    std::map<cluster::NodeId, double> node_load;
    double sum = 0;
    for (const auto& [id, info] : vc->config.nodes) {
      if (info.state == cluster::NodeState::kUp) node_load[id] = 0;
    }
    for (cluster::ShardId s = 0; s < vc->config.num_shards(); ++s) {
      node_load[vc->config.shards[s].primary] += load[s];
      sum += load[s];
    }
    const double mean = node_load.empty() ? 0 : sum / static_cast<double>(node_load.size());
    std::string loads;
    for (const auto& [id, l] : node_load) {
      loads += " " + std::to_string(id) + ":" + std::to_string(static_cast<int>(mean > 0 ? 100 * l / mean : 0)) + "%";
    }
    if (!vc->config.migrations.empty()) {
      std::printf("  %7.2f s  epoch %u: load of mean%s; %zu moves under way\n", Since(t0), epoch, loads.c_str(),
                  vc->config.migrations.size());
      std::fflush(stdout);
      continue;
    }
    const auto plan = cluster::PlanRebalance(vc->config, load, ro);
    if (plan.empty()) {
      std::printf("  %7.2f s  epoch %u: load of mean%s; balanced\n", Since(t0), epoch, loads.c_str());
      std::fflush(stdout);
      continue;
    }
    std::printf("  %7.2f s  epoch %u: load of mean%s; OVERLOADED: %zu moves\n", Since(t0), epoch, loads.c_str(),
                plan.size());
    std::fflush(stdout);
    auto r = RunMoves(**store, plan, std::max<size_t>(o.parallel, plan.size()), true, t0);
    if (!r.ok()) std::printf("  %7.2f s  moves: %s\n", Since(t0), r.status().ToString().c_str());
    previous.clear();  // the moves' time is not a statistics period
  }
  return 0;
}

}  // namespace slip::cli
