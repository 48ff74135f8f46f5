// DINOMO-N (dinomo/shared_nothing.h): keys moving between two private
// partitions are copied with their newest entries — every acknowledged
// write arrives, a delete keeps an older copy the new owner held from
// before from coming back, and the new owner's later writes win.
#include "dinomo/shared_nothing.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "dinomo/testing/sim_pool.h"

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
