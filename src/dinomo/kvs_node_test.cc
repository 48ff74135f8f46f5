// A DINOMO KVS node against the pool over the simulated fabric
// (dinomo/kvs_node.h, pool_server.h): the round trips of invariant D12
// exactly (unmerged hit 0, value hit 0, shortcut hit 1, miss 2, a write
// 1/B), segments sealed and merged under back-pressure (D9), a node that
// dies with open segments whose keys another node serves after the pool
// merged them (D4), and bad input refused.
#include "dinomo/kvs_node.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "dinomo/testing/sim_pool.h"
#include "proto/kv.h"

namespace slip::dinomo {
namespace {

using runtime::kMillisecond;

class KvsNodeTest : public ::testing::Test {
 protected:
  using Kn = testing::SimPool::Node;

  void SetUp() override {
    PoolOptions po;
    po.segment_bytes = 64 << 10;
    po.num_buckets = 1024;
    world_ = std::make_unique<testing::SimPool>(rt_, 4 << 20, po);
  }

  Kn& AddNode(uint32_t id, KvsNodeOptions o = {}) {
    o.node = id;
    std::optional<Status> ready;
    Kn& kn = world_->AddNode(o, [&](Status s) { ready = s; });
    EXPECT_TRUE(rt_.RunUntil([&] { return ready.has_value(); }, rt_.Now() + 100 * kMillisecond));
    EXPECT_TRUE(ready && ready->ok()) << (ready ? ready->ToString() : "no answer");
    return kn;
  }
  Pool& pool() { return world_->pool(); }
  const std::byte* at(uint64_t offset) { return world_->region().at(offset); }

  Status Put(Kn& kn, const std::string& key, const std::string& value) {
    std::optional<Status> got;
    kn.exec->Post([&] { kn.node->Put(key, value, [&](Status s) { got = s; }); });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * kMillisecond));
    return got.value_or(Status::Aborted("no answer"));
  }
  // Many writes at once: they share batches.
  void PutAll(Kn& kn, const std::map<std::string, std::string>& kvs) {
    PutAll(kn, std::vector<std::pair<std::string, std::string>>(kvs.begin(), kvs.end()));
  }
  void PutAll(Kn& kn, const std::vector<std::pair<std::string, std::string>>& kvs) {
    int left = static_cast<int>(kvs.size());
    kn.exec->Post([&] {
      for (const auto& [k, v] : kvs) kn.node->Put(k, v, [&](Status s) {
        EXPECT_TRUE(s.ok()) << s.ToString();
        --left;
      });
    });
    ASSERT_TRUE(rt_.RunUntil([&] { return left == 0; }, rt_.Now() + 1000 * kMillisecond));
  }
  // The node is gone (its DRAM with it); the pool keeps its open segments.
  void Kill(Kn& kn) { world_->Kill(kn); }
  Result<std::string> Get(Kn& kn, const std::string& key) {
    std::optional<Result<std::string>> got;
    kn.exec->Post([&] { kn.node->Get(key, [&](Result<std::string> r) { got = std::move(r); }); });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * kMillisecond));
    return got.value_or(Status::Aborted("no answer"));
  }
  // The round trips the node's next GET of `key` costs.
  uint64_t RoundTripsOf(Kn& kn, const std::string& key, std::string* value = nullptr) {
    const uint64_t before = kn.node->stats().get_round_trips;
    auto r = Get(kn, key);
    if (value) *value = r.ok() ? *r : r.status().ToString();
    return kn.node->stats().get_round_trips - before;
  }
  // Seals the node's open segment by filling it (small segments): its
  // writes become merged, no longer in the node's DRAM.
  void Settle(Kn& kn) {
    std::map<std::string, std::string> filler;
    for (int i = 0; i < 2000; ++i) filler["filler" + std::to_string(i)] = std::string(100, 'f');
    PutAll(kn, filler);
    rt_.RunUntil(rt_.Now() + 10 * kMillisecond);
  }

  runtime::SimRuntime rt_{runtime::SimRuntimeOptions{.seed = 5}};
  std::unique_ptr<testing::SimPool> world_;
};

TEST_F(KvsNodeTest, RoundTripsAreThoseOfD12) {
  KvsNodeOptions o;
  o.cache.capacity_bytes = 1 << 20;
  Kn& a = AddNode(1, o);
  ASSERT_TRUE(Put(a, "apple", "red").ok());
  std::string v;
  EXPECT_EQ(RoundTripsOf(a, "apple", &v), 0u) << "in the node's unmerged segment";
  EXPECT_EQ(v, "red");
  Settle(a);
  ASSERT_LT(a.node->unmerged_segments(), 2u);
  // Merged now; the node cached it when it wrote it (a value: spare space).
  EXPECT_EQ(RoundTripsOf(a, "apple", &v), 0u) << "value hit";
  EXPECT_EQ(v, "red");

  // Another node (the key's next owner) has an empty cache: a miss reads
  // the bucket, then the entry; then its cache has it.
  KvsNodeOptions tiny;
  tiny.cache.capacity_bytes = 22;  // room for one shortcut (5 + 16 B), never a value (+3)
  Kn& b = AddNode(2, tiny);
  EXPECT_EQ(RoundTripsOf(b, "apple", &v), 2u) << "miss: bucket + entry";
  EXPECT_EQ(v, "red");
  EXPECT_EQ(RoundTripsOf(b, "apple", &v), 1u) << "shortcut hit: the entry";
  EXPECT_EQ(v, "red");
  EXPECT_EQ(RoundTripsOf(b, "pear", &v), 1u) << "an absent key: its (empty) bucket";
  EXPECT_NE(v.find("NotFound"), std::string::npos) << v;
  EXPECT_EQ(b.node->stats().misses, 2u);
  EXPECT_EQ(b.node->stats().shortcut_hits, 1u);
}

TEST_F(KvsNodeTest, WritesShareBatchesOfOneRoundTrip) {
  KvsNodeOptions o;
  o.batch_entries = 8;
  Kn& a = AddNode(1, o);
  std::map<std::string, std::string> kvs;
  for (int i = 0; i < 64; ++i) kvs["k" + std::to_string(i)] = "v" + std::to_string(i);
  PutAll(a, kvs);
  EXPECT_EQ(a.node->stats().writes, 64u);
  EXPECT_EQ(a.node->stats().batches, 8u) << "D12: a write costs 1/B round trips";
  for (const auto& [k, v] : kvs) EXPECT_EQ(*Get(a, k), v);
}

TEST_F(KvsNodeTest, SegmentsAreSealedMergedAndNeverMoreThanTwoUnmerged) {
  Kn& a = AddNode(1);
  std::vector<std::pair<std::string, std::string>> writes;
  std::map<std::string, std::string> kvs;  // the last value of each key
  for (int i = 0; i < 3000; ++i) {
    writes.emplace_back("key" + std::to_string(i % 700), std::string(80, static_cast<char>('a' + i % 26)));
    kvs[writes.back().first] = writes.back().second;
  }
  size_t most = 0;
  a.exec->AddPoller([&] {
    if (a.node) most = std::max(most, a.node->unmerged_segments());
    return false;
  });
  PutAll(a, writes);
  rt_.RunUntil(rt_.Now() + 10 * kMillisecond);
  EXPECT_GT(a.node->stats().seals, 1u) << "writes " << a.node->stats().writes << " batches " << a.node->stats().batches
                                       << " bytes " << a.node->stats().written_bytes << " segments "
                                       << a.node->stats().segments;
  EXPECT_LE(most, 2u) << "D9";
  for (const auto& [k, v] : kvs) ASSERT_EQ(*Get(a, k), v) << k;
  // The pool holds what the node wrote: once every segment is merged, the
  // index has each key's last value.
  Kill(a);
  ASSERT_TRUE(world_->FenceAndMerge(1, 2).ok());
  for (const auto& [k, v] : kvs) {
    auto p = pool().index().Find(k);
    ASSERT_TRUE(p.has_value()) << k;
    auto d = log::DecodeBlock({at(p->offset), p->bytes}, {});
    ASSERT_TRUE(d.status.ok());
    EXPECT_EQ(d.block.value(), v) << k;
  }
}

// D4: node 1 dies with writes in open segments; once the pool merged them,
// node 2 — the keys' new owner — serves every acknowledged value.
TEST_F(KvsNodeTest, ADeadNodesWritesAreServedByTheNextOwnerAfterMergeAll) {
  Kn& a = AddNode(1);
  std::map<std::string, std::string> kvs;
  for (int i = 0; i < 50; ++i) kvs["k" + std::to_string(i)] = "v" + std::to_string(i);
  PutAll(a, kvs);
  ASSERT_TRUE(Put(a, "k7", "latest").ok());
  kvs["k7"] = "latest";
  Kill(a);
  ASSERT_FALSE(pool().OpenSegments(1).empty());
  ASSERT_TRUE(world_->FenceAndMerge(1, 2).ok());
  KvsNodeOptions later;
  later.epoch = 2;  // a later configuration: its writes win
  Kn& b = AddNode(2, later);
  for (const auto& [k, v] : kvs) EXPECT_EQ(*Get(b, k), v) << k;
  ASSERT_TRUE(Put(b, "k7", "from the new owner").ok());
  Settle(b);
  EXPECT_EQ(*Get(b, "k7"), "from the new owner");
}

// Scenario 4: a node that lost its keys but still runs (a zombie). Once the
// pool fenced it, its one-sided writes fail, the pool refuses its calls,
// and it answers everything with StaleTerm — none of its later writes is
// acknowledged or ever merged.
TEST_F(KvsNodeTest, AFencedZombieCanNeitherWriteNorServe) {
  Kn& a = AddNode(1);
  ASSERT_TRUE(Put(a, "k", "before").ok());
  ASSERT_TRUE(world_->FenceAndMerge(1, 2).ok());
  Status s = Put(a, "k", "zombie write");
  EXPECT_FALSE(s.ok()) << "a fenced node acknowledged a write";
  // The failed batch ended its segment; the seal was refused: fenced.
  rt_.RunUntil(rt_.Now() + 10 * kMillisecond);
  EXPECT_EQ(a.node->stats().fenced, 1u);
  EXPECT_TRUE(Put(a, "k", "again").Is(Code::kStaleTerm));
  EXPECT_TRUE(Get(a, "k").status().Is(Code::kStaleTerm));
  // The next owner sees the last acknowledged value, never the zombie's.
  KvsNodeOptions later;
  later.epoch = 2;
  Kn& b = AddNode(2, later);
  EXPECT_EQ(*Get(b, "k"), "before");
  ASSERT_TRUE(pool().MergeAll(1).ok());
  EXPECT_EQ(*Get(b, "k"), "before");
  // A restarted node 1 may come back only under a token at least the fence.
  std::optional<Status> stale;
  KvsNodeOptions old;
  old.node = 1;
  old.epoch = 1;
  world_->AddNode(old, [&](Status st) { stale = st; });
  rt_.RunUntil([&] { return stale.has_value(); }, rt_.Now() + 100 * kMillisecond);
  EXPECT_TRUE(stale && stale->Is(Code::kStaleTerm)) << (stale ? stale->ToString() : "no answer");
}

TEST_F(KvsNodeTest, DeletesAndBadInput) {
  Kn& a = AddNode(1);
  ASSERT_TRUE(Put(a, "k", "v").ok());
  std::optional<Status> del;
  a.exec->Post([&] { a.node->Delete("k", [&](Status s) { del = s; }); });
  rt_.RunUntil([&] { return del.has_value(); }, rt_.Now() + 100 * kMillisecond);
  ASSERT_TRUE(del && del->ok());
  EXPECT_TRUE(Get(a, "k").status().Is(Code::kNotFound));
  Settle(a);
  EXPECT_TRUE(Get(a, "k").status().Is(Code::kNotFound)) << "the merged tombstone";
  EXPECT_TRUE(Put(a, "", "v").Is(Code::kInvalidArgument));
  EXPECT_TRUE(Put(a, "big", std::string(40 << 10, 'x')).Is(Code::kTooLarge)) << "over half a segment";
  EXPECT_TRUE(Put(a, std::string(70 << 10, 'k'), "v").Is(Code::kTooLarge));
}

// A pool on an ordinary file (docs/papers/dinomo.md §5a "Durability"): what
// a node writes one-sidedly reaches only the page cache, so each batch is
// acknowledged only after POOL_PERSIST made it durable. Power fails (the
// crash model drops, keeps or tears every line not persisted), the pool
// restarts and merges the node's log: every acknowledged write is there.
// Without the persist calls (a pool that does not ask for them) some seed
// loses acknowledged writes — the test can tell.
TEST(KvsNodeDurability, AcknowledgedWritesSurvivePowerLossOnAFilePool) {
  auto run = [](uint64_t seed, pm::PersistMode mode, uint64_t* persists) {
    runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = seed});
    PoolOptions po;
    po.segment_bytes = 64 << 10;
    po.num_buckets = 1024;
    testing::SimPool w(rt, 4 << 20, po, {}, pm::RegionOptions{.mode = mode, .crash_model = true});
    auto start = [&](uint32_t epoch) -> testing::SimPool::Node& {
      KvsNodeOptions o;
      o.node = 1;
      o.epoch = epoch;
      o.batch_entries = 4;
      std::optional<Status> ready;
      auto& n = w.AddNode(o, [&](Status s) { ready = s; });
      EXPECT_TRUE(rt.RunUntil([&] { return ready.has_value(); }, rt.Now() + 100 * kMillisecond));
      return n;
    };
    auto& a = start(1);
    int left = 0;
    std::map<std::string, std::string> acked;
    for (int i = 0; i < 60; ++i) {
      const std::string key = "k" + std::to_string(i), value = "v" + std::to_string(i) + std::string(200, '.');
      ++left;
      a.exec->Post([&, key, value] {
        a.node->Put(key, value, [&, key, value](Status s) {
          if (s.ok()) acked[key] = value;
          --left;
        });
      });
    }
    EXPECT_TRUE(rt.RunUntil([&] { return left == 0; }, rt.Now() + 500 * kMillisecond));
    EXPECT_EQ(acked.size(), 60u);
    *persists = a.node->stats().persists;
    w.Kill(a);
    w.region().SimulateCrash(seed);
    w.RestartPool();
    EXPECT_TRUE(w.FenceAndMerge(1, 2).ok());
    auto& b = start(2);
    int lost = 0;
    for (const auto& [key, value] : acked) {
      std::optional<Result<std::string>> got;
      b.exec->Post([&, key] { b.node->Get(key, [&](Result<std::string> r) { got = std::move(r); }); });
      EXPECT_TRUE(rt.RunUntil([&] { return got.has_value(); }, rt.Now() + 100 * kMillisecond));
      lost += !(got && got->ok() && **got == value);
    }
    w.Kill(b);
    return lost;
  };
  int lost_without = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    uint64_t persists = 0;
    EXPECT_EQ(run(seed, pm::PersistMode::kMsync, &persists), 0) << "seed " << seed;
    EXPECT_GE(persists, 15u) << "one POOL_PERSIST per batch of 4";
    uint64_t none = 0;
    lost_without += run(seed, pm::PersistMode::kNone, &none);
    EXPECT_EQ(none, 0u) << "a pool in memory does not ask";
  }
  EXPECT_GT(lost_without, 0) << "without persisting, power loss should have cost some acknowledged write";
}

// The pool grows its index while a node holds the old one's place: the
// node's next lookup meets a moved bucket, asks POOL_INDEX where the index
// is now, and finds the key there (scenario 9).
TEST(KvsNodeIndexGrowth, ANodeFollowsTheIndexToItsNewPlace) {
  runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = 2});
  PoolOptions po;
  po.segment_bytes = 64 << 10;
  po.num_buckets = 2;
  po.index_bytes = 64 * 4;  // 9 slots
  testing::SimPool w(rt, 8 << 20, po);
  auto start = [&](uint32_t id) -> testing::SimPool::Node& {
    KvsNodeOptions o;
    o.node = id;
    o.cache.capacity_bytes = 0;  // every GET goes through the index
    std::optional<Status> ready;
    auto& n = w.AddNode(o, [&](Status s) { ready = s; });
    EXPECT_TRUE(rt.RunUntil([&] { return ready.has_value(); }, rt.Now() + 100 * kMillisecond));
    return n;
  };
  auto& a = start(1);
  auto& b = start(2);
  const uint64_t old_table = w.pool().index().table_offset();
  int left = 0;
  for (int i = 0; i < 1500; ++i) {
    ++left;
    a.exec->Post([&, i] { a.node->Put("key" + std::to_string(i), "v" + std::to_string(i), [&](Status) { --left; }); });
  }
  ASSERT_TRUE(rt.RunUntil([&] { return left == 0; }, rt.Now() + 2000 * kMillisecond));
  ASSERT_GE(w.pool().index_grows(), 1u) << "the seal's merge filled the index";
  ASSERT_NE(w.pool().index().table_offset(), old_table);
  for (int i : {5, 17, 400}) {
    std::optional<Result<std::string>> got;
    b.exec->Post([&] { b.node->Get("key" + std::to_string(i), [&](Result<std::string> r) { got = std::move(r); }); });
    ASSERT_TRUE(rt.RunUntil([&] { return got.has_value(); }, rt.Now() + 100 * kMillisecond));
    ASSERT_TRUE(got->ok()) << got->status().ToString();
    EXPECT_EQ(**got, "v" + std::to_string(i));
  }
  EXPECT_EQ(b.node->stats().index_moves, 1u) << "one POOL_INDEX, then the new place is kept";
  w.Kill(a);
  w.Kill(b);
}

}  // namespace
}  // namespace slip::dinomo
