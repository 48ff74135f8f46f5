// Performance runs of RubbleDB's chains (sim/chain_perf.h): deterministic
// per seed, the engines' steps charged on the nodes that take them, and the
// inputs moving each design's CPU per insert the expected way.
#include <gtest/gtest.h>

#include "sim/chain_perf.h"
#include "sim/cluster_sim.h"

namespace slip::sim {
namespace {

using runtime::Cost;

// Machines apart, threads polling; small tables, so a few thousand inserts
// flush and compact over three levels within seconds.
PerfOptions ChainModel() {
  PerfOptions p;
  p.costs[Cost::kMessageSend] = {500, 0.5};
  p.costs[Cost::kMessageReceive] = {500, 0.5};
  p.costs[Cost::kRpcCall] = {100, 0};
  p.costs[Cost::kRequest] = {100, 0};
  p.costs[Cost::kClientOp] = {100, 0};
  p.costs[Cost::kFabricPost] = {300, 0};
  p.costs[Cost::kLsmWrite] = {700, 1.0};
  p.costs[Cost::kLsmGet] = {900, 0.2};
  p.costs[Cost::kFlush] = {0, 2.5};
  p.costs[Cost::kCompaction] = {0, 1.2};
  p.shared_host = false;
  p.node_cores = 4;
  p.client_cores = 8;
  p.client_hosts = 1;
  p.park_after = -1;
  p.one_way = 2000;
  p.bandwidth = 12.5;
  p.sync_clients = false;
  p.load_depth = 8;
  p.workload.name = "load";
  p.workload.insert = 1;
  p.workload.records = 3000;
  p.workload.sizes = {"fixed", 16, 1000};
  return p;
}

ClusterSimOptions Chain(const std::string& design, uint32_t replicas, const PerfOptions& p) {
  ClusterSimOptions o;
  o.chain_design = design;
  o.nodes = replicas;
  o.replication = replicas;
  o.shards = replicas;
  o.clients = 2;
  o.chain_table_bytes = 16 << 10;
  o.perf = p;
  return o;
}

double Cpu(const ClusterSimResult& r, Cost c) { return r.perf.cpu_per_op[static_cast<size_t>(c)]; }
double Background(const ClusterSimResult& r) { return BackgroundCpu(r.perf); }

TEST(ChainPerfTest, ARunIsDeterministicPerSeed) {
  auto o = Chain("rubble", 3, ChainModel());
  o.seed = 3;
  auto a = RunClusterSim(o), b = RunClusterSim(o);
  o.seed = 4;
  auto c = RunClusterSim(o);
  ASSERT_TRUE(a.ok && b.ok && c.ok) << a.failure << b.failure << c.failure;
  EXPECT_EQ(a.perf.ops, 3000u);
  EXPECT_GT(a.perf.ops_per_sec, 0);
  EXPECT_GT(a.perf.write_p50, 0);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.perf.node_cpu, b.perf.node_cpu);
  EXPECT_NE(a.trace_hash, c.trace_hash);
}

// RubbleDB's point: only a head flushes and compacts; its followers take
// the tables into their slots without running anything.
TEST(ChainPerfTest, OnlyHeadsCompactInRubbleAndEveryReplicaInTheBaseline) {
  const PerfOptions p = ChainModel();
  auto rubble = RunClusterSim(Chain("rubble", 3, p));
  auto all = RunClusterSim(Chain("rubble-all-compact", 3, p));
  ASSERT_TRUE(rubble.ok && all.ok) << rubble.failure << all.failure;
  // Every replica's writes, in both: an insert is applied three times.
  EXPECT_NEAR(Cpu(all, Cost::kLsmWrite), 3 * (700 + 1016), 100);
  EXPECT_NEAR(Cpu(rubble, Cost::kLsmWrite), Cpu(all, Cost::kLsmWrite), 100);
  // Flushes and compactions: once per insert in rubble, three times in the
  // baseline (each replica's own tree, the head's shape: its followers
  // write at its sequences).
  ASSERT_GT(Background(rubble), 0);
  EXPECT_NEAR(Background(all), 3 * Background(rubble), 0.02 * Background(all));
  // Tables reach the followers as posted writes, one per slot and follower;
  // the baseline ships none.
  EXPECT_GT(Cpu(rubble, Cost::kFabricPost), 0);
  EXPECT_EQ(Cpu(all, Cost::kFabricPost), 0);
  EXPECT_LT(rubble.perf.node_cpu, all.perf.node_cpu);
  // Every step charged is some executor's CPU, counted once: the nodes'
  // and the clients' together are the inputs' totals (this model charges
  // no wake-up), and the engines' jobs hold the writes, flushes and
  // compactions.
  for (const ClusterSimResult* r : {&rubble, &all}) {
    double charged = 0;
    for (double c : r->perf.cpu_per_op) charged += c;
    EXPECT_NEAR(r->perf.node_cpu + r->perf.client_cpu, charged, 0.001 * charged);
    EXPECT_NEAR(r->perf.jobs_cpu, Cpu(*r, Cost::kLsmWrite) + Background(*r), 0.01 * r->perf.jobs_cpu);
  }
}

// The baseline pays compaction on every replica, RubbleDB on one: dearer
// compaction widens the gap, dearer messages (which both pay alike) narrow
// the ratio.
TEST(ChainPerfTest, InputsMoveTheDesignsTheExpectedWay) {
  const PerfOptions p = ChainModel();
  auto ratio = [](const PerfOptions& m) {
    auto rubble = RunClusterSim(Chain("rubble", 3, m));
    auto all = RunClusterSim(Chain("rubble-all-compact", 3, m));
    EXPECT_TRUE(rubble.ok && all.ok) << rubble.failure << all.failure;
    return all.perf.node_cpu / rubble.perf.node_cpu;
  };
  const double base = ratio(p);
  EXPECT_GT(base, 1.2);
  PerfOptions dear_compaction = p;
  dear_compaction.costs[Cost::kCompaction].per_byte *= 3;
  EXPECT_GT(ratio(dear_compaction), base * 1.1);
  PerfOptions dear_messages = p;
  dear_messages.costs[Cost::kMessageReceive].per_op *= 10;
  dear_messages.costs[Cost::kMessageSend].per_op *= 10;
  EXPECT_LT(ratio(dear_messages), base / 1.1);
}

TEST(ChainPerfTest, RefusesWhatItCannotRun) {
  const PerfOptions p = ChainModel();
  auto o = Chain("rowan-kv", 3, p);
  auto r = RunChainPerf(o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("not a chain design"), std::string::npos) << r.failure;
  o = Chain("rubble", 3, p);
  o.replication = 4;
  r = RunClusterSim(o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("replicas on 3 nodes"), std::string::npos) << r.failure;
  o = Chain("rubble", 3, p);
  o.perf.reset();
  r = RunClusterSim(o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("performance mode only"), std::string::npos) << r.failure;
  o = Chain("rubble", 3, p);
  o.chain_table_bytes = 2048;  // not four 1 KB entries
  r = RunClusterSim(o);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("tables of 2048 bytes"), std::string::npos) << r.failure;
}

}  // namespace
}  // namespace slip::sim
