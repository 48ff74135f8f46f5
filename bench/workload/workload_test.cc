#include "bench/workload/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

namespace slip::ycsb {
namespace {

TEST(WorkloadTest, StandardMixesMatchTheYcsbPropertyFiles) {
  struct Want {
    const char* name;
    double read, update, insert, scan, rmw;
    Distribution dist;
  };
  for (const Want& w : {Want{"load", 0, 0, 1, 0, 0, Distribution::kZipfian},
                        Want{"A", .5, .5, 0, 0, 0, Distribution::kZipfian},
                        Want{"b", .95, .05, 0, 0, 0, Distribution::kZipfian},
                        Want{"C", 1, 0, 0, 0, 0, Distribution::kZipfian},
                        Want{"d", .95, 0, .05, 0, 0, Distribution::kLatest},
                        Want{"e", 0, 0, .05, .95, 0, Distribution::kZipfian},
                        Want{"f", .5, 0, 0, 0, .5, Distribution::kZipfian}}) {
    auto spec = StandardWorkload(w.name);
    ASSERT_TRUE(spec.ok()) << w.name;
    spec->records = 1000;
    InsertCounter inserts(spec->records);
    OpGenerator gen(*spec, &inserts);
    Random rng(1);
    std::map<OpType, int> n;
    const int draws = 200000;
    for (int i = 0; i < draws; ++i) {
      Op op = gen.Next(rng);
      ++n[op.type];
      if (op.type == OpType::kScan) {
        ASSERT_GE(op.scan_len, 1u);
        ASSERT_LE(op.scan_len, 100u);
      }
      if (op.type != OpType::kInsert) {
        ASSERT_LT(op.record, inserts.Count()) << "chose a record that does not exist";
      }
    }
    auto frac = [&](OpType t) { return static_cast<double>(n[t]) / draws; };
    EXPECT_NEAR(frac(OpType::kRead), w.read, 0.005) << w.name;
    EXPECT_NEAR(frac(OpType::kUpdate), w.update, 0.005) << w.name;
    EXPECT_NEAR(frac(OpType::kInsert), w.insert, 0.005) << w.name;
    EXPECT_NEAR(frac(OpType::kScan), w.scan, 0.005) << w.name;
    EXPECT_NEAR(frac(OpType::kReadModifyWrite), w.rmw, 0.005) << w.name;
    EXPECT_EQ(spec->distribution, w.dist) << w.name;
  }
  EXPECT_TRUE(StandardWorkload("g").status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(ParseDistribution("hotspot").status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(NamedSizes("huge", 10).status().Is(Code::kInvalidArgument));
}

// The check: top-k record frequencies for theta = 0.99 over 10^6
// draws against YCSB's definition: rank k of the 10^10 scrambled items has
// p(k) = 1 / (k^theta * zeta(10^10, theta)), hashed onto one record each.
TEST(WorkloadTest, ZipfianTopKeysFollowTheYcsbDefinition) {
  auto spec = *StandardWorkload("c");
  spec.records = 100000;
  InsertCounter inserts(spec.records);
  OpGenerator gen(spec, &inserts);
  Random rng(7);
  std::map<uint64_t, int> count;
  const int draws = 1000000;
  for (int i = 0; i < draws; ++i) ++count[gen.Next(rng).record];
  const double theta = 0.99, zeta = ScrambledZipfian::ZetaOfItemCount(theta);
  const double n = static_cast<double>(ScrambledZipfian::kItemCount);
  // Ranks 1 and 2 are exact in Gray's algorithm (YCSB's); from rank 3 on it
  // maps u through n * (eta*u - eta + 1)^alpha, whose mass per item we
  // invert here, so the test checks YCSB's generator, not an idealisation.
  const double alpha = 1 / (1 - theta);
  const double eta = (1 - std::pow(2 / n, 1 - theta)) / (1 - (1 + std::pow(0.5, theta)) / zeta);
  auto u_at = [&](double item) { return (std::pow(item / n, 1 / alpha) - 1 + eta) / eta; };
  const double u0 = (1 + std::pow(0.5, theta)) / zeta;
  for (uint64_t k = 1; k <= 5; ++k) {
    const uint64_t record = ScrambledZipfian::Fnv64(k - 1) % spec.records;
    double p = 1 / (std::pow(static_cast<double>(k), theta) * zeta);
    if (k >= 3) p = u_at(static_cast<double>(k)) - std::max(u0, u_at(static_cast<double>(k - 1)));
    const double want = draws * p;
    // Sampling noise is sqrt(want) (~200 at rank 1): 5% is > 8 sigma.
    EXPECT_NEAR(count[record], want, want * 0.05) << "rank " << k;
  }
  // Most draws fall outside the top ranks: the curve is long-tailed.
  EXPECT_GT(count.size(), 50000u);
}

// Ranked: record r is the r-th hottest of a zipfian over the records
// themselves, p(r) = 1 / ((r + 1)^theta * zeta(records, theta)) — far more
// skewed over the tail than YCSB's scrambled zipfian.
TEST(WorkloadTest, RankedZipfianDrawsRecordsByRank) {
  auto spec = *StandardWorkload("c");
  spec.records = 50000;
  spec.distribution = *ParseDistribution("zipfian-ranked");
  EXPECT_STREQ(DistributionName(spec.distribution), "zipfian-ranked");
  InsertCounter inserts(spec.records);
  OpGenerator gen(spec, &inserts);
  Random rng(11);
  std::map<uint64_t, int> count;
  const int draws = 1000000;
  for (int i = 0; i < draws; ++i) ++count[gen.Next(rng).record];
  double zeta = 0;
  for (uint64_t i = 1; i <= spec.records; ++i) zeta += 1 / std::pow(static_cast<double>(i), 0.99);
  for (uint64_t r = 0; r < 2; ++r) {  // ranks 1 and 2 are exact in Gray's algorithm
    const double want = draws / (std::pow(static_cast<double>(r + 1), 0.99) * zeta);
    EXPECT_NEAR(count[r], want, want * 0.05) << "rank " << r;
  }
  uint64_t top_half = 0, scrambled_top_half = 0;
  for (const auto& [record, n] : count) top_half += record < spec.records / 2 ? n : 0;
  // The scrambled zipfian's hottest half of the records, for contrast.
  spec.distribution = Distribution::kZipfian;
  OpGenerator scrambled(spec, &inserts);
  std::map<uint64_t, int> by_record;
  for (int i = 0; i < draws; ++i) ++by_record[scrambled.Next(rng).record];
  std::vector<int> counts;
  for (const auto& [record, n] : by_record) counts.push_back(n);
  std::sort(counts.rbegin(), counts.rend());
  for (size_t i = 0; i < counts.size() && i < spec.records / 2; ++i) scrambled_top_half += counts[i];
  EXPECT_GT(static_cast<double>(top_half) / draws, 0.9);
  EXPECT_LT(static_cast<double>(scrambled_top_half) / draws, 0.8);
}

TEST(WorkloadTest, LatestFavoursTheNewestRecords) {
  auto spec = *StandardWorkload("d");
  spec.records = 10000;
  InsertCounter inserts(spec.records);
  OpGenerator gen(spec, &inserts);
  Random rng(3);
  uint64_t newest_hits = 0, reads = 0;
  for (int i = 0; i < 100000; ++i) {
    Op op = gen.Next(rng);
    if (op.type != OpType::kRead) continue;
    ++reads;
    if (op.record + 10 >= inserts.Count()) ++newest_hits;
  }
  // Under zipfian(0.99) over 10^4, the 10 hottest ranks get ~30% of draws.
  EXPECT_GT(static_cast<double>(newest_hits) / static_cast<double>(reads), 0.25);
}

TEST(WorkloadTest, KeysAndValuesHaveTheRequestedSizesAndStayDistinct) {
  for (const char* mix : {"zippydb", "up2x", "udb"}) {
    auto spec = *StandardWorkload("a");
    spec.sizes = *NamedSizes(mix, 0);
    InsertCounter inserts(spec.records);
    OpGenerator gen(spec, &inserts);
    std::set<std::string> keys;
    for (uint64_t r = 0; r < 200000; ++r) {
      std::string k = gen.Key(r);
      ASSERT_EQ(k.size(), spec.sizes.key_bytes) << mix;
      keys.insert(std::move(k));
    }
    EXPECT_EQ(keys.size(), 200000u) << mix << ": keys collide";
    EXPECT_EQ(gen.Value(3, 1).size(), spec.sizes.value_bytes);
    EXPECT_NE(gen.Value(3, 1), gen.Value(3, 2));
    EXPECT_EQ(gen.Value(3, 1), gen.Value(3, 1));
  }
  auto spec = *StandardWorkload("a");
  spec.sizes = *NamedSizes("fixed", 1000);
  InsertCounter inserts(spec.records);
  OpGenerator gen(spec, &inserts);
  EXPECT_EQ(gen.Key(5), KeyName(5));
  EXPECT_EQ(gen.Value(5, 0).size(), 1000u);
}

}  // namespace
}  // namespace slip::ycsb
