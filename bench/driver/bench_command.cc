#include "bench/driver/bench_command.h"

#include <CLI/CLI.hpp>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <fstream>

#include "bench/driver/driver.h"
#include "bench/driver/report.h"
#include "bench/driver/targets.h"

namespace slip::bench {
namespace {

// SIGINT/SIGTERM end the current run cleanly, so servers are stopped and
// temp directories removed by the targets' destructors. The handler resets
// itself: a second signal kills at once (servers still die: PDEATHSIG).
std::atomic<bool> g_interrupted{false};
void OnSignal(int) { g_interrupted.store(true); }
void CatchSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::string Lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int BadArgs(const Status& s) {
  std::fprintf(stderr, "slip bench: %s\n", s.message().c_str());
  return 2;
}

Result<bench::DriverOptions> DriverOptionsFrom(const BenchCommandOptions& o) {
  SLIP_ASSIGN_OR_RETURN(ycsb::WorkloadSpec w, ycsb::StandardWorkload(o.workload));
  if (!o.distribution.empty()) {
    SLIP_ASSIGN_OR_RETURN(w.distribution, ycsb::ParseDistribution(o.distribution));
  }
  if (!(o.theta > 0 && o.theta < 1)) return Status::InvalidArgument("--theta must be in (0, 1)");
  w.theta = o.theta;
  if (o.records == 0) return Status::InvalidArgument("--records must be positive");
  w.records = o.records;
  SLIP_ASSIGN_OR_RETURN(w.sizes, ycsb::NamedSizes(o.sizes, o.value_size));
  if (o.threads == 0) return Status::InvalidArgument("--threads must be positive");
  if (!(o.seconds > 0)) return Status::InvalidArgument("--seconds must be positive");
  if (o.warmup < 0) return Status::InvalidArgument("--warmup must not be negative");
  if (o.rate < 0) return Status::InvalidArgument("--rate must not be negative");
  bench::DriverOptions d;
  d.workload = w;
  d.threads = o.threads;
  d.seconds = o.seconds;
  d.warmup = o.warmup;
  d.rate = o.rate;
  d.depth = o.depth;
  d.seed = o.seed;
  d.cancel = &g_interrupted;
  return d;
}

}  // namespace

void AddBenchCommand(CLI::App& app, BenchCommandOptions* o) {
  std::string names;
  for (auto& n : bench::TargetNames()) names += (names.empty() ? "" : " | ") + n;
  auto* b = app.add_subcommand("bench", "run a YCSB workload against a target and report its figures");
  b->add_option("--target", o->target, names)->capture_default_str();
  b->add_option("-w,--workload", o->workload, "load | a | b | c | d | e | f")->capture_default_str();
  b->add_option("--distribution", o->distribution, "uniform | zipfian | latest | zipfian-ranked (default: the workload's)");
  b->add_option("--theta", o->theta, "zipfian skew")->capture_default_str();
  b->add_option("-n,--records", o->records, "records loaded before the run")->capture_default_str();
  b->add_option("--sizes", o->sizes, "object sizes: fixed | zippydb | up2x | udb")->capture_default_str();
  b->add_option("--value-size", o->value_size, "value bytes with --sizes fixed")->capture_default_str();
  b->add_option("-t,--threads", o->threads, "client threads")->capture_default_str();
  b->add_option("-s,--seconds", o->seconds, "measured time")->capture_default_str();
  b->add_option("--warmup", o->warmup, "warm-up seconds (not measured)")->capture_default_str();
  b->add_option("--depth", o->depth, "closed loop: operations each thread keeps in flight (async client; 1: synchronous)")
      ->capture_default_str();
  b->add_option("--rate", o->rate, "open loop: ops/s per thread (0: closed loop, peak throughput)")
      ->capture_default_str();
  b->add_option("--json", o->json, "write the report as JSON to FILE");
  b->add_option("--seed", o->seed, "workload seed")->capture_default_str();
  b->add_option("--dir", o->dir, "rpc-kv: the cluster in DIR (default: start one); local: PM file in DIR; rocksdb: database in DIR (default: temp)");
  b->add_option("--region-mb", o->region_mb, "local: PM size")->capture_default_str();
  b->add_option("--pm-mb", o->pm_mb, "replicated designs: PM per node of the cluster it starts (large values need more)")
      ->capture_default_str();
  b->add_option("--provider", o->provider, "replicated designs: libfabric provider of the cluster it starts (tcp | shm)")
      ->capture_default_str();
  auto* c = b->add_subcommand("compare", "run several targets one after another; ratios to the first");
  c->add_option("--targets", o->targets, "comma-separated targets, the first is the baseline")
      ->delimiter(',')
      ->required();
  c->fallthrough();  // the workload options above apply after `compare` too
}

int RunBenchCommand(const BenchCommandOptions& o) {
  auto driver = DriverOptionsFrom(o);
  if (!driver.ok()) return BadArgs(driver.status());
  std::vector<std::string> targets = o.targets.empty() ? std::vector<std::string>{o.target} : o.targets;
  for (auto& t : targets) {
    t = Lower(t);
    if (!bench::IsTargetName(t)) {
      bench::TargetConfig unknown;
      unknown.name = t;
      return BadArgs(bench::MakeTarget(unknown).status());
    }
  }
#ifndef NDEBUG
  std::fprintf(stderr, "slip bench: WARNING: assertions are enabled (debug build); figures are not representative\n");
#endif
  std::printf("slip bench: %s\n", bench::HostDescription().c_str());

  CatchSignals();
  std::vector<bench::RunReport> runs;
  int exit_code = 0;
  for (const std::string& name : targets) {
    if (g_interrupted.load()) {
      std::fprintf(stderr, "slip bench: interrupted\n");
      return 1;
    }
    // One target at a time, destroyed (servers stopped) before the next.
    auto target = bench::MakeTarget({name, o.threads, o.dir, o.region_mb, o.provider, o.pm_mb});
    if (!target.ok()) {
      std::fprintf(stderr, "slip bench: target %s: %s\n", name.c_str(), target.status().ToString().c_str());
      exit_code = 1;
      continue;
    }
    auto r = bench::RunWorkload(**target, *driver);
    target->reset();
    if (!r.ok()) {
      std::fprintf(stderr, "slip bench: target %s: %s\n", name.c_str(), r.status().ToString().c_str());
      exit_code = 1;
      continue;
    }
    std::printf("\n");
    bench::PrintSummary(stdout, *r);
    std::fflush(stdout);
    if (r->errors) exit_code = 1;
    runs.push_back(std::move(r).value());
  }
  if (targets.size() > 1 && runs.size() > 1) bench::PrintComparison(stdout, runs);

  if (!o.json.empty() && !runs.empty()) {
    nlohmann::json out;
    if (o.targets.empty()) {
      out = bench::ReportJson(runs.front());
    } else {
      out = nlohmann::json::array();
      for (auto& r : runs) out.push_back(bench::ReportJson(r));
    }
    std::ofstream f(o.json);
    f << out.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "slip bench: cannot write %s\n", o.json.c_str());
      return 1;
    }
  }
  return exit_code;
}

}  // namespace slip::bench
