// The ConfigStore contract, checked the same way against every backend.
// `open` returns a new store instance over the same backing state (another
// "process" as far as the store can tell).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "cluster/config_store.h"

namespace slip::cluster::testing {

using OpenFn = std::function<std::unique_ptr<ConfigStore>()>;

inline ClusterConfig TestConfig(uint64_t term, const std::string& tag = "") {
  std::map<NodeId, std::string> nodes;
  for (NodeId i = 1; i <= 4; i++) nodes[i] = "127.0.0.1:" + std::to_string(7100 + i) + tag;
  ClusterConfig c = Place(nodes, 8, 2).value();
  c.term = term;
  return c;
}

inline void CheckCas(const OpenFn& open) {
  auto a = open(), b = open();
  EXPECT_TRUE(a->Load().status().Is(Code::kNotFound));
  Result<uint64_t> v1 = a->CompareAndSwap(kNoVersion, TestConfig(1));
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_NE(*v1, kNoVersion);

  Result<VersionedConfig> seen = b->Load();
  ASSERT_TRUE(seen.ok()) << seen.status().ToString();
  EXPECT_EQ(seen->version, *v1);
  EXPECT_EQ(seen->config, TestConfig(1));

  EXPECT_TRUE(b->CompareAndSwap(kNoVersion, TestConfig(2)).status().Is(Code::kAborted));
  EXPECT_TRUE(b->CompareAndSwap(*v1 + 7, TestConfig(2)).status().Is(Code::kAborted));
  Status same_term = b->CompareAndSwap(*v1, TestConfig(1, "x")).status();
  EXPECT_TRUE(same_term.Is(Code::kInvalidArgument)) << same_term.ToString();
  ClusterConfig invalid = TestConfig(2);
  invalid.shards[0].backups = {invalid.shards[0].primary};
  EXPECT_TRUE(b->CompareAndSwap(*v1, invalid).status().Is(Code::kInvalidArgument));

  Result<uint64_t> v2 = b->CompareAndSwap(*v1, TestConfig(2));
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_NE(*v2, *v1);
  // a's view is stale now.
  Status stale = a->CompareAndSwap(*v1, TestConfig(3)).status();
  EXPECT_TRUE(stale.Is(Code::kAborted)) << stale.ToString();
  seen = a->Load();
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->version, *v2);
  EXPECT_EQ(seen->config.term, 2u);
}

// `threads` store instances read the same version and race to CAS: exactly
// one wins each round and the stored configuration is the winner's.
inline void CheckCasRace(const OpenFn& open, int threads, int rounds) {
  std::vector<std::unique_ptr<ConfigStore>> stores;
  for (int i = 0; i < threads; i++) stores.push_back(open());
  Result<uint64_t> v = stores[0]->CompareAndSwap(kNoVersion, TestConfig(1));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  uint64_t version = *v;
  for (int round = 0; round < rounds; round++) {
    const uint64_t term = static_cast<uint64_t>(round) + 2;
    std::barrier sync(threads);
    std::vector<Result<uint64_t>> results(static_cast<size_t>(threads), Status::Aborted("unset"));
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; i++) {
      ts.emplace_back([&, i] {
        sync.arrive_and_wait();
        results[static_cast<size_t>(i)] =
            stores[static_cast<size_t>(i)]->CompareAndSwap(version, TestConfig(term, "#" + std::to_string(i)));
      });
    }
    for (auto& t : ts) t.join();
    int winner = -1, wins = 0;
    for (int i = 0; i < threads; i++) {
      const auto& r = results[static_cast<size_t>(i)];
      if (r.ok()) {
        wins++;
        winner = i;
        version = *r;
      } else {
        EXPECT_TRUE(r.status().Is(Code::kAborted)) << r.status().ToString();
      }
    }
    ASSERT_EQ(wins, 1) << "round " << round;
    Result<VersionedConfig> now = stores[0]->Load();
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(now->version, version);
    EXPECT_EQ(now->config, TestConfig(term, "#" + std::to_string(winner)));
  }
}

// Watch fires when another instance writes, at once when already stale.
inline void CheckWatch(const OpenFn& open) {
  auto a = open(), b = open();
  std::promise<void> p1;
  ASSERT_TRUE(a->Watch(kNoVersion, [&] { p1.set_value(); }).ok());
  Result<uint64_t> v = b->CompareAndSwap(kNoVersion, TestConfig(1));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(p1.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "watch on an absent config did not fire on create";

  std::promise<void> p2;
  ASSERT_TRUE(a->Watch(kNoVersion, [&] { p2.set_value(); }).ok());
  EXPECT_EQ(p2.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "watch with a stale version did not fire at once";

  std::promise<void> p3;
  std::atomic<int> fired{0};
  ASSERT_TRUE(a->Watch(*v, [&] {
                 if (fired++ == 0) p3.set_value();
               }).ok());
  auto f3 = p3.get_future();
  EXPECT_EQ(f3.wait_for(std::chrono::milliseconds(150)), std::future_status::timeout)
      << "fired without a change";
  ASSERT_TRUE(b->CompareAndSwap(*v, TestConfig(2)).ok());
  EXPECT_EQ(f3.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  // A callback may call back into the store.
  std::promise<uint64_t> p4;
  ASSERT_TRUE(a->Watch(*v, [&] { p4.set_value(a->Load()->version); }).ok());
  auto f4 = p4.get_future();
  ASSERT_EQ(f4.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_NE(f4.get(), *v);
  // Pending at destruction: dropped, never run.
  const uint64_t cur = b->Load()->version;
  auto late = std::make_shared<std::atomic<bool>>(false);
  ASSERT_TRUE(a->Watch(cur, [late] { late->store(true); }).ok());
  a.reset();
  ASSERT_TRUE(b->CompareAndSwap(cur, TestConfig(3)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(late->load());
  EXPECT_EQ(fired.load(), 1);
}

// Leases between two instances, where holders hand over through Release.
inline void CheckLeaseHandover(const OpenFn& open) {
  auto a = open(), b = open();
  const Nanos ttl = 10 * runtime::kSecond;
  Result<Lease> la = a->AcquireLease("cm", "alpha", ttl, 1000);
  ASSERT_TRUE(la.ok()) << la.status().ToString();
  EXPECT_GT(la->expiry, 1000);
  EXPECT_LE(la->expiry, 1000 + ttl);
  Status busy = b->AcquireLease("cm", "beta", ttl, 2000).status();
  EXPECT_TRUE(busy.Is(Code::kBusy)) << busy.ToString();
  EXPECT_NE(busy.message().find("alpha"), std::string::npos) << busy.message();
  // A caller whose `now` was read before the grant (it waited for the store
  // meanwhile) still finds the lease held, not "from a clock that went back".
  EXPECT_TRUE(b->AcquireLease("cm", "beta", ttl, 500).status().Is(Code::kBusy));
  // The same holder re-acquiring is a renewal: same epoch.
  Result<Lease> again = a->AcquireLease("cm", "alpha", ttl, 3000);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->epoch, la->epoch);
  Result<Lease> renewed = a->RenewLease(*la, ttl, 4000);
  ASSERT_TRUE(renewed.ok()) << renewed.status().ToString();
  EXPECT_EQ(renewed->epoch, la->epoch);
  EXPECT_GT(renewed->expiry, la->expiry);
  // Other names are independent.
  EXPECT_TRUE(b->AcquireLease("other", "beta", ttl, 4000).ok());

  ASSERT_TRUE(a->ReleaseLease(*renewed).ok());
  Result<Lease> lb = b->AcquireLease("cm", "beta", ttl, 5000);
  ASSERT_TRUE(lb.ok()) << lb.status().ToString();
  EXPECT_GT(lb->epoch, la->epoch) << "a new holder gets a higher epoch";
  EXPECT_TRUE(a->RenewLease(*renewed, ttl, 6000).status().Is(Code::kAborted));
  EXPECT_TRUE(a->ReleaseLease(*renewed).ok()) << "releasing a lost lease is harmless";
  EXPECT_TRUE(b->RenewLease(*lb, ttl, 7000).ok()) << "and does not touch the new holder's";
  EXPECT_TRUE(a->AcquireLease("bad/name", "x", ttl, 0).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(a->AcquireLease("cm", "", ttl, 0).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(a->AcquireLease("cm", "x", 0, 0).status().Is(Code::kInvalidArgument));
}

}  // namespace slip::cluster::testing
