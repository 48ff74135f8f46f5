// Performance runs of the pool designs (sim/pool_perf.h): deterministic per
// seed, the pool's and the KVS nodes' steps charged where they happen, and
// their inputs moving predictions the expected way.
#include <gtest/gtest.h>

#include <cstdio>

#include "sim/cluster_sim.h"
#include "sim/pool_perf.h"

namespace slip::sim {
namespace {

using runtime::Cost;

// Machines apart (RDMA-like: one-sided operations cost the pool nothing),
// threads polling, small enough to run in a second.
PerfOptions PoolModel(double read) {
  PerfOptions p;
  p.costs[Cost::kMessageSend] = {2000, 0.1};
  p.costs[Cost::kMessageReceive] = {2000, 0.1};
  p.costs[Cost::kRpcCall] = {100, 0};
  p.costs[Cost::kRequest] = {100, 0};
  p.costs[Cost::kClientOp] = {100, 0};
  p.costs[Cost::kStorePut] = {200, 0.5};
  p.costs[Cost::kFabricPost] = {100, 0};
  p.costs[Cost::kFabricCompletion] = {100, 0};
  p.costs[Cost::kCacheLookup] = {300, 0.2};
  p.costs[Cost::kMerge] = {500, 0.1};
  p.shared_host = false;
  p.node_cores = 2;
  p.client_cores = 8;
  p.client_hosts = 1;
  p.pool_cores = 2;
  p.park_after = -1;
  p.one_way = 1000;
  p.bandwidth = 7;
  p.nic_service = 24;
  p.software_nic = false;
  p.sync_clients = false;
  p.threads_per_client = 8;
  p.workload.name = "mix";
  p.workload.read = read;
  p.workload.update = 1 - read;
  p.workload.records = 3000;
  p.workload.sizes = {"fixed", 8, 1024};
  p.warmup = 500 * runtime::kMicrosecond;
  p.measure = 2 * runtime::kMillisecond;
  return p;
}

ClusterSimOptions Pool(const std::string& design, const PerfOptions& p) {
  ClusterSimOptions o;
  o.pool_design = design;
  o.nodes = 2;
  o.workers = 2;
  o.clients = 4;
  o.pool_shared_keys = 0;
  o.perf = p;
  return o;
}

double Cpu(const ClusterSimResult& r, Cost c) { return r.perf.cpu_per_op[static_cast<size_t>(c)]; }

TEST(PoolPerfTest, ARunIsDeterministicPerSeed) {
  auto o = Pool("dinomo", PoolModel(0.5));
  o.seed = 3;
  auto a = RunClusterSim(o), b = RunClusterSim(o);
  o.seed = 4;
  auto c = RunClusterSim(o);
  ASSERT_TRUE(a.ok && b.ok && c.ok) << a.failure << b.failure << c.failure;
  EXPECT_GT(a.perf.ops, 1000u);
  EXPECT_EQ(a.perf.errors, 0u);
  EXPECT_GT(a.perf.read_p50, 0);
  EXPECT_GT(a.perf.write_p50, 0);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.perf.ops, b.perf.ops);
  EXPECT_NE(a.trace_hash, c.trace_hash);
}

TEST(PoolPerfTest, OnlyPerformanceRunsOfKnownDesignsAndWorkloads) {
  auto refused = [](const ClusterSimOptions& o, const char* why) {
    const ClusterSimResult r = RunClusterSim(o);
    EXPECT_FALSE(r.ok) << why;
    EXPECT_NE(r.failure.find(why), std::string::npos) << r.failure;
  };
  auto o = Pool("dinomo", PoolModel(0.5));
  o.perf.reset();
  refused(o, "performance mode only");
  refused(Pool("dinomo-x", PoolModel(0.5)), "dinomo-x");
  auto sync = Pool("clover", PoolModel(0.5));
  sync.perf->sync_clients = true;
  refused(sync, "asynchronous clients only");
  auto rmw = Pool("dinomo", PoolModel(0.5));
  rmw.perf->workload.update = 0;
  rmw.perf->workload.rmw = 0.5;
  refused(rmw, "reads, updates and inserts only");
  auto uniform = Pool("dinomo", PoolModel(0.5));
  uniform.perf->workload.distribution = ycsb::Distribution::kUniform;
  uniform.pool_shared_keys = 3;
  refused(uniform, "hottest of a zipfian workload");
  auto many = Pool("dinomo", PoolModel(0.5));
  many.pool_shared_keys = 65;
  refused(many, "at most 64 shared keys");
  auto huge = Pool("clover", PoolModel(0.5));
  huge.perf->measure = 100 * runtime::kSecond;  // Clover keeps every version written
  refused(huge, "fewer records or a shorter window");
}

// Reads are one-sided READs: the pool's CPU does nothing for them, and the
// KVS node's cache is charged on every one.
TEST(PoolPerfTest, ReadsCostThePoolNoCpuAndTheNodeItsCache) {
  for (const char* design : {"dinomo", "dinomo-s", "clover"}) {
    auto r = RunClusterSim(Pool(design, PoolModel(1)));
    ASSERT_TRUE(r.ok) << design << ": " << r.failure;
    EXPECT_GT(r.perf.ops, 1000u) << design;
    EXPECT_EQ(r.perf.pool_cpu, 0) << design;
    EXPECT_GE(Cpu(r, Cost::kCacheLookup), 300) << design;  // a lookup per read at least
    EXPECT_GT(r.perf.worker_cpu, 4000) << design;           // a request's messages at least
  }
}

// Writes are merged by the pool's threads: merges are charged there, and a
// dearer merge costs the pool more per operation.
TEST(PoolPerfTest, WritesAreMergedOnThePoolsThreads) {
  auto o = Pool("dinomo", PoolModel(0));
  auto cheap = RunClusterSim(o);
  o.perf->costs[Cost::kMerge] = {5000, 0.1};
  auto dear = RunClusterSim(o);
  ASSERT_TRUE(cheap.ok && dear.ok) << cheap.failure << dear.failure;
  EXPECT_GT(Cpu(cheap, Cost::kMerge), 0);
  EXPECT_GT(cheap.perf.pool_cpu, Cpu(cheap, Cost::kMerge));  // the seal calls' messages too
  EXPECT_GT(dear.perf.pool_cpu, cheap.perf.pool_cpu + 2000);
  EXPECT_GT(Cpu(cheap, Cost::kStorePut), 200);  // each write's entry encoded
}

// DINOMO's value hits need no round trip; DINOMO-S's shortcuts need one
// per hit, and Clover's caches are shared by every node. With the KVS
// nodes' CPU cheap, the pool's link decides: dinomo ahead. 16 nodes cache
// half the data, as the paper's do.
TEST(PoolPerfTest, ValueHitsSaveRoundTripsAndThePoolsLink) {
  PerfOptions p = PoolModel(1);
  p.costs[Cost::kMessageSend] = {100, 0};
  p.costs[Cost::kMessageReceive] = {100, 0};
  p.bandwidth = 0.5;  // a slow pool link
  p.threads_per_client = 32;
  auto cluster = [&p](const char* design) {
    ClusterSimOptions o = Pool(design, p);
    o.nodes = 16;
    o.workers = 1;
    return RunClusterSim(o);
  };
  auto dinomo = cluster("dinomo");
  auto shortcuts = cluster("dinomo-s");
  auto clover = cluster("clover");
  ASSERT_TRUE(dinomo.ok && shortcuts.ok && clover.ok) << dinomo.failure << shortcuts.failure << clover.failure;
  EXPECT_LT(dinomo.perf.pool_round_trips, 0.8);
  // A shortcut hit is a READ (reads of the node's unmerged writes none).
  EXPECT_GT(shortcuts.perf.pool_round_trips, 1.5 * dinomo.perf.pool_round_trips);
  EXPECT_GE(clover.perf.pool_round_trips, 1.0);
  EXPECT_GT(dinomo.perf.ops_per_sec, 1.5 * shortcuts.perf.ops_per_sec);
  EXPECT_GT(dinomo.perf.ops_per_sec, 1.5 * clover.perf.ops_per_sec);
  std::printf("ops/s dinomo %.0f dinomo-s %.0f clover %.0f; round trips %.2f %.2f %.2f\n", dinomo.perf.ops_per_sec,
              shortcuts.perf.ops_per_sec, clover.perf.ops_per_sec, dinomo.perf.pool_round_trips,
              shortcuts.perf.pool_round_trips, clover.perf.pool_round_trips);
}

// Under zipfian keys the thread owning the hottest key binds first; the
// hottest keys shared by every thread (selective replication) spread it.
TEST(PoolPerfTest, SharingTheHottestKeysSpreadsTheirOwnersLoad) {
  PerfOptions p = PoolModel(0.95);
  p.workload.distribution = ycsb::Distribution::kZipfian;
  p.client_cores = 32;
  p.threads_per_client = 8;
  auto cluster = [&p](int shared) {
    ClusterSimOptions o = Pool("dinomo", p);
    o.nodes = 16;
    o.workers = 2;
    o.clients = 32;
    o.pool_shared_keys = shared;
    return RunClusterSim(o);
  };
  auto owned = cluster(0), shared = cluster(4);
  ASSERT_TRUE(owned.ok && shared.ok) << owned.failure << shared.failure;
  EXPECT_EQ(owned.perf.errors + shared.perf.errors, 0u);
  EXPECT_GT(shared.perf.ops_per_sec, 1.2 * owned.perf.ops_per_sec);
  // Unshared, the hottest key's owner binds (it is saturated); shared, the
  // load spreads and throughput rises until another thread binds. A share
  // of the window never exceeds it (a turn across an edge is split there).
  EXPECT_GE(owned.perf.busiest_share, 0.95) << owned.perf.busiest;
  EXPECT_LE(owned.perf.busiest_share, 1.0);
  EXPECT_LE(shared.perf.busiest_share, 1.0);
  // The nodes treat them as shared: a read of one goes through its cell
  // (two READs where an owned key's value hit needs none).
  EXPECT_GT(shared.perf.pool_round_trips, owned.perf.pool_round_trips + 0.05);
  std::printf("ops/s owned %.0f (busiest %s %.0f%%), 4 shared %.0f (busiest %s %.0f%%)\n", owned.perf.ops_per_sec,
              owned.perf.busiest.c_str(), 100 * owned.perf.busiest_share, shared.perf.ops_per_sec,
              shared.perf.busiest.c_str(), 100 * shared.perf.busiest_share);
}

// The KVS nodes' CPU binds when the link does not: a dearer cache lookup
// lowers throughput.
TEST(PoolPerfTest, ADearerCacheLowersThroughputWhenNodesBind) {
  PerfOptions p = PoolModel(1);
  p.threads_per_client = 32;
  auto cheap = RunClusterSim(Pool("dinomo", p));
  p.costs[Cost::kCacheLookup] = {4000, 0.2};
  auto dear = RunClusterSim(Pool("dinomo", p));
  ASSERT_TRUE(cheap.ok && dear.ok) << cheap.failure << dear.failure;
  EXPECT_LT(dear.perf.ops_per_sec, 0.9 * cheap.perf.ops_per_sec);
  EXPECT_EQ(cheap.perf.busiest.substr(0, 2), "kn") << cheap.perf.busiest;
}

}  // namespace
}  // namespace slip::sim
