// Membership (node/membership.h): configuration changes by compare-and-swap
// recomputed on conflicts, a lease taken once an earlier holder's ran out,
// the owner told when the lease is lost, and newer configurations heard.
#include "node/membership.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "cluster/config_store.h"
#include "node/node_process.h"
#include "runtime/thread_runtime.h"

namespace slip::node {
namespace {

cluster::ClusterConfig Config() {
  auto c = cluster::Place({{0, "a"}, {1, "b"}}, 4, 1);
  EXPECT_TRUE(c.ok());
  return *c;
}

template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

TEST(MembershipTest, UpdatesAcquiresRenewsWatchesAndNoticesALostLease) {
  auto store = cluster::OpenMemoryStore(cluster::NewMemoryStoreState());
  ASSERT_TRUE(store->CompareAndSwap(cluster::kNoVersion, Config()).ok());
  runtime::ThreadRuntime rt;
  runtime::Executor* control = rt.CreateExecutor("control");
  ASSERT_TRUE(rt.Start().ok());
  const runtime::Nanos ttl = 200 * runtime::kMillisecond;
  Membership m(store.get(), control, ttl);

  // A change made from the newest configuration, whoever wrote last.
  auto other = store->Load();
  ASSERT_TRUE(other.ok());
  cluster::ClusterConfig bumped = other->config;
  ++bumped.term;
  ASSERT_TRUE(store->CompareAndSwap(other->version, bumped).ok());
  ASSERT_TRUE(m.Update([](const cluster::ClusterConfig& c) -> Result<cluster::ClusterConfig> {
                 cluster::ClusterConfig next = c;
                 next.pool = "beef";
                 ++next.term;
                 return next;
               }).ok());
  auto now = store->Load();
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->config.term, bumped.term + 1);
  EXPECT_EQ(now->config.pool, "beef");
  EXPECT_TRUE(m.Update([](const cluster::ClusterConfig&) -> Result<cluster::ClusterConfig> {
                 return Status::InvalidArgument("refused");
               }).Is(Code::kInvalidArgument));

  // An earlier holder's lease runs out first; then ours is renewed past its ttl.
  ASSERT_TRUE(store->AcquireLease("x", "earlier", ttl, MachineNow()).ok());
  ASSERT_TRUE(m.Acquire("x", "us").ok());
  EXPECT_GT(m.lease_expiry(), 0);
  std::atomic<int> lost{0};
  m.KeepAlive([&](Status s) {
    EXPECT_TRUE(s.Is(Code::kAborted)) << s.ToString();
    ++lost;
  });
  std::this_thread::sleep_for(3 * std::chrono::nanoseconds(ttl));
  EXPECT_EQ(lost.load(), 0) << "renewed in time";
  EXPECT_GT(m.lease_expiry(), MachineNow());

  // Newer configurations are heard.
  std::atomic<uint64_t> heard{0};
  m.Watch(now->version, [&](const cluster::VersionedConfig& vc) { heard = vc.config.term; });
  cluster::ClusterConfig next = now->config;
  ++next.term;
  ASSERT_TRUE(store->CompareAndSwap(now->version, next).ok());
  EXPECT_TRUE(Eventually([&] { return heard.load() == next.term; }));

  // Someone takes the lease (as a clock past its expiry sees it): the next
  // renewal fails and the owner is told, once.
  ASSERT_TRUE(store->AcquireLease("x", "thief", ttl, MachineNow() + 10 * ttl).ok());
  EXPECT_TRUE(Eventually([&] { return lost.load() == 1; }));
  std::this_thread::sleep_for(std::chrono::nanoseconds(ttl));
  EXPECT_EQ(lost.load(), 1);
  EXPECT_EQ(m.lease_expiry(), 0);
  rt.Stop();
}

// Listing itself, a process holds its lease during the update when it asks
// to (a probe then finds it busy) and after it in either case; the lease
// taken first is renewed, not taken again, by the same holder.
TEST(MembershipTest, UpdateHoldingLeaseTakesTheLeaseFirstWhenAsked) {
  for (const bool lease_first : {true, false}) {
    auto store = cluster::OpenMemoryStore(cluster::NewMemoryStoreState());
    ASSERT_TRUE(store->CompareAndSwap(cluster::kNoVersion, Config()).ok());
    runtime::ThreadRuntime rt;
    Membership m(store.get(), rt.CreateExecutor("control"), runtime::kSecond);
    bool held_during = false;
    ASSERT_TRUE(m.UpdateHoldingLease("node-7", "me", lease_first,
                                     [&](const cluster::ClusterConfig& c) -> Result<cluster::ClusterConfig> {
                                       auto probe = store->AcquireLease("node-7", "manager", runtime::kSecond,
                                                                        MachineNow());
                                       held_during = !probe.ok() && probe.status().Is(Code::kBusy);
                                       if (probe.ok()) {
                                         EXPECT_TRUE(store->ReleaseLease(*probe).ok());
                                       }
                                       cluster::ClusterConfig next = c;
                                       ++next.term;
                                       return next;
                                     })
                    .ok());
    EXPECT_EQ(held_during, lease_first);
    EXPECT_GT(m.lease_expiry(), MachineNow()) << "held after the update";
    EXPECT_TRUE(store->AcquireLease("node-7", "manager", runtime::kSecond, MachineNow()).status().Is(Code::kBusy));
  }
}

// A process whose listing fails does not serve: the lease it took first is
// given back at once, not left to run out, so a restarted process (another
// holder) takes it without waiting and the manager sees the node gone.
TEST(MembershipTest, UpdateHoldingLeaseReleasesTheLeaseItTookWhenTheUpdateFails) {
  auto store = cluster::OpenMemoryStore(cluster::NewMemoryStoreState());
  ASSERT_TRUE(store->CompareAndSwap(cluster::kNoVersion, Config()).ok());
  runtime::ThreadRuntime rt;
  Membership m(store.get(), rt.CreateExecutor("control"), 30 * runtime::kSecond);
  Status s = m.UpdateHoldingLease("node-7", "me", true,
                                  [](const cluster::ClusterConfig&) -> Result<cluster::ClusterConfig> {
                                    return Status::Aborted("replaced while starting");
                                  });
  EXPECT_TRUE(s.Is(Code::kAborted)) << s.ToString();
  EXPECT_EQ(m.lease_expiry(), 0);
  auto next = store->AcquireLease("node-7", "me-again", runtime::kSecond, MachineNow());
  EXPECT_TRUE(next.ok()) << "the lease was left held: " << next.status().ToString();
  auto v = store->Load();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->config.term, Config().term) << "the failed update changed nothing";
}

}  // namespace
}  // namespace slip::node
