#include "sim/cluster_sim.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "replication/design.h"

namespace slip::sim {
namespace {

using replication::Protocol;

// Seeds from SLIP_SIM_SEED (one) or a fixed CI budget.
std::vector<uint64_t> Seeds(uint64_t ci_count) {
  if (const char* s = std::getenv("SLIP_SIM_SEED")) return {std::strtoull(s, nullptr, 10)};
  // A longer campaign: SLIP_SIM_SEEDS=<count> (seeds 1..count).
  if (const char* s = std::getenv("SLIP_SIM_SEEDS")) ci_count = std::strtoull(s, nullptr, 10);
  std::vector<uint64_t> v;
  for (uint64_t i = 1; i <= ci_count; ++i) v.push_back(i);
  return v;
}

std::string DesignTestName(const ::testing::TestParamInfo<Protocol>& p) {
  std::string n(replication::DesignName(p.param));
  for (char& c : n) c = c == '-' ? '_' : c;
  return n;
}

// Every design runs the same whole-cluster campaigns. rpc-kv is the fastest
// to simulate and gets the most seeds; the one-sided designs add the
// simulated fabric under the nodes.
class ClusterSimTest : public ::testing::TestWithParam<Protocol> {
 protected:
  ClusterSimOptions Options(uint64_t seed) const {
    ClusterSimOptions o;
    o.seed = seed;
    o.protocol = GetParam();
    return o;
  }
  uint64_t Budget(uint64_t rpc) const { return GetParam() == Protocol::kRpc ? rpc : rpc / 2; }
  std::string Replay(uint64_t seed, const std::string& flags) const {
    return "\n  reproduce: build/slip sim --design " + std::string(replication::DesignName(GetParam())) +
           " --seed " + std::to_string(seed) + flags + " --trace";
  }
};

TEST_P(ClusterSimTest, SameSeedSameTrace) {
  auto o = Options(42);
  auto a = RunClusterSim(o);
  auto b = RunClusterSim(o);
  ASSERT_TRUE(a.ok) << a.failure;
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.operations, b.operations);
  o.seed = 43;
  EXPECT_NE(RunClusterSim(o).trace_hash, a.trace_hash);
}

TEST_P(ClusterSimTest, CampaignFindsNoViolation) {
  uint64_t ops = 0, faults = 0, failovers = 0;
  for (uint64_t seed : Seeds(Budget(20))) {
    auto o = Options(seed);
    o.crashes = 2;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure << Replay(seed, "");
    ops += r.operations;
    faults += r.faults;
    failovers += r.failovers;
  }
  EXPECT_GT(ops, 0u);
  EXPECT_GT(faults, 0u);
  EXPECT_GT(failovers, 0u);
}

// Whole-cluster power loss and cold start: every acknowledged write is
// still there, and the history stays linearizable across the restart. For
// the one-sided designs the replicas' entries are wherever peers' NICs put
// them (b-log, private buffers), recovered from PM.
TEST_P(ClusterSimTest, ColdStartCampaignFindsNoViolation) {
  uint64_t ops = 0;
  for (uint64_t seed : Seeds(Budget(20))) {
    auto o = Options(seed);
    o.crashes = 1;
    o.cold_start = true;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure << Replay(seed, " --cold-start --crashes 1");
    ops += r.operations;
  }
  EXPECT_GT(ops, 0u);
}

// Crashes while the cluster is recovering: a node just promoted for a failed
// node's shards dies during its promotion (the manager must reassign again
// and the next replica must gather what the first had gathered), and a node
// dies while the cold start reconciles shards.
TEST_P(ClusterSimTest, CrashesDuringFailoverAndColdStartFindNoViolation) {
  uint64_t faults = 0;
  for (uint64_t seed : Seeds(Budget(20))) {
    auto o = Options(seed);
    o.crashes = 2;
    o.failover_crashes = 2;
    o.cold_start = true;
    o.crash_in_cold_start = true;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << Replay(seed, " --crashes 2 --failover-crashes 2 --cold-start --crash-in-cold-start");
    faults += r.faults;
  }
  // Two scheduled crashes and a power loss per seed, plus the recovery crashes.
  EXPECT_GT(faults, 3 * Seeds(Budget(20)).size());
}

// Partitions cut a node off from the other nodes and the configuration
// manager while clients still reach it; leases keep it from serving once
// it has been replaced.
TEST_P(ClusterSimTest, PartitionCampaignFindsNoViolation) {
  for (uint64_t seed : Seeds(Budget(20))) {
    auto o = Options(seed);
    o.crashes = 1;
    o.partitions = 2;
    o.slow_nodes = 2;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << Replay(seed, " --crashes 1 --partitions 2 --slow 2");
  }
}

// Shard moves (docs/papers/rowan.md §3.7) under the crash campaign: primaries
// and backups moved to nodes holding none while clients write, and in half
// the moves the source or the target crashes, or the configuration manager
// restarts, 0-3 ms in (a move then ends in a roll-back). 200 seeds per design.
TEST_P(ClusterSimTest, MigrationCampaignFindsNoViolation) {
  uint64_t started = 0, done = 0, failed = 0, copied = 0, dropped = 0;
  for (uint64_t seed : Seeds(200)) {
    auto o = Options(seed);
    o.keys = 96;
    o.migrations = 6;
    o.migration_faults = true;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << Replay(seed, " --crashes 1 --keys 96 --migrations 6 --migration-faults");
    started += r.migrations_started;
    done += r.migrations_done;
    failed += r.migrations_failed;
    copied += r.migration_copied;
    dropped += r.shards_dropped;
  }
  if (Seeds(200).size() < 50) return;  // one seed from the environment
  EXPECT_GT(done, started / 2) << "most moves finish";
  EXPECT_GT(failed, 0u) << "some end in a failure";
  EXPECT_GT(copied, 0u);
  EXPECT_GT(dropped, 0u) << "sources let go of what they moved";
}

// Proof that the checker can fail: acknowledging before replication loses
// acknowledged writes when the primary crashes, within the CI seed budget.
TEST_P(ClusterSimTest, InjectedAckBeforeReplicationBugIsCaught) {
  int caught = 0;
  for (uint64_t seed : Seeds(Budget(20))) {
    auto o = Options(seed);
    o.crashes = 2;
    o.bug_ack_before_replication = true;
    caught += !RunClusterSim(o).ok;
  }
  EXPECT_GT(caught, 0) << "the campaign missed a deliberately broken protocol";
}

// Backups' workers stay idle in the one-sided designs: with no faults (so
// no promotion or seeding) not one REPLICATE request is served, while the
// fabric carries every write. rpc-kv serves one per write per backup.
TEST_P(ClusterSimTest, WritesReachBackupsOnlyThroughTheirDesignsPath) {
  auto o = Options(7);
  o.crashes = 0;
  auto r = RunClusterSim(o);
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_GT(r.operations, 500u);
  if (GetParam() == Protocol::kRpc) {
    EXPECT_GT(r.replicate_served, 0u);
    EXPECT_EQ(r.fabric_ops, 0u);
  } else {
    EXPECT_EQ(r.replicate_served, 0u);
    EXPECT_GT(r.fabric_ops, 0u);
  }
}

// CommitVer records: the same seeds with and without them stay correct, and
// with them promotions start above a recorded floor and move fewer entries.
TEST_P(ClusterSimTest, CommitVerRecordsShrinkPromotions) {
  uint64_t with_floor = 0, moved_with = 0, moved_without = 0;
  for (uint64_t seed : Seeds(4)) {
    auto o = Options(seed);
    o.keys = 600;
    o.ops_per_client = 300;
    o.crashes = 2;
    // Every PUT writes: conditional ones that write nothing thin the log
    // this compares, by chance differently with and without the records.
    o.conditional_puts = false;
    auto with = RunClusterSim(o);
    ASSERT_TRUE(with.ok) << "seed " << seed << ": " << with.failure
                         << Replay(seed, " --keys 600 --ops 300 --crashes 2 --no-conditional");
    o.commit_interval_us = 0;
    auto without = RunClusterSim(o);
    ASSERT_TRUE(without.ok) << "seed " << seed << ": " << without.failure
                            << Replay(seed, " --keys 600 --ops 300 --crashes 2 --no-conditional --commit-interval-us 0");
    EXPECT_GT(with.commit_records, 0u);
    EXPECT_EQ(without.commit_records, 0u);
    EXPECT_EQ(without.promotions_with_floor, 0u);
    with_floor += with.promotions_with_floor;
    moved_with += with.promotion_entries;
    moved_without += without.promotion_entries;
  }
  EXPECT_GT(with_floor, 0u);
  EXPECT_LT(moved_with, moved_without);
}

INSTANTIATE_TEST_SUITE_P(Designs, ClusterSimTest,
                         ::testing::Values(Protocol::kRpc, Protocol::kRowan, Protocol::kRWrite, Protocol::kBatch,
                                           Protocol::kShare, Protocol::kTailwind, Protocol::kErda,
                                           Protocol::kErdaRaw, Protocol::kErdaRedo),
                         DesignTestName);

// erda: clients read primaries and write their entries one-sidedly through
// crashes, failovers, partitions and a cold start (the campaigns above check
// the histories); here, that the one-sided paths are the ones that ran.
TEST(ErdaSimTest, ClientsReadAndWriteOneSidedThroughFaults) {
  client::ErdaPath::Stats d;
  for (uint64_t seed : Seeds(6)) {
    ClusterSimOptions o;
    o.seed = seed;
    o.protocol = Protocol::kErda;
    o.crashes = 2;
    o.partitions = 1;
    o.cold_start = true;
    o.workers = 2;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << "\n  reproduce: build/slip sim --design erda --seed " << seed
                      << " --crashes 2 --partitions 1 --cold-start --workers 2 --trace";
    d += r.direct;
  }
  EXPECT_GT(d.one_sided_gets, d.gets * 3 / 4);
  EXPECT_GT(d.one_sided_puts, d.puts * 3 / 4);
}

// erda-raw: clients write their entries one-sidedly (and nodes copy them),
// but read two-sidedly; erda-redo's clients never touch a node's PM.
TEST(ErdaSimTest, TheBaselinesTakeTheirOwnPaths) {
  for (Protocol p : {Protocol::kErdaRaw, Protocol::kErdaRedo}) {
    client::ErdaPath::Stats d;
    for (uint64_t seed : Seeds(3)) {
      ClusterSimOptions o;
      o.seed = seed;
      o.protocol = p;
      o.crashes = 1;
      auto r = RunClusterSim(o);
      ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure << "\n  reproduce: build/slip sim --design "
                        << replication::DesignName(p) << " --seed " << seed << " --crashes 1 --trace";
      d.gets += r.direct.gets;
      d.puts += r.direct.puts;
      d.one_sided_puts += r.direct.one_sided_puts;
    }
    EXPECT_EQ(d.gets, 0u) << replication::DesignName(p);
    if (p == Protocol::kErdaRaw) {
      EXPECT_GT(d.one_sided_puts, d.puts * 3 / 4);
    } else {
      EXPECT_EQ(d.puts, 0u);
    }
  }
}

// Proof that the checker sees what grants guard against: without leases a
// grant outlives the primary's tenure, and a client partitioned with an old
// primary reads its stale words one-sidedly.
TEST(ErdaSimTest, GrantsWithoutLeasesAreCaught) {
  bool caught = false;
  for (uint64_t seed = 1; seed <= 120 && !caught; ++seed) {
    ClusterSimOptions o;
    o.seed = seed;
    o.protocol = Protocol::kErda;
    o.partitions = 4;
    o.bug_no_lease = true;
    caught = !RunClusterSim(o).ok;
  }
  EXPECT_TRUE(caught) << "the campaign missed one-sided reads of a replaced primary";
}

// Nodes with three request workers (server/worker_pool.h): a shard's
// writes enter at its worker's entry, or (one in eight, a caller with an
// older configuration's entries) at another and hop, while its GETs go to
// each worker in turn and run where they arrive; each worker replicates
// over its own endpoint, share-kv's workers share one remote log per backup,
// and each worker writes the CommitVer records of its own shards; the first
// campaign's one-sided nodes digest on two executors, each taking used
// segments of its own. The same faults.
class MultiWorkerSimTest : public ::testing::TestWithParam<Protocol> {
 protected:
  static constexpr uint32_t kWorkers = 3;
  ClusterSimOptions Options(uint64_t seed) const {
    ClusterSimOptions o;
    o.seed = seed;
    o.protocol = GetParam();
    o.workers = kWorkers;
    return o;
  }
  // How to replay a failing seed; `flags` are the options beyond Options'.
  std::string Replay(uint64_t seed, const std::string& flags) const {
    return "\n  reproduce: build/slip sim --design " + std::string(replication::DesignName(GetParam())) +
           " --seed " + std::to_string(seed) + " --workers " + std::to_string(kWorkers) + flags + " --trace";
  }
};

TEST_P(MultiWorkerSimTest, CampaignWithFailoverAndColdStartCrashesFindsNoViolation) {
  const uint64_t budget = GetParam() == Protocol::kRpc ? 10 : 5;
  uint64_t records = 0, hopped = 0, elsewhere = 0;
  for (uint64_t seed : Seeds(budget)) {
    ClusterSimOptions o = Options(seed);
    o.digest_executors = 2;
    o.crashes = 2;
    o.failover_crashes = 1;
    o.partitions = 1;
    o.cold_start = true;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << Replay(seed, " --digest-executors 2 --crashes 2 --failover-crashes 1 --partitions 1 --cold-start");
    records += r.commit_records;
    hopped += r.requests_hopped;
    elsewhere += r.gets_elsewhere;
  }
  EXPECT_GT(records, 0u);
  EXPECT_GT(hopped, 0u) << "no request took the hop path";
  EXPECT_GT(elsewhere, 0u) << "no GET was served off its shard's worker";
}

// Shard moves with three workers per node: a GET that misses during a copy
// fetches the key from the move's source on whichever worker it reached,
// and applies it under that worker's own store writer.
TEST_P(MultiWorkerSimTest, MoveCampaignFindsNoViolation) {
  const uint64_t budget = GetParam() == Protocol::kRpc ? 30 : 15;
  uint64_t fetches = 0, done = 0;
  for (uint64_t seed : Seeds(budget)) {
    ClusterSimOptions o = Options(seed);
    o.crashes = 1;
    o.keys = 96;
    o.migrations = 6;
    o.migration_faults = true;
    auto r = RunClusterSim(o);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << Replay(seed, " --crashes 1 --keys 96 --migrations 6 --migration-faults");
    fetches += r.migration_fetches;
    done += r.migrations_done;
  }
  if (Seeds(budget).size() < budget) return;  // one seed from the environment
  EXPECT_GT(done, 0u);
  EXPECT_GT(fetches, 0u) << "no GET or DEL fetched from a move's source";
}

// Placement deals a node every n-th shard; each of its workers serves a
// range of shards (WorkerOfShard), so every worker of every node is some
// shards' primary. (With shard % workers, 6 nodes of 3 workers: one each.)
TEST_P(MultiWorkerSimTest, EveryWorkerOfEveryNodeServesWrites) {
  ClusterSimOptions o = Options(1);
  o.shards = 36;
  o.keys = 400;
  o.crashes = 0;  // the placement's primaries throughout
  auto r = RunClusterSim(o);
  ASSERT_TRUE(r.ok) << r.failure << Replay(1, " --shards 36 --keys 400 --crashes 0");
  EXPECT_GT(r.least_worker_writes, 0u);
}

INSTANTIATE_TEST_SUITE_P(Designs, MultiWorkerSimTest,
                         ::testing::Values(Protocol::kRpc, Protocol::kRowan, Protocol::kShare), DesignTestName);

}  // namespace
}  // namespace slip::sim
