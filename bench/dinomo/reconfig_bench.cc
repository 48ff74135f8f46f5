// B5's hardware-independent half (docs/papers/dinomo.md): the bytes a
// reconfiguration moves inside the pool, DINOMO against DINOMO-N, for 4 to
// 16 KVS nodes. Both run the real node code over the real pool on the
// simulated fabric: DINOMO with one shared pool, DINOMO-N with a private
// partition per node (dinomo/shared_nothing.h). After a load and a 50/50
// zipfian run, node n leaves (its shards go round-robin to the others) and
// then a node joins (it takes its share from every node):
//   DINOMO    merges the unmerged tails of the nodes whose ownership
//             changed (at most 2 segments each) — and copies nothing;
//   DINOMO-N  merges the same tails into their own partitions, then copies
//             the newest entry of every moving key into its new owner's.
// The paper: DINOMO's merge plus redistribution under 109 ms; DINOMO-N's
// reorganization over 11 s. The times here are the bytes over a stated
// bandwidth (2 GB/s: the paper's PM write bandwidth for merges), not
// measurements.
//
//   build/bench/dinomo/reconfig_bench [--keys N] [--ops N] [--shards S]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/workload/ycsb.h"
#include "common/hash.h"
#include "dinomo/shared_nothing.h"
#include "dinomo/testing/sim_pool.h"

namespace {

using namespace slip;
using dinomo::testing::SimPool;

constexpr double kCopyBytesPerSec = 2e9;

std::string Key(uint64_t i) {
  char k[32];
  std::snprintf(k, sizeof k, "k%07llu", static_cast<unsigned long long>(i));
  return k;
}

struct Moved {
  uint64_t merged = 0;  // log bytes merged at the reconfiguration
  uint64_t copied = 0;  // bytes copied between partitions
  uint64_t keys = 0;    // entries copied
};

// Shard s of `shards` is owned by owners[s] (node ids 1..n).
struct Cluster {
  explicit Cluster(bool one_pool) : shared(one_pool) {}
  const bool shared;  // DINOMO (one pool) or DINOMO-N (a partition per node)
  runtime::SimRuntime rt{runtime::SimRuntimeOptions{.seed = 1}};
  std::vector<std::unique_ptr<SimPool>> pools;  // [0] shared, or one per node id - 1
  std::map<uint32_t, SimPool::Node*> nodes;
  std::vector<uint32_t> owners;
  uint64_t epoch = 1;

  SimPool& PoolOf(uint32_t node) { return shared ? *pools[0] : *pools[node - 1]; }
  uint32_t ShardOf(const std::string& key) const {
    return static_cast<uint32_t>(HashKey(key) % owners.size());
  }
  void Start(uint32_t id) {
    dinomo::KvsNodeOptions o;
    o.node = id;
    o.epoch = epoch;
    o.cache.capacity_bytes = 1 << 20;
    int ready = 0;
    nodes[id] = &PoolOf(id).AddNode(o, [&ready](Status s) { ready += s.ok(); });
    rt.RunUntil([&] { return ready == 1; }, rt.Now() + runtime::kSecond);
  }
  void Run(uint64_t keys, uint64_t ops, double reads, bool load) {
    const std::string value(1024, 'v');
    ycsb::ScrambledZipfian zipf(keys);
    Random rng(7);
    int left = 0;
    auto issue = [&](const std::string& key, bool read) {
      SimPool::Node& k = *nodes[owners[ShardOf(key)]];
      ++left;
      if (read) {
        k.exec->Post([&k, key, &left] { k.node->Get(key, [&left](Result<std::string>) { --left; }); });
      } else {
        k.exec->Post([&k, key, &value, &left] { k.node->Put(key, value, [&left](Status) { --left; }); });
      }
      if (left >= 256) rt.RunUntil([&] { return left == 0; }, rt.Now() + 10 * runtime::kSecond);
    };
    for (uint64_t i = 0; load && i < keys; ++i) issue(Key(i), false);
    for (uint64_t i = 0; i < ops; ++i) issue(Key(zipf.Next(rng)), rng.NextDouble() < reads);
    rt.RunUntil([&] { return left == 0; }, rt.Now() + 10 * runtime::kSecond);
  }
  // Ownership becomes `next`: the nodes whose shards changed stop, their
  // logs are merged; DINOMO-N then copies the moving keys. They start again
  // in a new epoch (a node owning nothing stays stopped).
  Moved Reconfigure(const std::vector<uint32_t>& next) {
    std::map<uint32_t, bool> affected;
    for (size_t s = 0; s < owners.size(); ++s) {
      if (owners[s] != next[s]) affected[owners[s]] = affected[next[s]] = true;
    }
    ++epoch;
    Moved m;
    for (const auto& [id, _] : affected) {
      if (nodes.contains(id)) {
        PoolOf(id).Kill(*nodes[id]);
        nodes.erase(id);
      }
      uint64_t walked = 0;
      if (!PoolOf(id).pool().MergeAll(id, &walked).ok()) std::abort();
      m.merged += walked;
    }
    if (!shared) {
      for (const auto& [to, _] : affected) {
        for (const auto& [from, __] : affected) {
          if (from == to) continue;
          auto moving = [&](std::string_view key) {
            const uint32_t s = static_cast<uint32_t>(HashKey(key) % owners.size());
            return owners[s] == from && next[s] == to;
          };
          auto c = dinomo::CopyKeys(PoolOf(from).pool(), PoolOf(from).region(), PoolOf(to).pool(),
                                    PoolOf(to).region(), from, moving);
          if (!c.ok()) {
            std::fprintf(stderr, "copy: %s\n", c.status().ToString().c_str());
            std::abort();
          }
          m.copied += c->bytes;
          m.keys += c->keys;
        }
      }
    }
    owners = next;
    for (const auto& [id, _] : affected) {
      bool owns = false;
      for (uint32_t o : owners) owns |= o == id;
      if (owns) Start(id);
    }
    return m;
  }
};

}  // namespace

int main(int argc, char** argv) {
  uint64_t keys = 100000, ops = 100000, shards = 64;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--keys") == 0) keys = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--ops") == 0) ops = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--shards") == 0) shards = std::strtoull(argv[i + 1], nullptr, 10);
  }
  std::printf("B5: bytes a reconfiguration moves in the pool; %llu keys of 8 B + 1 KB, %llu shards, 64 KB segments, "
              "%llu zipfian 50/50 ops before; times = bytes / %.0f GB/s (a stated bandwidth, not a measurement)\n\n",
              static_cast<unsigned long long>(keys), static_cast<unsigned long long>(shards),
              static_cast<unsigned long long>(ops), kCopyBytesPerSec / 1e9);
  std::printf("| nodes | event | shards moved | dinomo merged | dinomo-n merged + copied (keys) | dinomo time | dinomo-n "
              "time | dinomo-n / dinomo |\n|---|---|---|---|---|---|---|---|\n");
  for (uint32_t n : {4u, 8u, 16u}) {
    const uint64_t data = keys * (1024 + 64);
    Moved moved[2][2];  // [design][event]
    uint32_t moved_shards[2] = {0, 0};
    for (int design = 0; design < 2; ++design) {
      Cluster c(design == 0);
      dinomo::PoolOptions po;
      po.segment_bytes = 64 << 10;
      po.num_buckets = 1u << 15;
      while (po.num_buckets < keys / 2) po.num_buckets <<= 1;
      // DINOMO-N: a partition per node, the joiner's included.
      const uint32_t pools = c.shared ? 1 : n + 1;
      for (uint32_t p = 0; p < pools; ++p) {
        const uint64_t bytes = c.shared ? 4 * data + (64 << 20) : 4 * data / n + (64 << 20);
        c.pools.push_back(std::make_unique<SimPool>(c.rt, bytes, po));
      }
      for (uint64_t s = 0; s < shards; ++s) c.owners.push_back(static_cast<uint32_t>(s % n) + 1);
      for (uint32_t id = 1; id <= n; ++id) c.Start(id);
      c.Run(keys, ops, 0.5, true);
      // Node n leaves: its shards go round-robin to the others.
      std::vector<uint32_t> next = c.owners;
      uint32_t k = 0;
      for (auto& o : next) {
        if (o == n) o = (k++ % (n - 1)) + 1;
      }
      moved_shards[0] = k;
      moved[design][0] = c.Reconfigure(next);
      c.Run(keys, ops / 4, 0.5, false);
      // A node joins (id n + 1, DINOMO-N's spare partition): every node gives
      // it shards until it has its share.
      next = c.owners;
      const uint64_t share = shards / n;
      std::map<uint32_t, uint32_t> count;
      for (uint32_t o : next) ++count[o];
      uint32_t given = 0;
      for (auto& o : next) {
        if (given == share) break;
        if (count[o] > share) {
          --count[o];
          o = n + 1;
          ++given;
        }
      }
      moved_shards[1] = given;
      moved[design][1] = c.Reconfigure(next);
      for (auto& [id, node] : c.nodes) c.PoolOf(id).Kill(*node);
    }
    const char* events[2] = {"a node leaves", "a node joins"};
    for (int e = 0; e < 2; ++e) {
      const Moved& d = moved[0][e];
      const Moved& x = moved[1][e];
      const double dn = static_cast<double>(d.merged + d.copied), xn = static_cast<double>(x.merged + x.copied);
      std::printf("| %u | %s | %u | %.2f MB | %.2f + %.2f MB (%llu) | %.2f ms | %.2f ms | %.0fx |\n", n, events[e],
                  moved_shards[e], d.merged / 1e6, x.merged / 1e6, x.copied / 1e6,
                  static_cast<unsigned long long>(x.keys), dn / kCopyBytesPerSec * 1e3, xn / kCopyBytesPerSec * 1e3,
                  dn > 0 ? xn / dn : 0.0);
      std::fflush(stdout);
    }
  }
  return 0;
}
