#include "runtime/sim_runtime.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace slip::runtime {
namespace {

TEST(SimRuntimeTest, TimersRunInTimeOrderAndTiesInSettingOrder) {
  SimRuntime rt;
  Executor* e = rt.CreateExecutor("a");
  std::vector<std::pair<Nanos, int>> ran;
  auto rec = [&](int v) { return [&, v] { ran.emplace_back(rt.Now(), v); }; };
  e->After(300, rec(3));
  e->After(100, rec(1));
  e->After(200, rec(20));
  e->After(200, rec(21));
  e->After(-5, rec(0));
  EXPECT_EQ(rt.RunUntilIdle(), 5u);
  std::vector<std::pair<Nanos, int>> want = {{0, 0}, {100, 1}, {200, 20}, {200, 21}, {300, 3}};
  EXPECT_EQ(ran, want);
  EXPECT_EQ(rt.Now(), 300);
}

TEST(SimRuntimeTest, CancelStopsATimerAndReportsWhetherItWasPending) {
  SimRuntime rt;
  Executor* e = rt.CreateExecutor("a");
  int fired = 0;
  TimerId keep = e->After(10, [&] { ++fired; });
  TimerId drop = e->After(20, [&] { fired += 100; });
  EXPECT_TRUE(e->Cancel(drop));
  EXPECT_FALSE(e->Cancel(drop));
  EXPECT_EQ(rt.RunUntilIdle(), 1u);
  EXPECT_EQ(fired, 1);
  EXPECT_FALSE(e->Cancel(keep)) << "already ran";
  EXPECT_FALSE(e->Cancel(12345));
  // The cancelled timer did not advance time.
  EXPECT_EQ(rt.Now(), 10);
}

TEST(SimRuntimeTest, PostRunsAfterTheCurrentHandlerInPostingOrder) {
  SimRuntime rt;
  Executor* a = rt.CreateExecutor("a");
  Executor* b = rt.CreateExecutor("b");
  std::vector<std::string> log;
  a->After(50, [&] {
    b->Post([&] { log.push_back("b1@" + std::to_string(rt.Now())); });
    a->Post([&] { log.push_back("a1"); });
    b->Post([&] { log.push_back("b2"); });
    log.push_back("timer");
  });
  a->After(50, [&] { log.push_back("timer2"); });
  rt.RunUntilIdle();
  // Posts go behind already-scheduled events at the same time.
  std::vector<std::string> want = {"timer", "timer2", "b1@50", "a1", "b2"};
  EXPECT_EQ(log, want);
}

TEST(SimRuntimeTest, HandlersSeeTheirExecutorAsCurrent) {
  SimRuntime rt;
  Executor* a = rt.CreateExecutor("a");
  Executor* b = rt.CreateExecutor("b");
  bool a_cur = false, b_cur = true;
  a->Post([&] {
    a_cur = a->IsCurrent();
    b_cur = b->IsCurrent();
  });
  rt.RunUntilIdle();
  EXPECT_TRUE(a_cur);
  EXPECT_FALSE(b_cur);
  EXPECT_FALSE(a->IsCurrent());
}

TEST(SimRuntimeTest, PollersRunOnlyAfterEventsOnTheirExecutor) {
  SimRuntime rt;
  Executor* a = rt.CreateExecutor("a");
  Executor* b = rt.CreateExecutor("b");
  int pending = 0, a_polls = 0, b_polls = 0;
  a->AddPoller([&] {
    ++a_polls;
    if (pending == 0) return false;
    --pending;
    return true;
  });
  b->AddPoller([&] { return ++b_polls, false; });
  a->After(10, [&] { pending = 3; });
  rt.RunUntilIdle();
  // One event on a: pollers ran until no work (3 with work + 1 without).
  EXPECT_EQ(a_polls, 4);
  EXPECT_EQ(pending, 0);
  EXPECT_EQ(b_polls, 0);
  b->Wake();
  b->Wake();  // coalesced
  EXPECT_EQ(rt.RunUntilIdle(), 1u);
  EXPECT_EQ(b_polls, 1);
}

TEST(SimRuntimeTest, PollerThatAlwaysWorksCannotStallTime) {
  SimRuntime rt(SimRuntimeOptions{.seed = 1, .measure_cpu = false, .max_poll_rounds = 5});
  Executor* a = rt.CreateExecutor("a");
  int polls = 0;
  a->AddPoller([&] { return ++polls, true; });
  a->After(1, [] {});
  a->After(2, [] {});
  rt.RunUntilIdle();
  EXPECT_EQ(polls, 10);
  EXPECT_EQ(rt.Now(), 2);
}

TEST(SimRuntimeTest, PollerCanRemoveItselfAndAddAnother) {
  SimRuntime rt;
  Executor* a = rt.CreateExecutor("a");
  int first = 0, second = 0;
  PollerId self = 0;
  self = a->AddPoller([&] {
    ++first;
    a->RemovePoller(self);
    a->AddPoller([&] { return ++second, false; });
    return false;
  });
  a->Post([] {});
  a->Post([] {});
  rt.RunUntilIdle();
  EXPECT_EQ(first, 1);
  // Added during the first event's round, so it first runs after the second.
  EXPECT_EQ(second, 1);
}

TEST(SimRuntimeTest, RunUntilAdvancesVirtualTimeEvenWhenIdle) {
  SimRuntime rt;
  Executor* a = rt.CreateExecutor("a");
  int ran = 0;
  a->After(5 * kSecond, [&] { ++ran; });
  EXPECT_EQ(rt.RunUntil(kSecond), 0u);
  EXPECT_EQ(rt.Now(), kSecond);
  EXPECT_EQ(rt.RunUntil(10 * kSecond), 1u);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(rt.Now(), 10 * kSecond);

  int count = 0;
  a->After(kMillisecond, [&] { ++count; });
  a->After(2 * kMillisecond, [&] { ++count; });
  EXPECT_TRUE(rt.RunUntil([&] { return count == 1; }, rt.Now() + kSecond));
  EXPECT_EQ(rt.Now(), 10 * kSecond + kMillisecond);
  EXPECT_FALSE(rt.RunUntil([&] { return count == 5; }, rt.Now() + kSecond));
  EXPECT_EQ(count, 2);
  EXPECT_EQ(rt.Now(), 11 * kSecond + kMillisecond);
}

TEST(SimRuntimeTest, DeviceEventsRunAtAbsoluteTimesAndFeedPollers) {
  SimRuntime rt;
  Executor* a = rt.CreateExecutor("a");
  int polls = 0;
  a->AddPoller([&] { return ++polls, false; });
  std::vector<Nanos> at;
  rt.Schedule(700, nullptr, kFirstDeviceKind, "dev", 1, [&] { at.push_back(rt.Now()); });
  rt.Schedule(300, a, kFirstDeviceKind + 1, "deliver", 2, [&] { at.push_back(rt.Now()); });
  rt.RunUntilIdle();
  EXPECT_EQ(at, (std::vector<Nanos>{300, 700}));
  EXPECT_EQ(polls, 1) << "only the event bound to `a` runs its pollers";
}

// A little workload whose timing depends on the executors' seeded Rng:
// ping-pong between two executors with random delays and cancellations.
uint64_t RunWorkload(uint64_t seed, std::vector<std::string>* lines = nullptr) {
  SimRuntime rt(SimRuntimeOptions{.seed = seed});
  if (lines) rt.SetTraceSink([lines](const std::string& l) { lines->push_back(l); });
  Executor* a = rt.CreateExecutor("a");
  Executor* b = rt.CreateExecutor("b");
  int hops = 0;
  std::function<void(Executor*, Executor*)> hop = [&](Executor* self, Executor* other) {
    if (++hops > 200) return;
    TimerId t = self->After(static_cast<Nanos>(self->Rng().Uniform(1000)), [] {});
    if (self->Rng().Bernoulli(0.5)) self->Cancel(t);
    self->After(static_cast<Nanos>(self->Rng().Uniform(500)),
                [&, self, other] { other->Post([&, self, other] { hop(other, self); }); });
  };
  a->Post([&] { hop(a, b); });
  rt.RunUntilIdle();
  return rt.TraceHash();
}

TEST(SimRuntimeTest, SameSeedGivesTheSameTraceAndAnotherSeedDiffers) {
  std::vector<std::string> l1, l2;
  const uint64_t h1 = RunWorkload(7, &l1);
  const uint64_t h2 = RunWorkload(7, &l2);
  EXPECT_EQ(h1, h2);
  EXPECT_EQ(l1, l2);
  EXPECT_GT(l1.size(), 400u);
  EXPECT_NE(RunWorkload(8), h1);
  EXPECT_NE(l1[1].find("ex="), std::string::npos);
}

TEST(SimRuntimeTest, MeasuredCpuTimeGrowsWithHandlerWork) {
  SimRuntime rt(SimRuntimeOptions{.seed = 1, .measure_cpu = true});
  Executor* busy = rt.CreateExecutor("busy");
  Executor* lazy = rt.CreateExecutor("lazy");
  volatile uint64_t sink = 0;
  for (int i = 0; i < 20; ++i) {
    busy->Post([&] {
      for (int k = 0; k < 200000; ++k) sink = sink + static_cast<uint64_t>(k) * 3;
    });
  }
  rt.RunUntilIdle();
  EXPECT_GT(busy->CpuTime(), 0);
  EXPECT_EQ(lazy->CpuTime(), 0);
}

}  // namespace
}  // namespace slip::runtime
