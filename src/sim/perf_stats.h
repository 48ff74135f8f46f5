// What every performance run (sim/perf.cc, sim/pool_perf.cc) reports of
// the operations its window measured: how many, how fast, the median of
// reads and of writes, and the median, 99th percentile and mean of all.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/cluster_sim.h"

namespace slip::sim::detail {

inline void SetLatencies(PerfResult& r, std::vector<runtime::Nanos> reads, std::vector<runtime::Nanos> writes,
                         uint64_t errors, runtime::Nanos measure) {
  auto median = [](std::vector<runtime::Nanos>& v) -> runtime::Nanos {
    if (v.empty()) return 0;
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  r.read_p50 = median(reads);
  r.write_p50 = median(writes);
  std::vector<runtime::Nanos> all = std::move(reads);
  all.insert(all.end(), writes.begin(), writes.end());
  std::sort(all.begin(), all.end());
  r.ops = all.size();
  r.errors = errors;
  r.ops_per_sec = static_cast<double>(r.ops) * 1e9 / static_cast<double>(measure);
  if (all.empty()) return;
  r.p50 = all[all.size() / 2];
  r.p99 = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  long double sum = 0;
  for (runtime::Nanos l : all) sum += static_cast<long double>(l);
  r.mean = static_cast<runtime::Nanos>(sum / static_cast<long double>(all.size()));
}

}  // namespace slip::sim::detail
