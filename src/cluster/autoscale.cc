#include "cluster/autoscale.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace slip::cluster {
namespace {

std::string Pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100 * x);
  return b;
}

}  // namespace

AutoscaleDecision AutoscalePolicy::Keys(const AutoscaleObservation& seen, bool slo_met, const std::string& lat) const {
  AutoscaleDecision d;
  const auto& keys = seen.key_requests;
  // Too few keys to tell hot from cold: only a shared key no node reports
  // at all is cold.
  const bool enough = keys.size() >= kMinKeysForHotness;
  double mean = 0, var = 0;
  for (const auto& [key, n] : keys) mean += n;
  mean /= static_cast<double>(std::max<size_t>(keys.size(), 1));
  for (const auto& [key, n] : keys) var += (n - mean) * (n - mean);
  const double sigma = std::sqrt(var / static_cast<double>(std::max<size_t>(keys.size(), 1)));
  const double hot = mean + 3 * sigma, cold = mean - sigma;
  std::map<std::string, double> requests(keys.begin(), keys.end());
  const uint32_t n = static_cast<uint32_t>(seen.occupancy.size());
  char bounds[96];
  std::snprintf(bounds, sizeof bounds, "; hot above %.0f, cold below %.0f requests", hot, cold);
  if (!slo_met && enough) {
    // The hottest key that can still spread further.
    std::vector<std::pair<std::string, double>> by_load(keys.begin(), keys.end());
    std::sort(by_load.begin(), by_load.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& [key, count] : by_load) {
      if (count <= hot) break;
      const uint32_t r = seen.replicas.contains(key) ? seen.replicas.at(key) : 1;
      if (r >= n) continue;
      const double want = std::ceil(r * seen.latency_us / std::max(o_.latency_slo_us, 1.0));
      d.action = AutoscaleDecision::Action::kShare;
      d.key = key;
      d.replicas = std::min(n, std::max(r + 1, static_cast<uint32_t>(std::min<double>(want, n))));
      char b[128];
      std::snprintf(b, sizeof b, ", a key at %.0f requests > %.0f: %u -> %u nodes", count, hot, r, d.replicas);
      d.why = lat + b;
      return d;
    }
  } else if (slo_met) {
    for (const auto& [key, r] : seen.replicas) {
      auto it = requests.find(key);
      const double count = it == requests.end() ? 0 : it->second;
      if (it != requests.end() && (!enough || count >= cold)) continue;
      d.action = AutoscaleDecision::Action::kUnshare;
      d.key = key;
      char b[128];
      std::snprintf(b, sizeof b, ", a shared key at %.0f requests < %.0f: back to its owner alone", count, cold);
      d.why = lat + b;
      return d;
    }
  }
  d.why = bounds;
  return d;
}

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
  } else if (auto k = Keys(seen, slo_met, lat); k.action != AutoscaleDecision::Action::kNone) {
    d = std::move(k);
  } else {
    d.why = std::string(lat) + ", nodes " + Pct(lo->second) + ".." + Pct(hi->second) + k.why;
    return d;
  }
  acted_ = true;
  last_action_ = seen.now;
  return d;
}

}  // namespace slip::cluster
