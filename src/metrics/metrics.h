// A node's counters for operators: the JSON every node answers STATS with
// (the same the benchmarks and `slip stats` read), rendered in Prometheus's
// text exposition format, every series named slip_* (docs/metrics.md).
//
// Series with a meaning of their own get proper names, types and labels
// (slip_operations_total{op}, slip_cpu_seconds_total{role},
// slip_request_duration_seconds histograms, ...); every other number in the
// JSON still appears, as a gauge named by its path (slip_<key>_<key>), so a
// counter added to a node's STATS is scrapeable without touching this.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/histogram.h"

namespace slip::metrics {

// Latency buckets' upper bounds (ns) for STATS and Prometheus: 10 us to 10 s.
const std::vector<uint64_t>& LatencyBoundsNs();

// {"count", "sum_ns", "buckets": [[upper bound ns, cumulative count], ...]}
// over LatencyBoundsNs (values above the last bound are in count only).
nlohmann::json HistogramJson(const Histogram& h);

// An extra series from the process around the node (the RESP front door's
// counters): name (slip_*), Prometheus type, help, and labelled values.
struct Series {
  std::string name, type, help;
  std::vector<std::pair<std::string, double>> values;  // label text ("" or `k="v"`), value
};

// The exposition of one node: its STATS JSON, then `extra`.
std::string PrometheusText(const nlohmann::json& stats, const std::vector<Series>& extra = {});

// A quantile (0..1) of the requests between two HistogramJson snapshots
// (`before` may be null: since the start), in ns, interpolated within its
// bucket; -1 when none were recorded.
double QuantileBetween(const nlohmann::json& before, const nlohmann::json& after, double q);

}  // namespace slip::metrics
