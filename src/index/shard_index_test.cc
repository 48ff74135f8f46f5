#include "index/shard_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/hash.h"
#include "common/random.h"

namespace slip::index {
namespace {

// Entries as the log would hold them: offset -> (key, version).
class FakeLog : public EntryReader {
 public:
  uint64_t Add(std::string key, uint64_t version) {
    uint64_t off = next_;
    next_ += 64;
    entries_[off] = {std::move(key), version};
    return off;
  }
  EntryInfo Read(uint64_t offset) const override {
    const auto& e = entries_.at(offset);
    return {e.first, e.second};
  }

 private:
  uint64_t next_ = 64;
  std::map<uint64_t, std::pair<std::string, uint64_t>> entries_;
};

TEST(ShardIndexTest, UpsertLookupAndVersionCondition) {
  FakeLog log;
  ShardIndex idx(&log);
  uint64_t h = HashKey("k");
  uint64_t v2 = log.Add("k", 2), v1 = log.Add("k", 1), v3 = log.Add("k", 3);
  EXPECT_TRUE(idx.Upsert(h, "k", 2, v2).applied);
  auto r = idx.Upsert(h, "k", 1, v1);  // older arrives late: ignored, still counted
  EXPECT_FALSE(r.applied);
  EXPECT_EQ(*idx.Lookup(h, "k"), v2);
  r = idx.Upsert(h, "k", 3, v3);
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(r.displaced, v2);
  EXPECT_EQ(*idx.Lookup(h, "k"), v3);
  EXPECT_EQ(idx.EntryCount(h, "k"), 3u);
  EXPECT_FALSE(idx.Lookup(HashKey("other"), "other").has_value());
}

TEST(ShardIndexTest, AnyApplyOrderGivesTheSameIndex) {
  // Invariant I12: a set of entries applied in any order yields the index of
  // version order.
  FakeLog log;
  struct E { std::string key; uint64_t version; uint64_t off; };
  std::vector<E> entries;
  Random rng(11);
  for (uint64_t v = 1; v <= 2000; ++v) {
    std::string key = "key" + std::to_string(rng.Uniform(300));
    entries.push_back({key, v, log.Add(key, v)});
  }
  auto build = [&](const std::vector<E>& order) {
    ShardIndex idx(&log, 16);  // small: exercises growth
    for (const E& e : order) idx.Upsert(HashKey(e.key), e.key, e.version, e.off);
    std::map<std::string, uint64_t> out;
    for (int k = 0; k < 300; ++k) {
      std::string key = "key" + std::to_string(k);
      if (auto off = idx.Lookup(HashKey(key), key)) out[key] = *off;
    }
    return out;
  };
  auto expected = build(entries);
  for (uint64_t seed = 0; seed < 5; ++seed) {
    std::vector<E> shuffled = entries;
    Random r(seed);
    for (size_t i = shuffled.size(); i > 1; --i) std::swap(shuffled[i - 1], shuffled[r.Uniform(i)]);
    EXPECT_EQ(build(shuffled), expected) << "seed " << seed;
  }
}

TEST(ShardIndexTest, RelocateOnlyMovesTheCurrentWinner) {
  FakeLog log;
  ShardIndex idx(&log);
  uint64_t h = HashKey("k");
  uint64_t a = log.Add("k", 5), copy = log.Add("k", 5), newer = log.Add("k", 6);
  idx.Upsert(h, "k", 5, a);
  EXPECT_TRUE(idx.Relocate(h, "k", a, copy));
  EXPECT_EQ(*idx.Lookup(h, "k"), copy);
  idx.Upsert(h, "k", 6, newer);
  EXPECT_FALSE(idx.Relocate(h, "k", copy, log.Add("k", 5)));  // a writer won the race
  EXPECT_EQ(*idx.Lookup(h, "k"), newer);
  EXPECT_EQ(idx.EntryCount(h, "k"), 4u);  // every copy counts, moved or not
}

TEST(ShardIndexTest, ReleaseRemovesKeyWithItsLastEntry) {
  FakeLog log;
  ShardIndex idx(&log);
  uint64_t h = HashKey("k");
  idx.Upsert(h, "k", 1, log.Add("k", 1));
  idx.Upsert(h, "k", 2, log.Add("k", 2));
  EXPECT_EQ(idx.Release(h, "k"), 1u);
  EXPECT_TRUE(idx.Lookup(h, "k").has_value());
  EXPECT_EQ(idx.Release(h, "k"), 0u);
  EXPECT_FALSE(idx.Lookup(h, "k").has_value());
  EXPECT_EQ(idx.size(), 0u);
}

TEST(ShardIndexTest, RandomInsertEraseMatchesModel) {
  // Backward-shift deletion must keep every other key reachable.
  FakeLog log;
  ShardIndex idx(&log, 16);
  std::map<std::string, std::pair<uint64_t, uint32_t>> model;  // key -> (winner, count)
  Random rng(3);
  uint64_t version = 0;
  for (int step = 0; step < 20000; ++step) {
    std::string key = "k" + std::to_string(rng.Uniform(500));
    uint64_t h = HashKey(key);
    if (rng.Bernoulli(0.6)) {
      uint64_t off = log.Add(key, ++version);
      idx.Upsert(h, key, version, off);
      auto& m = model[key];
      m.first = off;
      ++m.second;
    } else if (model.count(key)) {
      uint32_t left = idx.Release(h, key);
      if (--model[key].second == 0) model.erase(key);
      ASSERT_EQ(left, model.count(key) ? model[key].second : 0u);
    }
  }
  ASSERT_EQ(idx.size(), model.size());
  for (const auto& [key, m] : model) {
    auto off = idx.Lookup(HashKey(key), key);
    ASSERT_TRUE(off.has_value()) << key;
    EXPECT_EQ(*off, m.first);
    EXPECT_EQ(idx.EntryCount(HashKey(key), key), m.second);
  }
}

}  // namespace
}  // namespace slip::index
