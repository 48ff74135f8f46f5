// Shard moves in a real local cluster of a sharded design, two experiments
// (docs/papers/rowan.md §3.7, issue "Elastic clusters"):
//
//   hotspot  Rowan's Fig. 15 at our scale. A read-intensive load (95% GET)
//            over preloaded keys, uniform at first; then 80% of the requests
//            that went to node A's shards go to one shard h of node B. `slip
//            cluster rebalance` (Rowan's policy, 500 ms statistics) runs
//            throughout. Reported: throughput before, during the hotspot and
//            after the move; time from the hotspot to the move's start (÷ the
//            statistics period); objects moved per second.
//   move     One shard's primary moved on an idle cluster, then under the
//            read-intensive load: objects copied per second.
//   grow     Throughput while the cluster grows 3 -> 5 nodes and shrinks back
//            (`slip cluster add-node` twice, `remove-node` twice) under a
//            50/50 GET/PUT load; every acknowledged write is read back at the
//            end.
//
// Each prints a summary and writes PREFIX-timeline.csv (time, ops/s per 100
// ms) and PREFIX-events.csv (time, event) for bench/plot_timeline.
//
//   reshard_bench SLIP_BINARY hotspot|move|grow [--design D] [--threads T] [--keys K] [--value B] [--out PREFIX]
//                 [--keep 1]   (leave the cluster's directory, with its logs)
//                 [--balanced F]  (hotspot: the rebalancer's target, default 0.05)
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_config.h"
#include "cluster/config_access.h"
#include "common/hash.h"
#include "common/random.h"
#include "common/subprocess.h"
#include "slip/client.h"

using namespace slip;
using Clock = std::chrono::steady_clock;

namespace {

constexpr double kBucket = 0.1;  // seconds per timeline bucket

struct Options {
  std::string slip, mode, design = "rowan-kv", out;
  int threads = 8, keys = 20000, value = 100;
  bool keep = false;  // leave the cluster's directory (its logs) behind
  std::string balanced = "0.05";  // slip cluster rebalance --balanced
};

// Completions per 100 ms since t0, and the events, written as CSV.
class Timeline {
 public:
  explicit Timeline(Clock::time_point t0) : t0_(t0) {}
  void Done() {
    const size_t b = static_cast<size_t>(Seconds() / kBucket);
    if (b < counts_.size()) counts_[b].fetch_add(1, std::memory_order_relaxed);
  }
  double Seconds() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  void Event(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.emplace_back(Seconds(), what);
    std::printf("  %7.2f s  %s\n", events_.back().first, what.c_str());
    std::fflush(stdout);
  }
  void EventAt(double at, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.emplace_back(at, what);
  }
  // Operations per second over [from, to) seconds.
  double Rate(double from, double to) const {
    uint64_t n = 0;
    size_t b0 = static_cast<size_t>(from / kBucket), b1 = static_cast<size_t>(to / kBucket);
    for (size_t b = b0; b < b1 && b < counts_.size(); ++b) n += counts_[b].load();
    return b1 > b0 ? static_cast<double>(n) / (static_cast<double>(b1 - b0) * kBucket) : 0;
  }
  void Write(const std::string& prefix, double end) const {
    std::ofstream t(prefix + "-timeline.csv");
    t << "seconds,ops_per_s\n";
    for (size_t b = 0; b < counts_.size() && b * kBucket < end; ++b) t << b * kBucket << "," << counts_[b].load() / kBucket << "\n";
    std::ofstream e(prefix + "-events.csv");
    e << "seconds,event\n";
    for (const auto& [at, what] : events_) e << at << ",\"" << what << "\"\n";
  }

 private:
  Clock::time_point t0_;
  std::array<std::atomic<uint64_t>, 4000> counts_{};
  std::mutex mu_;
  std::vector<std::pair<double, std::string>> events_;
};

int Run(const std::string& command) { return std::system((command + " > /dev/null 2>&1").c_str()); }

// A cluster in a fresh directory under /dev/shm (PM emulated in memory:
// the dram class, so the numbers are the protocol's, not msync's).
struct Cluster {
  std::string slip, dir;
  std::unique_ptr<Client> client;
  std::unique_ptr<cluster::ConfigStore> store;
  cluster::ClusterConfig Config() const { return store->Load()->config; }
  // Stops every process; the directory (with its logs) stays if `keep`.
  void Stop(bool keep) {
    client.reset();
    Run(slip + " cluster down --dir " + dir);
    if (keep) {
      std::printf("cluster directory kept: %s\n", dir.c_str());
    } else {
      std::filesystem::remove_all(dir);
    }
  }
};

std::optional<Cluster> Start(const Options& o, int nodes, int shards) {
  Cluster c;
  c.slip = o.slip;
  c.dir = "/dev/shm/slip_reshard_" + std::to_string(getpid()) + "_" + o.mode;
  std::filesystem::remove_all(c.dir);
  if (Run(o.slip + " cluster up --pm dram --pm-mb 256 --lease-ms 1000 --nodes " + std::to_string(nodes) + " --rf 2 --shards " +
          std::to_string(shards) + " --design " + o.design + " --dir " + c.dir) != 0) {
    std::fprintf(stderr, "cluster up failed (see %s/logs)\n", c.dir.c_str());
    return std::nullopt;
  }
  auto client = Client::Open(ClientOptions{.dir = c.dir, .zookeeper = "", .provider = "",
                                           .deadline = std::chrono::seconds(30), .bind_address = "", .secret_file = ""});
  auto store = cluster::OpenConfigStore(c.dir, "");
  if (!client.ok() || !store.ok()) return std::nullopt;
  c.client = std::move(*client);
  c.store = std::move(*store);
  return c;
}

void Preload(Client& client, const std::vector<std::string>& keys, int value) {
  std::vector<std::thread> loaders;
  for (int t = 0; t < 8; ++t) {
    loaders.emplace_back([&, t] {
      for (size_t i = t; i < keys.size(); i += 8) (void)client.Put(keys[i], std::string(value, 'p'));
    });
  }
  for (auto& l : loaders) l.join();
}

int Hotspot(const Options& o) {
  const int nodes = 4, shards = 16;
  auto c = Start(o, nodes, shards);
  if (!c) return 1;
  const cluster::ClusterConfig first = c->Config();
  std::vector<std::string> keys;
  std::vector<std::vector<uint32_t>> by_shard(shards);
  for (int i = 0; i < o.keys; ++i) {
    keys.push_back("k" + std::to_string(i));
    by_shard[first.ShardOf(HashKey(keys.back()))].push_back(i);
  }
  Preload(*c->client, keys, o.value);
  // Node A loses most of its load to shard h of node B, which A holds no replica of.
  const cluster::NodeId a = 0;
  uint32_t h = 0;
  for (; h < first.num_shards(); ++h) {
    const auto r = first.Replicas(h);
    if (first.shards[h].primary != a && std::find(r.begin(), r.end(), a) == r.end()) break;
  }
  const cluster::NodeId b = first.shards[h].primary;
  std::printf("%s, %d nodes, RF 2, %d shards, %d keys of %d B, %d client threads, 95%% GET; dram class, tcp loopback\n",
              o.design.c_str(), nodes, shards, o.keys, o.value, o.threads);
  std::printf("hotspot: 80%% of node %u's requests go to shard %u (%zu keys) on node %u\n", a, h, by_shard[h].size(), b);

  const auto t0 = Clock::now();
  Timeline tl(t0);
  // The supervisor's lines, each stamped with this clock as it arrives.
  int fds[2];
  if (pipe(fds) != 0) return 1;
  auto rebalance = subprocess::Spawn({.argv = {o.slip, "cluster", "rebalance", "--period-ms", "500", "--balanced",
                                               o.balanced, "--dir", c->dir},
                                      .output = "", .truncate_output = false, .output_fd = fds[1]});
  close(fds[1]);
  if (!rebalance.ok()) return 1;
  std::mutex lines_mu;
  std::vector<std::pair<double, std::string>> lines;
  std::thread reader([&, fd = fds[0]] {
    std::string partial;
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) {
      partial.append(buf, static_cast<size_t>(n));
      for (size_t nl; (nl = partial.find('\n')) != std::string::npos; partial.erase(0, nl + 1)) {
        std::lock_guard<std::mutex> lock(lines_mu);
        lines.emplace_back(tl.Seconds(), partial.substr(0, nl));
      }
    }
    close(fd);
  });
  std::atomic<bool> hot{false}, stop{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < o.threads; ++t) {
    workers.emplace_back([&, t] {
      Random rng(1000 + t);
      while (!stop) {
        uint32_t k = static_cast<uint32_t>(rng.Uniform(keys.size()));
        if (hot && first.shards[first.ShardOf(HashKey(keys[k]))].primary == a && rng.Bernoulli(0.8)) {
          k = by_shard[h][rng.Uniform(by_shard[h].size())];
        }
        const bool ok = rng.Bernoulli(0.95) ? c->client->Get(keys[k]).ok()
                                            : c->client->Put(keys[k], std::string(o.value, 'u')).ok();
        if (ok) tl.Done();
      }
    });
  }
  const double warm = 1.0, uniform_end = 5.0, end = 15.0;
  std::this_thread::sleep_for(std::chrono::duration<double>(uniform_end));
  hot = true;
  tl.Event("hotspot starts");
  const double hot_at = tl.Seconds();
  while (tl.Seconds() < end) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop = true;
  for (auto& w : workers) w.join();
  (void)subprocess::Stop(*rebalance, std::chrono::seconds(2));
  reader.join();
  // When the supervisor saw the overload, and when the hot shard had moved.
  double detected = -1, moved_at = -1, move_s = -1, last_move = -1;
  std::string moved_line;
  std::string transcript;
  for (const auto& [at, line] : lines) {
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "[%7.2f s] ", at);
    transcript += stamp + line + "\n";
    if (at < hot_at) continue;
    if (line.find("OVERLOADED") != std::string::npos && detected < 0) {
      detected = at;
      tl.EventAt(at, "overload detected");
    }
    const size_t in_pos = line.find(" in ");
    if (line.find("moved from") == std::string::npos || in_pos == std::string::npos) continue;
    last_move = at;
    if (line.find("shard " + std::to_string(h) + " moved") != std::string::npos && moved_at < 0) {
      moved_at = at;
      move_s = std::atof(line.c_str() + in_pos + 4);
      moved_line = line;
      tl.EventAt(at, "hot shard moved");
    }
  }
  const double before = tl.Rate(warm, uniform_end);
  const double during = tl.Rate(hot_at, moved_at > 0 ? moved_at : end);
  const double after = tl.Rate(last_move > 0 ? last_move + 0.5 : end, end);
  std::printf("\n| phase | ops/s | vs. before |\n|---|---|---|\n");
  std::printf("| uniform (%.0f-%.0f s) | %.0f | 1.00 |\n", warm, uniform_end, before);
  std::printf("| hotspot, until the hot shard moved (%.2f s) | %.0f | %.2f |\n",
              (moved_at > 0 ? moved_at : end) - hot_at, during, during / before);
  std::printf("| after the moves, to the end | %.0f | %.2f |\n", after, after / before);
  if (detected > 0) {
    std::printf("\noverload detected %.0f ms after the hotspot began (%.2f x the 500 ms period)\n",
                (detected - hot_at) * 1000, (detected - hot_at) / 0.5);
  } else {
    std::printf("\noverload not detected\n");
  }
  if (move_s > 0) {
    std::printf("move: %s\n  %zu objects in %.3f s = %.0f objects/s\n", moved_line.c_str(), by_shard[h].size(), move_s,
                static_cast<double>(by_shard[h].size()) / move_s);
  }
  if (!o.out.empty()) {
    tl.Write(o.out, end);
    std::ofstream(o.out + "-rebalance.txt") << transcript;
  }
  c->Stop(o.keep);
  return detected > 0 && move_s > 0 ? 0 : 1;
}

// One shard's primary moved, on an idle cluster and then under the read-
// intensive load: objects copied per second (the move ends when the target
// reported every entry copied).
int MoveRate(const Options& o) {
  const int nodes = 4, shards = 16;
  auto c = Start(o, nodes, shards);
  if (!c) return 1;
  std::vector<std::string> keys;
  std::vector<size_t> per_shard(shards);
  const cluster::ClusterConfig first = c->Config();
  for (int i = 0; i < o.keys; ++i) {
    keys.push_back("k" + std::to_string(i));
    ++per_shard[first.ShardOf(HashKey(keys.back()))];
  }
  Preload(*c->client, keys, o.value);
  std::printf("%s, %d nodes, RF 2, %d shards, %d keys of %d B; dram class, tcp loopback\n\n", o.design.c_str(), nodes,
              shards, o.keys, o.value);
  std::printf("| load | shard | entries copied | hand-over + copy (target) | objects/s | slip cluster move, end to end |\n"
              "|---|---|---|---|---|---|\n");
  std::atomic<bool> loaded{false}, stop{false};
  std::vector<std::thread> workers;
  for (int round = 0; round < 2; ++round) {
    if (round == 1) {
      loaded = true;
      for (int t = 0; t < o.threads; ++t) {
        workers.emplace_back([&, t] {
          Random rng(3000 + t);
          while (!stop) {
            const auto& k = keys[rng.Uniform(keys.size())];
            if (rng.Bernoulli(0.95)) {
              (void)c->client->Get(k);
            } else {
              (void)c->client->Put(k, std::string(o.value, 'u'));
            }
          }
        });
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    const cluster::ClusterConfig now = c->Config();
    const uint32_t shard = static_cast<uint32_t>(round);
    const auto r = now.Replicas(shard);
    cluster::NodeId to = 0;
    while (std::find(r.begin(), r.end(), to) != r.end()) ++to;
    const auto t0 = Clock::now();
    const int rc = Run(o.slip + " cluster move --shard " + std::to_string(shard) + " --to " + std::to_string(to) +
                       " --dir " + c->dir);
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    // The target's own account: from the move's configuration to the last
    // entry copied (server/node_agent.cc logs it).
    double copy_s = -1;
    uint64_t copied = 0;
    {
      std::ifstream in(c->dir + "/logs/node-" + std::to_string(to) + ".log");
      const std::string want = "shard " + std::to_string(shard) + ": ";
      for (std::string line; std::getline(in, line);) {
        const size_t at = line.find(want);
        unsigned long long n = 0, us = 0;
        if (at != std::string::npos && line.find("entries copied") != std::string::npos &&
            std::sscanf(line.c_str() + at + want.size(), "%llu entries copied from node %*u, %llu us", &n, &us) == 2) {
          copied = n;
          copy_s = static_cast<double>(us) / 1e6;
        }
      }
    }
    std::printf("| %s | %u | %llu | %.3f s | %.0f | %.3f s%s |\n", loaded ? "95% GET, 8 threads" : "idle", shard,
                static_cast<unsigned long long>(copied), copy_s, copy_s > 0 ? static_cast<double>(copied) / copy_s : 0,
                secs, rc == 0 ? "" : " (FAILED)");
  }
  stop = true;
  for (auto& w : workers) w.join();
  c->Stop(o.keep);
  return 0;
}

int Grow(const Options& o) {
  const int shards = 12;
  auto c = Start(o, 3, shards);
  if (!c) return 1;
  std::vector<std::string> keys;
  for (int i = 0; i < o.keys; ++i) keys.push_back("k" + std::to_string(i));
  Preload(*c->client, keys, o.value);
  std::printf("%s, 3 -> 5 -> 3 nodes, RF 2, %d shards, %d keys of %d B, %d client threads, 50%% GET / 50%% PUT; dram "
              "class, tcp loopback\n",
              o.design.c_str(), shards, o.keys, o.value, o.threads);
  const auto t0 = Clock::now();
  Timeline tl(t0);
  std::atomic<bool> stop{false};
  // Each thread writes only its own keys and remembers the last value it
  // was acknowledged (and any whose outcome it does not know).
  struct Mine {
    std::map<uint32_t, std::string> acked;
    std::map<uint32_t, std::set<std::string>> maybe;
    uint64_t unknown = 0;
  };
  std::vector<Mine> mine(o.threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < o.threads; ++t) {
    workers.emplace_back([&, t] {
      Random rng(2000 + t);
      for (uint64_t i = 0; !stop; ++i) {
        const uint32_t k = static_cast<uint32_t>(rng.Uniform(keys.size() / o.threads)) * o.threads + t;
        if (rng.Bernoulli(0.5)) {
          if (c->client->Get(keys[k]).ok()) tl.Done();
          continue;
        }
        const std::string v = "t" + std::to_string(t) + "-" + std::to_string(i);
        Status s = c->client->Put(keys[k], v);
        if (s.ok()) {
          mine[t].acked[k] = v;
          mine[t].maybe[k].clear();
          tl.Done();
        } else {
          ++mine[t].unknown;
          mine[t].maybe[k].insert(v);
        }
      }
    });
  }
  std::vector<std::pair<double, double>> spans;  // each step's start and end
  auto step = [&](const std::string& what, const std::string& args) {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    tl.Event(what + " starts");
    const double from = tl.Seconds();
    const int rc = Run(o.slip + " cluster " + args + " --dir " + c->dir);
    tl.Event(what + (rc == 0 ? " done" : " FAILED"));
    spans.emplace_back(from, tl.Seconds());
    return rc == 0;
  };
  bool ok = step("add node 3", "add-node --lease-ms 1000 --pm-mb 256") &&
            step("add node 4", "add-node --lease-ms 1000 --pm-mb 256") && step("remove node 4", "remove-node --node 4") &&
            step("remove node 3", "remove-node --node 3");
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const double end = tl.Seconds();
  stop = true;
  for (auto& w : workers) w.join();
  // Every acknowledged write, read back.
  uint64_t checked = 0, lost = 0, unknown = 0;
  for (int t = 0; t < o.threads; ++t) {
    unknown += mine[t].unknown;
    for (const auto& [k, v] : mine[t].acked) {
      auto got = c->client->Get(keys[k]);
      ++checked;
      if (!got.ok() || (*got != v && !mine[t].maybe[k].count(*got))) {
        ++lost;
        std::printf("LOST: %s: acknowledged %s, read %s\n", keys[k].c_str(), v.c_str(),
                    got.ok() ? got->c_str() : got.status().ToString().c_str());
      }
    }
  }
  std::printf("\n%llu acknowledged keys read back: %llu lost; %llu writes with unknown outcome\n",
              static_cast<unsigned long long>(checked), static_cast<unsigned long long>(lost),
              static_cast<unsigned long long>(unknown));
  if (spans.size() == 4) {
    std::printf("\n| phase | ops/s |\n|---|---|\n");
    std::printf("| 3 nodes | %.0f |\n", tl.Rate(0.5, spans[0].first));
    std::printf("| adding node 3 (%.2f s) | %.0f |\n", spans[0].second - spans[0].first, tl.Rate(spans[0].first, spans[0].second));
    std::printf("| 4 nodes | %.0f |\n", tl.Rate(spans[0].second, spans[1].first));
    std::printf("| adding node 4 (%.2f s) | %.0f |\n", spans[1].second - spans[1].first, tl.Rate(spans[1].first, spans[1].second));
    std::printf("| 5 nodes | %.0f |\n", tl.Rate(spans[1].second, spans[2].first));
    std::printf("| removing node 4 (%.2f s) | %.0f |\n", spans[2].second - spans[2].first, tl.Rate(spans[2].first, spans[2].second));
    std::printf("| removing node 3 (%.2f s) | %.0f |\n", spans[3].second - spans[3].first, tl.Rate(spans[3].first, spans[3].second));
    std::printf("| 3 nodes again | %.0f |\n", tl.Rate(spans[3].second, end));
  }
  if (!o.out.empty()) tl.Write(o.out, end);
  c->Stop(o.keep);
  return ok && lost == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: reshard_bench SLIP_BINARY hotspot|move|grow [--design D] [--threads T] [--keys K] [--value B] "
                 "[--out PREFIX]\n");
    return 2;
  }
  Options o;
  o.slip = argv[1];
  o.mode = argv[2];
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--design")) o.design = argv[i + 1];
    else if (!std::strcmp(argv[i], "--threads")) o.threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--keys")) o.keys = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--value")) o.value = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--out")) o.out = argv[i + 1];
    else if (!std::strcmp(argv[i], "--keep")) o.keep = std::atoi(argv[i + 1]) != 0;
    else if (!std::strcmp(argv[i], "--balanced")) o.balanced = argv[i + 1];
  }
  if (o.mode == "hotspot") return Hotspot(o);
  if (o.mode == "grow") return Grow(o);
  if (o.mode == "move") return MoveRate(o);
  std::fprintf(stderr, "unknown experiment %s\n", o.mode.c_str());
  return 2;
}
