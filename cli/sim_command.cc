#include "cli/sim_command.h"

#include "cluster/cluster_config.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "replication/design.h"
#include "replication/testing/campaign.h"
#include "common/log.h"
#include "sim/chain_perf.h"
#include "sim/cluster_sim.h"
#include "sim/perf_model.h"
#include "sim/rubble_campaign.h"
#include "sim/testbeds.h"

namespace slip::cli {
namespace {

// The one-sided designs' campaign (replication/testing/campaign.h): backup
// and primary power losses around a write load, every acked write checked.
int RunReplicationCampaign(const SimCommandOptions& o, replication::Protocol protocol, uint64_t first,
                           uint64_t last) {
  if (!o.bug.empty() && o.bug != "ack-early" && o.bug != "skip-persist") {
    std::fprintf(stderr, "slip sim: --design %s knows --bug ack-early or skip-persist, not '%s'\n",
                 o.design.c_str(), o.bug.c_str());
    return 2;
  }
  uint64_t acked = 0, faults = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t seed = first; seed <= last; ++seed) {
    replication::testing::CampaignOptions co;
    co.protocol = protocol;
    co.seed = seed;
    co.trace = o.trace;
    co.bug_ack_early = o.bug == "ack-early";
    co.file_class = o.file_class;
    co.bug_skip_persist = o.bug == "skip-persist";
    co.max_persist_delay = o.persist_delay_ns;
    co.writes = static_cast<int>(o.ops * o.clients);  // one primary writes what the clients would
    co.backup_crashes = static_cast<int>(o.crashes);
    auto r = replication::testing::RunReplicationSeed(co);
    for (const auto& line : r.trace) std::printf("  %s\n", line.c_str());
    acked += r.acked;
    faults += r.faults;
    if (!r.violation.empty()) {
      ++failed;
      std::string extra = o.bug.empty() ? "" : " --bug " + o.bug;
      if (o.file_class) extra += " --file-class";
      if (o.persist_delay_ns != SimCommandOptions{}.persist_delay_ns) extra += " --persist-delay-ns " + std::to_string(o.persist_delay_ns);
      std::printf("seed %llu FAILED: %s\n  replay: slip sim --layer replication --design %s --seed %llu --trace%s\n",
                  static_cast<unsigned long long>(seed), r.violation.c_str(), o.design.c_str(),
                  static_cast<unsigned long long>(seed), extra.c_str());
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t seeds = last - first + 1;
  std::printf("design %s: %llu seeds, %llu writes acknowledged, %llu power losses, %llu violations, %.1f seeds/s\n",
              o.design.c_str(), static_cast<unsigned long long>(seeds), static_cast<unsigned long long>(acked),
              static_cast<unsigned long long>(faults), static_cast<unsigned long long>(failed),
              static_cast<double>(seeds) / secs);
  return failed ? 1 : 0;
}

// The options a replay needs besides design and seed.
std::string ReplayFlags(const SimCommandOptions& o) {
  const SimCommandOptions d;
  std::string f;
  auto num = [&f](const char* flag, auto v, auto dv) {
    if (v != dv) f += std::string(" ") + flag + " " + std::to_string(v);
  };
  num("--nodes", o.nodes, d.nodes);
  num("--replication", o.replication, d.replication);
  num("--shards", o.shards, d.shards);
  num("--clients", o.clients, d.clients);
  num("--keys", o.keys, d.keys);
  num("--ops", o.ops, d.ops);
  num("--crashes", o.crashes, d.crashes);
  num("--partitions", o.partitions, d.partitions);
  num("--slow", o.slow_nodes, d.slow_nodes);
  num("--persist-delay-ns", o.persist_delay_ns, d.persist_delay_ns);
  if (o.drop != d.drop) f += " --drop " + std::to_string(o.drop);
  num("--failover-crashes", o.failover_crashes, d.failover_crashes);
  num("--commit-interval-us", o.commit_interval_us, d.commit_interval_us);
  num("--workers", o.workers, d.workers);
  num("--digest-executors", o.digest_executors, d.digest_executors);
  num("--migrations", o.migrations, d.migrations);
  if (o.migration_faults) f += " --migration-faults";
  if (o.cold_start) f += " --cold-start";
  if (o.no_conditional) f += " --no-conditional";
  if (o.crash_in_cold_start) f += " --crash-in-cold-start";
  if (!o.bug.empty()) f += " --bug " + o.bug;
  return f;
}

// The chain designs' campaign (sim/rubble_campaign.h): its own cluster of
// three RubbleServer nodes, faults chosen by the seed.
int RunRubbleCampaigns(const SimCommandOptions& o, uint64_t first, uint64_t last) {
  if (!o.bug.empty()) {
    std::fprintf(stderr, "slip sim: --design %s knows no --bug\n", o.design.c_str());
    return 2;
  }
  // The nodes' own lines, and the faults', with --trace only.
  logging::SetLevel(o.trace ? logging::Level::kInfo : logging::Level::kError);
  uint64_t ops = 0, unknown = 0, kills = 0, seeded = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t seed = first; seed <= last; ++seed) {
    const sim::RubbleCampaignResult r = sim::RunRubbleCampaign({.seed = seed, .base_dir = "", .design = o.design});
    ops += r.ops;
    unknown += r.unknown;
    kills += r.kills;
    seeded += r.seeded;
    if (!r.ok) {
      ++failed;
      std::printf("seed %llu FAILED: %s\n  replay: slip sim --design %s --seed %llu --trace\n",
                  static_cast<unsigned long long>(seed), r.failure.c_str(), o.design.c_str(),
                  static_cast<unsigned long long>(seed));
    } else if (first == last) {
      std::printf("seed %llu ok: %llu operations, trace %016llx\n", static_cast<unsigned long long>(seed),
                  static_cast<unsigned long long>(r.ops), static_cast<unsigned long long>(r.trace_hash));
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s: %llu seeds, %llu failed; %llu operations checked for linearizability (%llu with unknown "
              "outcome), %llu processes stopped, %llu replicas seeded; %.1f s\n",
              o.design.c_str(), static_cast<unsigned long long>(last - first + 1),
              static_cast<unsigned long long>(failed), static_cast<unsigned long long>(ops),
              static_cast<unsigned long long>(unknown), static_cast<unsigned long long>(kills),
              static_cast<unsigned long long>(seeded), secs);
  return failed == 0 ? 0 : 1;
}

// ---- The papers' testbeds (sim/testbeds.h) ----

std::string ScenarioNames() {
  std::string names = "this-machine";
  for (const sim::Scenario& s : sim::Scenarios()) names += ", " + s.name;
  return names;
}

// "12.3 M", "635 K", "4.1": a throughput or latency at a readable scale.
std::string Scaled(double v) {
  char buf[32];
  if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2f M", v / 1e6);
  } else if (v >= 1e4) {
    std::snprintf(buf, sizeof buf, "%.0f K", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f", v);
  }
  return buf;
}

int ListScenarios() {
  std::printf("%-14s %s\n", "this-machine", "this machine as the validation runs it (--design, --threads, ...)");
  for (const sim::Scenario& s : sim::Scenarios()) {
    std::printf("%-14s %s\n", s.name.c_str(), s.figure.c_str());
    if (s.runs) {
      std::printf("%-14s   testbed %s; %s\n", "", s.model.c_str(), s.setup.c_str());
    } else {
      std::printf("%-14s   cannot run in performance mode (slip sim --perf %s says why)\n", "", s.name.c_str());
    }
  }
  return 0;
}

// The comparison of a paper number with the simulation, in a line.
std::string DescribeComparison(const sim::Comparison& c) {
  const bool ratio = !c.baseline.empty();
  const bool ops = c.metric == sim::Metric::kPeakOps || c.metric == sim::Metric::kPeakOpsPerServer;
  auto value = [&](double v) {
    char buf[48];
    if (!ratio && c.metric == sim::Metric::kBackgroundShare) {
      std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v);
      return std::string(buf);
    }
    if (!ratio && c.metric == sim::Metric::kOpsPerNodeCpu) return Scaled(v) + "ops/core-s";
    if (ratio || c.metric == sim::Metric::kScaling) {
      std::snprintf(buf, sizeof buf, "%.2fx", v);
      return std::string(buf);
    }
    return ops ? Scaled(v) + "ops/s" : Scaled(v) + " us";
  };
  std::string who = ratio ? c.design + " vs " + c.baseline : c.design;
  std::string paper = value(c.paper_low);
  if (c.paper_high != c.paper_low) paper += "-" + value(c.paper_high);
  char line[512];
  std::snprintf(line, sizeof line, "  %-10s %-26s %-48s paper %-14s simulated %-12s  [%s]", c.series.c_str(),
                who.c_str(), sim::MetricName(c.metric), paper.c_str(),
                c.has_simulated ? value(c.simulated).c_str() : "-", c.source.c_str());
  return line;
}

// --input overrides, in order; false (after saying why) on a bad one.
bool ApplyInputs(const SimCommandOptions& o, sim::MachineModel& model) {
  for (const std::string& spec : o.inputs) {
    if (Status s = sim::OverrideInput(model, spec); !s.ok()) {
      std::fprintf(stderr, "slip sim: --input: %s\n", s.message().c_str());
      return false;
    }
  }
  return true;
}

// The runs of the designs `only` names (comma-separated; empty: all).
// InvalidArgument naming a design the scenario does not run.
Result<std::vector<sim::ScenarioRun>> OnlyDesigns(std::vector<sim::ScenarioRun> runs, const std::string& only) {
  if (only.empty()) return runs;
  std::vector<std::string> names;
  for (size_t at = 0; at <= only.size();) {
    const size_t comma = std::min(only.find(',', at), only.size());
    if (comma > at) names.push_back(only.substr(at, comma - at));
    at = comma + 1;
  }
  if (names.empty()) return Status::InvalidArgument("--only '" + only + "' names no design");
  std::string offered;
  for (const auto& r : runs) {
    if (offered.find(" " + r.design + ",") == std::string::npos) offered += " " + r.design + ",";
  }
  for (const std::string& n : names) {
    if (offered.find(" " + n + ",") == std::string::npos) {
      return Status::InvalidArgument("--only: this scenario runs no design '" + n + "' (it runs" +
                                     offered.substr(0, offered.size() - 1) + ")");
    }
  }
  std::vector<sim::ScenarioRun> kept;
  for (auto& r : runs) {
    if (std::find(names.begin(), names.end(), r.design) != names.end()) kept.push_back(std::move(r));
  }
  return kept;
}

void PrintScenarioHeader(const sim::Scenario& s, const std::string& path, const sim::MachineModel& m,
                         const sim::PerfOptions& p) {
  std::printf("%s: %s\n", s.name.c_str(), s.figure.c_str());
  std::printf("testbed %s (%s): storage machines of %u cores, up to %u client machines of %u cores; one-way "
              "%.2f us, %.1f B/ns, NIC %lld ns per packet, threads %s\n",
              path.c_str(), m.provider.c_str(), p.node_cores, m.client_hosts, p.client_cores,
              static_cast<double>(p.one_way) / 1e3, p.bandwidth, static_cast<long long>(p.nic_service),
              p.park_after < 0 ? "polling" : "parking");
  std::printf("setup: %s\n", s.setup.c_str());
  for (const std::string& n : s.notes) std::printf("note: %s\n", n.c_str());
  std::printf("\n%-10s %-10s %7s %12s %12s %8s %9s %9s %8s %7s  %s\n", "series", "design", "load", "ops/s",
              "per server", "p50 us", "read p50", "write p50", "p99 us", "(real)", "busiest executor");
}

void PrintRun(const sim::RunResult& rr, double secs) {
  const sim::ScenarioRun& run = rr.run;
  const sim::ClusterSimResult& r = rr.result;
  if (!r.ok) {
    std::printf("%-10s %-10s %7u FAILED: %s\n", run.series.c_str(), run.design.c_str(), run.load, r.failure.c_str());
    return;
  }
  if (r.perf.log_full) {
    std::printf("%-10s %-10s %7u FAILED: a node's log filled (no cleaner runs in the simulation): the window "
                "measured a stall; shorten --measure\n",
                run.series.c_str(), run.design.c_str(), run.load);
    return;
  }
  const sim::PerfResult& q = r.perf;
  // A kind the workload has none of shows as "-".
  auto us = [](runtime::Nanos t) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(t) / 1e3);
    return t > 0 ? std::string(buf) : std::string("-");
  };
  std::printf("%-10s %-10s %7u %12s %12s %8s %9s %9s %8s %6.1fs  %s %.0f%%\n", run.series.c_str(), run.design.c_str(),
              run.load, Scaled(q.ops_per_sec).c_str(), Scaled(q.ops_per_sec / run.options.nodes).c_str(),
              us(q.p50).c_str(), us(q.read_p50).c_str(), us(q.write_p50).c_str(), us(q.p99).c_str(), secs,
              q.busiest.c_str(), 100 * q.busiest_share);
  // A pool design's one-sided operations to the pool per operation: what
  // its caches save (DINOMO §5.2 reports these).
  if (!run.options.pool_design.empty()) std::printf("%57s %.2f round trips to the pool per op\n", "", q.pool_round_trips);
  // A chain design's CPU per insert over its nodes (the paper's metric),
  // and what of it its engines' flushes and compactions took.
  if (!run.options.chain_design.empty() && q.node_cpu > 0) {
    const double background = sim::BackgroundCpu(q);
    std::printf("%57s node CPU %.2f us per op (%s ops per core-s): requests and chain %.2f, engines %.2f, of "
                "which flush + compaction %.2f (%.1f%%); writes put off %.3f per op\n",
                "", q.node_cpu / 1e3, Scaled(1e9 / q.node_cpu).c_str(), q.worker_cpu / 1e3, q.jobs_cpu / 1e3,
                background / 1e3, 100 * background / q.node_cpu, q.refused);
  }
}

// Each series at a glance, whether or not the paper gives a number for it.
void PrintSeriesSummary(const std::vector<sim::RunResult>& results) {
  std::printf("\n%-10s %-10s %14s %14s %16s %10s\n", "series", "design", "peak ops/s", "per server",
              "light PUT p50 us", "scaling");
  std::vector<std::pair<std::string, std::string>> seen;
  for (const sim::RunResult& rr : results) {
    const std::pair<std::string, std::string> key{rr.run.series, rr.run.design};
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    std::vector<const sim::RunResult*> series;
    for (const sim::RunResult& x : results) {
      if (x.run.series == key.first && x.run.design == key.second) series.push_back(&x);
    }
    double peak = 0, per_server = 0, light = 0, scaling = 0;
    if (!sim::SeriesMetric(sim::Metric::kPeakOps, series, {}, &peak)) continue;  // a failed run
    sim::SeriesMetric(sim::Metric::kPeakOpsPerServer, series, {}, &per_server);
    sim::SeriesMetric(sim::Metric::kWriteP50Light, series, {}, &light);
    sim::SeriesMetric(sim::Metric::kScaling, series, {}, &scaling);
    char lat[24] = "-";
    if (light > 0) std::snprintf(lat, sizeof lat, "%.1f", light);
    std::printf("%-10s %-10s %14s %14s %16s %9.2fx\n", key.first.c_str(), key.second.c_str(), Scaled(peak).c_str(),
                Scaled(per_server).c_str(), lat, scaling);
  }
}

nlohmann::json ScenarioJson(const sim::Scenario& s, const std::string& path, const std::vector<sim::RunResult>& results,
                            const std::vector<sim::Comparison>& cmp) {
  nlohmann::json doc;
  doc["scenario"] = s.name;
  doc["figure"] = s.figure;
  doc["model"] = path;
  doc["notes"] = s.notes;
  doc["runs"] = nlohmann::json::array();
  for (const sim::RunResult& rr : results) {
    const sim::PerfResult& q = rr.result.perf;
    nlohmann::json j = {{"series", rr.run.series},
                        {"design", rr.run.design},
                        {"in_flight", rr.run.load},
                        {"client_threads", rr.run.options.clients},
                        {"ok", rr.result.ok},
                        {"failure", rr.result.failure}};
    if (rr.result.ok) {
      j["ops_per_sec"] = q.ops_per_sec;
      j["errors"] = q.errors;
      j["log_full"] = q.log_full;
      j["min_free_segments"] = q.min_free_segments;
      j["ops_per_sec_per_server"] = q.ops_per_sec / rr.run.options.nodes;
      j["p50_us"] = static_cast<double>(q.p50) / 1e3;
      j["p99_us"] = static_cast<double>(q.p99) / 1e3;
      j["read_p50_us"] = static_cast<double>(q.read_p50) / 1e3;
      j["write_p50_us"] = static_cast<double>(q.write_p50) / 1e3;
      j["busiest"] = {{"executor", q.busiest}, {"share", q.busiest_share}};
      j["cpu_us"] = {{"client", q.client_cpu / 1e3},
                     {"worker", q.worker_cpu / 1e3},
                     {"nic", q.nic_cpu / 1e3},
                     {"digest", q.digest_cpu / 1e3},
                     {"pool", q.pool_cpu / 1e3}};
      if (!rr.run.options.pool_design.empty()) j["pool_round_trips"] = q.pool_round_trips;
      // Each input's CPU per operation (us), those charged at all.
      j["inputs_us"] = nlohmann::json::object();
      for (size_t i = 0; i < runtime::kCostCount; ++i) {
        if (q.cpu_per_op[i] > 0) j["inputs_us"][std::string(runtime::CostName(static_cast<runtime::Cost>(i)))] = q.cpu_per_op[i] / 1e3;
      }
      if (!rr.run.options.chain_design.empty()) {
        j["node_cpu_us"] = q.node_cpu / 1e3;
        j["cpu_us"]["engine_jobs"] = q.jobs_cpu / 1e3;
        j["refused_per_op"] = q.refused;
      }
    }
    doc["runs"].push_back(j);
  }
  doc["comparisons"] = nlohmann::json::array();
  for (const sim::Comparison& c : cmp) {
    nlohmann::json j = {{"series", c.series},
                        {"design", c.design},
                        {"baseline", c.baseline},
                        {"metric", sim::MetricName(c.metric)},
                        {"paper_low", c.paper_low},
                        {"paper_high", c.paper_high},
                        {"source", c.source}};
    j["simulated"] = c.has_simulated ? nlohmann::json(c.simulated) : nlohmann::json(nullptr);
    doc["comparisons"].push_back(j);
  }
  return doc;
}

// Runs a paper's testbed scenario and sets it beside the paper's numbers.
int RunScenario(const SimCommandOptions& o, const sim::Scenario& s) {
  if (!s.runs) {
    std::fprintf(stderr, "slip sim: %s (%s) cannot run in performance mode: %s\n", s.name.c_str(), s.figure.c_str(),
                 s.unsupported.c_str());
    for (const sim::Comparison& c : sim::Compare(s, {})) std::fprintf(stderr, "%s\n", DescribeComparison(c).c_str());
    return 2;
  }
  if (!o.this_machine_options_given.empty()) {
    std::string given;
    for (const std::string& g : o.this_machine_options_given) given += (given.empty() ? "" : ", ") + g;
    std::fprintf(stderr, "slip sim: %s takes its cluster, workload and load from the paper; %s shape --perf "
                 "this-machine or a fault campaign, not a scenario (it takes --only, --model, --measure, --shared-keys, --seed, "
                 "--json)\n",
                 s.name.c_str(), given.c_str());
    return 2;
  }
  // The scenario's own testbed unless --model names another.
  const std::string path = o.model_given ? o.model : s.model;
  auto model = sim::LoadMachineModel(path);
  if (!model.ok()) {
    std::fprintf(stderr, "slip sim: %s%s\n", model.status().ToString().c_str(),
                 o.model_given ? "" : " (a scenario's testbed file is relative to the repository: run from its root, "
                                      "or name the file with --model)");
    return 2;
  }
  if (!ApplyInputs(o, *model)) return 2;
  auto built = s.runs(*model, o.seed >= 0 ? static_cast<uint64_t>(o.seed) : 1);
  if (!built.ok()) {
    std::fprintf(stderr, "slip sim: %s: %s\n", path.c_str(), built.status().ToString().c_str());
    return 2;
  }
  auto only = OnlyDesigns(std::move(*built), o.only);
  if (!only.ok()) {
    std::fprintf(stderr, "slip sim: %s: %s\n", s.name.c_str(), only.status().message().c_str());
    return 2;
  }
  std::vector<sim::ScenarioRun> runs = std::move(*only);
  // --measure given: that window in place of the scenario's own (to check
  // that a longer one changes nothing).
  if (o.measure_given) {
    for (auto& r : runs) {
      if (!r.options.chain_design.empty()) {
        std::fprintf(stderr, "slip sim: --measure: %s measures each load whole (sim/chain_perf.h), not a window\n",
                     s.name.c_str());
        return 2;
      }
      r.options.perf->measure = static_cast<runtime::Nanos>(o.measure_s * 1e9);
    }
  }
  if (o.shared_keys_given) {
    if (o.shared_keys < -1) {
      std::fprintf(stderr, "slip sim: --shared-keys takes -1 (a thread's share decides) or a count of keys\n");
      return 2;
    }
    bool pool = false;
    for (auto& r : runs) {
      if (r.options.pool_design.empty()) continue;
      r.options.pool_shared_keys = o.shared_keys;
      pool = true;
    }
    if (!pool) {
      std::fprintf(stderr, "slip sim: --shared-keys applies to DINOMO's designs; %s runs none\n", s.name.c_str());
      return 2;
    }
  }
  logging::SetLevel(logging::Level::kError);
  if (!o.json) {
    PrintScenarioHeader(s, path, *model, *runs.front().options.perf);
    std::fflush(stdout);
  }
  std::vector<sim::RunResult> results;
  int failed = 0;
  for (sim::ScenarioRun& run : runs) {
    const auto t0 = std::chrono::steady_clock::now();
    sim::ClusterSimResult result = sim::RunClusterSim(run.options);
    results.push_back({std::move(run), std::move(result)});
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const sim::ClusterSimResult& r = results.back().result;
    if (!r.ok || r.perf.log_full) ++failed;
    if (!o.json) {
      PrintRun(results.back(), secs);
      std::fflush(stdout);  // long scenarios show their progress
    }
  }
  const std::vector<sim::Comparison> cmp = sim::Compare(s, results);
  if (o.json) {
    std::printf("%s\n", ScenarioJson(s, path, results, cmp).dump().c_str());
    return failed == 0 ? 0 : 1;
  }
  PrintSeriesSummary(results);
  std::printf("\nthe paper beside the simulation (ratios: the first design's advantage over the second):\n");
  for (const sim::Comparison& c : cmp) std::printf("%s\n", DescribeComparison(c).c_str());
  return failed == 0 ? 0 : 1;
}

// The erda family's clients' one-sided and fallen-back operations, on one
// line after `label`; nothing for a design without direct access.
void PrintDirect(const char* label, const client::ErdaPath::Stats& d) {
  if (d.gets + d.puts == 0) return;
  std::printf("%s: %llu of %llu GETs one-sided (%llu fell back), %llu of %llu PUTs written one-sidedly "
              "(%llu fell back), %llu grants\n",
              label, static_cast<unsigned long long>(d.one_sided_gets), static_cast<unsigned long long>(d.gets),
              static_cast<unsigned long long>(d.fallback_gets), static_cast<unsigned long long>(d.one_sided_puts),
              static_cast<unsigned long long>(d.puts), static_cast<unsigned long long>(d.fallback_puts),
              static_cast<unsigned long long>(d.grants));
}

}  // namespace

// A performance run on the cost model (docs/model.md).
int RunPerfCommand(const SimCommandOptions& o) {
  if (o.perf == "list") return ListScenarios();
  if (o.measure_given && !(o.measure_s >= 1e-6)) {
    std::fprintf(stderr, "slip sim: --measure must be at least a virtual microsecond (in seconds: 1e-6), not %g\n",
                 o.measure_s);
    return 2;
  }
  if (const sim::Scenario* s = sim::FindScenario(o.perf)) return RunScenario(o, *s);
  auto protocol = replication::ParseDesign(o.design);
  if (!protocol.ok()) {
    std::fprintf(stderr, "slip sim: %s\n", protocol.status().ToString().c_str());
    return 2;
  }
  if (o.perf != "this-machine") {
    std::fprintf(stderr, "slip sim: --perf knows %s (and list), not '%s'\n", ScenarioNames().c_str(), o.perf.c_str());
    return 2;
  }
  if (o.shared_keys_given) {
    std::fprintf(stderr, "slip sim: --shared-keys applies to DINOMO's designs, which this-machine does not run\n");
    return 2;
  }
  if (o.depth == 0) {
    std::fprintf(stderr, "slip sim: --depth must be at least 1\n");
    return 2;
  }
  if (o.depth > 1 && o.threads != 1) {
    std::fprintf(stderr, "slip sim: --depth N (N > 1) runs one asynchronous application: give --threads 1\n");
    return 2;
  }
  auto model = sim::LoadMachineModel(o.model);
  if (!model.ok()) {
    std::fprintf(stderr, "slip sim: %s (bench/model/model_calibrate writes one)\n", model.status().ToString().c_str());
    return 2;
  }
  if (!ApplyInputs(o, *model)) return 2;
  auto w = ycsb::StandardWorkload(o.workload);
  if (!w.ok()) {
    std::fprintf(stderr, "slip sim: %s\n", w.status().ToString().c_str());
    return 2;
  }
  sim::PerfOptions p = sim::ThisMachine(*model, o.cores);
  p.workload = *w;
  p.workload.records = o.records;
  p.workload.sizes.value_bytes = o.value_size;
  p.threads_per_client = o.depth > 1 ? o.depth : o.threads;
  p.sync_clients = o.depth == 1;
  p.measure = static_cast<runtime::Nanos>(o.measure_s * 1e9);
  p.warmup = p.measure / 5;
  sim::ClusterSimOptions co;
  co.seed = o.seed >= 0 ? static_cast<uint64_t>(o.seed) : 1;
  co.protocol = *protocol;
  co.nodes = o.nodes;
  co.replication = o.replication;
  co.shards = o.shards;
  co.workers = o.workers;
  co.digest_executors = o.digest_executors;
  co.clients = 1;
  co.perf = p;
  const auto t0 = std::chrono::steady_clock::now();
  const sim::ClusterSimResult r = sim::RunClusterSim(co);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok) {
    std::fprintf(stderr, "slip sim: %s\n", r.failure.c_str());
    return 1;
  }
  // Spin before parks per operation, by role (us): part of the role's CPU.
  auto spin = [&r](sim::PerfResult::Role k) { return r.perf.spin_per_op_by_role[k] / 1e3; };
  // Fabric messages sent per operation, by role: a real run's "rpc sends".
  auto messages = [&r](sim::PerfResult::Role k) {
    return r.perf.steps_per_op_by_role[k][static_cast<size_t>(runtime::Cost::kMessageSend)];
  };
  if (o.json) {
    std::printf("{\"design\":\"%s\",\"threads\":%u,\"depth\":%u,\"ops_per_sec\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
                "\"read_p50_us\":%.1f,\"write_p50_us\":%.1f,\"busy\":%.3f,"
                "\"cpu_us\":{\"client\":%.2f,\"worker\":%.2f,\"nic\":%.2f,\"digest\":%.2f},"
                "\"spin_us\":{\"client\":%.2f,\"worker\":%.2f,\"nic\":%.2f},"
                "\"parks\":{\"client\":%.3f,\"app\":%.3f,\"worker\":%.3f,\"nic\":%.3f},"
                "\"preemptions\":{\"client\":%.3f,\"app\":%.3f,\"worker\":%.3f,\"nic\":%.3f},"
                "\"messages\":{\"client\":%.3f,\"worker\":%.3f,\"nic\":%.3f},\"log_full\":%s}\n",
                o.design.c_str(), o.threads, o.depth, r.perf.ops_per_sec, static_cast<double>(r.perf.p50) / 1e3,
                static_cast<double>(r.perf.p99) / 1e3, static_cast<double>(r.perf.read_p50) / 1e3,
                static_cast<double>(r.perf.write_p50) / 1e3, r.perf.host_busy.empty() ? 0.0 : r.perf.host_busy[0],
                r.perf.client_cpu / 1e3, r.perf.worker_cpu / 1e3, r.perf.nic_cpu / 1e3, r.perf.digest_cpu / 1e3,
                spin(sim::PerfResult::kClient), spin(sim::PerfResult::kWorker), spin(sim::PerfResult::kNic),
                r.perf.client_parks, r.perf.app_parks, r.perf.worker_parks, r.perf.nic_parks,
                r.perf.client_preemptions, r.perf.app_preemptions, r.perf.worker_preemptions,
                r.perf.nic_preemptions, messages(sim::PerfResult::kClient), messages(sim::PerfResult::kWorker),
                messages(sim::PerfResult::kNic), r.perf.log_full ? "true" : "false");
    return 0;
  }
  std::printf("%s on this-machine (%u cores, %s model %s), YCSB-%s, %u records of %u B, %u threads%s: "
              "%.0f ops/s, p50 %.1f us, p99 %.1f us, host busy %.0f%% (%llu ops in %.2f virtual s; %.1f s to simulate)\n",
              o.design.c_str(), o.cores, model->provider.c_str(), o.model.c_str(), o.workload.c_str(), o.records,
              o.value_size, o.threads,
              o.depth > 1 ? (" x " + std::to_string(o.depth) + " in flight (asynchronous)").c_str() : "",
              r.perf.ops_per_sec, static_cast<double>(r.perf.p50) / 1e3,
              static_cast<double>(r.perf.p99) / 1e3, 100 * (r.perf.host_busy.empty() ? 0.0 : r.perf.host_busy[0]),
              static_cast<unsigned long long>(r.perf.ops), o.measure_s, secs);
  std::printf("p50 by kind: reads %.1f us, writes %.1f us\n", static_cast<double>(r.perf.read_p50) / 1e3,
              static_cast<double>(r.perf.write_p50) / 1e3);
  if (r.perf.log_full) {
    std::printf("warning: a node's log filled during the window (the simulated nodes run no cleaner): it measured "
                "a stall; shorten --measure or load more --records\n");
  }
  std::printf("CPU per operation by role (virtual us): client %.2f, worker %.2f, nic %.2f, digest %.2f "
              "(of it spinning before parks: client %.2f, worker %.2f, nic %.2f)\n",
              r.perf.client_cpu / 1e3, r.perf.worker_cpu / 1e3, r.perf.nic_cpu / 1e3, r.perf.digest_cpu / 1e3,
              spin(sim::PerfResult::kClient), spin(sim::PerfResult::kWorker), spin(sim::PerfResult::kNic));
  std::printf("parks per operation: client %.2f, application threads %.2f, workers %.2f, nics %.2f\n",
              r.perf.client_parks, r.perf.app_parks, r.perf.worker_parks, r.perf.nic_parks);
  std::printf("preemptions per operation: client %.2f, application threads %.2f, workers %.2f, nics %.2f\n",
              r.perf.client_preemptions, r.perf.app_preemptions, r.perf.worker_preemptions,
              r.perf.nic_preemptions);
  {
    // The same by the thread that took the core, most first. For a real
    // run bench/model/sched-summary.py lists these as shares of its
    // involuntary switches: times its switches per operation to compare.
    static constexpr const char* kThreadNames[] = {"client", "application thread", "worker", "nic", "digest"};
    static_assert(std::size(kThreadNames) == sim::PerfResult::kThreads);
    std::vector<std::pair<double, std::string>> pairs;
    for (size_t a = 0; a < sim::PerfResult::kThreads; ++a) {
      for (size_t b = 0; b < sim::PerfResult::kThreads; ++b) {
        const double v = r.perf.preemptions_by[a][b];
        if (v >= 0.005) pairs.emplace_back(v, std::string(kThreadNames[a]) + " by " + kThreadNames[b]);
      }
    }
    std::sort(pairs.begin(), pairs.end(), [](const auto& x, const auto& y) {
      return x.first != y.first ? x.first > y.first : x.second < y.second;
    });
    std::string line;
    for (const auto& [v, who] : pairs) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "%s%s %.2f", line.empty() ? "" : ", ", who.c_str(), v);
      line += buf;
    }
    std::printf("preempted by (per operation): %s\n", line.empty() ? "none" : line.c_str());
  }
  std::printf("fabric messages sent per operation: client %.2f, workers %.2f, nics %.2f\n",
              messages(sim::PerfResult::kClient), messages(sim::PerfResult::kWorker), messages(sim::PerfResult::kNic));
  std::printf("CPU per operation by input (virtual ns), in all and by role:\n");
  std::printf("  %-18s %9s %8s %8s %8s %8s\n", "", "all", "client", "worker", "nic", "digest");
  for (size_t i = 0; i < runtime::kCostCount; ++i) {
    if (r.perf.cpu_per_op[i] <= 0) continue;
    std::printf("  %-18s %9.0f", std::string(runtime::CostName(static_cast<runtime::Cost>(i))).c_str(),
                r.perf.cpu_per_op[i]);
    for (const auto& role : r.perf.cpu_per_op_by_role) std::printf(" %8.0f", role[i]);
    std::printf("\n");
  }
  // Over the whole run (the load and warm-up too): a GET that falls back
  // costs a worker a two-sided call on top of its READs.
  PrintDirect("direct access (whole run)", r.direct);
  return 0;
}

int RunSimCommand(const SimCommandOptions& o) {
  if (!o.perf.empty()) return RunPerfCommand(o);
  // Designs whose campaigns are programs of their own (their nodes are not
  // the store's NodeCore).
  if (cluster::UsesPool(o.design)) {
    std::fprintf(stderr,
                 "slip sim: %s's campaigns are build/src/sim/dinomo_cluster_sim_test, dinomo_shared_sim_test and "
                 "clover_sim_test\n",
                 o.design.c_str());
    return 2;
  }
  uint64_t first = 0, last = 0;
  if (o.seed >= 0) {
    first = last = static_cast<uint64_t>(o.seed);
  } else {
    const auto dots = o.seeds.find("..");
    char* end = nullptr;
    first = std::strtoull(o.seeds.c_str(), &end, 10);
    last = dots == std::string::npos ? first : std::strtoull(o.seeds.c_str() + dots + 2, &end, 10);
    if (dots == std::string::npos || last < first || *end != '\0') {
      std::fprintf(stderr, "slip sim: --seeds wants A..B with A <= B, got '%s'\n", o.seeds.c_str());
      return 2;
    }
  }
  if (cluster::UsesChain(o.design)) return RunRubbleCampaigns(o, first, last);
  auto protocol = replication::ParseDesign(o.design);
  if (!protocol.ok()) {
    std::fprintf(stderr, "slip sim: %s\n", protocol.status().ToString().c_str());
    return 2;
  }
  if (o.layer == "replication") {
    if (!replication::IsOneSided(*protocol)) {
      std::fprintf(stderr, "slip sim: --layer replication is for the one-sided designs; rpc-kv runs as a cluster\n");
      return 2;
    }
    return RunReplicationCampaign(o, *protocol, first, last);
  }
  if (o.layer != "cluster") {
    std::fprintf(stderr, "slip sim: --layer is cluster or replication, not '%s'\n", o.layer.c_str());
    return 2;
  }
  if (!o.bug.empty() && o.bug != "ack-before-replication" && o.bug != "no-lease") {
    std::fprintf(stderr, "slip sim: unknown --bug '%s' (ack-before-replication, no-lease)\n", o.bug.c_str());
    return 2;
  }
  if (o.replication == 0 || o.replication > o.nodes || o.shards == 0 || o.clients == 0 || o.keys == 0 ||
      o.workers == 0 || o.workers > 32 || o.digest_executors == 0 || o.digest_executors > 16) {
    std::fprintf(stderr,
                 "slip sim: need 1 <= replication <= nodes, 1 <= workers <= 32, 1 <= digest executors <= 16 and "
                 "positive shards, clients, keys\n");
    return 2;
  }
  // The nodes' own lines (hand-overs, copies) with --trace only.
  logging::SetLevel(o.trace ? logging::Level::kInfo : logging::Level::kError);
  uint64_t ops = 0, unknown = 0, faults = 0, failovers = 0, failed = 0, unchecked = 0;
  uint64_t moves_started = 0, moves_done = 0, moves_failed = 0, move_fetches = 0, move_copied = 0;
  uint64_t promotions = 0, with_floor = 0, moved = 0, records = 0;
  client::ErdaPath::Stats direct;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t seed = first; seed <= last; ++seed) {
    sim::ClusterSimOptions so;
    so.seed = seed;
    so.protocol = *protocol;
    so.persist_delay_ns = static_cast<int64_t>(o.persist_delay_ns);
    so.nodes = o.nodes;
    so.replication = o.replication;
    so.shards = o.shards;
    so.clients = o.clients;
    so.keys = o.keys;
    so.ops_per_client = o.ops;
    so.crashes = o.crashes;
    so.drop_probability = o.drop;
    so.trace = o.trace;
    so.cold_start = o.cold_start;
    so.conditional_puts = !o.no_conditional;
    so.failover_crashes = o.failover_crashes;
    so.crash_in_cold_start = o.crash_in_cold_start;
    so.commit_interval_us = o.commit_interval_us;
    so.partitions = o.partitions;
    so.slow_nodes = o.slow_nodes;
    so.workers = o.workers;
    so.digest_executors = o.digest_executors;
    so.migrations = o.migrations;
    so.migration_faults = o.migration_faults;
    so.bug_ack_before_replication = o.bug == "ack-before-replication";
    so.bug_no_lease = o.bug == "no-lease";
    auto r = sim::RunClusterSim(so);
    ops += r.operations;
    unknown += r.unknown_outcomes;
    faults += r.faults;
    failovers += r.failovers;
    unchecked += r.check.unchecked_keys;
    promotions += r.promotions;
    with_floor += r.promotions_with_floor;
    moved += r.promotion_entries;
    records += r.commit_records;
    moves_started += r.migrations_started;
    moves_done += r.migrations_done;
    moves_failed += r.migrations_failed;
    move_fetches += r.migration_fetches;
    move_copied += r.migration_copied;
    direct += r.direct;
    if (!r.ok) {
      ++failed;
      std::printf("seed %llu FAILED: %s\n  replay: slip sim --design %s --seed %llu --trace%s\n",
                  static_cast<unsigned long long>(seed), r.failure.c_str(), o.design.c_str(),
                  static_cast<unsigned long long>(seed), ReplayFlags(o).c_str());
    } else if (first == last) {
      std::printf("seed %llu ok: %llu operations, trace %016llx, %.3f s virtual\n",
                  static_cast<unsigned long long>(seed), static_cast<unsigned long long>(r.operations),
                  static_cast<unsigned long long>(r.trace_hash), static_cast<double>(r.virtual_ns) / 1e9);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t seeds = last - first + 1;
  std::printf("design %s: %llu seeds, %llu operations (%llu with unknown outcome), %llu crashes, "
              "%llu failovers, %llu violations, %llu keys unchecked (budget), %.1f seeds/s\n",
              o.design.c_str(), static_cast<unsigned long long>(seeds),
              static_cast<unsigned long long>(ops), static_cast<unsigned long long>(unknown),
              static_cast<unsigned long long>(faults), static_cast<unsigned long long>(failovers),
              static_cast<unsigned long long>(failed), static_cast<unsigned long long>(unchecked),
              static_cast<double>(seeds) / secs);
  std::printf("  %llu promotions (%llu above a CommitVer), %.1f entries moved per promotion, %llu CommitVer records\n",
              static_cast<unsigned long long>(promotions), static_cast<unsigned long long>(with_floor),
              promotions ? static_cast<double>(moved) / static_cast<double>(promotions) : 0.0,
              static_cast<unsigned long long>(records));
  if (moves_started > 0) {
    std::printf("  %llu shard moves: %llu finished, %llu ended by a failure (rolled back); %llu entries copied, "
                "%llu keys fetched from a source on a miss\n",
                static_cast<unsigned long long>(moves_started), static_cast<unsigned long long>(moves_done),
                static_cast<unsigned long long>(moves_failed), static_cast<unsigned long long>(move_copied),
                static_cast<unsigned long long>(move_fetches));
  }
  PrintDirect("  direct access", direct);
  return failed ? 1 : 0;
}

}  // namespace slip::cli
