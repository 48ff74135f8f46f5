#include "cli/soak_command.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "cli/cluster_command.h"
#include "cli/processes.h"
#include "cluster/cluster_config.h"
#include "cluster/config_access.h"
#include "common/random.h"
#include "sim/linearizability.h"
#include "slip/client.h"

namespace slip::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using sim::Operation;

int64_t NowNs(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

// Every member up, every shard with its full replication factor and no
// replica still being seeded, no move under way: only then may the next
// kill come (a kill before the last one's re-replication finished could
// leave a shard with no complete replica, which is unavailability, not the
// loss this soak looks for). "" when healthy, else what is missing.
std::string Unhealthy(cluster::ConfigStore& store) {
  auto c = store.Load();
  if (!c.ok()) return c.status().ToString();
  std::string missing;
  for (const auto& [id, n] : c->config.nodes) {
    if (n.state != cluster::NodeState::kUp) missing += " node " + std::to_string(id) + " not up;";
  }
  for (size_t s = 0; s < c->config.shards.size(); ++s) {
    const auto& r = c->config.shards[s];
    if (r.backups.size() + 1 < c->config.replication_factor || !r.syncing.empty()) {
      missing += " shard " + std::to_string(s) + " under-replicated;";
    }
  }
  if (!c->config.migrations.empty()) missing += " moves under way;";
  return missing;
}

// Healthy by the configuration, and serving: a write to every one of
// `probes` keys (spread over the shards) succeeds. A restarted process can
// be a member in good standing before it serves again.
Status WaitHealthy(cluster::ConfigStore& store, Client* client, uint32_t probes, std::chrono::seconds timeout) {
  const auto end = Clock::now() + timeout;
  std::string missing;
  uint32_t served = 0;
  while (Clock::now() < end) {
    missing = Unhealthy(store);
    if (!missing.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (client == nullptr) return Status::Ok();
    for (; served < probes; ++served) {
      if (!client->Put("__soak_probe_" + std::to_string(served), "1").ok()) break;
    }
    if (served == probes && Unhealthy(store).empty()) return Status::Ok();
    if (served == probes) served = 0;  // a node was lost meanwhile: probe again once it is back
  }
  return Status::Timeout("the cluster did not recover within " + std::to_string(timeout.count()) + " s:" +
                         (missing.empty() ? " not every shard serves" : missing));
}

// One client thread's record.
struct Track {
  std::vector<Operation> history;
  std::vector<int64_t> successes;  // completion times of acknowledged operations
  // Its own keys' writes, in the order it made them (a thread's writes of
  // a key never overlap): for the final check.
  struct Write {
    std::optional<std::string> value;  // nullopt: a delete
    bool acked = false;
  };
  std::map<std::string, std::vector<Write>> writes;
};

struct Episode {
  std::string victims;
  int64_t killed = 0, restarted = 0, healthy = 0;  // ns since the start
};

}  // namespace

int RunSoak(const SoakOptions& o) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "slip soak: %s\n", s.ToString().c_str());
    return 1;
  };
  if (o.dir.empty()) return fail(Status::InvalidArgument("--dir is required"));
  if (fs::exists(o.dir + "/cluster.json")) {
    return fail(Status::InvalidArgument(o.dir + " holds a cluster: the soak starts its own, give a new directory"));
  }
  if (o.threads == 0 || o.keys < o.threads) return fail(Status::InvalidArgument("need --keys >= --threads >= 1"));
  const bool pool = cluster::UsesPool(o.design);
  const bool chain = cluster::UsesChain(o.design);

  ClusterCommandOptions co;
  co.dir = o.dir;
  co.nodes = o.nodes;
  co.shards = o.shards;
  co.replication = o.replication;
  co.design = o.design;
  co.provider = o.provider;
  co.pm = o.pm;
  co.lease_ms = o.lease_ms;
  if (ClusterUp(co) != 0) return fail(Status::Unavailable("the cluster did not start (see " + o.dir + "/logs)"));
  auto store = cluster::OpenConfigStore(o.dir, "");
  if (!store.ok()) return fail(store.status());
  auto client = Client::Open(ClientOptions{.dir = o.dir, .zookeeper = "", .provider = "",
                                           .deadline = std::chrono::seconds(5), .bind_address = "", .secret_file = ""});
  if (!client.ok()) return fail(client.status());
  const uint32_t probes = 4 * o.shards;
  if (Status s = WaitHealthy(**store, client->get(), probes, std::chrono::seconds(60)); !s.ok()) return fail(s);

  // The load: YCSB-A-like (half reads, the rest writes, one write in ten a
  // delete) over `keys` keys; thread t writes only keys k with k % threads
  // == t and reads any. Values are unique over the run.
  const auto t0 = Clock::now();
  std::atomic<bool> stop{false};
  std::vector<Track> tracks(o.threads);
  auto key_name = [](uint32_t k) { return "soak" + std::to_string(k); };
  auto load = [&](uint32_t t) {
    Random rng(o.seed * 7919 + t);
    Track& tr = tracks[t];
    const uint32_t own = (o.keys - t + o.threads - 1) / o.threads;  // keys t, t+T, ...
    for (uint64_t i = 0; !stop; ++i) {
      const uint32_t r = static_cast<uint32_t>(rng.Uniform(100));
      Operation op;
      op.client = t;
      op.invoke = NowNs(t0);
      bool unknown = false;
      if (r < 50) {
        op.kind = Operation::Kind::kGet;
        op.key = key_name(static_cast<uint32_t>(rng.Uniform(o.keys)));
        auto v = (*client)->Get(op.key);
        op.ret = NowNs(t0);
        if (v.ok()) {
          op.value = *v;
        } else if (!v.status().Is(Code::kNotFound)) {
          op.ret = sim::kLeftOut;  // told nothing
        }
      } else {
        op.key = key_name(t + o.threads * static_cast<uint32_t>(rng.Uniform(own)));
        const bool del = r >= 95;
        Status s;
        if (del) {
          op.kind = Operation::Kind::kDel;
          s = (*client)->Delete(op.key);
          // OK says the value is gone, not that there was one (a retry after
          // a lost answer; DINOMO's blind tombstone); NotFound is exact.
          op.found = s.ok();
          op.found_unknown = s.ok();
          if (s.Is(Code::kNotFound)) s = Status::Ok();
        } else {
          op.kind = Operation::Kind::kPut;
          std::string v = "t" + std::to_string(t) + "-" + std::to_string(i) + "-";
          v.resize(std::max<size_t>(v.size(), o.value_size), 'x');
          op.value = v;
          s = (*client)->Put(op.key, v);
        }
        op.ret = NowNs(t0);
        op.unknown = unknown = !s.ok();
        tr.writes[op.key].push_back({del ? std::nullopt : op.value, s.ok()});
      }
      if (op.ret != sim::kLeftOut && !op.unknown) tr.successes.push_back(op.ret);
      tr.history.push_back(std::move(op));
      // After a write with no known outcome, back off: a client hammering
      // an unavailable shard fills the history with writes that may or may
      // not have happened, and checking grows exponentially with them.
      if (unknown) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  };
  std::vector<std::thread> workers;
  for (uint32_t t = 0; t < o.threads; ++t) workers.emplace_back(load, t);

  // The faults.
  Random rng(o.seed);
  std::vector<Episode> episodes;
  Status failure;
  uint32_t killed = 0;
  while (killed < o.kills && failure.ok()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
    auto c = (*store)->Load();
    if (!c.ok()) {
      failure = c.status();
      break;
    }
    std::vector<uint32_t> members;
    for (const auto& [id, n] : c->config.nodes) members.push_back(id);
    // What goes down: a node; one time in six the manager; one in six two
    // nodes back to back, where every shard keeps a replica (RF >= 3).
    std::vector<std::string> names;
    const uint64_t pick = rng.Uniform(6);
    if (pick == 0) {
      names.push_back("manager");
    } else {
      const uint32_t a = members[rng.Uniform(members.size())];
      names.push_back(NodeName(a));
      if (pick == 1 && !pool && !chain && o.replication >= 3 && members.size() >= 3 && killed + 1 < o.kills) {
        uint32_t b = a;
        while (b == a) b = members[rng.Uniform(members.size())];
        names.push_back(NodeName(b));
      }
    }
    Episode e;
    e.killed = NowNs(t0);
    for (size_t i = 0; i < names.size(); ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng.Uniform(200)));
      if (Status s = KillProcess(o.dir, names[i]); !s.ok()) failure = s;
      e.victims += (i ? " + " : "") + names[i];
      ++killed;
    }
    // Down 0.2x..2x --down-ms: with the default (the lease) some come back
    // before the manager notices, others after a failover.
    const double stretch = 0.2 + 1.8 * static_cast<double>(rng.Uniform(1000)) / 1000.0;
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(o.down_ms * stretch)));
    for (const std::string& n : names) {
      const auto args = n == "manager" ? ManagerArgs(co) : ServerArgs(co, static_cast<uint32_t>(std::stoul(n.substr(5))));
      // The killed process may take a moment to be gone (its pid file is).
      for (int attempt = 0;; ++attempt) {
        auto p = SpawnDetached(o.dir, n, args);
        if (p.ok()) break;
        if (attempt == 50) {
          failure = p.status();
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    e.restarted = NowNs(t0);
    if (failure.ok()) failure = WaitHealthy(**store, client->get(), probes, std::chrono::seconds(120));
    e.healthy = NowNs(t0);
    std::printf("kill %2u: %-18s down %4lld ms, healthy again %5lld ms after the kill\n", killed, e.victims.c_str(),
                static_cast<long long>((e.restarted - e.killed) / 1'000'000),
                static_cast<long long>((e.healthy - e.killed) / 1'000'000));
    std::fflush(stdout);
    episodes.push_back(std::move(e));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(o.interval_ms));
  stop = true;
  for (auto& w : workers) w.join();

  // Every acknowledged write: each key's final value must be its last
  // acknowledged write, or a later write whose outcome was unknown.
  std::vector<Operation> history;
  uint64_t ops = 0, acked = 0, unknown = 0, lost = 0, keys_checked = 0;
  std::string lost_detail;
  for (Track& tr : tracks) {
    for (Operation& op : tr.history) {
      ++ops;
      if (op.kind != Operation::Kind::kGet) (op.unknown ? unknown : acked) += 1;
      history.push_back(std::move(op));
    }
  }
  for (uint32_t k = 0; k < o.keys && failure.ok(); ++k) {
    const std::string key = key_name(k);
    Operation final_read;
    final_read.kind = Operation::Kind::kGet;
    final_read.key = key;
    final_read.client = o.threads;
    final_read.invoke = NowNs(t0);
    Result<std::string> v = Status::Unavailable("");
    for (int attempt = 0; attempt < 20; ++attempt) {
      v = (*client)->Get(key);
      if (v.ok() || v.status().Is(Code::kNotFound)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    final_read.ret = NowNs(t0);
    if (!v.ok() && !v.status().Is(Code::kNotFound)) {
      failure = Status(v.status().code(), "final read of " + key + ": " + v.status().message());
      break;
    }
    const std::optional<std::string> got = v.ok() ? std::optional<std::string>(*v) : std::nullopt;
    final_read.value = got;
    history.push_back(final_read);
    const auto& writes = tracks[k % o.threads].writes[key];
    // Acceptable: the last acknowledged write, or any write after it.
    size_t from = 0;
    for (size_t i = 0; i < writes.size(); ++i) {
      if (writes[i].acked) from = i;
    }
    bool ok = writes.empty() ? !got.has_value() : false;
    for (size_t i = from; i < writes.size() && !ok; ++i) ok = writes[i].value == got;
    if (!writes.empty() && !writes[from].acked && !got) ok = true;  // nothing acknowledged, nothing there
    ++keys_checked;
    if (!ok) {
      ++lost;
      if (lost_detail.empty()) {
        lost_detail = key + " reads " + (got ? *got : std::string("absent")) + ", its last acknowledged write was " +
                      (writes[from].value ? *writes[from].value : std::string("a delete"));
      }
    }
  }
  uint64_t checked = 0, unknown_checked = 0;
  const std::string verdict = failure.ok() ? sim::Verdict(history, &checked, &unknown_checked) : "not checked";

  // Availability per kill: the longest any operation waited, among those
  // invoked between the kill and the cluster's recovery, and the longest
  // stretch in which no client saw an acknowledgement.
  std::vector<int64_t> successes;
  for (const Track& tr : tracks) successes.insert(successes.end(), tr.successes.begin(), tr.successes.end());
  std::sort(successes.begin(), successes.end());
  std::ostringstream report;
  report << "| kill | what | down ms | healthy after ms | longest op wait ms | no acknowledgement for ms |\n"
         << "|---|---|---|---|---|---|\n";
  int64_t worst_wait = 0, worst_stall = 0;
  for (size_t i = 0; i < episodes.size(); ++i) {
    const Episode& e = episodes[i];
    int64_t wait = 0;
    for (const Operation& op : history) {
      if (op.invoke >= e.killed && op.invoke <= e.healthy && op.ret != sim::kLeftOut && !op.unknown) {
        wait = std::max(wait, op.ret - op.invoke);
      }
    }
    int64_t stall = 0, last = e.killed;
    auto it = std::lower_bound(successes.begin(), successes.end(), e.killed);
    for (; it != successes.end() && *it <= e.healthy; ++it) {
      stall = std::max(stall, *it - last);
      last = *it;
    }
    if (it != successes.end()) stall = std::max(stall, *it - last);
    worst_wait = std::max(worst_wait, wait);
    worst_stall = std::max(worst_stall, stall);
    report << "| " << i + 1 << " | " << e.victims << " | " << (e.restarted - e.killed) / 1'000'000 << " | "
           << (e.healthy - e.killed) / 1'000'000 << " | " << wait / 1'000'000 << " | " << stall / 1'000'000 << " |\n";
  }
  std::ostringstream summary;
  summary << "design " << o.design << ", " << o.nodes << " nodes, RF " << (pool ? 1 : o.replication) << ", "
          << o.provider << ": " << killed << " kills in " << NowNs(t0) / 1'000'000'000 << " s; " << ops
          << " operations (" << acked << " acknowledged writes, " << unknown << " with unknown outcome); "
          << keys_checked << " keys read back, " << lost << " lost; history of " << checked
          << " operations: " << (verdict.empty() ? "linearizable" : verdict) << "; worst op wait "
          << worst_wait / 1'000'000 << " ms, worst stall " << worst_stall / 1'000'000 << " ms";
  std::printf("%s\n", summary.str().c_str());
  if (!lost_detail.empty()) std::printf("first lost: %s\n", lost_detail.c_str());
  if (!o.report.empty()) {
    std::ofstream f(o.report, std::ios::app);
    f << "### " << o.design << "\n\n" << summary.str() << "\n\n" << report.str() << "\n";
  }
  client->reset();
  (void)ClusterDown(co);
  if (!failure.ok() || lost != 0 || !verdict.empty()) {
    // What CI keeps is this output, not the directory: the logs' last lines.
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(o.dir + "/logs", ec)) {
      std::ifstream in(f.path());
      std::vector<std::string> last;
      for (std::string line; std::getline(in, line);) {
        last.push_back(std::move(line));
        if (last.size() > 12) last.erase(last.begin());
      }
      std::printf("--- last lines of %s\n", f.path().c_str());
      for (const auto& line : last) std::printf("  %s\n", line.c_str());
    }
  }
  if (!failure.ok()) {
    std::fprintf(stderr, "slip soak: %s (logs in %s/logs)\n", failure.ToString().c_str(), o.dir.c_str());
    return 1;
  }
  const bool passed = lost == 0 && verdict.empty();
  if (passed && !o.keep) {
    std::error_code ec;
    fs::remove_all(o.dir, ec);
  }
  return passed ? 0 : 1;
}

}  // namespace slip::cli
