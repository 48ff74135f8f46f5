// AutoscalePolicy: DINOMO's policy engine for elasticity (docs/papers/
// dinomo.md §5c; the paper's Table 4, after Anna's autoscaler), as a pure
// function of what one epoch observed — so it is tested without processes
// and run by `slip cluster autoscale`, which measures and acts.
//
//   SLO violated, every node busier than `over`  -> add a node
//   SLO met, some node idler than `under`        -> remove the idlest
//
// At most one action per epoch, then nothing for `grace` (the paper: 90 s),
// so a reconfiguration's effect is seen before the next one. Never below
// `min_nodes` or above `max_nodes`. Hot-key replication (Table 4's other
// rows) is not built.
#pragma once

#include <cstdint>
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
};

struct AutoscaleDecision {
  enum class Action { kNone, kAdd, kRemove } action = Action::kNone;
  NodeId node = 0;  // kRemove: which
  std::string why;
};

class AutoscalePolicy {
 public:
  explicit AutoscalePolicy(AutoscaleOptions options) : o_(options) {}
  // What to do after this epoch. An action starts the grace period.
  AutoscaleDecision Decide(const AutoscaleObservation& seen);

 private:
  const AutoscaleOptions o_;
  bool acted_ = false;
  runtime::Nanos last_action_ = 0;
};

}  // namespace slip::cluster
