// The papers' testbeds as scenarios (sim/testbeds.h): every model file
// parses and sources every constant, every scenario runs or says why, runs
// are deterministic per seed, the testbed's NIC constants move predictions
// the expected way, and the figures' metrics are read off runs correctly.
#include "sim/testbeds.h"

#include <gtest/gtest.h>

#include <string>

#include "replication/design.h"
#include "sim/chain_perf.h"
#include "sim/pool_perf.h"

namespace slip::sim {
namespace {

using runtime::Cost;
using runtime::kMicrosecond;

std::string RepoPath(const std::string& relative) { return std::string(SLIP_SOURCE_DIR) + "/" + relative; }

MachineModel ModelOf(const Scenario& s) {
  auto m = LoadMachineModel(RepoPath(s.model));
  EXPECT_TRUE(m.ok()) << s.name << ": " << m.status().ToString();
  return m.ok() ? *m : MachineModel{};
}

// The lightest run of `design` in `series` of `scenario`, on `model` (the
// scenario's own file when null), shortened: a test needs the mechanism,
// not the figure's statistics, and every simulated operation costs real
// time.
ScenarioRun LightRun(const std::string& scenario, const std::string& series, const std::string& design,
                     const MachineModel* model = nullptr, uint64_t seed = 1) {
  const Scenario* s = FindScenario(scenario);
  EXPECT_NE(s, nullptr) << scenario;
  ScenarioRun best;
  best.load = UINT32_MAX;
  if (s == nullptr) return best;
  auto runs = s->runs(model != nullptr ? *model : ModelOf(*s), seed);
  EXPECT_TRUE(runs.ok()) << runs.status().ToString();
  if (!runs.ok()) return best;
  for (const ScenarioRun& r : *runs) {
    if (r.series == series && r.design == design && r.load < best.load) best = r;
  }
  EXPECT_NE(best.load, UINT32_MAX) << scenario << " has no " << design << " in " << series;
  // A chain run's tables this small, so its 2,000 records flush and compact.
  if (!best.options.chain_design.empty()) best.options.chain_table_bytes = 16 << 10;
  if (best.options.perf) {
    best.options.perf->workload.records = 2000;
    best.options.perf->warmup = 200 * kMicrosecond;
    best.options.perf->measure = 500 * kMicrosecond;
  }
  return best;
}

double Cpu(const ClusterSimResult& r, Cost c) { return r.perf.cpu_per_op[static_cast<size_t>(c)]; }

TEST(TestbedsTest, EveryModelFileParsesAndSourcesEveryConstant) {
  int files = 0;
  for (const Scenario& s : Scenarios()) {
    if (!s.runs) continue;
    ++files;
    const MachineModel m = ModelOf(s);
    EXPECT_TRUE(m.Unsourced().empty()) << s.model << ": no source for " << m.Unsourced().front();
    // A testbed: machines, an RDMA NIC with its service time, polling
    // threads; every input of the cost model, and nothing beyond them.
    for (const char* c : {"network.one_way_ns", "network.bandwidth_bytes_per_ns", "network.nic_service_ns",
                          "network.software_nic", "machines.node_cores", "machines.client_cores",
                          "machines.client_hosts", "runtime.park_after_ns"}) {
      EXPECT_TRUE(m.Gives(c)) << s.model << " lacks " << c;
    }
    for (size_t i = 0; i < runtime::kCostCount; ++i) {
      EXPECT_TRUE(m.Gives(std::string(runtime::CostName(static_cast<Cost>(i))))) << s.model;
    }
    auto p = TestbedPerf(m);
    ASSERT_TRUE(p.ok()) << s.model << ": " << p.status().ToString();
    EXPECT_FALSE(p->software_nic) << s.model;
    EXPECT_LT(p->park_after, 0) << s.model;
    EXPECT_FALSE(p->shared_host);
    EXPECT_FALSE(p->sync_clients);
  }
  EXPECT_GE(files, 3);
  // A calibration of this machine (network, no machines) is not a
  // testbed: TestbedPerf says which constants it lacks.
  MachineModel here = ModelOf(*FindScenario("rowan-fig9"));
  here.node_cores = here.client_cores = here.client_hosts = 0;
  here.nic_service = -1;
  auto refused = TestbedPerf(here);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("machines.node_cores"), std::string::npos);
  EXPECT_NE(refused.status().message().find("network.nic_service_ns"), std::string::npos);
}

TEST(TestbedsTest, ASourceForAConstantTheFileDoesNotGiveIsRefused) {
  std::string doc = R"({"network":{"one_way_ns":1000,"sources":{"one_way_ns":"x","latency_ns":"y"}},"inputs":{)";
  for (size_t i = 0; i < runtime::kCostCount; ++i) {
    doc += std::string(i ? "," : "") + "\"" + std::string(runtime::CostName(static_cast<Cost>(i))) +
           R"(":{"per_op_ns":1,"per_byte_ns":0,"source":"s"})";
  }
  doc += "}}";
  auto m = ParseMachineModel(doc);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("network.latency_ns"), std::string::npos);
  // A constant written as a string is refused, not read as 0.
  std::string quoted = doc;
  quoted.replace(quoted.find(R"("latency_ns":"y")"), 16, "");
  quoted.replace(quoted.find(R"("one_way_ns":1000)"), 17, R"("one_way_ns":"1000")");
  quoted.replace(quoted.find(R"("one_way_ns":"x",)"), 17, R"("one_way_ns":"x")");
  auto q = ParseMachineModel(quoted);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.status().message().find("network.one_way_ns"), std::string::npos);
}

TEST(TestbedsTest, EveryScenarioRunsOrSaysWhy) {
  std::set<std::string> names;
  for (const Scenario& s : Scenarios()) {
    EXPECT_TRUE(names.insert(s.name).second) << "two scenarios named " << s.name;
    EXPECT_EQ(FindScenario(s.name), &s);
    EXPECT_FALSE(s.figure.empty());
    EXPECT_FALSE(s.paper.empty() && s.ratios.empty()) << s.name << " sets no paper number beside its runs";
    if (!s.runs) {
      EXPECT_FALSE(s.unsupported.empty()) << s.name << " neither runs nor says why";
      continue;
    }
    EXPECT_TRUE(s.unsupported.empty());
    auto runs = s.runs(ModelOf(s), 1);
    ASSERT_TRUE(runs.ok()) << s.name << ": " << runs.status().ToString();
    ASSERT_FALSE(runs->empty());
    std::set<std::pair<std::string, std::string>> series;
    for (const ScenarioRun& r : *runs) {
      series.insert({r.series, r.design});
      ASSERT_TRUE(r.options.perf.has_value());
      const bool pool = !r.options.pool_design.empty();
      const bool chain = !r.options.chain_design.empty();
      EXPECT_TRUE(pool    ? IsPoolPerfDesign(r.design) && r.design == r.options.pool_design
                  : chain ? IsChainPerfDesign(r.design) && r.design == r.options.chain_design
                          : replication::ParseDesign(r.design).ok())
          << r.design;
      // A chain run's load keeps load_depth inserts in flight per client.
      EXPECT_EQ(r.options.clients * (chain ? r.options.perf->load_depth : r.options.perf->threads_per_client), r.load);
      // Every thread has a core (the files charge no context switch): a
      // node's workers, NIC poller and digest (a KVS node: its threads);
      // the client threads.
      EXPECT_LE(r.options.workers + (pool ? 0 : 2), r.options.perf->node_cores) << s.name;
      const uint32_t hosts = r.options.perf->client_hosts;
      EXPECT_LE((r.options.clients + hosts - 1) / hosts, r.options.perf->client_cores) << s.name;
      EXPECT_EQ(r.options.perf->workload.scan, 0) << "performance runs refuse scans";
      // (A chain run measures its load whole, not a window.)
      if (!chain) {
        EXPECT_LE(r.options.perf->measure, 10 * runtime::kMillisecond) << "a scenario's run must stay short";
      }
    }
    // Every number the paper gives is compared with runs of its series.
    for (const PaperValue& v : s.paper) {
      EXPECT_TRUE(series.count({v.series, v.design})) << s.name << ": no runs for " << v.series << "/" << v.design;
    }
    for (const PaperRatio& r : s.ratios) {
      EXPECT_TRUE(series.count({r.series, r.design})) << s.name << ": " << r.series << "/" << r.design;
      EXPECT_TRUE(series.count({r.series, r.baseline})) << s.name << ": " << r.series << "/" << r.baseline;
    }
  }
  EXPECT_EQ(FindScenario("no-such-figure"), nullptr);
  EXPECT_TRUE(FindScenario("rowan-fig9") != nullptr && FindScenario("rowan-fig9")->runs);
  EXPECT_TRUE(FindScenario("tailwind-fig6") != nullptr && FindScenario("tailwind-fig6")->runs);
  EXPECT_TRUE(FindScenario("dinomo-fig5") != nullptr && FindScenario("dinomo-fig5")->runs);
}

// Each runnable scenario, one light run: the same seed gives the same
// trace, another seed another; what a testbed's file says is never charged
// (wake-ups of polling threads, an RDMA NIC's placement) is not.
TEST(TestbedsTest, EachScenarioIsDeterministicPerSeed) {
  struct Case {
    const char* scenario;
    const char* series;
    const char* design;
  };
  for (const Case& c : {Case{"rowan-fig9", "YCSB-A", "rowan-kv"}, Case{"tailwind-fig6", "50% PUT", "tailwind"},
                        Case{"tailwind-fig7", "100% PUT", "rpc-kv"}, Case{"erda-fig18", "YCSB-C", "erda"},
                        Case{"dinomo-fig5", "A 4 KNs", "dinomo"}, Case{"dinomo-fig5", "B 4 KNs", "clover"},
                        Case{"rubble-fig7", "load, R=3", "rubble"}}) {
    SCOPED_TRACE(c.scenario);
    const ScenarioRun one = LightRun(c.scenario, c.series, c.design, nullptr, 7);
    const ScenarioRun other = LightRun(c.scenario, c.series, c.design, nullptr, 8);
    auto a = RunClusterSim(one.options), b = RunClusterSim(one.options), d = RunClusterSim(other.options);
    ASSERT_TRUE(a.ok && b.ok && d.ok) << a.failure << b.failure << d.failure;
    EXPECT_GT(a.perf.ops, 50u);
    EXPECT_FALSE(a.perf.log_full);
    EXPECT_EQ(a.trace_hash, b.trace_hash);
    EXPECT_EQ(a.perf.ops, b.perf.ops);
    EXPECT_EQ(a.perf.p50, b.perf.p50);
    EXPECT_NE(a.trace_hash, d.trace_hash);
    const MachineModel m = ModelOf(*FindScenario(c.scenario));
    int never = 0;
    for (size_t i = 0; i < runtime::kCostCount; ++i) {
      const std::string name(runtime::CostName(static_cast<Cost>(i)));
      if (m.sources.at(name).rfind("never charged", 0) != 0) continue;
      ++never;
      EXPECT_EQ(Cpu(a, static_cast<Cost>(i)), 0) << name << " is charged";
    }
    EXPECT_GE(never, 2);  // the wake-up and the target's placement at least
    if (c.scenario == std::string("rubble-fig7")) {
      EXPECT_GT(Cpu(a, Cost::kCompaction), 0);
    }
    EXPECT_EQ(a.perf.client_parks + a.perf.worker_parks + a.perf.nic_parks, 0);
  }
}

// The testbed's constants, one at a time, on a light update-only run:
// latency follows the network and the steps each design takes.
TEST(TestbedsTest, NicConstantsMoveThePredictionTheExpectedWay) {
  const MachineModel base = ModelOf(*FindScenario("tailwind-fig7"));
  auto write_p50 = [](const std::string& design, const MachineModel& m) {
    auto r = RunClusterSim(LightRun("tailwind-fig7", "100% PUT", design, &m).options);
    EXPECT_TRUE(r.ok) << r.failure;
    return r.perf.write_p50;
  };
  const auto tailwind = write_p50("tailwind", base), rpc = write_p50("rpc-kv", base);
  // A PUT is a client round trip and a replication round trip: each
  // microsecond more of one-way latency adds about four.
  MachineModel far = base;
  far.one_way += 2 * kMicrosecond;
  const auto far_tailwind = write_p50("tailwind", far);
  EXPECT_GT(far_tailwind, tailwind + 6 * kMicrosecond);
  EXPECT_LT(far_tailwind, tailwind + 10 * kMicrosecond);
  // A slower target NIC delays the one-sided writes.
  MachineModel slow_nic = base;
  slow_nic.nic_service = 2 * kMicrosecond;
  EXPECT_GT(write_p50("tailwind", slow_nic), tailwind + kMicrosecond);
  // A thinner link serialises every message and packet longer.
  MachineModel thin = base;
  thin.bandwidth = 0.05;  // 400 Mb/s
  EXPECT_GT(write_p50("rpc-kv", thin), rpc + kMicrosecond);
  // Dearer posts slow the design that posts, not the one that sends.
  MachineModel dear_post = base;
  dear_post.costs[Cost::kFabricPost].per_op += 1000;
  EXPECT_GT(write_p50("tailwind", dear_post), tailwind + kMicrosecond);
  EXPECT_EQ(write_p50("rpc-kv", dear_post), rpc);
  // Dearer messages slow rpc-kv's replication more than tailwind's.
  MachineModel dear_send = base;
  dear_send.costs[Cost::kMessageSend].per_op += 1000;
  EXPECT_GT(write_p50("rpc-kv", dear_send) - rpc, write_p50("tailwind", dear_send) - tailwind);
}

// The simulated nodes run no cleaner: a window long enough to write a
// node's PM region full measures a stall, and the run says so.
TEST(TestbedsTest, AWindowThatFillsTheLogIsFlagged) {
  ScenarioRun run = LightRun("tailwind-fig7", "100% PUT", "tailwind");
  auto brief = RunClusterSim(run.options);
  ASSERT_TRUE(brief.ok) << brief.failure;
  EXPECT_FALSE(brief.perf.log_full);
  EXPECT_GT(brief.perf.min_free_segments, 2u);
  // One client's updates put ~35 MB/s of entries on every node: a region
  // of ~32 MB (2,000 records, and two segments for each of the cluster's
  // 32 workers) is full within a virtual second and a half.
  run.options.perf->measure = 1500 * runtime::kMillisecond;
  auto longer = RunClusterSim(run.options);
  ASSERT_TRUE(longer.ok) << longer.failure;
  EXPECT_TRUE(longer.perf.log_full);
  EXPECT_LT(longer.perf.ops_per_sec, brief.perf.ops_per_sec);
}

// Metrics and ratios from hand-made results: peak over the sweep, the
// latency at the baseline's peak, light-load latency, scaling.
TEST(TestbedsTest, CompareReadsTheFiguresMetricsOffTheRuns) {
  auto result = [](const char* series, const char* design, uint32_t load, double ops, runtime::Nanos write_p50) {
    RunResult r;
    r.run.series = series;
    r.run.design = design;
    r.run.load = load;
    r.run.options.nodes = 4;
    r.result.ok = true;
    r.result.perf.ops_per_sec = ops;
    r.result.perf.write_p50 = write_p50;
    r.result.perf.p99 = 2 * write_p50;
    r.run.options.perf = PerfOptions{};
    r.run.options.perf->workload.update = 1;  // update-only: the p99 is an update's
    return r;
  };
  const std::vector<RunResult> runs = {
      result("A", "new", 1, 100, 10'000),    result("A", "new", 10, 900, 12'000),
      result("A", "new", 100, 1200, 30'000), result("A", "old", 1, 80, 20'000),
      result("A", "old", 10, 800, 24'000),   result("A", "old", 100, 700, 90'000),
  };
  Scenario s;
  s.paper = {{"A", "new", Metric::kPeakOps, 1000, "p"}, {"B", "new", Metric::kPeakOps, 1, "no runs"}};
  s.ratios = {
      {"A", "new", "old", Metric::kPeakOps, 1.5, 1.5, "r"},
      {"A", "new", "old", Metric::kPeakOpsPerServer, 1.5, 1.5, "r"},
      {"A", "new", "old", Metric::kWriteP50AtPeak, 2, 2, "r"},
      {"A", "new", "old", Metric::kWriteP50Light, 2, 2, "r"},
      {"A", "new", "old", Metric::kWriteP99Light, 2, 2, "r"},
  };
  const std::vector<Comparison> c = Compare(s, runs);
  ASSERT_EQ(c.size(), 7u);
  EXPECT_TRUE(c[0].has_simulated);
  EXPECT_DOUBLE_EQ(c[0].simulated, 1200);
  EXPECT_FALSE(c[1].has_simulated);          // no runs of series B
  EXPECT_DOUBLE_EQ(c[2].simulated, 1.5);     // 1200 / 800
  EXPECT_DOUBLE_EQ(c[3].simulated, 1.5);     // per server alike
  EXPECT_DOUBLE_EQ(c[4].simulated, 2);       // old peaks at 10 clients: 24 us / 12 us
  EXPECT_DOUBLE_EQ(c[5].simulated, 2);       // 20 us / 10 us at 1 client
  EXPECT_DOUBLE_EQ(c[6].simulated, 2);       // the p99s, likewise
  // With reads in the series, its p99 is not an update's: no number.
  std::vector<RunResult> mixed = runs;
  for (RunResult& r : mixed) {
    r.run.options.perf->workload.read = 0.5;
    r.run.options.perf->workload.update = 0.5;
  }
  EXPECT_FALSE(Compare(s, mixed)[6].has_simulated);
  EXPECT_TRUE(Compare(s, mixed)[5].has_simulated);
  double scaling = 0;
  std::vector<const RunResult*> mine = {&runs[0], &runs[1], &runs[2]};
  ASSERT_TRUE(SeriesMetric(Metric::kScaling, mine, {}, &scaling));
  EXPECT_DOUBLE_EQ(scaling, 12);
  // A failed run yields no number rather than a wrong one; so does a run
  // whose window ran a node's log full (a stall, not the design).
  std::vector<RunResult> failed = runs;
  failed[1].result.ok = false;
  EXPECT_FALSE(Compare(s, failed)[0].has_simulated);
  std::vector<RunResult> full = runs;
  full[5].result.perf.log_full = true;
  EXPECT_TRUE(Compare(s, full)[0].has_simulated);   // new's own series is whole
  EXPECT_FALSE(Compare(s, full)[2].has_simulated);  // the ratio needs old's
}

// A chain scenario's metrics: operations per node CPU-second (higher is
// better), and the nodes' flush and compaction share of their CPU.
TEST(TestbedsTest, ChainMetricsReadTheNodesCpuPerOperation) {
  auto result = [](const char* design, double node_cpu, double flush, double compaction) {
    RunResult r;
    r.run.series = "load";
    r.run.design = design;
    r.result.ok = true;
    r.result.perf.ops_per_sec = 1000;  // not what these metrics read
    r.result.perf.node_cpu = node_cpu;
    r.result.perf.cpu_per_op[static_cast<size_t>(Cost::kFlush)] = flush;
    r.result.perf.cpu_per_op[static_cast<size_t>(Cost::kCompaction)] = compaction;
    return r;
  };
  const std::vector<RunResult> runs = {result("rubble", 20'000, 2'000, 8'000),
                                       result("all-compact", 50'000, 6'000, 34'000)};
  Scenario s;
  s.paper = {{"load", "all-compact", Metric::kBackgroundShare, 0.72, "p"}};
  s.ratios = {{"load", "rubble", "all-compact", Metric::kOpsPerNodeCpu, 1.5, 1.5, "r"}};
  const std::vector<Comparison> c = Compare(s, runs);
  ASSERT_EQ(c.size(), 2u);
  ASSERT_TRUE(c[0].has_simulated && c[1].has_simulated);
  EXPECT_DOUBLE_EQ(c[0].simulated, 0.8);  // (6 + 34) / 50 us
  EXPECT_DOUBLE_EQ(c[1].simulated, 2.5);  // 50 / 20 us per operation
  // A run that measured no node CPU gives no number.
  std::vector<RunResult> unmeasured = runs;
  unmeasured[0].result.perf.node_cpu = 0;
  EXPECT_FALSE(Compare(s, unmeasured)[1].has_simulated);
}

}  // namespace
}  // namespace slip::sim
