// Failover timeline of a real local cluster: kill the primary of a shard
// while a client writes to it, and time (a) until the manager has committed
// the new configuration (detection + commit) and (b) until writes succeed
// again (promotion: the new primary gathered and scattered the shard).
//
//   failover_bench SLIP_BINARY [--lease-ms L] [--runs N] [--preload K] [--commit-interval-ms C]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "cluster/cluster_config.h"
#include "common/hash.h"
#include "cluster/config_access.h"
#include "slip/client.h"

using namespace slip;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: failover_bench SLIP_BINARY [--lease-ms L] [--runs N] [--preload K] [--commit-interval-ms C]\n");
    return 2;
  }
  const std::string slip = argv[1];
  int lease_ms = 200, runs = 3, preload = 2000, commit_ms = 15;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--lease-ms")) lease_ms = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--preload")) preload = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--commit-interval-ms")) commit_ms = std::atoi(argv[i + 1]);
  }
  std::printf("| run | lease | detect + commit (kill -> new term stored) | promote (new term -> first write OK) | total |\n|---|---|---|---|---|\n");
  for (int run = 0; run < runs; ++run) {
    const std::string dir = "/tmp/slip_failover_" + std::to_string(getpid()) + "_" + std::to_string(run);
    std::filesystem::remove_all(dir);
    const std::string up = slip + " cluster up --nodes 3 --shards 12 --lease-ms " + std::to_string(lease_ms) +
                           " --commit-interval-ms " + std::to_string(commit_ms) +
                           " --dir " + dir + " > /dev/null";
    if (std::system(up.c_str()) != 0) return 1;
    auto client = Client::Open(ClientOptions{.dir = dir, .zookeeper = "", .provider = "",
                                             .deadline = std::chrono::seconds(30), .bind_address = "", .secret_file = ""});
    auto store = cluster::OpenConfigStore(dir, "");
    if (!client.ok() || !store.ok()) return 1;
    auto cfg = (*store)->Load();
    if (!cfg.ok()) return 1;
    // A key whose shard node 1 serves as primary.
    std::string key;
    for (int i = 0;; ++i) {
      key = "probe" + std::to_string(i);
      if (cfg->config.shards[cfg->config.ShardOf(HashKey(key))].primary == 1) break;
    }
    for (int i = 0; i < preload; ++i) (void)(*client)->Put("fill" + std::to_string(i), std::string(100, 'x'));
    if (!(*client)->Put(key, "before").ok()) return 1;
    const uint64_t term0 = cfg->config.term;

    std::atomic<int64_t> committed_ns{0};
    std::atomic<bool> done{false};
    const auto t_kill = Clock::now();
    std::thread watch([&] {
      while (!done) {
        auto c = (*store)->Load();
        if (c.ok() && c->config.term > term0 && c->config.nodes.at(1).state == cluster::NodeState::kDown) {
          committed_ns = (Clock::now() - t_kill).count();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    const std::string kill = slip + " cluster kill --node 1 --dir " + dir;
    if (std::system(kill.c_str()) != 0) return 1;
    Status s = (*client)->Put(key, "after");
    const double total = std::chrono::duration<double, std::milli>(Clock::now() - t_kill).count();
    done = true;
    watch.join();
    const double commit = static_cast<double>(committed_ns.load()) / 1e6;
    std::printf("| %d | %d ms | %.1f ms | %.1f ms | %.1f ms%s |\n", run + 1, lease_ms, commit, total - commit, total,
                s.ok() ? "" : " (write failed)");
    std::fflush(stdout);
    client->reset();
    std::system((slip + " cluster down --dir " + dir + " > /dev/null").c_str());
    if (s.ok()) {
      std::filesystem::remove_all(dir);
    } else {
      std::printf("  write failed: %s (logs kept in %s/logs)\n", s.ToString().c_str(), dir.c_str());
    }
  }
  return 0;
}
