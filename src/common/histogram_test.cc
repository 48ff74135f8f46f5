#include "common/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "common/random.h"

namespace slip {
namespace {

TEST(HistogramTest, PercentilesWithinRelativeError) {
  Histogram h;
  std::vector<uint64_t> all;
  Random rng(4);
  for (int i = 0; i < 100000; ++i) {
    uint64_t v = 1 + rng.Uniform(1 << (1 + rng.Uniform(24)));
    h.Record(v);
    all.push_back(v);
  }
  std::sort(all.begin(), all.end());
  for (double q : {0.0, 0.5, 0.9, 0.99, 0.999, 1.0}) {
    uint64_t exact = all[static_cast<size_t>(q * (all.size() - 1))];
    uint64_t got = h.Percentile(q);
    EXPECT_GE(got, exact) << q;
    EXPECT_LE(static_cast<double>(got), static_cast<double>(exact) * (1 + 1.0 / 64) + 1) << q;
  }
  EXPECT_EQ(h.count(), all.size());
  EXPECT_EQ(h.max(), all.back());
}

TEST(HistogramTest, MergeEqualsRecordingEverything) {
  Histogram a, b, both;
  for (uint64_t v = 1; v < 5000; v += 7) {
    (v % 2 ? a : b).Record(v);
    both.Record(v);
  }
  a.Merge(b);
  for (double q : {0.1, 0.5, 0.99}) EXPECT_EQ(a.Percentile(q), both.Percentile(q));
}

}  // namespace
}  // namespace slip
