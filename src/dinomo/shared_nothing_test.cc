// DINOMO-N (dinomo/shared_nothing.h): keys moving between two private
// partitions are copied with their newest entries — every acknowledged
// write arrives, a delete keeps an older copy the new owner held from
// before from coming back, and the new owner's later writes win.
#include "dinomo/shared_nothing.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "common/hash.h"
#include "dinomo/testing/sim_pool.h"
#include "proto/kv.h"
#include "proto/pool.h"
#include "rpc/local_network.h"

namespace slip::dinomo {
namespace {

using runtime::kMillisecond;
using Kn = testing::SimPool::Node;

class SharedNothingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PoolOptions po;
    po.segment_bytes = 64 << 10;
    po.num_buckets = 1024;
    a_ = std::make_unique<testing::SimPool>(rt_, 8 << 20, po);
    b_ = std::make_unique<testing::SimPool>(rt_, 8 << 20, po);
  }
  Kn& Start(testing::SimPool& w, uint32_t id, uint64_t epoch) {
    std::optional<Status> ready;
    KvsNodeOptions o;
    o.node = id;
    o.epoch = epoch;
    Kn& kn = w.AddNode(o, [&](Status s) { ready = s; });
    EXPECT_TRUE(rt_.RunUntil([&] { return ready.has_value(); }, rt_.Now() + 100 * kMillisecond));
    EXPECT_TRUE(ready && ready->ok());
    return kn;
  }
  Status Write(Kn& kn, const std::string& key, std::optional<std::string> value) {
    std::optional<Status> got;
    kn.exec->Post([&] {
      auto done = [&](Status s) { got = s; };
      if (value) {
        kn.node->Put(key, *value, done);
      } else {
        kn.node->Delete(key, done);
      }
    });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * kMillisecond));
    return got.value_or(Status::Aborted("no answer"));
  }
  std::optional<std::string> Read(Kn& kn, const std::string& key) {
    std::optional<Result<std::string>> got;
    kn.exec->Post([&] { kn.node->Get(key, [&](Result<std::string> r) { got = std::move(r); }); });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * kMillisecond));
    EXPECT_TRUE(got && (got->ok() || got->status().Is(Code::kNotFound)));
    return got && got->ok() ? std::optional<std::string>(**got) : std::nullopt;
  }

  runtime::SimRuntime rt_{runtime::SimRuntimeOptions{.seed = 9}};
  std::unique_ptr<testing::SimPool> a_, b_;
};

TEST_F(SharedNothingTest, MovedKeysArriveWithTheirNewestEntries) {
  // Node 2 owned the "m" keys once (older versions in its partition).
  Kn& old_b = Start(*b_, 2, 1);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Write(old_b, "m" + std::to_string(i), "ancient").ok());
  // Node 1 owns them now, overwrites every one twice, deletes a few; it
  // also owns "s" keys that stay.
  Kn& a = Start(*a_, 1, 2);
  std::map<std::string, std::optional<std::string>> want;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 20; ++i) {
      const std::string key = "m" + std::to_string(i);
      const std::string v = "r" + std::to_string(round) + "-" + std::to_string(i);
      ASSERT_TRUE(Write(a, key, v).ok());
      want[key] = v;
    }
  }
  for (int i = 0; i < 20; i += 5) {
    ASSERT_TRUE(Write(a, "m" + std::to_string(i), std::nullopt).ok());
    want["m" + std::to_string(i)] = std::nullopt;
  }
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(Write(a, "s" + std::to_string(i), "stays").ok());
  // The "m" keys move to node 2: node 1's log is merged (it stops), then
  // the newest entry of each is copied into node 2's partition.
  a_->Kill(a);
  b_->Kill(old_b);
  ASSERT_TRUE(a_->FenceAndMerge(1, 3).ok());
  ASSERT_TRUE(b_->FenceAndMerge(2, 3).ok());
  auto copied = CopyKeys(a_->pool(), a_->region(), b_->pool(), b_->region(), 1,
                         [](std::string_view key) { return key.starts_with("m"); });
  ASSERT_TRUE(copied.ok()) << copied.status().ToString();
  EXPECT_EQ(copied->keys, 20u);
  EXPECT_EQ(copied->tombstones, 4u);
  EXPECT_GE(copied->bytes, 20u * 64);
  // Node 2, in a later epoch, serves them.
  Kn& b = Start(*b_, 2, 3);
  for (const auto& [key, v] : want) EXPECT_EQ(Read(b, key), v) << key;
  EXPECT_EQ(Read(b, "s1"), std::nullopt) << "only the moving keys were copied";
  ASSERT_TRUE(Write(b, "m1", "newer").ok());
  EXPECT_EQ(Read(b, "m1"), "newer");
  // Copying again changes nothing (the versions are already indexed).
  auto again = CopyKeys(a_->pool(), a_->region(), b_->pool(), b_->region(), 1,
                        [](std::string_view key) { return key == "m1"; });
  ASSERT_TRUE(again.ok());
  b_->Kill(b);
  ASSERT_TRUE(b_->FenceAndMerge(2, 4).ok());
  Kn& b2 = Start(*b_, 2, 4);
  EXPECT_EQ(Read(b2, "m1"), "newer");
}

}  // namespace
}  // namespace slip::dinomo

namespace slip::dinomo {
namespace {

// PartitionedPool (dinomo/partitioned_pool.h): each node's calls go to its
// own partition; POOL_ADOPT copies only the shards asked for, from every
// other partition, and a malformed request changes nothing.
TEST(PartitionedPoolTest, NodesWorkInTheirOwnPartitionsAndAdoptShards) {
  runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = 3});
  PoolOptions po;
  po.segment_bytes = 64 << 10;
  po.num_buckets = 1024;
  testing::SimPool w(rt, 4 << 20, po);
  w.PartitionPerNode(4 << 20);
  auto start = [&](uint32_t id, uint64_t epoch) -> Kn& {
    std::optional<Status> ready;
    KvsNodeOptions o;
    o.node = id;
    o.epoch = epoch;
    Kn& kn = w.AddNode(o, [&](Status s) { ready = s; });
    EXPECT_TRUE(rt.RunUntil([&] { return ready.has_value(); }, rt.Now() + 100 * kMillisecond));
    return kn;
  };
  auto call = [&](proto::Method m, const std::string& payload) {
    std::optional<Status> got;
    std::string out;
    // To the pool's side, as the network delivers it.
    rpc::LocalNetwork net;
    w.AttachTo(net);
    auto c = net.CallerFor(w.pool_exec(), 100 * kMillisecond);
    c->Call(testing::SimPool::kPoolId, static_cast<uint16_t>(m), payload, [&](Result<rpc::PeerResponse> r) {
      got = r.ok() ? Status(r->status, r->payload) : r.status();
      if (r.ok()) out = r->payload;
    });
    EXPECT_TRUE(rt.RunUntil([&] { return got.has_value(); }, rt.Now() + 100 * kMillisecond));
    return std::pair{got.value_or(Status::Aborted("no answer")), out};
  };
  Kn& a = start(1, 1);
  int left = 40;
  a.exec->Post([&] {
    for (int i = 0; i < 40; ++i) a.node->Put("k" + std::to_string(i), "v" + std::to_string(i), [&](Status) { --left; });
  });
  ASSERT_TRUE(rt.RunUntil([&] { return left == 0; }, rt.Now() + 500 * kMillisecond));
  rt.RunUntil(rt.Now() + 5 * kMillisecond);
  ASSERT_TRUE(w.FenceAndMerge(1, 2).ok()) << "node 1 leaves; its partition keeps the data";
  ASSERT_NE(w.partitions()->pool(1), nullptr);
  EXPECT_EQ(w.partitions()->pool(2), nullptr) << "no partition before node 2 calls";
  constexpr uint32_t kShards = 4;
  auto [s, payload] = call(proto::Method::kPoolAdopt, proto::Encode(proto::PoolAdoptRequest{2, 2, kShards, {0, 1}}));
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto copied = proto::DecodePoolAdoptResponse(proto::AsBytes(payload));
  ASSERT_TRUE(copied.ok());
  uint64_t in_01 = 0;
  for (int i = 0; i < 40; ++i) in_01 += ShardOfHash(HashKey("k" + std::to_string(i)), kShards) < 2;
  EXPECT_EQ(copied->keys, in_01) << "exactly the keys of shards 0 and 1";
  for (int i = 0; i < 40; ++i) {
    const std::string k = "k" + std::to_string(i);
    EXPECT_EQ(w.partitions()->pool(2)->index().Find(k).has_value(), ShardOfHash(HashKey(k), kShards) < 2) << k;
  }
  Kn& b = start(2, 2);
  std::optional<Result<std::string>> got;
  b.exec->Post([&] { b.node->Get("k3", [&](Result<std::string> r) { got = std::move(r); }); });
  ASSERT_TRUE(rt.RunUntil([&] { return got.has_value(); }, rt.Now() + 100 * kMillisecond));
  if (ShardOfHash(HashKey("k3"), kShards) < 2) {
    EXPECT_TRUE(got->ok() && **got == "v3");
  } else {
    EXPECT_TRUE(got->status().Is(Code::kNotFound)) << "not adopted: not in node 2's partition";
  }
  EXPECT_TRUE(call(proto::Method::kPoolAdopt, proto::Encode(proto::PoolAdoptRequest{2, 2, kShards, {7}}))
                  .first.Is(Code::kInvalidArgument));
  EXPECT_TRUE(call(proto::Method::kPoolAllocate, "xy").first.Is(Code::kInvalidArgument)) << "too short to name a node";
  EXPECT_EQ(w.partitions()->adopted_keys(), in_01);
  w.Kill(b);
}

}  // namespace
}  // namespace slip::dinomo
