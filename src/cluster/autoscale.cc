#include "cluster/autoscale.h"

#include <algorithm>
#include <cstdio>

namespace slip::cluster {
namespace {

std::string Pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100 * x);
  return b;
}

}  // namespace

AutoscaleDecision AutoscalePolicy::Decide(const AutoscaleObservation& seen) {
  AutoscaleDecision d;
  if (seen.occupancy.empty()) {
    d.why = "no node to observe";
    return d;
  }
  if (acted_ && seen.now - last_action_ < o_.grace) {
    d.why = "grace period after the last action";
    return d;
  }
  const auto [lo, hi] = std::minmax_element(seen.occupancy.begin(), seen.occupancy.end(),
                                            [](const auto& a, const auto& b) { return a.second < b.second; });
  const bool slo_met = seen.latency_us <= o_.latency_slo_us;
  const size_t n = seen.occupancy.size();
  char lat[64];
  std::snprintf(lat, sizeof lat, "latency %.0f us %s %.0f us", seen.latency_us, slo_met ? "<=" : ">",
                o_.latency_slo_us);
  if (!slo_met && lo->second > o_.over) {
    if (n >= o_.max_nodes) {
      d.why = std::string(lat) + ", every node above " + Pct(o_.over) + ", but at the maximum of nodes";
      return d;
    }
    d.action = AutoscaleDecision::Action::kAdd;
    d.why = std::string(lat) + " and the idlest node at " + Pct(lo->second) + " > " + Pct(o_.over);
  } else if (slo_met && lo->second < o_.under) {
    if (n <= o_.min_nodes) {
      d.why = std::string(lat) + ", node " + std::to_string(lo->first) + " idle, but at the minimum of nodes";
      return d;
    }
    d.action = AutoscaleDecision::Action::kRemove;
    d.node = lo->first;
    d.why = std::string(lat) + " and node " + std::to_string(lo->first) + " at " + Pct(lo->second) + " < " +
            Pct(o_.under);
  } else {
    d.why = std::string(lat) + ", nodes " + Pct(lo->second) + ".." + Pct(hi->second);
    return d;
  }
  acted_ = true;
  last_action_ = seen.now;
  return d;
}

}  // namespace slip::cluster
