#include "common/random.h"

#include <gtest/gtest.h>

namespace slip {
namespace {

TEST(RandomTest, SameSeedSameSequence) {
  Random a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= (x != c.Next());
  }
  EXPECT_TRUE(differs);
}

TEST(RandomTest, UniformStaysInRangeAndCoversIt) {
  Random r(1);
  int seen[10] = {};
  for (int i = 0; i < 10000; ++i) {
    uint64_t v = r.Uniform(10);
    ASSERT_LT(v, 10u);
    ++seen[v];
  }
  for (int s : seen) EXPECT_GT(s, 800);
}

}  // namespace
}  // namespace slip
