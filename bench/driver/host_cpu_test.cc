// /proc/stat's aggregate line into the host's shares over a window.
#include "bench/driver/host_cpu.h"

#include <gtest/gtest.h>

namespace slip::bench {
namespace {

TEST(HostCpuTest, ParsesTheAggregateLine) {
  auto t = ParseProcStat("cpu  100 2 300 4000 5 6 70 8 9 10\ncpu0 50 1 150 2000 2 3 35 4 4 5\nintr 1 2\n");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->user, 100u);
  EXPECT_EQ(t->nice, 2u);
  EXPECT_EQ(t->system, 300u);
  EXPECT_EQ(t->idle, 4000u);
  EXPECT_EQ(t->iowait, 5u);
  EXPECT_EQ(t->irq, 6u);
  EXPECT_EQ(t->softirq, 70u);
  EXPECT_EQ(t->steal, 8u);  // guest and guest_nice (inside user) are not read
  // A kernel without the steal column.
  auto old = ParseProcStat("cpu 1 2 3 4 5 6 7\n");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->softirq, 7u);
  EXPECT_EQ(old->steal, 0u);
}

TEST(HostCpuTest, RejectsWhatIsNotTheAggregateLine) {
  EXPECT_FALSE(ParseProcStat(""));
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3 4 5 6 7 8\n"));  // one core's line
  EXPECT_FALSE(ParseProcStat("intr 1 2 3 4 5 6 7 8\n"));
  EXPECT_FALSE(ParseProcStat("cpu  1 2 3\n"));             // too few fields
  EXPECT_FALSE(ParseProcStat("cpu  1 2 x 4 5 6 7 8\n"));
  EXPECT_FALSE(ParseProcStat("cpu  1 2 3 4 5 6 7 -8\n"));
}

TEST(HostCpuTest, SharesOfAWindow) {
  const HostCpuTimes a{100, 0, 100, 100, 0, 0, 0, 0};
  // 400 ticks: 100 user, 50 system, 30 softirq, 10 irq, 150 idle, 50
  // iowait, 10 steal.
  const HostCpuTimes b{200, 0, 150, 250, 50, 10, 30, 10};
  auto s = ShareBetween(a, b);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->busy, 190.0 / 400);
  EXPECT_DOUBLE_EQ(s->softirq, 30.0 / 400);
  EXPECT_DOUBLE_EQ(s->idle, 200.0 / 400);
  EXPECT_DOUBLE_EQ(s->steal, 10.0 / 400);
  EXPECT_DOUBLE_EQ(s->busy + s->idle + s->steal, 1.0);
  // No tick between them, or samples out of order: no window.
  EXPECT_FALSE(ShareBetween(a, a));
  EXPECT_FALSE(ShareBetween(b, a));
}

TEST(HostCpuTest, IdleOrIowaitGoingDownCountsAsNone) {
  // proc(5): iowait can decrease; idle has on some tickless kernels.
  const HostCpuTimes a{100, 0, 100, 100, 50, 0, 0, 0};
  const HostCpuTimes b{200, 0, 200, 90, 40, 0, 0, 0};
  auto s = ShareBetween(a, b);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->busy, 1.0);
  EXPECT_DOUBLE_EQ(s->idle, 0.0);
}

TEST(HostCpuTest, ThisHostHasOne) {
  // Linux is the only platform slip builds on; its /proc/stat parses.
  auto t = ReadHostCpu();
  ASSERT_TRUE(t.has_value());
  EXPECT_GT(t->user + t->system + t->idle, 0u);
}

}  // namespace
}  // namespace slip::bench
