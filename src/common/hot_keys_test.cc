// The Space-Saving sketch (common/hot_keys.h): exact while it has room, a
// heavy key found in a long tail, counts never below the truth, and bounded
// memory.
#include "common/hot_keys.h"

#include <gtest/gtest.h>

#include <map>

#include "common/random.h"

namespace slip {
namespace {

TEST(HotKeysTest, ExactWhileItHasRoom) {
  HotKeys h(4);
  for (int i = 0; i < 5; ++i) h.Record("a");
  for (int i = 0; i < 3; ++i) h.Record("b");
  h.Record("c");
  const auto top = h.Top(2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].key, "a");
  EXPECT_EQ(top[0].count, 5u);
  EXPECT_EQ(top[0].error, 0u);
  EXPECT_EQ(top[1].key, "b");
  EXPECT_EQ(h.total(), 9u);
  h.Clear();
  EXPECT_TRUE(h.Top(3).empty());
  EXPECT_EQ(h.total(), 0u);
}

TEST(HotKeysTest, FindsTheHeavyKeysOfALongTail) {
  HotKeys h(16);
  Random rng(3);
  std::map<std::string, uint64_t> truth;
  for (int i = 0; i < 100000; ++i) {
    // 20% "hot", 5% "warm", the rest spread over 50,000 keys.
    const uint64_t r = rng.Uniform(100);
    const std::string key = r < 20 ? "hot" : r < 25 ? "warm" : "k" + std::to_string(rng.Uniform(50000));
    ++truth[key];
    h.Record(key);
  }
  const auto top = h.Top(16);
  ASSERT_GE(top.size(), 2u);
  EXPECT_EQ(top[0].key, "hot");
  EXPECT_EQ(top[1].key, "warm");
  for (const auto& k : top) {
    EXPECT_GE(k.count, truth[k.key]) << k.key;
    EXPECT_LE(k.count - k.error, truth[k.key]) << k.key;
  }
}

}  // namespace
}  // namespace slip
