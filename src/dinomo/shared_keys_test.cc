// Shared keys (selective replication, docs/papers/dinomo.md §4d): a hot key
// owned by several KVS nodes at once through its indirect cell in the pool.
// Round trips (a shared read 2, 3 the first time; a write its batch plus a
// swap), another owner's write seen at once, no value ever cached (D7),
// concurrent writers ordered by the swap, merges that leave the cell alone
// and collect what the word moved away from (D10), de-replication pointing
// the index back at the newest entry, and a restarted pool finding its
// cells again.
#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "dinomo/cell.h"
#include "dinomo/kvs_node.h"
#include "dinomo/testing/sim_pool.h"

namespace slip::dinomo {
namespace {

using runtime::kMillisecond;

std::string Val(const Result<std::string>& r) { return r.ok() ? *r : r.status().ToString(); }

class SharedKeysTest : public ::testing::Test {
 protected:
  using Kn = testing::SimPool::Node;

  void SetUp() override {
    PoolOptions po;
    po.segment_bytes = 64 << 10;
    po.num_buckets = 1024;
    world_ = std::make_unique<testing::SimPool>(rt_, 4 << 20, po);
  }
  Kn& AddNode(uint32_t id, std::set<std::string> shared, uint64_t epoch = 1) {
    KvsNodeOptions o;
    o.node = id;
    o.epoch = epoch;
    o.shared = std::move(shared);
    o.cache.capacity_bytes = 1 << 20;  // room for values: none of a shared key may be one
    std::optional<Status> ready;
    Kn& kn = world_->AddNode(o, [&](Status s) { ready = s; });
    EXPECT_TRUE(rt_.RunUntil([&] { return ready.has_value(); }, rt_.Now() + 100 * kMillisecond));
    EXPECT_TRUE(ready && ready->ok());
    return kn;
  }
  Pool& pool() { return world_->pool(); }
  Status Put(Kn& kn, const std::string& key, const std::string& value) {
    std::optional<Status> got;
    kn.exec->Post([&] { kn.node->Put(key, value, [&](Status s) { got = s; }); });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * kMillisecond));
    return got.value_or(Status::Aborted("no answer"));
  }
  Result<std::string> Get(Kn& kn, const std::string& key, uint64_t* rts = nullptr) {
    const uint64_t before = kn.node->stats().get_round_trips;
    std::optional<Result<std::string>> got;
    kn.exec->Post([&] { kn.node->Get(key, [&](Result<std::string> r) { got = std::move(r); }); });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * kMillisecond));
    if (rts) *rts = kn.node->stats().get_round_trips - before;
    return got.value_or(Status::Aborted("no answer"));
  }
  // The node's writes merged: fills its open segment so it seals.
  void Settle(Kn& kn) {
    int left = 400;
    kn.exec->Post([&] {
      for (int i = 0; i < 400; ++i) {
        kn.node->Put("filler" + std::to_string(i), std::string(200, 'f'), [&](Status) { --left; });
      }
    });
    ASSERT_TRUE(rt_.RunUntil([&] { return left == 0; }, rt_.Now() + 1000 * kMillisecond));
    rt_.RunUntil(rt_.Now() + 10 * kMillisecond);
  }
  std::string ValueAt(std::optional<IndexPointer> p) {
    if (!p || p->cell) return "(none)";
    auto d = log::DecodeBlock({world_->region().at(p->offset), p->bytes}, log::Limits{});
    return d.status.ok() ? std::string(d.block.value()) : "(undecodable)";
  }

  runtime::SimRuntime rt_{runtime::SimRuntimeOptions{.seed = 9}};
  std::unique_ptr<testing::SimPool> world_;
};

TEST_F(SharedKeysTest, OwnersShareAKeyThroughItsCell) {
  Kn& a = AddNode(1, {});
  ASSERT_TRUE(Put(a, "hot", "v0").ok());
  Settle(a);
  // The owner's writes are merged; the pool makes the key shared.
  auto cell = pool().Share("hot");
  ASSERT_TRUE(cell.ok()) << cell.status().ToString();
  EXPECT_TRUE(cell->cell);
  EXPECT_EQ(pool().index().Find("hot"), *cell);
  EXPECT_EQ(pool().Share("hot").value(), *cell) << "sharing again changes nothing";
  EXPECT_EQ(pool().stats().shared_keys, 1u);

  Kn& b = AddNode(2, {"hot"});
  Kn& c = AddNode(3, {"hot"});
  uint64_t rts = 0;
  EXPECT_EQ(Val(Get(b, "hot", &rts)), "v0");
  EXPECT_EQ(rts, 3u) << "first read: bucket, cell, entry";
  EXPECT_EQ(Val(Get(b, "hot", &rts)), "v0");
  EXPECT_EQ(rts, 2u) << "then: cell, entry";

  // A write takes effect at its swap: the other owner sees it at once.
  ASSERT_TRUE(Put(b, "hot", "v1").ok());
  EXPECT_EQ(b.node->stats().swaps, 1u);
  EXPECT_EQ(Val(Get(c, "hot", &rts)), "v1");
  EXPECT_EQ(Val(Get(b, "hot", &rts)), "v1");
  EXPECT_EQ(rts, 2u) << "never a value hit, nor the node's own unmerged write (D7)";

  // c last saw v1; b moves the word on; c's swap meets it and goes again.
  ASSERT_TRUE(Put(b, "hot", "v2").ok());
  ASSERT_TRUE(Put(c, "hot", "v3").ok());
  EXPECT_EQ(c.node->stats().swap_retries, 1u);
  EXPECT_EQ(Val(Get(b, "hot")), "v3");

  // A delete is a tombstone swapped in.
  c.exec->Post([&] { c.node->Delete("hot", [](Status) {}); });
  rt_.RunUntil(rt_.Now() + 5 * kMillisecond);
  EXPECT_TRUE(Get(b, "hot").status().Is(Code::kNotFound));
  // The index still points at the cell: merges leave shared keys alone.
  Settle(b);
  Settle(c);
  EXPECT_EQ(pool().index().Find("hot"), *cell);
  EXPECT_EQ(b.node->stats().shared_gets, b.node->stats().gets) << "b read nothing but the shared key";
}

TEST_F(SharedKeysTest, ConcurrentWritersLeaveOneValueEveryOwnerReads) {
  Kn& a = AddNode(1, {});
  ASSERT_TRUE(Put(a, "hot", "start").ok());
  Settle(a);
  ASSERT_TRUE(pool().Share("hot").ok());
  Kn* owners[3] = {&AddNode(2, {"hot"}), &AddNode(3, {"hot"}), &AddNode(4, {"hot"})};
  int acked = 0;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 3; ++i) {
      Kn& k = *owners[i];
      k.exec->Post([&, i, round] {
        k.node->Put("hot", "n" + std::to_string(i) + "r" + std::to_string(round), [&](Status s) {
          EXPECT_TRUE(s.ok()) << s.ToString();
          ++acked;
        });
      });
    }
  }
  ASSERT_TRUE(rt_.RunUntil([&] { return acked == 60; }, rt_.Now() + 1000 * kMillisecond));
  const std::string v = Val(Get(*owners[0], "hot"));
  EXPECT_EQ(Val(Get(*owners[1], "hot")), v);
  EXPECT_EQ(Val(Get(*owners[2], "hot")), v);
  uint64_t retries = 0, swaps = 0;
  for (Kn* k : owners) {
    retries += k->node->stats().swap_retries;
    swaps += k->node->stats().swaps;
  }
  EXPECT_GT(retries, 0u) << "writers raced for the word";
  EXPECT_LT(swaps - retries, 60u) << "a node's writes of the key landing together share a swap";
}

TEST_F(SharedKeysTest, WordsMovedAwayFromAreCollected) {
  Kn& a = AddNode(1, {});
  ASSERT_TRUE(Put(a, "hot", "start").ok());
  Settle(a);
  ASSERT_TRUE(pool().Share("hot").ok());
  Kn& b = AddNode(2, {"hot"});
  Kn& c = AddNode(3, {"hot"});
  // ~1,000 entries of 1 KB: 16 segments' worth, in a pool of ~60.
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(Put(i % 2 ? b : c, "hot", std::to_string(i) + std::string(1000, 'v')).ok());
    ASSERT_TRUE(Put(i % 2 ? c : b, "hot", std::to_string(i) + "+" + std::string(1000, 'w')).ok());
  }
  EXPECT_GT(pool().stats().freed_segments, 5u);
  EXPECT_LT(pool().stats().segments - pool().stats().free_segments, 10u) << "at most the open and unmerged ones";
  EXPECT_EQ(Val(Get(b, "hot")), "499+" + std::string(1000, 'w'));
}

TEST_F(SharedKeysTest, DereplicationPointsTheIndexAtTheNewestEntry) {
  Kn& a = AddNode(1, {});
  ASSERT_TRUE(Put(a, "hot", "v0").ok());
  Settle(a);
  ASSERT_TRUE(pool().Share("hot").ok());
  Kn& b = AddNode(2, {"hot"});
  Kn& c = AddNode(3, {"hot"});
  ASSERT_TRUE(Put(b, "hot", "from-b").ok());
  ASSERT_TRUE(Put(c, "hot", "from-c").ok());
  // Every owner stops and has its log merged (the reconfiguration's
  // settle), then the cell goes.
  rt_.RunUntil(rt_.Now() + 5 * kMillisecond);
  ASSERT_TRUE(world_->FenceAndMerge(2, 2).ok());
  ASSERT_TRUE(world_->FenceAndMerge(3, 2).ok());
  ASSERT_TRUE(pool().Unshare("hot").ok());
  EXPECT_EQ(pool().stats().shared_keys, 0u);
  EXPECT_EQ(ValueAt(pool().index().Find("hot")), "from-c");
  EXPECT_TRUE(pool().Unshare("hot").ok()) << "unsharing again changes nothing";
  // The key's one owner again, at a later epoch.
  Kn& d = AddNode(4, {}, 2);
  uint64_t rts = 0;
  EXPECT_EQ(Val(Get(d, "hot", &rts)), "from-c");
  EXPECT_EQ(rts, 2u) << "bucket and entry, as any key";
  ASSERT_TRUE(Put(d, "hot", "from-d").ok());
  Settle(d);
  EXPECT_EQ(ValueAt(pool().index().Find("hot")), "from-d");
}

TEST_F(SharedKeysTest, ARestartedPoolFindsItsCells) {
  Kn& a = AddNode(1, {});
  ASSERT_TRUE(Put(a, "hot", "v0").ok());
  ASSERT_TRUE(Put(a, "cold", "c0").ok());
  Settle(a);
  auto cell = pool().Share("hot");
  ASSERT_TRUE(cell.ok());
  Kn& b = AddNode(2, {"hot"});
  ASSERT_TRUE(Put(b, "hot", "v1").ok());
  Settle(b);
  // A cell made but never installed (the pool died between the two).
  ASSERT_TRUE(pool().Share("orphan").ok());
  ASSERT_TRUE(pool().index().Set("orphan", std::nullopt).ok());
  rt_.RunUntil(rt_.Now() + 5 * kMillisecond);
  world_->Kill(a);
  world_->Kill(b);
  world_->RestartPool();
  EXPECT_EQ(pool().stats().shared_keys, 1u) << "the orphan is dropped";
  EXPECT_EQ(pool().index().Find("hot"), *cell);
  Kn& c = AddNode(3, {"hot"}, 3);
  EXPECT_EQ(Val(Get(c, "hot")), "v1");
  EXPECT_EQ(Val(Get(c, "cold")), "c0");
  ASSERT_TRUE(Put(c, "hot", "v2").ok());
  EXPECT_EQ(Val(Get(c, "hot")), "v2");
}

TEST_F(SharedKeysTest, AWriteToAKeyThePoolDoesNotShareFails) {
  Kn& b = AddNode(2, {"hot"});
  Status s = Put(b, "hot", "v");
  EXPECT_TRUE(s.Is(Code::kUnavailable)) << s.ToString();
  EXPECT_NE(s.message().find("no cell"), std::string::npos) << s.ToString();
  EXPECT_TRUE(Get(b, "hot").status().Is(Code::kNotFound));
}

// On a pool that is a file, a shared key's write is acknowledged only once
// its cell's word is persisted too (POOL_PERSIST of the word, after the
// batch's): power lost after the acknowledgement loses nothing.
TEST(SharedKeysDurability, AcknowledgedSwapsSurvivePowerLossOnAFilePool) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = seed});
    PoolOptions po;
    po.segment_bytes = 64 << 10;
    po.num_buckets = 1024;
    testing::SimPool w(rt, 4 << 20, po, {}, pm::RegionOptions{.mode = pm::PersistMode::kMsync, .crash_model = true});
    ASSERT_TRUE(w.pool().Share("hot").ok());
    auto start = [&](uint32_t id, uint64_t epoch) -> testing::SimPool::Node& {
      KvsNodeOptions o;
      o.node = id;
      o.epoch = epoch;
      o.batch_entries = 4;
      o.shared = {"hot"};
      std::optional<Status> ready;
      auto& n = w.AddNode(o, [&](Status s) { ready = s; });
      EXPECT_TRUE(rt.RunUntil([&] { return ready.has_value(); }, rt.Now() + 100 * kMillisecond));
      return n;
    };
    auto& a = start(1, 1);
    auto& b = start(2, 1);
    std::string last;
    for (int i = 0; i < 30; ++i) {
      auto& k = i % 2 ? a : b;
      const std::string v = "v" + std::to_string(i) + std::string(100, '.');
      std::optional<Status> got;
      k.exec->Post([&] { k.node->Put("hot", v, [&](Status st) { got = st; }); });
      ASSERT_TRUE(rt.RunUntil([&] { return got.has_value(); }, rt.Now() + 100 * kMillisecond));
      ASSERT_TRUE(got->ok()) << got->ToString();
      last = v;
    }
    EXPECT_GE(a.node->stats().persists + b.node->stats().persists, 60u) << "a batch's and a word's per write";
    w.Kill(a);
    w.Kill(b);
    w.region().SimulateCrash(seed);
    w.RestartPool();
    ASSERT_TRUE(w.FenceAndMerge(1, 2).ok());
    ASSERT_TRUE(w.FenceAndMerge(2, 2).ok());
    auto& c = start(3, 2);
    std::optional<Result<std::string>> got;
    c.exec->Post([&] { c.node->Get("hot", [&](Result<std::string> r) { got = std::move(r); }); });
    ASSERT_TRUE(rt.RunUntil([&] { return got.has_value(); }, rt.Now() + 100 * kMillisecond));
    EXPECT_EQ(Val(*got), last) << "seed " << seed;
    w.Kill(c);
  }
}

TEST(CellTest, EncodesAndRefusesWhatIsNotACell) {
  std::vector<std::byte> buf(CellBytes(5));
  EXPECT_EQ(buf.size(), 64u);
  EncodeCell(buf, "hello", 0x1234);
  auto v = ParseCell(buf);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->key, "hello");
  EXPECT_EQ(v->word, 0x1234u);
  EXPECT_EQ(v->magic, kCellMagic);
  buf[kCellHeader] = std::byte{'j'};  // the key no longer matches its CRC
  EXPECT_FALSE(ParseCell(buf).has_value());
  // A longer key's cell read with a shorter key's size: not this key's.
  std::vector<std::byte> longer(CellBytes(40));
  EncodeCell(longer, std::string(40, 'k'), 1);
  EXPECT_FALSE(ParseCell(std::span<const std::byte>(longer).first(64)).has_value());
  EXPECT_TRUE(ParseCell(longer).has_value());
  std::vector<std::byte> zero(64);
  EXPECT_FALSE(ParseCell(zero).has_value()) << "never-written space";
  EXPECT_EQ(static_cast<uint8_t>(kCellMagic & 0xff), 0xf0) << "never a log block's type";
}

}  // namespace
}  // namespace slip::dinomo
