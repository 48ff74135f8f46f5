// DAC, DINOMO's adaptive cache (dinomo/adaptive_cache.h): the rules of the
// paper's Table 3 and Eq. 1 one by one (invariant D8), and whole traces
// (scenario 10: a uniform working set converges to the round-trip-optimal
// mix, a skewed one to values, a shrinking cache demotes).
#include "dinomo/adaptive_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace slip::dinomo {
namespace {

// Keys "k000".."k999" (4 B), overhead 16: a shortcut is 20 B, a value of
// 60 B makes an 80 B value entry.
std::string Key(int i) {
  std::string k = std::to_string(i);
  return "k" + std::string(3 - std::min<size_t>(3, k.size()), '0') + k;
}
const std::string kValue(60, 'v');
constexpr uint64_t kShortcut = 20, kValueEntry = 80;

CacheOptions Adaptive(uint64_t capacity) {
  CacheOptions o;
  o.capacity_bytes = capacity;
  return o;
}

// Looks a key up and does what a KVS node does next: READ behind a
// shortcut, or walk the index on a miss (2 round trips).
AdaptiveCache::Kind Access(AdaptiveCache& c, int i, double miss_rts = 2) {
  const std::string k = Key(i);
  auto f = c.Lookup(k);
  if (f.kind == AdaptiveCache::Kind::kShortcut) c.ShortcutRead(k, kValue);
  if (f.kind == AdaptiveCache::Kind::kMiss) c.Missed(k, PoolPointer{static_cast<uint64_t>(i) * 128, 96}, kValue, miss_rts);
  return f.kind;
}

TEST(AdaptiveCacheTest, SpareSpaceHoldsValuesThenMissesDemoteTheLeastRecentlyUsed) {
  AdaptiveCache c(Adaptive(3 * kValueEntry));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Access(c, i), AdaptiveCache::Kind::kMiss);
  EXPECT_EQ(c.stats().values, 3u) << "BEGIN: spare space is filled with values";
  EXPECT_EQ(Access(c, 0), AdaptiveCache::Kind::kValue);  // 1 and 2 are now the LRU values
  auto f = c.Lookup(Key(0));
  EXPECT_EQ(f.kind, AdaptiveCache::Kind::kValue);
  EXPECT_EQ(f.value, kValue);
  // A miss with no room: the LRU value (1) is demoted to a shortcut.
  EXPECT_EQ(Access(c, 3), AdaptiveCache::Kind::kMiss);
  EXPECT_EQ(c.stats().demotions, 1u);
  EXPECT_EQ(c.Lookup(Key(1)).kind, AdaptiveCache::Kind::kShortcut);
  EXPECT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kValue);
  EXPECT_EQ(c.Lookup(Key(3)).kind, AdaptiveCache::Kind::kShortcut);
  EXPECT_LE(c.stats().used_bytes, 3 * kValueEntry);
}

TEST(AdaptiveCacheTest, WithNoValuesLeftAMissEvictsTheLeastFrequentlyUsedShortcut) {
  AdaptiveCache c(Adaptive(3 * kShortcut));
  for (int i = 0; i < 3; ++i) Access(c, i);
  ASSERT_EQ(c.stats().shortcuts, 3u);
  ASSERT_EQ(c.stats().values, 0u);
  // Hits: 0 three more times, 1 once, 2 not: 2 is the LFU shortcut.
  for (int n = 0; n < 3; ++n) c.Lookup(Key(0));
  c.Lookup(Key(1));
  Access(c, 3);
  EXPECT_EQ(c.stats().evictions, 1u);
  EXPECT_EQ(c.Lookup(Key(2)).kind, AdaptiveCache::Kind::kMiss) << "the LFU shortcut went";
  EXPECT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kShortcut);
  EXPECT_EQ(c.Lookup(Key(1)).kind, AdaptiveCache::Kind::kShortcut);
}

TEST(AdaptiveCacheTest, PromotionFollowsEquationOne) {
  // Room for 5 shortcuts, or one value entry (80) plus one shortcut (20).
  AdaptiveCache c(Adaptive(5 * kShortcut));
  // Fill with 5 shortcuts: no spare space for a value from the start.
  for (int i = 0; i < 5; ++i) c.Missed(Key(i), PoolPointer{}, std::string(100, 'x'), 2);
  ASSERT_EQ(c.stats().shortcuts, 5u);
  // Promoting key 0 (60 B of value) needs three 20 B shortcuts evicted.
  // Each has 1 hit (its miss) and M̄ = 2: cost 3 × 1 × 2 = 6 hits.
  for (int n = 0; n < 4; ++n) {
    ASSERT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kShortcut);
    c.ShortcutRead(Key(0), kValue);
  }
  EXPECT_EQ(c.stats().promotions, 0u) << "hits(P) = 5 < 6";
  ASSERT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kShortcut);
  c.ShortcutRead(Key(0), kValue);
  EXPECT_EQ(c.stats().promotions, 1u) << "hits(P) = 6 >= 6";
  EXPECT_EQ(c.stats().evictions, 3u);
  EXPECT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kValue);
  EXPECT_LE(c.stats().used_bytes, 5 * kShortcut);
}

TEST(AdaptiveCacheTest, CountsSurvivePromotionAndDemotion) {
  AdaptiveCache c(Adaptive(kValueEntry + kShortcut));
  c.Missed(Key(0), {}, kValue, 2);  // a value (spare space)
  for (int n = 0; n < 9; ++n) c.Lookup(Key(0));
  c.Missed(Key(1), {}, kValue, 2);  // no room for a value: key 1 is a shortcut
  ASSERT_EQ(c.Lookup(Key(1)).kind, AdaptiveCache::Kind::kShortcut);
  c.Missed(Key(2), {}, kValue, 2);  // demotes key 0 (the only value), evicts nothing else
  EXPECT_EQ(c.stats().demotions, 1u);
  ASSERT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kShortcut);
  // Five shortcuts fill the cache; the sixth evicts the LFU one. Key 0
  // kept its 11 hits as a shortcut, so it is not that one: key 2 (1 hit,
  // the oldest of the least used) is.
  c.Missed(Key(3), {}, kValue, 2);
  c.Missed(Key(4), {}, kValue, 2);
  ASSERT_EQ(c.stats().shortcuts, 5u);
  c.Missed(Key(5), {}, kValue, 2);
  EXPECT_EQ(c.stats().evictions, 1u);
  EXPECT_EQ(c.Lookup(Key(2)).kind, AdaptiveCache::Kind::kMiss);
  EXPECT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kShortcut);
}

TEST(AdaptiveCacheTest, SharedKeysAreNeverValues) {
  AdaptiveCache c(Adaptive(10 * kValueEntry));
  c.Missed(Key(0), {}, kValue, 2, /*shared=*/true);
  EXPECT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kShortcut);
  for (int n = 0; n < 50; ++n) c.ShortcutRead(Key(0), kValue, /*shared=*/true);
  EXPECT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kShortcut);
  c.Missed(Key(1), {}, kValue, 2);
  ASSERT_EQ(c.Lookup(Key(1)).kind, AdaptiveCache::Kind::kValue);
  c.Wrote(Key(1), {}, kValue, /*shared=*/true);  // the key became shared
  EXPECT_EQ(c.Lookup(Key(1)).kind, AdaptiveCache::Kind::kShortcut);
}

TEST(AdaptiveCacheTest, WritesMoveShortcutsAndValuesAndCacheUnknownKeys) {
  AdaptiveCache c(Adaptive(kValueEntry + kShortcut));
  c.Wrote(Key(0), PoolPointer{64, 96}, kValue);  // uncached: cached as on a miss, no round trip
  auto f = c.Lookup(Key(0));
  ASSERT_EQ(f.kind, AdaptiveCache::Kind::kValue);
  EXPECT_EQ(f.pointer, (PoolPointer{64, 96}));
  c.Wrote(Key(0), PoolPointer{4096, 96}, std::string(60, 'w'));
  f = c.Lookup(Key(0));
  EXPECT_EQ(f.pointer, (PoolPointer{4096, 96}));
  EXPECT_EQ(f.value, std::string(60, 'w'));
  c.Missed(Key(1), PoolPointer{8, 96}, kValue, 2);
  ASSERT_EQ(c.Lookup(Key(1)).kind, AdaptiveCache::Kind::kShortcut);
  c.Wrote(Key(1), PoolPointer{9000, 96}, kValue);
  EXPECT_EQ(c.Lookup(Key(1)).pointer, (PoolPointer{9000, 96}));
  // A value that grows past the capacity is kept as a shortcut.
  c.Wrote(Key(0), PoolPointer{12000, 500}, std::string(400, 'g'));
  EXPECT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kShortcut);
  EXPECT_LE(c.stats().used_bytes, kValueEntry + kShortcut);
  c.Erase(Key(0));
  EXPECT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kMiss);
  c.Clear();
  EXPECT_EQ(c.stats().used_bytes, 0u);
  EXPECT_EQ(c.Lookup(Key(1)).kind, AdaptiveCache::Kind::kMiss);
}

TEST(AdaptiveCacheTest, AMissMovesTheAverageMissCost) {
  AdaptiveCache c(Adaptive(1000));
  EXPECT_DOUBLE_EQ(c.average_miss_rts(), 2.0);
  for (int i = 0; i < 500; ++i) c.Missed(Key(i % 1000), {}, kValue, 4);
  EXPECT_NEAR(c.average_miss_rts(), 4.0, 0.01);
}

TEST(AdaptiveCacheTest, AgingHalvesCounts) {
  CacheOptions o = Adaptive(3 * kShortcut);
  o.age_every = 8;
  AdaptiveCache c(o);
  for (int i = 0; i < 3; ++i) c.Missed(Key(i), {}, kValue, 2);
  // Key 0 was hot long ago; keys 1 and 2 are used now.
  for (int n = 0; n < 6; ++n) c.Lookup(Key(0));
  for (int round = 0; round < 6; ++round) {
    c.Lookup(Key(1));
    c.Lookup(Key(2));
  }
  c.Missed(Key(3), {}, kValue, 2);
  EXPECT_EQ(c.Lookup(Key(0)).kind, AdaptiveCache::Kind::kMiss) << "its old count decayed below the others'";
}

TEST(AdaptiveCacheTest, SameTraceSameState) {
  auto run = [] {
    AdaptiveCache c(Adaptive(40 * kValueEntry));
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int> key(0, 199);
    for (int n = 0; n < 20000; ++n) Access(c, key(rng));
    return c.stats();
  };
  const CacheStats a = run(), b = run();
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(a.shortcuts, b.shortcuts);
  EXPECT_EQ(a.promotions, b.promotions);
  EXPECT_EQ(a.demotions, b.demotions);
  EXPECT_EQ(a.evictions, b.evictions);
  EXPECT_EQ(a.value_hits, b.value_hits);
}

// Scenario 10: a uniform working set of W keys in a cache of C bytes ends
// with every key cached and (C − W·s)/(v − s) of them as values — the mix
// with the fewest round trips.
TEST(AdaptiveCacheTest, AUniformWorkingSetConvergesToTheRoundTripOptimalMix) {
  constexpr int kW = 500;
  const uint64_t capacity = 200 * kValueEntry;  // 16,000 B: all W as shortcuts (10,000) and some values
  AdaptiveCache c(Adaptive(capacity));
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> key(0, kW - 1);
  for (int n = 0; n < 200000; ++n) Access(c, key(rng));
  const CacheStats s = c.stats();
  EXPECT_EQ(s.values + s.shortcuts, static_cast<uint64_t>(kW)) << "every key cached";
  const uint64_t optimal = (capacity - kW * kShortcut) / (kValueEntry - kShortcut);  // 100
  EXPECT_GE(s.values, optimal - 1);
  EXPECT_LE(s.values, optimal);
  EXPECT_LE(s.used_bytes, capacity);
}

// Why new entries take their count from the sketch: with the paper's rule
// (every entry starts at 1) promotions keep evicting the newest shortcuts,
// which miss again, and the same uniform working set never settles.
TEST(AdaptiveCacheTest, WithThePapersCountsAUniformWorkingSetNeverSettles) {
  constexpr int kW = 500;
  CacheOptions o = Adaptive(200 * kValueEntry);
  o.sketch_counters = 0;
  AdaptiveCache c(o);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int> key(0, kW - 1);
  for (int n = 0; n < 200000; ++n) Access(c, key(rng));
  const CacheStats s = c.stats();
  EXPECT_LT(s.values + s.shortcuts, static_cast<uint64_t>(kW));
  EXPECT_GT(s.values, 100u) << "more values than the optimal mix, fewer keys";
}

// Scenario 10: under heavy skew the few hot keys end as values.
TEST(AdaptiveCacheTest, ASkewedWorkingSetEndsAsValues) {
  constexpr int kKeys = 1000;
  AdaptiveCache c(Adaptive(30 * kValueEntry));
  // Zipf θ = 2 over 1,000 keys by inversion of the CDF.
  std::vector<double> cdf(kKeys);
  double sum = 0;
  for (int i = 0; i < kKeys; ++i) cdf[i] = (sum += 1.0 / ((i + 1.0) * (i + 1.0)));
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, sum);
  uint64_t value_hits = 0, ops = 0;
  for (int n = 0; n < 100000; ++n) {
    const int k = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin());
    const bool measured = n >= 50000;
    if (Access(c, k) == AdaptiveCache::Kind::kValue && measured) ++value_hits;
    ops += measured;
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.Lookup(Key(i)).kind, AdaptiveCache::Kind::kValue) << i;
  EXPECT_GT(static_cast<double>(value_hits) / static_cast<double>(ops), 0.85);
}

// Scenario 10: a cache that shrinks demotes values before it evicts.
TEST(AdaptiveCacheTest, ShrinkingDemotesBeforeEvicting) {
  AdaptiveCache c(Adaptive(10 * kValueEntry));
  for (int i = 0; i < 10; ++i) Access(c, i);
  ASSERT_EQ(c.stats().values, 10u);
  c.SetCapacity(10 * kShortcut + 2 * (kValueEntry - kShortcut));  // all as shortcuts, two as values
  EXPECT_EQ(c.stats().values, 2u);
  EXPECT_EQ(c.stats().shortcuts, 8u);
  EXPECT_EQ(c.stats().evictions, 0u);
  c.SetCapacity(5 * kShortcut);
  EXPECT_EQ(c.stats().values + c.stats().shortcuts, 5u);
  EXPECT_LE(c.stats().used_bytes, 5 * kShortcut);
}

// The static policies of the paper's Fig. 3: fixed shares, LRU pools.
TEST(AdaptiveCacheTest, StaticPoliciesKeepTheirShares) {
  for (double share : {0.0, 0.5, 1.0}) {
    CacheOptions o;
    o.capacity_bytes = 20 * kValueEntry;
    o.policy = CacheOptions::Policy::kStatic;
    o.value_share = share;
    AdaptiveCache c(o);
    std::mt19937_64 rng(9);
    std::uniform_int_distribution<int> key(0, 299);
    for (int n = 0; n < 20000; ++n) Access(c, key(rng));
    const CacheStats s = c.stats();
    EXPECT_LE(s.used_bytes, o.capacity_bytes) << share;
    if (share == 0.0) {
      EXPECT_EQ(s.values, 0u);
    }
    if (share == 1.0) {
      EXPECT_EQ(s.shortcuts, 0u);
    }
    if (share == 0.5) {
      EXPECT_LE(s.values * kValueEntry, o.capacity_bytes / 2);
      EXPECT_GT(s.values, 0u);
      EXPECT_GT(s.shortcuts, 0u);
    }
  }
}

}  // namespace
}  // namespace slip::dinomo
