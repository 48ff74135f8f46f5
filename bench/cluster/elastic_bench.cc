// Reconfiguration timeline of a real local dinomo cluster (B5 of
// docs/papers/dinomo.md): while client threads write one key per shard in
// turn, a node joins (`slip cluster add-node`), one leaves (`remove-node`)
// and one is killed (failover). For each event it prints how long the
// command took, how many shards changed owner, and the longest time any of
// those shards went without a successful write — what a client sees of the
// handover (stop, drain, merge the logs, wait for the loser to let go,
// serve). Nothing but ownership moves: the data stays in the pool.
//
// --design dinomo-n runs the shared-nothing baseline instead: each node a
// partition of its own, so a handover copies the moving shards' keys into
// the gaining node's partition; --preload N first writes N keys of 1 KB, so
// there is something to copy.
//
//   elastic_bench SLIP_BINARY [--lease-ms L] [--runs N] [--shards S] [--threads T] [--design D] [--preload N]
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_config.h"
#include "cluster/config_access.h"
#include "common/hash.h"
#include "slip/client.h"

using namespace slip;
using Clock = std::chrono::steady_clock;

namespace {

struct Ok {
  uint32_t shard;
  Clock::time_point end;
};

std::vector<uint32_t> Owners(const cluster::ClusterConfig& c) {
  std::vector<uint32_t> o;
  for (const auto& s : c.shards) o.push_back(s.primary);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: elastic_bench SLIP_BINARY [--lease-ms L] [--runs N] [--shards S] [--threads T] [--design D] "
                 "[--preload N]\n");
    return 2;
  }
  const std::string slip = argv[1];
  int lease_ms = 1000, runs = 3, shards = 12, threads = 2, preload = 0;
  std::string design = "dinomo";
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--lease-ms")) lease_ms = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--shards")) shards = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--design")) design = argv[i + 1];
    else if (!std::strcmp(argv[i], "--preload")) preload = std::atoi(argv[i + 1]);
  }
  std::printf("design %s, %d keys of 1 KB preloaded\n\n", design.c_str(), preload);
  std::printf("| run | event | command | shards moved | longest gap of a moved shard | writes/s before | writes/s during |\n"
              "|---|---|---|---|---|---|---|\n");
  for (int run = 0; run < runs; ++run) {
    const std::string dir = "/dev/shm/slip_elastic_" + std::to_string(getpid()) + "_" + std::to_string(run);
    std::filesystem::remove_all(dir);
    const std::string lease = " --lease-ms " + std::to_string(lease_ms);
    if (std::system((slip + " cluster up --design " + design + " --nodes 3 --shards " + std::to_string(shards) + lease +
                     " --dir " + dir + " > /dev/null")
                        .c_str()) != 0) {
      return 1;
    }
    auto client = Client::Open(ClientOptions{.dir = dir, .zookeeper = "", .provider = "",
                                             .deadline = std::chrono::seconds(30), .bind_address = "", .secret_file = ""});
    auto store = cluster::OpenConfigStore(dir, "");
    if (!client.ok() || !store.ok()) return 1;
    auto first = (*store)->Load();
    if (!first.ok()) return 1;
    {
      std::vector<std::thread> loaders;
      for (int t = 0; t < 8; ++t) {
        loaders.emplace_back([&, t] {
          for (int i = t; i < preload; i += 8) (void)(*client)->Put("preload" + std::to_string(i), std::string(1024, 'p'));
        });
      }
      for (auto& l : loaders) l.join();
    }
    // One key per shard.
    std::vector<std::string> probe(first->config.num_shards());
    for (int i = 0, found = 0; found < static_cast<int>(probe.size()); ++i) {
      const std::string key = "probe" + std::to_string(i);
      std::string& slot = probe[first->config.ShardOf(HashKey(key))];
      if (slot.empty()) {
        slot = key;
        ++found;
      }
    }
    std::mutex mu;
    std::vector<Ok> oks;
    std::atomic<bool> stop{false};
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t) {
      writers.emplace_back([&, t] {
        for (uint64_t i = t; !stop; i += threads) {
          const uint32_t shard = static_cast<uint32_t>(i % probe.size());
          if ((*client)->Put(probe[shard], std::to_string(i)).ok()) {
            std::lock_guard<std::mutex> lock(mu);
            oks.push_back(Ok{shard, Clock::now()});
          }
        }
      });
    }
    auto event = [&](const char* name, const std::string& command) -> bool {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      const auto before_owners = Owners((*store)->Load()->config);
      size_t ok_before;
      {
        std::lock_guard<std::mutex> lock(mu);
        ok_before = oks.size();
      }
      const auto t0 = Clock::now();
      const int rc = std::system((command + " > /dev/null").c_str());
      const auto t1 = Clock::now();
      // Let the handover finish (a failover takes a lease to detect).
      std::this_thread::sleep_for(std::chrono::milliseconds(lease_ms * 3 + 500));
      const auto t2 = Clock::now();
      const auto after_owners = Owners((*store)->Load()->config);
      std::vector<bool> moved(probe.size(), false);
      int n_moved = 0;
      for (size_t s = 0; s < probe.size(); ++s) n_moved += moved[s] = before_owners[s] != after_owners[s];
      std::vector<Clock::time_point> last(probe.size(), t0);
      double longest = 0;
      size_t during = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        for (size_t i = ok_before; i < oks.size(); ++i) {
          const Ok& o = oks[i];
          if (o.end < t0) continue;
          ++during;
          if (!moved[o.shard]) continue;
          longest = std::max(longest, std::chrono::duration<double, std::milli>(o.end - last[o.shard]).count());
          last[o.shard] = o.end;
        }
      }
      for (size_t s = 0; s < probe.size(); ++s) {
        if (moved[s]) longest = std::max(longest, std::chrono::duration<double, std::milli>(t2 - last[s]).count());
      }
      // Writes per second over the half second before the event, and from
      // the command's start to the end of the window.
      double before_rate = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        size_t n = 0;
        for (size_t i = 0; i < ok_before; ++i) n += oks[i].end >= t0 - std::chrono::milliseconds(500);
        before_rate = static_cast<double>(n) / 0.5;
      }
      const double during_rate = static_cast<double>(during) / std::chrono::duration<double>(t2 - t0).count();
      std::printf("| %d | %s | %.0f ms%s | %d | %.1f ms | %.0f | %.0f |\n", run + 1, name,
                  std::chrono::duration<double, std::milli>(t1 - t0).count(), rc == 0 ? "" : " (failed)", n_moved,
                  longest, before_rate, during_rate);
      std::fflush(stdout);
      return rc == 0;
    };
    bool ok = event("add-node (node 3 joins)", slip + " cluster add-node" + lease + " --dir " + dir);
    ok = ok && event("remove-node (node 0 leaves)", slip + " cluster remove-node --node 0 --dir " + dir);
    ok = ok && event("kill node 1 (failover)", slip + " cluster kill --node 1 --dir " + dir);
    stop = true;
    for (auto& w : writers) w.join();
    client->reset();
    std::system((slip + " cluster down --dir " + dir + " > /dev/null").c_str());
    if (ok) {
      std::filesystem::remove_all(dir);
    } else {
      std::printf("  an event failed (logs kept in %s/logs)\n", dir.c_str());
    }
  }
  return 0;
}
