// AutoscalePolicy: DINOMO's policy engine for elasticity (docs/papers/
// dinomo.md §5c; the paper's Table 4, after Anna's autoscaler), as a pure
// function of what one epoch observed — so it is tested without processes
// and run by `slip cluster autoscale`, which measures and acts.
//
//   SLO violated, every node busier than `over`  -> add a node
//   SLO met, some node idler than `under`        -> remove the idlest
//   SLO violated, occupancy otherwise, a key above the hotness bound
//                                                -> share it with more nodes:
//                                                   R' = max(R + 1, R x latency / SLO)
//   SLO met, occupancy otherwise, a shared key below the coldness bound
//                                                -> de-replicate it (R = 1)
//
// Hot is above mean + 3 sigma of the keys' requests in the epoch, cold below
// mean - sigma or not among them [paper] — over the keys the nodes report
// (each its most requested, common/hot_keys.h); with fewer than
// kMinKeysForHotness of them nothing is hot, and only a shared key no node
// reports is cold. At most one action per epoch, then nothing for
// `grace` (the paper: 90 s), so a reconfiguration's effect is seen before
// the next one. Never below `min_nodes` or above `max_nodes`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cluster/cluster_config.h"
#include "runtime/runtime.h"

namespace slip::cluster {

struct AutoscaleOptions {
  double over = 0.20;   // occupancy above which a node counts as busy (paper: 20%)
  double under = 0.10;  // occupancy below which a node counts as idle (paper: 10%)
  double latency_slo_us = 1200;  // average latency objective (paper: 1.2 ms)
  runtime::Nanos grace = 90 * runtime::kSecond;
  uint32_t min_nodes = 1, max_nodes = 16;
};

struct AutoscaleObservation {
  runtime::Nanos now = 0;
  // Up nodes and the share of the epoch their workers were busy (0..1).
  std::vector<std::pair<NodeId, double>> occupancy;
  double latency_us = 0;  // average over the epoch's probes
  // Requests per key in the epoch, summed over the nodes (the keys each
  // reported as its most requested), and the shared keys with how many
  // nodes serve each now (their shard's owner included).
  std::vector<std::pair<std::string, double>> key_requests;
  std::map<std::string, uint32_t> replicas;
};

struct AutoscaleDecision {
  enum class Action { kNone, kAdd, kRemove, kShare, kUnshare } action = Action::kNone;
  NodeId node = 0;  // kRemove: which
  std::string key;        // kShare, kUnshare: which
  uint32_t replicas = 0;  // kShare: how many nodes are to serve it (its shard's owner included)
  std::string why;
};

inline constexpr size_t kMinKeysForHotness = 10;

class AutoscalePolicy {
 public:
  explicit AutoscalePolicy(AutoscaleOptions options) : o_(options) {}
  // What to do after this epoch. An action starts the grace period.
  AutoscaleDecision Decide(const AutoscaleObservation& seen);

 private:
  // Table 4's hot-key rows (kNone when they say nothing; `why` the bounds).
  AutoscaleDecision Keys(const AutoscaleObservation& seen, bool slo_met, const std::string& lat) const;

  const AutoscaleOptions o_;
  bool acted_ = false;
  runtime::Nanos last_action_ = 0;
};

}  // namespace slip::cluster
