#include "sim/cluster_sim.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace slip::sim {
namespace {

// Seeds from SLIP_SIM_SEED (one) or a fixed CI budget.
std::vector<uint64_t> Seeds(uint64_t ci_count) {
  if (const char* s = std::getenv("SLIP_SIM_SEED")) return {std::strtoull(s, nullptr, 10)};
  // A longer campaign: SLIP_SIM_SEEDS=<count> (seeds 1..count).
  if (const char* s = std::getenv("SLIP_SIM_SEEDS")) ci_count = std::strtoull(s, nullptr, 10);
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= ci_count; ++i) v.push_back(i);
  return v;
}

TEST(ClusterSimTest, SameSeedSameTrace) {
  ClusterSimOptions o;
  o.seed = 42;
  auto a = RunClusterSim(o);
  auto b = RunClusterSim(o);
  ASSERT_TRUE(a.ok) << a.failure;
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.operations, b.operations);
  o.seed = 43;
  EXPECT_NE(RunClusterSim(o).trace_hash, a.trace_hash);
}

TEST(ClusterSimTest, CampaignFindsNoViolation) {
  uint64_t ops = 0, faults = 0, failovers = 0;
  for (uint64_t seed : Seeds(20)) {
    ClusterSimOptions o;
    o.seed = seed;
    o.crashes = 2;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << "\n  reproduce: SLIP_SIM_SEED=" << seed
                      << " build/src/sim/sim_test --gtest_filter='ClusterSimTest.Campaign*'";
    ops += r.operations;
    faults += r.faults;
    failovers += r.failovers;
  }
  EXPECT_GT(ops, 0u);
  EXPECT_GT(faults, 0u);
  EXPECT_GT(failovers, 0u);
}

// Whole-cluster power loss and cold start: every acknowledged write is
// still there, and the history stays linearizable across the restart.
TEST(ClusterSimTest, ColdStartCampaignFindsNoViolation) {
  uint64_t ops = 0;
  for (uint64_t seed : Seeds(20)) {
    ClusterSimOptions o;
    o.seed = seed;
    o.crashes = 1;
    o.cold_start = true;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << "\n  reproduce: build/slip sim --seed " << seed << " --cold-start --crashes 1 --trace";
    ops += r.operations;
  }
  EXPECT_GT(ops, 0u);
}

// Partitions cut a node off from the other nodes and the configuration
// manager while clients still reach it; leases keep it from serving once
// it has been replaced.
TEST(ClusterSimTest, PartitionCampaignFindsNoViolation) {
  for (uint64_t seed : Seeds(20)) {
    ClusterSimOptions o;
    o.seed = seed;
    o.crashes = 1;
    o.partitions = 2;
    o.slow_nodes = 2;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << "\n  reproduce: build/slip sim --seed " << seed << " --crashes 1 --partitions 2 --trace";
  }
}

// Proof that the checker can fail: acknowledging before replication loses
// acknowledged writes when the primary crashes, within the CI seed budget.
TEST(ClusterSimTest, InjectedAckBeforeReplicationBugIsCaught) {
  int caught = 0;
  for (uint64_t seed : Seeds(20)) {
    ClusterSimOptions o;
    o.seed = seed;
    o.crashes = 2;
    o.bug_ack_before_replication = true;
    caught += !RunClusterSim(o).ok;
  }
  EXPECT_GT(caught, 0) << "the campaign missed a deliberately broken protocol";
}

}  // namespace
}  // namespace slip::sim
