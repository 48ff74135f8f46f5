// B2 (docs/papers/dinomo.md): round trips to the pool per operation and
// where GETs were answered, for 1 to 16 KVS nodes — counts, not times, so
// they do not depend on this machine. Every node is the real node code
// (dinomo/kvs_node.h) against the real pool (dinomo/pool.h) over the
// simulated fabric, all in one process on virtual time.
//
// Setup, the paper's ratios at a smaller size: 8-byte keys and 1 KB values;
// each node's cache holds 1/32 of the data (the paper: 1 GB per node, 32 GB
// loaded), so 16 nodes cache half of it; keys are owned by hash (ownership
// partitioning); YCSB's scrambled zipfian 0.99. Each mix starts from a
// freshly loaded pool and warms up for as many operations as it measures.
//
// The paper (§5.2): value hits 52% with 1 node, 88% with 16; 0.1 round
// trips per operation at 16 nodes; DINOMO-S (shortcut-only caches) up to
// 10x the round trips.
//
// A node keeps its unmerged segments (at most 2) in DRAM, and GETs of them
// cost nothing: the paper's 8 MB segments are 0.8% of a node's 2 GB share
// at 16 nodes. Keep segments small against the data per node (the
// defaults: 64 KB segments, 100 K keys: 128 KB of 6 MB per node at 16),
// or "unmerged" answers take over.
//
// --batch-sweep prints B8 instead: round trips per op and per write for
// batches of 1 to 64 writes, write-heavy against read-mostly.
//
// --hot-keys prints B6 instead: 16 nodes, 50/50, zipfian 2 (the top key
// takes 61% of the requests), DINOMO with and without its 4 hottest keys
// shared by every node, and Clover; modelled throughput where the busiest
// node binds (a key's owner serves all of its requests unless it is shared).
//
//   build/bench/dinomo/dinomo_rts_bench [--keys N] [--ops N] [--segment-kb N] [--batch-sweep |
//                                        --hot-keys [--outstanding N]]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "bench/workload/ycsb.h"
#include "common/hash.h"
#include "dinomo/clover.h"
#include "dinomo/testing/sim_pool.h"

namespace {

using namespace slip;
using dinomo::KvsNode;
using dinomo::KvsNodeStats;

struct Mix {
  const char* name;
  double reads;  // the rest are updates
};

struct Row {
  double rts_per_op = 0, unmerged = 0, value = 0, shortcut = 0, miss = 0;
  double rts_per_write = 0;  // batches per write
  double bytes_per_op = 0;   // over the pool's NIC: READs and WRITEs
  double writes_per_op = 0;  // entries the pool's merge threads apply
  // The busiest node's CPU per operation of the whole run (kOpUs per
  // request, kRtUs per one-sided op it posted): where it binds first.
  double max_node_us_per_op = 0;
  double swaps_per_op = 0;  // shared keys' compare-and-swaps
};

// B3's bottleneck model (notes §5 item 4): throughput of n KVS nodes is the
// least of what their CPUs, the pool's NIC, the pool's merge threads and
// Clover's metadata server allow, each from the hardware-independent counters
// above. The inputs, [ours] unless marked:
//   - a KVS node has 8 threads [paper]; a request costs a thread kOpUs of CPU
//     plus kRtUs per one-sided operation it posts. kOpUs + kRtUs = 10 us is
//     calibrated on the paper's "DINOMO-S flat beyond 8 nodes on reads"
//     (1 round trip of ~1.1 KB per op against the NIC below); the split
//     kOpUs = kRtUs is an assumption.
//   - the pool's NIC: 56 Gb/s FDR = 7 GB/s [paper], shared by every node.
//   - the pool's merge threads: 4 [paper], each applying kMergePerThread
//     entries/s (Fig. 4: 4 threads keep up with the log-write maximum, so
//     merging never binds in the paper; this keeps it so).
//   - Clover's metadata server: 4 worker threads [paper] at kMdsUs per call;
//     each write costs it one (its allocation and version GC), each
//     CLOVER_INSERT another.
constexpr double kKnThreads = 8, kOpUs = 5, kRtUs = 5, kNicBytesPerSec = 7e9;
constexpr double kMergeThreads = 4, kMergePerThread = 10e6, kMdsThreads = 4, kMdsUs = 2;

struct Modeled {
  double ops = 0;
  const char* bound = "";
};

Modeled Model(uint32_t nodes, double rts_per_op, double bytes_per_op, double merge_per_op, double mds_per_op) {
  Modeled m{nodes * kKnThreads / ((kOpUs + kRtUs * rts_per_op) * 1e-6), "KN CPU"};
  auto cap = [&](double limit, const char* what) {
    if (limit < m.ops) m = Modeled{limit, what};
  };
  if (bytes_per_op > 0) cap(kNicBytesPerSec / bytes_per_op, "pool NIC");
  if (merge_per_op > 0) cap(kMergeThreads * kMergePerThread / merge_per_op, "merge");
  if (mds_per_op > 0) cap(kMdsThreads / (kMdsUs * 1e-6) / mds_per_op, "metadata server");
  return m;
}

// A key owner's CPU binds before the average node's: the run's throughput
// is the least of what the busiest node, the NIC and the merge threads allow.
Modeled ModelBusiest(double max_node_us_per_op, double bytes_per_op, double merge_per_op) {
  Modeled m{kKnThreads / (max_node_us_per_op * 1e-6), "busiest KN"};
  if (bytes_per_op > 0 && kNicBytesPerSec / bytes_per_op < m.ops) m = Modeled{kNicBytesPerSec / bytes_per_op, "pool NIC"};
  if (merge_per_op > 0 && kMergeThreads * kMergePerThread / merge_per_op < m.ops) {
    m = Modeled{kMergeThreads * kMergePerThread / merge_per_op, "merge"};
  }
  return m;
}

// Zipfian of any skew by its explicit CDF (as Anna's benchmark samples
// theta = 2, which the YCSB generator's formula does not cover); rank 0 is
// the hottest key.
class ZipfCdf {
 public:
  ZipfCdf(uint64_t n, double theta) : cdf_(n) {
    double sum = 0;
    for (uint64_t i = 0; i < n; ++i) cdf_[i] = sum += 1.0 / std::pow(static_cast<double>(i + 1), theta);
    for (double& c : cdf_) c /= sum;
  }
  uint64_t Next(Random& rng) const {
    return static_cast<uint64_t>(std::lower_bound(cdf_.begin(), cdf_.end(), rng.NextDouble()) - cdf_.begin());
  }
  double Share(uint64_t top) const { return top == 0 ? 0.0 : cdf_[top - 1]; }

 private:
  std::vector<double> cdf_;
};
using Pick = std::function<uint64_t(Random&)>;

std::string Key(uint64_t i) {
  char k[32];
  std::snprintf(k, sizeof k, "k%07llu", static_cast<unsigned long long>(i));  // 8 B below 10^7 keys
  return k;
}

// The operation stream every design here gets: keys 0..keys-1 loaded in
// waves of 512, then `ops` operations of warm-up and `ops` measured (YCSB's
// scrambled zipfian over the keys, reads by `mix`, the rest updates of
// 1 KB), in waves of 256 outstanding. `target(key)` is the node that serves
// the key (anything with `exec` and `node`); `measure()` runs between
// warm-up and measurement; `after_load()` and `after_wave(n)` let a design
// run its background work.
// `pick` (if given) draws the keys instead of the scrambled zipfian.
template <typename Target, typename AfterLoad, typename Measure, typename AfterWave>
void Drive(runtime::SimRuntime& rt, uint64_t keys, uint64_t ops, const Mix& mix, Random& rng, Target target,
           AfterLoad after_load, Measure measure, AfterWave after_wave, const Pick& pick = {}, uint64_t outstanding = 256) {
  const std::string value(1024, 'v');
  int left = 0;
  // `read()` is asked after `target`: the random stream's order (a design
  // that picks a random node draws before the read/write coin).
  auto issue = [&](const std::string& key, auto read) {
    auto& k = target(key);
    ++left;
    if (read()) {
      k.exec->Post([&k, key, &left] { k.node->Get(key, [&left](Result<std::string>) { --left; }); });
    } else {
      k.exec->Post([&k, key, &value, &left] { k.node->Put(key, value, [&left](Status) { --left; }); });
    }
  };
  for (uint64_t i = 0; i < keys; ++i) {
    issue(Key(i), [] { return false; });
    if (left >= 512 || i + 1 == keys) rt.RunUntil([&] { return left == 0; }, rt.Now() + 10 * runtime::kSecond);
  }
  after_load();
  ycsb::ScrambledZipfian zipf(keys);
  for (int phase = 0; phase < 2; ++phase) {
    if (phase == 1) measure();
    for (uint64_t done = 0; done < ops;) {
      const uint64_t wave = std::min<uint64_t>(outstanding, ops - done);
      for (uint64_t j = 0; j < wave; ++j) {
        const std::string key = Key(pick ? pick(rng) : zipf.Next(rng));
        issue(key, [&] { return rng.NextDouble() < mix.reads; });
      }
      rt.RunUntil([&] { return left == 0; }, rt.Now() + 10 * runtime::kSecond);
      done += wave;
      after_wave(wave);
    }
  }
}

// DINOMO, or DINOMO-S (the paper's baseline: the same nodes with a
// shortcut-only cache).
// `shared`: keys every node owns through their cells (selective
// replication); requests for them go to a random node.
Row Run(uint32_t nodes, const Mix& mix, uint64_t keys, uint64_t ops, uint64_t segment_bytes, bool shortcut_only,
        uint32_t batch_entries = 16, const Pick& pick = {}, const std::set<std::string>& shared = {},
        uint64_t outstanding = 256) {
  runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = 1});
  const uint64_t value_bytes = 1024;
  const uint64_t data = keys * (8 + value_bytes);
  dinomo::PoolOptions po;
  po.segment_bytes = segment_bytes;
  po.num_buckets = 1u << 15;
  while (po.num_buckets < keys / 2) po.num_buckets <<= 1;
  dinomo::testing::SimPool world(rt, data * 3 + (64 << 20), po);
  std::vector<dinomo::testing::SimPool::Node*> kns;
  // Shared before anything is written: their first value goes into the cell.
  for (const std::string& k : shared) (void)world.pool().Share(k);
  int ready = 0;
  for (uint32_t i = 0; i < nodes; ++i) {
    dinomo::KvsNodeOptions o;
    o.node = i + 1;
    o.shared = shared;
    o.cache.capacity_bytes = data / 32;
    o.batch_entries = batch_entries;
    if (shortcut_only) {
      o.cache.policy = dinomo::CacheOptions::Policy::kStatic;
      o.cache.value_share = 0;
    }
    kns.push_back(&world.AddNode(o, [&ready](Status s) { ready += s.ok(); }));
  }
  rt.RunUntil([&] { return ready == static_cast<int>(nodes); }, rt.Now() + runtime::kSecond);
  Random rng(7);
  auto owner = [&](const std::string& key) -> dinomo::testing::SimPool::Node& {
    if (shared.contains(key)) return *kns[rng.Uniform(nodes)];
    return *kns[HashKey(key) % nodes];
  };
  std::vector<KvsNodeStats> before(nodes);
  Drive(
      rt, keys, ops, mix, rng, owner, [] {},
      [&] {
        for (uint32_t i = 0; i < nodes; ++i) before[i] = kns[i]->node->stats();
      },
      [](uint64_t) {}, pick, outstanding);
  uint64_t gets = 0, writes = 0, rts = 0, unmerged = 0, value_hits = 0, shortcut = 0, miss = 0, bytes = 0, swaps = 0;
  double max_node_us = 0;
  for (uint32_t i = 0; i < nodes; ++i) {
    const KvsNodeStats& a = before[i];
    const KvsNodeStats& b = kns[i]->node->stats();
    bytes += (b.read_bytes - a.read_bytes) + (b.written_bytes - a.written_bytes);
    gets += b.gets - a.gets;
    writes += b.writes - a.writes;
    const uint64_t node_rts = (b.get_round_trips - a.get_round_trips) + (b.batches - a.batches) + (b.swaps - a.swaps);
    rts += node_rts;
    swaps += b.swaps - a.swaps;
    const double node_ops = static_cast<double>((b.gets - a.gets) + (b.writes - a.writes));
    max_node_us = std::max(max_node_us, kOpUs * node_ops + kRtUs * static_cast<double>(node_rts));
    unmerged += b.unmerged_hits - a.unmerged_hits;
    value_hits += b.value_hits - a.value_hits;
    shortcut += b.shortcut_hits - a.shortcut_hits;
    miss += b.misses - a.misses;
  }
  Row r;
  const double g = gets ? static_cast<double>(gets) : 1.0;
  r.rts_per_op = static_cast<double>(rts) / static_cast<double>(gets + writes);
  r.bytes_per_op = static_cast<double>(bytes) / static_cast<double>(gets + writes);
  r.writes_per_op = static_cast<double>(writes) / static_cast<double>(gets + writes);
  r.max_node_us_per_op = max_node_us / static_cast<double>(gets + writes);
  r.swaps_per_op = static_cast<double>(swaps) / static_cast<double>(gets + writes);
  uint64_t batches = 0;
  for (uint32_t i = 0; i < nodes; ++i) batches += kns[i]->node->stats().batches - before[i].batches;
  r.rts_per_write = writes ? static_cast<double>(batches) / static_cast<double>(writes) : 0.0;
  r.unmerged = unmerged / g;
  r.value = value_hits / g;
  r.shortcut = shortcut / g;
  r.miss = miss / g;
  for (auto* k : kns) world.Kill(*k);
  return r;
}

// Clover (dinomo/clover.h): the same keys, values, cache size and operation
// stream, but every operation goes to a random node (shared ownership), the
// caches hold shortcuts only, and writes link versions out of place; the
// metadata server's GC pass moves chain heads forward every 4,096 ops.
struct CloverRow {
  double rts_per_op = 0, hits = 0, hops_per_op = 0;
  double bytes_per_op = 0, mds_per_op = 0;
};

CloverRow RunClover(uint32_t nodes, const Mix& mix, uint64_t keys, uint64_t ops, uint64_t segment_bytes,
                    const Pick& pick = {}, uint64_t outstanding = 256) {
  runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = 1});
  const uint64_t value_bytes = 1024;
  const uint64_t data = keys * (8 + value_bytes);
  dinomo::PoolOptions po;
  po.segment_bytes = segment_bytes;
  po.num_buckets = 1u << 15;
  while (po.num_buckets < keys / 2) po.num_buckets <<= 1;
  // Versions are never reclaimed: room for every write of the run.
  const uint64_t versions = keys + static_cast<uint64_t>(2.0 * static_cast<double>(ops) * (1.0 - mix.reads)) + 1;
  dinomo::testing::SimPool world(rt, versions * (64 + value_bytes + 128) + data + (64 << 20), po);
  struct Cn {
    runtime::Executor* exec;
    std::unique_ptr<fabric::Endpoint> ep;
    std::unique_ptr<rpc::LocalCaller> calls;
    std::unique_ptr<dinomo::CloverNode> node;
  };
  std::vector<std::unique_ptr<Cn>> cns;
  int ready = 0;
  for (uint32_t i = 0; i < nodes; ++i) {
    auto c = std::make_unique<Cn>();
    c->exec = rt.CreateExecutor("cn" + std::to_string(i));
    c->ep = std::move(world.fabric().CreateEndpoint(i + 1, c->exec, {})).value();
    c->calls = world.CallerFor(c->exec);
    c->node = std::make_unique<dinomo::CloverNode>(
        c->exec, c->ep.get(), c->calls.get(), dinomo::testing::SimPool::kPoolId,
        dinomo::CloverNodeOptions{.node = i + 1, .epoch = 1, .cache_bytes = data / 32, .limits = {}});
    dinomo::CloverNode* n = c->node.get();
    c->exec->AddPoller([n] { return n->Poll(); });
    c->exec->Post([n, &ready] { n->Start([&ready](Status s) { ready += s.ok(); }); });
    cns.push_back(std::move(c));
  }
  rt.RunUntil([&] { return ready == static_cast<int>(nodes); }, rt.Now() + runtime::kSecond);
  Random rng(7);
  auto any = [&](const std::string&) -> Cn& { return *cns[rng.Uniform(nodes)]; };
  auto gc = [&] {
    bool done = false;
    world.pool_exec()->Post([&] {
      (void)dinomo::AdvanceChains(world.pool(), world.region());
      done = true;
    });
    rt.RunUntil([&] { return done; }, rt.Now() + runtime::kSecond);
  };
  std::vector<dinomo::CloverNodeStats> before(nodes);
  uint64_t since_gc = 0;
  Drive(
      rt, keys, ops, mix, rng, any, gc,
      [&] {
        for (uint32_t i = 0; i < nodes; ++i) before[i] = cns[i]->node->stats();
      },
      [&](uint64_t wave) {
        if ((since_gc += wave) >= 4096) {
          gc();
          since_gc = 0;
        }
      },
      pick, outstanding);
  uint64_t gets = 0, writes = 0, rts = 0, hits = 0, hops = 0, bytes = 0, mds = 0;
  for (uint32_t i = 0; i < nodes; ++i) {
    const dinomo::CloverNodeStats& a = before[i];
    const dinomo::CloverNodeStats& b = cns[i]->node->stats();
    bytes += (b.read_bytes - a.read_bytes) + (b.written_bytes - a.written_bytes);
    mds += (b.writes - a.writes) + (b.inserts - a.inserts);
    gets += b.gets - a.gets;
    writes += b.writes - a.writes;
    rts += (b.get_round_trips - a.get_round_trips) + (b.write_round_trips - a.write_round_trips);
    hits += b.shortcut_hits - a.shortcut_hits;
    hops += b.hops - a.hops;
  }
  for (auto& c : cns) {
    c->ep.reset();
    c->node.reset();
  }
  CloverRow r;
  r.rts_per_op = static_cast<double>(rts) / static_cast<double>(gets + writes);
  r.hits = gets ? static_cast<double>(hits) / static_cast<double>(gets) : 0.0;
  r.hops_per_op = static_cast<double>(hops) / static_cast<double>(gets + writes);
  r.bytes_per_op = static_cast<double>(bytes) / static_cast<double>(gets + writes);
  r.mds_per_op = static_cast<double>(mds) / static_cast<double>(gets + writes);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t keys = 100000, ops = 100000, segment_kb = 64;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--segment-kb") == 0) segment_kb = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--keys") == 0) keys = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--ops") == 0) ops = std::strtoull(argv[i + 1], nullptr, 10);
  }
  bool batch_sweep = false, hot_keys = false;
  uint64_t outstanding = 16;  // B6: requests in flight over all nodes (the paper: one per client thread)
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--outstanding") == 0) outstanding = std::strtoull(argv[i + 1], nullptr, 10);
  }
  for (int i = 1; i < argc; ++i) {
    batch_sweep |= std::strcmp(argv[i], "--batch-sweep") == 0;
    hot_keys |= std::strcmp(argv[i], "--hot-keys") == 0;
  }
  if (hot_keys) {
    // B6 (Fig. 7): under zipfian 2 one key takes most requests and its one
    // owner binds; shared by every node, its requests spread (each costing
    // more: cell and entry, no cached value, a swap per write).
    const uint32_t nodes = 16;
    const Mix mix{"50/50", 0.5};
    const ZipfCdf zipf(keys, 2.0);
    const Pick pick = [&zipf](Random& rng) { return zipf.Next(rng); };
    std::set<std::string> hot;
    for (uint64_t i = 0; i < 4; ++i) hot.insert(Key(i));
    std::printf("B6: hot keys, %u nodes, %llu keys of 8 B + 1 KB, 50/50, zipfian 2 by CDF (top key %.0f%%, top 4 %.0f%% "
                "of requests), %llu ops measured after as many warm-up, %llu outstanding\n",
                nodes, static_cast<unsigned long long>(keys), 100 * zipf.Share(1), 100 * zipf.Share(4),
                static_cast<unsigned long long>(ops), static_cast<unsigned long long>(outstanding));
    const Row plain = Run(nodes, mix, keys, ops, segment_kb << 10, false, 16, pick, {}, outstanding);
    const Row rep = Run(nodes, mix, keys, ops, segment_kb << 10, false, 16, pick, hot, outstanding);
    const CloverRow c = RunClover(nodes, mix, keys, ops, segment_kb << 10, pick, outstanding);
    const Modeled mp = ModelBusiest(plain.max_node_us_per_op, plain.bytes_per_op, plain.writes_per_op);
    const Modeled mr = ModelBusiest(rep.max_node_us_per_op, rep.bytes_per_op, rep.writes_per_op);
    const Modeled mc = Model(nodes, c.rts_per_op, c.bytes_per_op, 0, c.mds_per_op);
    std::printf("%-34s %10s %12s %14s %12s %s\n", "", "rts/op", "swaps/op", "busiest us/op", "Mops/s", "bound");
    std::printf("%-34s %10.3f %12.3f %14.3f %12.2f %s\n", "dinomo, no replication (=dinomo-n)", plain.rts_per_op,
                plain.swaps_per_op, plain.max_node_us_per_op, mp.ops / 1e6, mp.bound);
    std::printf("%-34s %10.3f %12.3f %14.3f %12.2f %s\n", "dinomo, top 4 shared by all 16", rep.rts_per_op,
                rep.swaps_per_op, rep.max_node_us_per_op, mr.ops / 1e6, mr.bound);
    std::printf("%-34s %10.3f %12s %14s %12.2f %s\n", "clover (random node per request)", c.rts_per_op, "-", "-",
                mc.ops / 1e6, mc.bound);
    std::printf("\nclover / dinomo unreplicated %.1fx (paper ~4x); dinomo replicated / clover %.1fx (paper 1.6x); "
                "replicated / unreplicated (dinomo-n) %.1fx (paper up to 5.6x)\n",
                mc.ops / mp.ops, mr.ops / mc.ops, mr.ops / mp.ops);
    return 0;
  }
  if (batch_sweep) {
    // B8: a write costs 1/B round trips (one WRITE per batch of B); with
    // more writes in the mix a batch fills sooner, so the write-heavy mix
    // needs fewer round trips per op than the read-mostly one.
    const uint32_t nodes = 4;
    std::printf("B8: batching, %u nodes, %llu keys of 8 B + 1 KB, zipfian 0.99, %llu ops measured, up to 256 operations "
                "outstanding over all nodes\n",
                nodes, static_cast<unsigned long long>(keys), static_cast<unsigned long long>(ops));
    std::printf("%6s %22s %22s %22s %22s\n", "B", "50/50 rts/op", "50/50 rts/write", "95/5 rts/op", "95/5 rts/write");
    for (uint32_t b : {1u, 2u, 4u, 8u, 16u, 32u, 64u}) {
      const Row w = Run(nodes, Mix{"50/50", 0.5}, keys, ops, segment_kb << 10, false, b);
      const Row r = Run(nodes, Mix{"95/5", 0.95}, keys, ops, segment_kb << 10, false, b);
      std::printf("%6u %22.3f %22.3f %22.3f %22.3f\n", b, w.rts_per_op, w.rts_per_write, r.rts_per_op, r.rts_per_write);
      std::fflush(stdout);
    }
    return 0;
  }
  std::printf("B2: DINOMO round trips to the pool per op and GET answers by where they came from\n");
  std::printf("%llu keys of 8 B + 1 KB, cache per node = data/32, %llu KB segments, zipfian 0.99, %llu ops measured "
              "after as many warm-up\n",
              static_cast<unsigned long long>(keys), static_cast<unsigned long long>(segment_kb),
              static_cast<unsigned long long>(ops));
  const Mix mixes[] = {{"read-only", 1.0}, {"read-mostly 95/5", 0.95}, {"write-heavy 50/50", 0.5}};
  struct Measured {
    uint32_t n;
    Row d, s;
    CloverRow c;
  };
  std::vector<std::pair<const Mix*, std::vector<Measured>>> all;
  for (const Mix& m : mixes) {
    std::printf("\n%s\n%6s %10s %10s %10s %10s %10s %14s %12s %12s %12s %12s %14s\n", m.name, "nodes", "rts/op",
                "unmerged", "value", "shortcut", "miss", "dinomo-s rts", "s/dinomo", "clover rts", "clover hits",
                "clover hops", "clover/dinomo");
    auto& rows = all.emplace_back(&m, std::vector<Measured>{}).second;
    for (uint32_t n : {1u, 2u, 4u, 8u, 16u}) {
      const Row r = Run(n, m, keys, ops, segment_kb << 10, false);
      const Row s = Run(n, m, keys, ops, segment_kb << 10, true);
      const CloverRow c = RunClover(n, m, keys, ops, segment_kb << 10);
      rows.push_back(Measured{n, r, s, c});
      std::printf("%6u %10.3f %9.1f%% %9.1f%% %9.1f%% %9.1f%% %14.3f %11.1fx %12.3f %11.1f%% %12.3f %13.1fx\n", n,
                  r.rts_per_op, 100 * r.unmerged, 100 * r.value, 100 * r.shortcut, 100 * r.miss, s.rts_per_op,
                  r.rts_per_op > 0 ? s.rts_per_op / r.rts_per_op : 0.0, c.rts_per_op, 100 * c.hits, c.hops_per_op,
                  r.rts_per_op > 0 ? c.rts_per_op / r.rts_per_op : 0.0);
      std::fflush(stdout);
    }
  }
  std::printf("\nB3: modelled throughput (Mops/s) from the counters above; inputs: %g KN threads, %g us per request + "
              "%g us per one-sided op, pool NIC %g GB/s, %g merge threads x %g M entries/s, Clover metadata server %g "
              "threads x %g us per call\n",
              kKnThreads, kOpUs, kRtUs, kNicBytesPerSec / 1e9, kMergeThreads, kMergePerThread / 1e6, kMdsThreads, kMdsUs);
  for (const auto& [m, rows] : all) {
    std::printf("\n%s\n%6s %12s %10s %12s %10s %12s %10s %10s %12s\n", m->name, "nodes", "dinomo", "B/op",
                "dinomo-s", "B/op", "clover", "B/op", "d/clover", "bound d|s|c");
    for (const Measured& x : rows) {
      const Modeled d = Model(x.n, x.d.rts_per_op, x.d.bytes_per_op, x.d.writes_per_op, 0);
      const Modeled s = Model(x.n, x.s.rts_per_op, x.s.bytes_per_op, x.s.writes_per_op, 0);
      const Modeled c = Model(x.n, x.c.rts_per_op, x.c.bytes_per_op, 0, x.c.mds_per_op);
      std::printf("%6u %12.2f %10.0f %12.2f %10.0f %12.2f %10.0f %9.1fx   %s | %s | %s\n", x.n, d.ops / 1e6,
                  x.d.bytes_per_op, s.ops / 1e6, x.s.bytes_per_op, c.ops / 1e6, x.c.bytes_per_op,
                  c.ops > 0 ? d.ops / c.ops : 0.0, d.bound, s.bound, c.bound);
    }
  }
  return 0;
}
