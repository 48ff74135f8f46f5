#include "cli/stats_command.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "cluster/config_access.h"
#include "metrics/metrics.h"
#include "slip/client.h"

namespace slip::cli {
namespace {

using nlohmann::json;

struct Snapshot {
  std::chrono::steady_clock::time_point at;
  std::map<uint32_t, json> stats;           // nodes that answered
  std::map<uint32_t, std::string> errors;   // nodes that did not
  std::string error;                        // the configuration could not be read
};

Snapshot Take(Client& c) {
  Snapshot s;
  auto answers = c.NodeStatsEach();
  s.at = std::chrono::steady_clock::now();
  if (!answers.ok()) {
    s.error = answers.status().ToString();
    return s;
  }
  for (auto& a : *answers) {
    if (a.node == Client::kPoolStatsId) continue;
    if (a.stats.ok()) {
      json j = json::parse(*a.stats, nullptr, false);
      if (!j.is_discarded()) s.stats[a.node] = std::move(j);
    } else {
      s.errors[a.node] = a.stats.status().ToString();
    }
  }
  return s;
}

// A number of a node's STATS, 0 when absent or not a number (a node of
// another version may differ).
double Get(const json& j, const char* k) {
  return j.is_object() && j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0;
}
double Ops(const json& j) { return Get(j, "puts") + Get(j, "gets") + Get(j, "dels") + Get(j, "writes"); }
double CpuNs(const json& j) {
  double t = 0;
  if (!j.contains("cpu_ns") || !j["cpu_ns"].is_object()) return 0;
  for (const auto& [role, ns] : j["cpu_ns"].items()) {
    // flush and compaction are in "clean" already (rubble).
    if (role != "flush" && role != "compaction" && ns.is_number()) t += ns.get<double>();
  }
  return t;
}
json Hist(const json& j, const char* op) {
  return j.contains("latency_ns") && j["latency_ns"].is_object() && j["latency_ns"].contains(op) ? j["latency_ns"][op]
                                                                                                 : json();
}
std::string Ms(double ns) {
  if (ns < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f", ns / 1e6);
  return b;
}

void Print(const Snapshot& before, const Snapshot& now, const cluster::VersionedConfig* config, const StatsOptions& o) {
  const double dt = std::chrono::duration<double>(now.at - before.at).count();
  if (!o.plain) std::printf("\x1b[H\x1b[2J");
  const std::time_t t = std::time(nullptr);
  char clock[16];
  std::strftime(clock, sizeof(clock), "%H:%M:%S", std::localtime(&t));
  std::printf("slip stats  %s  %s  term %llu  %s  (every %.1f s)\n", o.dir.c_str(),
              config ? config->config.design.c_str() : "?",
              static_cast<unsigned long long>(config ? config->config.term : 0), clock, o.interval_s);
  if (!now.error.empty()) std::printf("no node asked: %s\n", now.error.c_str());
  std::printf("%-8s %-6s %6s %7s %10s %9s %9s %17s %17s %6s %8s %9s\n", "node", "state", "term", "lease", "ops/s", "puts/s",
              "gets/s", "put p50/p99 ms", "get p50/p99 ms", "cpu%", "inflight", "keys");
  double total_ops = 0, total_puts = 0, total_gets = 0, total_cpu = 0;
  std::map<uint32_t, std::string> states;
  if (config) {
    for (const auto& [id, n] : config->config.nodes) states[id] = n.state == cluster::NodeState::kUp ? "up" : "down";
  }
  for (const auto& [id, e] : now.errors) states.try_emplace(id, "?");
  for (const auto& [id, s] : now.stats) states.try_emplace(id, "?");
  for (const auto& [id, state] : states) {
    auto it = now.stats.find(id);
    auto bt = before.stats.find(id);
    if (it == now.stats.end()) {
      auto e = now.errors.find(id);
      std::printf("node %-3u %-6s  no answer%s%s\n", id, state.c_str(), e != now.errors.end() ? ": " : "",
                  e != now.errors.end() ? e->second.c_str() : "");
      continue;
    }
    const json& s = it->second;
    const bool rate = bt != before.stats.end() && dt > 0;
    const json empty;
    const json& b = rate ? bt->second : empty;
    const double ops = rate ? (Ops(s) - Ops(b)) / dt : 0;
    const double puts = rate ? (Get(s, "puts") + Get(s, "writes") - Get(b, "puts") - Get(b, "writes")) / dt : 0;
    const double gets = rate ? (Get(s, "gets") - Get(b, "gets")) / dt : 0;
    const double cpu = rate ? 100 * (CpuNs(s) - CpuNs(b)) / 1e9 / dt : 0;
    total_ops += ops;
    total_puts += puts;
    total_gets += gets;
    total_cpu += cpu;
    const double term = s.contains("term") ? Get(s, "term") : Get(s, "serving_term");
    char lease[16] = "-";
    if (s.contains("lease_ms_left")) std::snprintf(lease, sizeof(lease), "%.1fs", Get(s, "lease_ms_left") / 1e3);
    const std::string put_q = Ms(metrics::QuantileBetween(rate ? Hist(b, "put") : json(), Hist(s, "put"), 0.5)) + "/" +
                              Ms(metrics::QuantileBetween(rate ? Hist(b, "put") : json(), Hist(s, "put"), 0.99));
    const std::string get_q = Ms(metrics::QuantileBetween(rate ? Hist(b, "get") : json(), Hist(s, "get"), 0.5)) + "/" +
                              Ms(metrics::QuantileBetween(rate ? Hist(b, "get") : json(), Hist(s, "get"), 0.99));
    const std::string inflight = s.contains("in_flight_writes") ? std::to_string(static_cast<uint64_t>(Get(s, "in_flight_writes"))) : "-";
    const std::string keys = s.contains("store") && s["store"].is_object()
                                 ? std::to_string(static_cast<uint64_t>(Get(s["store"], "keys")))
                                 : "-";
    std::printf("node %-3u %-6s %6.0f %7s %10.0f %9.0f %9.0f %17s %17s %6.0f %8s %9s\n", id, state.c_str(), term,
                lease, ops, puts, gets,
                put_q.c_str(), get_q.c_str(), cpu, inflight.c_str(), keys.c_str());
  }
  std::printf("%-8s %-6s %6s %7s %10.0f %9.0f %9.0f %17s %17s %6.0f\n", "total", "", "", "", total_ops, total_puts,
              total_gets, "", "", total_cpu);
  std::fflush(stdout);
}

}  // namespace

int RunStats(const StatsOptions& o) {
  auto client = Client::Open(ClientOptions{.dir = o.dir, .zookeeper = o.zookeeper, .provider = "",
                                           .deadline = std::chrono::seconds(5), .bind_address = "", .secret_file = o.secret_file});
  if (!client.ok()) {
    std::fprintf(stderr, "slip stats: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto store = cluster::OpenConfigStore(o.dir, o.zookeeper);
  if (!store.ok()) {
    std::fprintf(stderr, "slip stats: %s\n", store.status().ToString().c_str());
    return 1;
  }
  Snapshot before = Take(**client);
  for (uint32_t n = 0; o.count == 0 || n < o.count; ++n) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.interval_s));
    Snapshot now = Take(**client);
    auto config = (*store)->Load();
    Print(before, now, config.ok() ? &*config : nullptr, o);
    before = std::move(now);
  }
  return 0;
}

}  // namespace slip::cli
