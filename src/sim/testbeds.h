// The papers' testbeds as named performance scenarios (docs/model.md, "The
// papers' testbeds"). `slip sim --perf rowan-fig9` runs the designs one of
// a paper's headline figures compares, on a model of the paper's hardware
// (a model file, bench/model/paper-*.json), in the figure's cluster shape
// and workload, and sets the simulated series beside the numbers the paper
// reports and the ratios it claims.
//
// A scenario is data: how to build its runs from a model file, and the
// paper's numbers. What a run predicts comes from the simulator alone
// (RunClusterSim with PerfOptions); this module only shapes the runs and
// reads the figure's metrics off their results.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sim/cluster_sim.h"
#include "sim/perf_model.h"

namespace slip::sim {

// How a figure's number is read off a series of runs (one design under one
// workload, over a sweep of client load).
enum class Metric {
  kPeakOps,           // highest throughput over the sweep, whole cluster (ops/s)
  kPeakOpsPerServer,  // the same per storage node (ops/s)
  kWriteP50Light,     // median update latency at the sweep's lightest load (us)
  kWriteP99Light,     // 99th percentile at the lightest load (us; update-only series)
  kWriteP50AtPeak,    // median update latency at the load where the baseline peaks (us)
  kScaling,           // throughput at the heaviest load over the lightest
  // Chain designs (sim/chain_perf.h): 1e9 / PerfResult::node_cpu, the
  // papers' throughput per core; and the nodes' flush and compaction CPU
  // over all of theirs (a share, 0-1).
  kOpsPerNodeCpu,
  kBackgroundShare,
};
const char* MetricName(Metric m);
// Throughput, scaling and operations per CPU-second: higher is better.
// Latencies and the background share: lower.
bool HigherIsBetter(Metric m);

// One simulation of a scenario: a point of one series.
struct ScenarioRun {
  std::string series;  // the figure's series: a workload ("YCSB-A")
  std::string design;  // replication::DesignName
  // Operations in flight, the sweep's x: client threads (options.clients)
  // x operations each keeps in flight (perf->threads_per_client).
  uint32_t load = 0;
  ClusterSimOptions options;  // complete: RunClusterSim(options)
};

// A number the paper reports for a design in a series.
struct PaperValue {
  std::string series, design;
  Metric metric;
  double value;        // ops/s or us, as the metric says
  std::string source;  // section or figure; "derived" if computed from the paper's numbers
};

// A ratio the paper claims between two designs in a series, in the metric's
// better direction: throughput design / baseline, latency baseline / design
// ("design is R times better"). low == high unless the paper gives a range.
struct PaperRatio {
  std::string series, design, baseline;
  Metric metric;
  double low, high;
  std::string source;
};

struct Scenario {
  std::string name;    // "rowan-fig9"
  std::string figure;  // what it reproduces: paper, figure, section
  std::string model;   // the testbed's model file (relative to the repository)
  std::string setup;   // cluster and workload, one line
  // Where the simulation differs from the paper's setup, and why.
  std::vector<std::string> notes;
  // The runs on a testbed's model; empty when the scenario cannot run in
  // performance mode, and then `unsupported` says exactly why.
  std::function<Result<std::vector<ScenarioRun>>(const MachineModel&, uint64_t seed)> runs;
  std::string unsupported;
  std::vector<PaperValue> paper;
  std::vector<PaperRatio> ratios;
};

// Every scenario, in the order `slip sim --perf list` shows them.
const std::vector<Scenario>& Scenarios();
// nullptr for an unknown name.
const Scenario* FindScenario(std::string_view name);

// A testbed's machines as PerfOptions: storage nodes and client machines of
// their own, the file's network, NIC and threads, asynchronous clients (the
// papers' client threads poll their own connections). InvalidArgument
// naming what the file lacks: machines, a NIC service time, the threads'
// park_after.
Result<PerfOptions> TestbedPerf(const MachineModel& m);

struct RunResult {
  ScenarioRun run;
  ClusterSimResult result;
};

// A paper value or ratio beside what the runs give for it. `simulated` is
// meaningless unless `has_simulated` (the runs that would give it were left
// out, or failed).
struct Comparison {
  std::string series, design, baseline;  // baseline empty: an absolute value
  Metric metric;
  double paper_low = 0, paper_high = 0;
  double simulated = 0;
  bool has_simulated = false;
  std::string source;
};
std::vector<Comparison> Compare(const Scenario& s, const std::vector<RunResult>& results);

// A metric of one series (the runs of one design and workload, any order).
// False when it cannot be read off them (no runs, a failed run or one that
// filled a node's log — PerfResult::log_full — or no baseline runs for
// kWriteP50AtPeak).
bool SeriesMetric(Metric m, const std::vector<const RunResult*>& series,
                  const std::vector<const RunResult*>& baseline, double* out);

}  // namespace slip::sim
