#include "metrics/metrics.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace slip::metrics {
namespace {

using nlohmann::json;

std::string Number(double v) {
  char buf[64];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9.007199254740992e15) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.9g", v);
  }
  return buf;
}

std::string Sanitize(const std::string& s) {
  std::string r;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    r.push_back(ok ? c : '_');
  }
  return r;
}

std::string Escape(const std::string& v) {
  std::string r;
  for (char c : v) {
    if (c == '\\' || c == '"') r.push_back('\\');
    if (c == '\n') {
      r += "\\n";
      continue;
    }
    r.push_back(c);
  }
  return r;
}

// The families of one exposition, in the order first added.
class Writer {
 public:
  void Add(const std::string& name, const std::string& type, const std::string& help, const std::string& labels,
           double v) {
    Family& f = Get(name, type, help);
    f.lines += name + (labels.empty() ? "" : "{" + labels + "}") + " " + Number(v) + "\n";
  }
  // A histogram from HistogramJson, in seconds.
  void AddHistogram(const std::string& name, const std::string& help, const std::string& labels, const json& h) {
    if (!h.is_object() || !h.contains("buckets")) return;
    Family& f = Get(name, "histogram", help);
    const std::string sep = labels.empty() ? "" : labels + ",";
    for (const auto& b : h["buckets"]) {
      f.lines += name + "_bucket{" + sep + "le=\"" + Number(b[0].get<double>() / 1e9) + "\"} " +
                 Number(b[1].get<double>()) + "\n";
    }
    const double count = h.value("count", 0.0);
    f.lines += name + "_bucket{" + sep + "le=\"+Inf\"} " + Number(count) + "\n";
    const std::string l = labels.empty() ? "" : "{" + labels + "}";
    f.lines += name + "_sum" + l + " " + Number(h.value("sum_ns", 0.0) / 1e9) + "\n";
    f.lines += name + "_count" + l + " " + Number(count) + "\n";
  }
  std::string Text() const {
    std::string out;
    for (const std::string& name : order_) {
      const Family& f = families_.at(name);
      out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n" + f.lines;
    }
    return out;
  }

 private:
  struct Family {
    std::string type, help, lines;
  };
  Family& Get(const std::string& name, const std::string& type, const std::string& help) {
    auto [it, fresh] = families_.try_emplace(name);
    if (fresh) {
      it->second.type = type;
      it->second.help = help;
      order_.push_back(name);
    }
    return it->second;
  }
  std::map<std::string, Family> families_;
  std::vector<std::string> order_;
};

bool IsNumber(const json& v) { return v.is_number() || v.is_boolean(); }
double AsDouble(const json& v) { return v.is_boolean() ? (v.get<bool>() ? 1 : 0) : v.get<double>(); }

// Every number under `v` as a gauge named by its path.
void Flatten(Writer& w, const std::string& path, const json& v) {
  if (IsNumber(v)) {
    w.Add("slip_" + Sanitize(path), "gauge", "STATS field " + path, "", AsDouble(v));
  } else if (v.is_object()) {
    for (const auto& [k, x] : v.items()) Flatten(w, path + "_" + k, x);
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (IsNumber(v[i])) {
        w.Add("slip_" + Sanitize(path), "gauge", "STATS field " + path + ", by index", "index=\"" + std::to_string(i) + "\"",
              AsDouble(v[i]));
      }
    }
  }
}

}  // namespace

const std::vector<uint64_t>& LatencyBoundsNs() {
  static const std::vector<uint64_t> bounds = [] {
    std::vector<uint64_t> b;
    for (uint64_t decade = 10'000; decade <= 1'000'000'000; decade *= 10) {
      for (uint64_t m : {1, 2, 5}) b.push_back(decade * m);
    }
    b.push_back(10'000'000'000);
    return b;
  }();
  return bounds;
}

json HistogramJson(const Histogram& h) {
  json buckets = json::array();
  for (const uint64_t b : LatencyBoundsNs()) buckets.push_back({b, h.CountAtOrBelow(b)});
  return {{"count", h.count()}, {"sum_ns", h.sum()}, {"buckets", std::move(buckets)}};
}

std::string PrometheusText(const json& j, const std::vector<Series>& extra) {
  Writer w;
  std::set<std::string> done;
  auto has = [&](const char* k) { return j.is_object() && j.contains(k); };
  auto take = [&](const char* k) -> const json& {
    done.insert(k);
    return j.at(k);
  };
  if (has("node")) {
    const std::string design = has("design") && j["design"].is_string() ? j["design"].get<std::string>() : "";
    w.Add("slip_node_info", "gauge", "This node's id and design (always 1)",
          "node=\"" + Number(AsDouble(take("node"))) + "\",design=\"" + Escape(design) + "\"", 1);
    done.insert("design");
  }
  if (has("cpu_ns") && j["cpu_ns"].is_object()) {
    for (const auto& [role, ns] : take("cpu_ns").items()) {
      if (!IsNumber(ns)) continue;
      if (role == "flush" || role == "compaction") {
        // RubbleDB's: parts of "clean", not roles of their own (a sum over
        // roles must not count them twice).
        w.Add("slip_lsm_cpu_seconds_total", "counter", "CPU time of the LSM's background work (within role=\"clean\")",
              "work=\"" + Escape(role) + "\"", AsDouble(ns) / 1e9);
        continue;
      }
      w.Add("slip_cpu_seconds_total", "counter", "CPU time of this node's threads by role", "role=\"" + Escape(role) + "\"",
            AsDouble(ns) / 1e9);
    }
  }
  static const std::pair<const char*, const char*> kOps[] = {{"puts", "put"}, {"gets", "get"}, {"dels", "del"}, {"writes", "write"}};
  for (const auto& [key, op] : kOps) {
    if (has(key) && IsNumber(j[key])) {
      w.Add("slip_operations_total", "counter", "Client requests this node served, by operation",
            std::string("op=\"") + op + "\"", AsDouble(take(key)));
    }
  }
  if (has("errors")) {
    for (const auto& [reason, n] : take("errors").items()) {
      if (IsNumber(n)) {
        w.Add("slip_request_errors_total", "counter", "Client requests answered with an error, by reason",
              "reason=\"" + Escape(reason) + "\"", AsDouble(n));
      }
    }
  }
  if (has("latency_ns")) {
    for (const auto& [op, h] : take("latency_ns").items()) {
      w.AddHistogram("slip_request_duration_seconds",
                     "Client requests from arrival to reply at this node (a write's includes replication), by operation",
                     "op=\"" + Escape(op) + "\"", h);
    }
  }
  for (const char* k : {"term", "serving_term"}) {
    if (has(k) && IsNumber(j[k])) w.Add("slip_term", "gauge", "The configuration term this node serves", "", AsDouble(take(k)));
  }
  if (has("lease_ms_left") && IsNumber(j["lease_ms_left"])) {
    w.Add("slip_lease_seconds_left", "gauge", "How long this node's lease still runs (<= 0: expired)", "",
          AsDouble(take("lease_ms_left")) / 1e3);
  }
  if (has("in_flight_writes") && IsNumber(j["in_flight_writes"])) {
    w.Add("slip_in_flight_writes", "gauge", "Writes this node prepared as a primary and has not finished (replicating)",
          "", AsDouble(take("in_flight_writes")));
  }
  if (has("received_bytes") && IsNumber(j["received_bytes"])) {
    w.Add("slip_backup_received_bytes_total", "counter", "Bytes peers replicated into this node's PM (backup role)", "",
          AsDouble(take("received_bytes")));
  }
  if (has("store") && j["store"].is_object()) {
    const json& st = take("store");
    for (const auto& [k, v] : st.items()) {
      if (k == "segments" && v.is_object()) {
        for (const auto& [state, n] : v.items()) {
          w.Add("slip_segments", "gauge", "Log segments of this node's PM by state", "state=\"" + Escape(state) + "\"",
                AsDouble(n));
        }
      } else if (k == "appended_bytes") {
        w.Add("slip_store_appended_bytes_total", "counter", "PM bytes this node wrote as log entries (primary role)", "",
              AsDouble(v));
      } else if (k == "relocated_bytes") {
        w.Add("slip_cleaner_relocated_bytes_total", "counter", "PM bytes the cleaner rewrote", "", AsDouble(v));
      } else if (k == "segments_cleaned") {
        w.Add("slip_cleaner_segments_cleaned_total", "counter", "Segments the cleaner freed", "", AsDouble(v));
      } else if (k == "keys") {
        w.Add("slip_keys", "gauge", "Keys in this node's index (its replicas' too; tombstones included)", "", AsDouble(v));
      } else {
        Flatten(w, "store_" + k, v);
      }
    }
  }
  if (has("recovery") && j["recovery"].is_object()) {
    for (const auto& [k, v] : take("recovery").items()) {
      if (IsNumber(v)) {
        w.Add("slip_recovery_" + Sanitize(k), "gauge", "The last start's recovery: " + k, "", AsDouble(v));
      }
    }
  }
  for (const auto& [k, v] : j.items()) {
    if (!done.count(k)) Flatten(w, k, v);
  }
  for (const Series& s : extra) {
    for (const auto& [labels, v] : s.values) w.Add(s.name, s.type, s.help, labels, v);
  }
  return w.Text();
}

double QuantileBetween(const json& before, const json& after, double q) {
  if (!after.is_object() || !after.contains("buckets")) return -1;
  const json empty = json::object();
  const json& b = before.is_object() && before.contains("buckets") ? before : empty;
  const double total = after.value("count", 0.0) - b.value("count", 0.0);
  if (total <= 0) return -1;
  const double target = q * total;
  double prev_cum = 0, prev_bound = 0;
  for (size_t i = 0; i < after["buckets"].size(); ++i) {
    const double bound = after["buckets"][i][0].get<double>();
    double cum = after["buckets"][i][1].get<double>();
    if (b.contains("buckets") && i < b["buckets"].size()) cum -= b["buckets"][i][1].get<double>();
    if (cum >= target && cum > prev_cum) {
      return prev_bound + (bound - prev_bound) * (target - prev_cum) / (cum - prev_cum);
    }
    prev_cum = cum;
    prev_bound = bound;
  }
  return prev_bound;  // beyond the last bound
}

}  // namespace slip::metrics
