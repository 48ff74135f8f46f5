// The autoscaling policy (cluster/autoscale.h), Table 4 of the DINOMO
// paper: add when the SLO is violated and every node is busy, remove the
// idlest when the SLO is met and one is idle, one action then a grace
// period, within the node bounds.
#include "cluster/autoscale.h"

#include <gtest/gtest.h>

namespace slip::cluster {
namespace {

using runtime::kSecond;
using Action = AutoscaleDecision::Action;

AutoscaleObservation Seen(runtime::Nanos now, std::vector<std::pair<NodeId, double>> occ, double latency_us) {
  return AutoscaleObservation{now, std::move(occ), latency_us};
}

TEST(AutoscalePolicyTest, FollowsTableFourWithAGracePeriod) {
  AutoscalePolicy p(AutoscaleOptions{.over = 0.2, .under = 0.1, .latency_slo_us = 1000, .grace = 10 * kSecond,
                                     .min_nodes = 1, .max_nodes = 4});
  // Met, everyone in between: nothing.
  EXPECT_EQ(p.Decide(Seen(1 * kSecond, {{0, 0.5}, {1, 0.15}}, 500)).action, Action::kNone);
  // Violated but one node is not busy: the load is not the nodes' (nothing).
  EXPECT_EQ(p.Decide(Seen(2 * kSecond, {{0, 0.9}, {1, 0.15}}, 5000)).action, Action::kNone);
  // Violated, everyone busy: add.
  auto add = p.Decide(Seen(3 * kSecond, {{0, 0.9}, {1, 0.6}}, 5000));
  EXPECT_EQ(add.action, Action::kAdd) << add.why;
  // Within the grace period nothing happens, whatever is seen.
  EXPECT_EQ(p.Decide(Seen(12 * kSecond, {{0, 0.9}, {1, 0.9}, {2, 0.9}}, 9000)).action, Action::kNone);
  // Met, node 2 idle: remove it (the idlest).
  auto rm = p.Decide(Seen(14 * kSecond, {{0, 0.3}, {1, 0.05}, {2, 0.01}}, 200));
  EXPECT_EQ(rm.action, Action::kRemove) << rm.why;
  EXPECT_EQ(rm.node, 2u);
}

TEST(AutoscalePolicyTest, StaysWithinTheNodeBounds) {
  AutoscalePolicy p(AutoscaleOptions{.over = 0.2, .under = 0.1, .latency_slo_us = 1000, .grace = 0,
                                     .min_nodes = 2, .max_nodes = 2});
  EXPECT_EQ(p.Decide(Seen(1, {{0, 0.9}, {1, 0.9}}, 9000)).action, Action::kNone) << "at the maximum";
  EXPECT_EQ(p.Decide(Seen(2, {{0, 0.0}, {1, 0.0}}, 10)).action, Action::kNone) << "at the minimum";
  EXPECT_EQ(p.Decide(Seen(3, {}, 10)).action, Action::kNone) << "nothing observed";
}

}  // namespace
}  // namespace slip::cluster
