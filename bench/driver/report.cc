#include "bench/driver/report.h"

#include <fstream>
#include <string>
#include <thread>

namespace slip::bench {
namespace {

using nlohmann::json;

json Opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

double Us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

json Latency(const Histogram& h) {
  if (h.count() == 0) return nullptr;
  return json{{"p50", Us(h.Percentile(0.50))},  {"p90", Us(h.Percentile(0.90))},
              {"p99", Us(h.Percentile(0.99))},  {"p999", Us(h.Percentile(0.999))},
              {"max", Us(h.max())}};
}

std::string Fmt(const std::optional<double>& v, const char* fmt = "%.2f") {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, *v);
  return buf;
}

}  // namespace

std::string HostDescription() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  }
  std::string d = model + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores, gcc " +
                  std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__);
#ifdef NDEBUG
  d += ", assertions off";
#else
  d += ", ASSERTIONS ON (debug build)";
#endif
  return d;
}

const std::vector<const char*>& ReportFields() {
  static const std::vector<const char*> f = {
      "design", "durability", "workload", "parameters", "throughput_ops", "latency_us", "cpu_us_per_op",
      "rtts_per_op", "fabric_bytes_per_op", "pm_bytes_per_op", "dlwa", "rpc_sends_per_op", "host_cpu"};
  return f;
}

const std::vector<const char*>& CpuRoles() {
  static const std::vector<const char*> r = {"worker", "backup_worker", "nic",  "control",
                                             "digest", "clean",         "pool", "client"};
  return r;
}

json ReportJson(const RunReport& r) {
  const DriverOptions& o = r.options;
  const ycsb::WorkloadSpec& w = o.workload;
  json params = {
      {"target", r.target_description},
      {"host", HostDescription()},
      {"threads", o.threads},
      {"depth", o.depth},
      {"seconds", o.seconds},
      {"warmup_seconds", o.warmup},
      {"mode", o.rate > 0 ? "open" : "closed"},
      {"rate_per_thread", o.rate > 0 ? json(o.rate) : json(nullptr)},
      {"records", w.records},
      {"distribution", ycsb::DistributionName(w.distribution)},
      {"theta", w.theta},
      {"sizes", w.sizes.name},
      {"key_bytes", w.sizes.key_bytes ? json(w.sizes.key_bytes) : json("ycsb")},
      {"value_bytes", w.sizes.value_bytes},
      {"mix", {{"read", w.read}, {"update", w.update}, {"insert", w.insert}, {"scan", w.scan}, {"rmw", w.rmw}}},
      {"seed", o.seed},
  };
  json lat = json::object();
  for (int i = 0; i < kNumOpTypes; ++i)
    lat[ycsb::OpTypeName(static_cast<ycsb::OpType>(i))] = Latency(r.latency_ns[i]);
  const RoleCpu& c = r.cpu_us_per_op;
  json cpu = {{"worker", Opt(c.worker)}, {"backup_worker", Opt(c.backup_worker)},
              {"nic", Opt(c.nic)},       {"control", Opt(c.control)},
              {"digest", Opt(c.digest)}, {"clean", Opt(c.clean)},
              {"pool", Opt(c.pool)},     {"client", r.client_cpu_us_per_op()}};
  return json{{"design", r.design},
              {"durability", r.durability},
              {"workload", w.name},
              {"parameters", params},
              {"throughput_ops", r.throughput_ops},
              {"latency_us", lat},
              {"cpu_us_per_op", cpu},
              {"rtts_per_op", Opt(r.rtts_per_op)},
              {"fabric_bytes_per_op", Opt(r.fabric_bytes_per_op)},
              {"pm_bytes_per_op", Opt(r.pm_bytes_per_op)},
              {"dlwa", Opt(r.dlwa)},
              {"rpc_sends_per_op", r.rpc_sends_per_op ? json{{"client_frames", r.rpc_sends_per_op->client_frames},
                                                             {"client_messages", r.rpc_sends_per_op->client_messages},
                                                             {"server_frames", r.rpc_sends_per_op->server_frames},
                                                             {"server_messages", r.rpc_sends_per_op->server_messages}}
                                                      : json(nullptr)},
              {"host_cpu", r.host_cpu ? json{{"busy", r.host_cpu->busy},
                                             {"softirq", r.host_cpu->softirq},
                                             {"idle", r.host_cpu->idle},
                                             {"steal", r.host_cpu->steal}}
                                      : json(nullptr)}};
}

void PrintSummary(std::FILE* out, const RunReport& r) {
  const DriverOptions& o = r.options;
  const std::string depth = o.depth > 1 ? " x " + std::to_string(o.depth) + " in flight" : "";
  std::fprintf(out, "%s: workload %s, %s, %u threads%s, %s loop%s, %.0f s (+%.0f s warm-up)\n",
               r.design.c_str(), r.options.workload.name.c_str(),
               ycsb::DistributionName(o.workload.distribution), o.threads, depth.c_str(), o.rate > 0 ? "open" : "closed",
               o.rate > 0 ? (" at " + std::to_string(static_cast<long long>(o.rate)) + " ops/s/thread").c_str() : "",
               o.seconds, o.warmup);
  std::fprintf(out, "  target      %s\n", r.target_description.c_str());
  std::fprintf(out, "  durability  %s\n", r.durability.c_str());
  std::fprintf(out, "  throughput  %12.0f ops/s  (%llu ops in %.2f s", r.throughput_ops,
               static_cast<unsigned long long>(r.ops), r.measured_seconds);
  if (r.not_found) std::fprintf(out, ", %llu reads not found", static_cast<unsigned long long>(r.not_found));
  if (r.errors)
    std::fprintf(out, ", %llu ERRORS, first: %s", static_cast<unsigned long long>(r.errors), r.first_error.c_str());
  std::fprintf(out, ")\n");
  std::fprintf(out, "  latency us       p50       p90       p99     p99.9       max         ops\n");
  for (int i = 0; i < kNumOpTypes; ++i) {
    const Histogram& h = r.latency_ns[i];
    if (h.count() == 0) continue;
    std::fprintf(out, "    %-8s %9.1f %9.1f %9.1f %9.1f %9.1f %11llu\n", ycsb::OpTypeName(static_cast<ycsb::OpType>(i)),
                 Us(h.Percentile(0.5)), Us(h.Percentile(0.9)), Us(h.Percentile(0.99)), Us(h.Percentile(0.999)),
                 Us(h.max()), static_cast<unsigned long long>(h.count()));
  }
  const RoleCpu& c = r.cpu_us_per_op;
  std::fprintf(out,
               "  cpu us/op   client %.2f  worker %s  backup %s  nic %s  control %s  digest %s  clean %s  pool %s\n",
               r.client_cpu_us_per_op(), Fmt(c.worker).c_str(), Fmt(c.backup_worker).c_str(), Fmt(c.nic).c_str(),
               Fmt(c.control).c_str(), Fmt(c.digest).c_str(), Fmt(c.clean).c_str(), Fmt(c.pool).c_str());
  if (r.host_cpu) {
    // The whole host, every process on it: idle cores (every thread
    // waiting) and a neighbour's steal show in no thread's clock above.
    std::fprintf(out, "  host cpu    busy %.1f%% (softirq %.1f%%)  idle %.1f%%  steal %.1f%%  of %u cores\n",
                 100 * r.host_cpu->busy, 100 * r.host_cpu->softirq, 100 * r.host_cpu->idle,
                 100 * r.host_cpu->steal, std::thread::hardware_concurrency());
  }
  std::fprintf(out, "  per op      rtts %s  fabric bytes %s  pm bytes %s  dlwa %s   (- = not measured)\n",
               Fmt(r.rtts_per_op).c_str(), Fmt(r.fabric_bytes_per_op, "%.1f").c_str(),
               Fmt(r.pm_bytes_per_op, "%.1f").c_str(), Fmt(r.dlwa).c_str());
  if (const auto& s = r.rpc_sends_per_op) {
    std::fprintf(out, "  rpc sends   client %.2f frames in %.2f messages  servers %.2f frames in %.2f messages  (per op)\n",
                 s->client_frames, s->client_messages, s->server_frames, s->server_messages);
  }
}

void PrintComparison(std::FILE* out, const std::vector<RunReport>& runs) {
  if (runs.empty()) return;
  const RunReport& base = runs.front();
  auto p99 = [](const RunReport& r) {
    // The op type with the most samples stands for the run.
    const Histogram* best = &r.latency_ns[0];
    for (auto& h : r.latency_ns)
      if (h.count() > best->count()) best = &h;
    return Us(best->Percentile(0.99));
  };
  auto p50 = [](const RunReport& r) {
    Histogram all;
    for (auto& h : r.latency_ns) all.Merge(h);
    return Us(all.Percentile(0.5));
  };
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  std::fprintf(out, "\ncomparison (workload %s; ratios relative to %s)\n", base.options.workload.name.c_str(),
               base.design.c_str());
  std::fprintf(out, "  %-14s %-10s %12s %7s %9s %7s %9s %7s %10s %7s\n", "target", "durability", "ops/s", "x",
               "p50 us", "x", "p99 us", "x", "client us", "x");
  for (const RunReport& r : runs) {
    std::fprintf(out, "  %-14s %-10s %12.0f %7.2f %9.1f %7.2f %9.1f %7.2f %10.2f %7.2f\n", r.design.c_str(),
                 r.durability.c_str(),
                 r.throughput_ops, ratio(r.throughput_ops, base.throughput_ops), p50(r), ratio(p50(r), p50(base)),
                 p99(r), ratio(p99(r), p99(base)), r.client_cpu_us_per_op(),
                 ratio(r.client_cpu_us_per_op(), base.client_cpu_us_per_op()));
  }
  std::fprintf(out, "  (p50 over all ops; p99 of the most frequent op type)\n");
  for (const RunReport& r : runs) {
    if (r.durability != base.durability) {
      std::fprintf(out, "  note: not one durability class (%s: %s, %s: %s); compare within a class only\n",
                   base.design.c_str(), base.durability.c_str(), r.design.c_str(), r.durability.c_str());
      break;
    }
  }
}

}  // namespace slip::bench
