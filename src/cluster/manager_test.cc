// cluster::Manager on virtual time over the in-memory store: nodes are
// modelled only by the leases they hold.
#include "cluster/manager.h"

#include <gtest/gtest.h>

#include "runtime/sim_runtime.h"

namespace slip::cluster {
namespace {

using runtime::kMillisecond;

constexpr Nanos kLease = 100 * kMillisecond;

class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::map<NodeId, std::string> nodes;
    for (NodeId i = 0; i < 4; ++i) nodes[i] = "node" + std::to_string(i);
    auto c = Place(nodes, 8, 3);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_TRUE(store_->CompareAndSwap(kNoVersion, *c).ok());
    ex_ = rt_.CreateExecutor("cm");
  }

  // Node `id` keeps renewing its lease every quarter lease until `until`.
  void Hold(NodeId id, Nanos until) {
    auto tick = std::make_shared<std::function<void()>>();
    auto* node = rt_.CreateExecutor("node" + std::to_string(id));
    *tick = [this, id, until, node, tick] {
      if (rt_.Now() >= until) return;
      ASSERT_TRUE(store_->AcquireLease("node-" + std::to_string(id), "n" + std::to_string(id), kLease, rt_.Now()).ok());
      node->After(kLease / 4, [tick] { (*tick)(); });
    };
    loops_.push_back(tick);
    node->Post([tick] { (*tick)(); });
  }

  std::unique_ptr<Manager> NewManager(const std::string& holder) {
    ManagerOptions o;
    o.lease = kLease;
    o.holder = holder;
    auto m = std::make_unique<Manager>(store_.get(), ex_, o);
    Manager* raw = m.get();
    ex_->Post([this, raw] {
      raw->Start([this](const Manager::Reassigned& r) { reassigned_.push_back(r); },
                 [this](Status s) { stopped_.push_back(s); });
    });
    return m;
  }

  ClusterConfig Stored() { return store_->Load()->config; }

  std::vector<std::shared_ptr<std::function<void()>>> loops_;
  runtime::SimRuntime rt_;
  std::shared_ptr<MemoryStoreState> state_ = NewMemoryStoreState();
  std::unique_ptr<ConfigStore> store_ = OpenMemoryStore(state_);
  runtime::Executor* ex_ = nullptr;
  std::vector<Manager::Reassigned> reassigned_;
  std::vector<Status> stopped_;
};

TEST_F(ManagerTest, LiveNodesAreLeftAlone) {
  for (NodeId i = 0; i < 4; ++i) Hold(i, 1'000 * kLease);
  auto m = NewManager("cm");
  rt_.RunUntil(20 * kLease);
  EXPECT_TRUE(m->holds_lease());
  EXPECT_TRUE(reassigned_.empty());
  EXPECT_EQ(Stored().term, 1u);
}

TEST_F(ManagerTest, ANodeWhoseLeaseExpiresIsReplacedOnceInANewTerm) {
  for (NodeId i = 0; i < 4; ++i) Hold(i, i == 2 ? 5 * kLease : 1'000 * kLease);
  auto m = NewManager("cm");
  rt_.RunUntil(20 * kLease);
  ASSERT_EQ(reassigned_.size(), 1u);
  EXPECT_EQ(reassigned_[0].failed, 2u);
  EXPECT_EQ(reassigned_[0].after.config.term, 2u);
  EXPECT_EQ(reassigned_[0].after.config, Stored());
  EXPECT_EQ(Stored().nodes.at(2).state, NodeState::kDown);
  for (const auto& s : Stored().shards) EXPECT_NE(s.primary, 2u);
  // Not before its lease ran out: the last renewal was before 5 leases.
  EXPECT_TRUE(stopped_.empty());
}

TEST_F(ManagerTest, ANodeNeverSeenIsReplacedOnlyAfterTheBootGrace) {
  for (NodeId i = 0; i < 3; ++i) Hold(i, 1'000 * kLease);  // node 3 never comes up
  auto m = NewManager("cm");
  rt_.RunUntil(3 * kLease);
  EXPECT_TRUE(reassigned_.empty()) << "still within the boot grace";
  rt_.RunUntil(5 * kLease);
  ASSERT_EQ(reassigned_.size(), 1u);
  EXPECT_EQ(reassigned_[0].failed, 3u);
}

// In a pool design the manager keeps ownership even: a node that joins gets
// its share once it is seen holding its lease, and a failed node's shards
// are spread at once.
TEST_F(ManagerTest, APoolDesignsShardsFollowTheLiveNodes) {
  ClusterConfig c = Stored();
  for (auto& s : c.shards) s.backups.clear(), s.syncing.clear();
  c.replication_factor = 1;
  c.design = "dinomo";
  c.pool = "00";
  c.term = 2;
  ASSERT_TRUE(store_->CompareAndSwap(store_->Load()->version, c).ok());
  for (NodeId i = 0; i < 4; ++i) Hold(i, i == 3 ? 10 * kLease : 1'000 * kLease);
  auto m = NewManager("cm");
  rt_.RunUntil(5 * kLease);
  EXPECT_EQ(Stored().term, 2u) << "balanced: nothing to do";
  // Node 9 joins: it takes its lease, then lists itself.
  Hold(9, 1'000 * kLease);
  rt_.RunUntil(rt_.Now() + kLease / 8);
  auto joined = JoinOwner(Stored(), 9, "node9");
  ASSERT_TRUE(joined.ok());
  ASSERT_TRUE(store_->CompareAndSwap(store_->Load()->version, *joined).ok());
  rt_.RunUntil(rt_.Now() + kLease);
  std::map<NodeId, uint32_t> owned;
  for (const auto& s : Stored().shards) ++owned[s.primary];
  EXPECT_EQ(owned.size(), 5u);
  EXPECT_GE(owned[9], 1u);
  for (const auto& [n, k] : owned) EXPECT_LE(k, 2u) << "node " << n;
  // Node 3 stops renewing: declared failed, its shards go to the others.
  rt_.RunUntil(20 * kLease);
  ASSERT_EQ(reassigned_.size(), 1u);
  EXPECT_EQ(reassigned_[0].failed, 3u);
  owned.clear();
  for (const auto& s : Stored().shards) ++owned[s.primary];
  EXPECT_EQ(owned.count(3), 0u);
  for (const auto& [n, k] : owned) EXPECT_EQ(k, 2u) << "node " << n;
}

TEST_F(ManagerTest, AStandbyTakesOverWhenTheActiveManagerGoesAway) {
  for (NodeId i = 0; i < 4; ++i) Hold(i, i == 1 ? 30 * kLease : 1'000 * kLease);
  auto a = NewManager("cm-a");
  rt_.RunUntil(kLease);
  auto b = NewManager("cm-b");
  rt_.RunUntil(10 * kLease);
  EXPECT_TRUE(a->holds_lease());
  EXPECT_FALSE(b->holds_lease()) << "one manager at a time";
  ex_->Post([&] { a->Stop(); });
  rt_.RunUntil(12 * kLease);
  EXPECT_TRUE(b->holds_lease());
  rt_.RunUntil(50 * kLease);
  ASSERT_EQ(reassigned_.size(), 1u) << "the standby does the work now";
  EXPECT_EQ(reassigned_[0].failed, 1u);
}

TEST_F(ManagerTest, AManagerThatLosesItsLeaseStopsActingAndStandsBy) {
  for (NodeId i = 0; i < 4; ++i) Hold(i, i == 0 ? 10 * kLease : 1'000 * kLease);
  auto m = NewManager("cm");
  rt_.RunUntil(2 * kLease);
  // Someone takes the manager lease away (as after a long pause of ours).
  ASSERT_TRUE(store_->ReleaseLease(Lease{"manager", "cm", 1, 0}).ok());
  auto usurper = store_->AcquireLease("manager", "usurper", 1'000 * kLease, rt_.Now());
  ASSERT_TRUE(usurper.ok());
  rt_.RunUntil(30 * kLease);
  EXPECT_TRUE(stopped_.empty()) << "losing the lease is no reason to stop: " << stopped_[0].ToString();
  EXPECT_FALSE(m->holds_lease());
  EXPECT_TRUE(reassigned_.empty()) << "node 0 failed after the manager lost its lease";
  // The other manager goes away: ours takes over again and does the work
  // it left (node 0 stopped renewing long ago).
  ASSERT_TRUE(store_->ReleaseLease(*usurper).ok());
  rt_.RunUntil(40 * kLease);
  EXPECT_TRUE(m->holds_lease());
  ASSERT_EQ(reassigned_.size(), 1u);
  EXPECT_EQ(reassigned_[0].failed, 0u);
  EXPECT_TRUE(stopped_.empty());
}

// A renewal that comes too late (the manager's own executor stalled past
// the lease, as on an overloaded machine with one manager): it stands by,
// takes the lease again at once since no one else wanted it, and the
// cluster still has a manager — a node that fails afterwards is replaced.
TEST_F(ManagerTest, AManagerThatStalledPastItsLeaseManagesAgain) {
  for (NodeId i = 0; i < 4; ++i) Hold(i, i == 2 ? 20 * kLease : 1'000 * kLease);
  auto m = NewManager("cm");
  rt_.RunUntil(2 * kLease);
  ASSERT_TRUE(m->holds_lease());
  // What a stall looks like to the store: our lease ran out before the
  // next renewal came, and nobody else took it.
  ASSERT_TRUE(store_->ReleaseLease(Lease{"manager", "cm", 1, 0}).ok());
  rt_.RunUntil(60 * kLease);
  EXPECT_TRUE(stopped_.empty());
  EXPECT_TRUE(m->holds_lease());
  ASSERT_EQ(reassigned_.size(), 1u) << "no manager after the stall";
  EXPECT_EQ(reassigned_[0].failed, 2u);
}

// Forwards to a store, but just before the first compare-and-swap another
// writer (a node publishing a new address) moves the stored version on.
class InterferingStore final : public ConfigStore {
 public:
  explicit InterferingStore(ConfigStore* inner) : inner_(inner) {}
  Result<VersionedConfig> Load() override { return inner_->Load(); }
  Result<uint64_t> CompareAndSwap(uint64_t expected, const ClusterConfig& config) override {
    if (!interfered_) {
      interfered_ = true;
      VersionedConfig now = inner_->Load().value();
      ++now.config.term;
      now.config.nodes[0].address = "elsewhere";
      EXPECT_TRUE(inner_->CompareAndSwap(now.version, now.config).ok());
    }
    return inner_->CompareAndSwap(expected, config);
  }
  Status Watch(uint64_t known, std::function<void()> changed) override {
    return inner_->Watch(known, std::move(changed));
  }
  Result<Lease> AcquireLease(const std::string& n, const std::string& h, Nanos ttl, Nanos now) override {
    return inner_->AcquireLease(n, h, ttl, now);
  }
  Result<Lease> RenewLease(const Lease& l, Nanos ttl, Nanos now) override { return inner_->RenewLease(l, ttl, now); }
  Status ReleaseLease(const Lease& l) override { return inner_->ReleaseLease(l); }
  bool interfered_ = false;

 private:
  ConfigStore* inner_;
};

TEST_F(ManagerTest, AConflictingWriteIsRetriedAgainstTheNewConfiguration) {
  for (NodeId i = 0; i < 4; ++i) Hold(i, i == 3 ? 4 * kLease : 1'000 * kLease);
  InterferingStore interfering(store_.get());
  ManagerOptions o;
  o.lease = kLease;
  Manager m(&interfering, ex_, o);
  ex_->Post([&] { m.Start([&](const Manager::Reassigned& r) { reassigned_.push_back(r); }, nullptr); });
  rt_.RunUntil(20 * kLease);
  ASSERT_TRUE(interfering.interfered_);
  ASSERT_EQ(reassigned_.size(), 1u);
  EXPECT_EQ(reassigned_[0].failed, 3u);
  EXPECT_EQ(reassigned_[0].after.config.term, 3u) << "computed again from the other writer's term 2";
  EXPECT_EQ(Stored().nodes.at(0).address, "elsewhere") << "the other write is kept";
  EXPECT_EQ(Stored().nodes.at(3).state, NodeState::kDown);
  ex_->Post([&] { m.Stop(); });
  rt_.RunUntil(21 * kLease);
}

}  // namespace
}  // namespace slip::cluster
