#include "runtime/thread_runtime.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace slip::runtime {
namespace {

// Test-side waiting only (protocol code never sleeps). The bound is generous:
// it is reached only when something is broken, never on a slow machine.
bool WaitFor(const std::function<bool()>& cond,
             std::chrono::milliseconds bound = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + bound;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

TEST(ThreadRuntimeTest, PostedTasksRunInOrderOnTheExecutorsThread) {
  ThreadRuntime rt;
  Executor* e = rt.CreateExecutor("worker");
  ASSERT_TRUE(rt.Start().ok());
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::atomic<bool> saw_current{true};
  for (int i = 0; i < 100; ++i) {
    e->Post([&, i] {
      std::lock_guard lock(mu);
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
      if (!e->IsCurrent()) saw_current = false;
    });
  }
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return order.size() == 100;
  }));
  rt.Stop();
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  for (auto id : threads) {
    EXPECT_EQ(id, threads[0]);
    EXPECT_NE(id, std::this_thread::get_id());
  }
  EXPECT_TRUE(saw_current.load());
  EXPECT_FALSE(e->IsCurrent());
}

TEST(ThreadRuntimeTest, PostIsSafeFromManyThreads) {
  ThreadRuntime rt;
  Executor* e = rt.CreateExecutor("worker");
  ASSERT_TRUE(rt.Start().ok());
  int count = 0;  // only touched on the executor's thread
  std::atomic<int> done{0};
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) e->Post([&] { ++count, ++done; });
    });
  }
  for (auto& t : posters) t.join();
  ASSERT_TRUE(WaitFor([&] { return done.load() == 4000; }));
  std::atomic<int> seen{-1};
  e->Post([&] { seen = count; });
  ASSERT_TRUE(WaitFor([&] { return seen.load() >= 0; }));
  EXPECT_EQ(seen.load(), 4000);
}

TEST(ThreadRuntimeTest, TimersFireInDueOrderAndCancelWorks) {
  ThreadRuntime rt;
  Executor* e = rt.CreateExecutor("worker");
  std::mutex mu;
  std::vector<int> fired;
  std::atomic<bool> cancel_ok{false};
  auto rec = [&](int v) {
    return [&, v] {
      std::lock_guard lock(mu);
      fired.push_back(v);
    };
  };
  // Armed before Start() from the test thread, and from a handler.
  e->After(30 * kMillisecond, rec(3));
  e->After(10 * kMillisecond, rec(1));
  TimerId dropped = e->After(20 * kMillisecond, rec(99));
  e->Post([&] {
    e->After(20 * kMillisecond, rec(2));
    cancel_ok = e->Cancel(dropped);
  });
  const Nanos start = rt.Now();
  ASSERT_TRUE(rt.Start().ok());
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return fired.size() == 3;
  }));
  EXPECT_GE(rt.Now() - start, 30 * kMillisecond) << "a timer fired early";
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  rt.Stop();
  EXPECT_TRUE(cancel_ok.load());
  EXPECT_EQ(fired, (std::vector<int>{1, 2, 3}));
  EXPECT_FALSE(e->Cancel(dropped));
}

TEST(ThreadRuntimeTest, IdlePollersStillRunWithinTheParkBound) {
  ThreadRuntime rt(ThreadRuntimeOptions{.seed = 1, .spin_turns = 0, .max_park = kMillisecond});
  Executor* e = rt.CreateExecutor("nic");
  std::atomic<int> polls{0};
  e->AddPoller([&] { return ++polls, false; });
  ASSERT_TRUE(rt.Start().ok());
  // Parked with nothing to do, it still comes back every max_park.
  EXPECT_TRUE(WaitFor([&] { return polls.load() >= 20; }));
}

// A poller's source with a wait fd: an eventfd the poller reads, counting
// its runs and noting when it found the fd signalled.
struct EventfdSource {
  EventfdSource() : efd(::eventfd(0, EFD_NONBLOCK)) {}
  ~EventfdSource() { ::close(efd); }
  void Attach(Executor* e, bool sees_all) {
    e->AddPoller([this] {
      ++polls;
      uint64_t v;
      if (::read(efd, &v, sizeof(v)) == sizeof(v)) got = true;
      return false;
    });
    e->AddWaitFd(efd, nullptr, sees_all);
  }
  bool Signal() const {
    const uint64_t one = 1;
    return ::write(efd, &one, sizeof(one)) == static_cast<ssize_t>(sizeof(one));
  }
  const int efd;
  std::atomic<int> polls{0};
  std::atomic<bool> got{false};
};

// An executor whose every poller has a wait fd to wake it does not come
// back every max_park: an idle node costs no CPU.
TEST(ThreadRuntimeTest, PollersCoveredByWaitFdsParkUntilAnEvent) {
  EventfdSource src;  // outlives the runtime, which polls it
  ASSERT_GE(src.efd, 0);
  ThreadRuntime rt(ThreadRuntimeOptions{.seed = 1, .spin_turns = 0, .max_park = kMillisecond});
  Executor* e = rt.CreateExecutor("node");
  src.Attach(e, true);
  ASSERT_TRUE(rt.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return src.polls.load() >= 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const int before = src.polls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(src.polls.load() - before, 20) << "woke about every max_park (1 ms) with nothing to do";
  ASSERT_TRUE(src.Signal());
  EXPECT_TRUE(WaitFor([&] { return src.got.load(); }, std::chrono::seconds(5)));
  // Timers still end the park on time.
  std::atomic<bool> fired{false};
  e->After(5 * kMillisecond, [&] { fired = true; });
  EXPECT_TRUE(WaitFor([&] { return fired.load(); }, std::chrono::seconds(5)));
  rt.Stop();
}

// A wait fd that signals only some of its source's events (shm's doorbell)
// ends a park when it fires, yet leaves the park bounded: the poller still
// runs every max_park for what it does not signal.
TEST(ThreadRuntimeTest, AWaitFdThatSeesNotAllKeepsTheParkBounded) {
  {
    EventfdSource src;
    ASSERT_GE(src.efd, 0);
    ThreadRuntime rt(ThreadRuntimeOptions{.seed = 1, .spin_turns = 0, .max_park = kMillisecond});
    src.Attach(rt.CreateExecutor("shm"), false);
    ASSERT_TRUE(rt.Start().ok());
    EXPECT_TRUE(WaitFor([&] { return src.polls.load() >= 20; })) << "parked past max_park with a partial wait fd";
    rt.Stop();
  }
  // And it does end a park: with a park bound far beyond the test's
  // patience, only the fd can explain a prompt poller run.
  EventfdSource src;
  ASSERT_GE(src.efd, 0);
  ThreadRuntime slow(ThreadRuntimeOptions{.seed = 1, .spin_turns = 0, .max_park = 60 * kSecond});
  src.Attach(slow.CreateExecutor("shm"), false);
  ASSERT_TRUE(slow.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return src.polls.load() >= 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it park
  ASSERT_TRUE(src.Signal());
  EXPECT_TRUE(WaitFor([&] { return src.got.load(); }, std::chrono::seconds(5)));
  slow.Stop();
}

TEST(ThreadRuntimeTest, WakeAndWaitFdsEndAPark) {
  // A park bound far beyond the test's patience: only a wake-up can explain
  // a prompt poller run.
  ThreadRuntime rt(ThreadRuntimeOptions{.seed = 1, .spin_turns = 0, .max_park = 60 * kSecond});
  Executor* e = rt.CreateExecutor("nic");
  std::atomic<int> polls{0};
  std::atomic<bool> flag{false};
  e->AddPoller([&] {
    ++polls;
    return false;
  });
  const int efd = ::eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(efd, 0);
  std::atomic<bool> fd_ready{false};
  e->AddPoller([&] {
    uint64_t v;
    if (::read(efd, &v, sizeof(v)) == sizeof(v)) fd_ready = true;
    return false;
  });
  e->AddWaitFd(efd, [&] { return !flag.load(); }, true);
  ASSERT_TRUE(rt.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return polls.load() >= 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let it park

  int before = polls.load();
  e->Wake();
  EXPECT_TRUE(WaitFor([&] { return polls.load() > before; }, std::chrono::seconds(5)));

  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const uint64_t one = 1;
  ASSERT_EQ(::write(efd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  EXPECT_TRUE(WaitFor([&] { return fd_ready.load(); }, std::chrono::seconds(5)));
  rt.Stop();
  ::close(efd);
}

TEST(ThreadRuntimeTest, CpuTimeIsPerExecutorAndNonZeroAfterWork) {
  ThreadRuntime rt(ThreadRuntimeOptions{.seed = 1, .spin_turns = 0, .max_park = kMillisecond});
  Executor* busy = rt.CreateExecutor("busy");
  Executor* idle = rt.CreateExecutor("idle");
  ASSERT_TRUE(rt.Start().ok());
  std::atomic<bool> done{false};
  busy->Post([&] {
    volatile uint64_t sink = 0;
    // Burn until the thread's own CPU clock moved, whatever the machine speed.
    timespec t0{}, t1{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do {
      for (int k = 0; k < 10000; ++k) sink = sink + static_cast<uint64_t>(k);
      ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    } while ((t1.tv_sec - t0.tv_sec) * kSecond + (t1.tv_nsec - t0.tv_nsec) < 5 * kMillisecond);
    done = true;
  });
  ASSERT_TRUE(WaitFor([&] { return done.load(); }));
  EXPECT_GE(busy->CpuTime(), 5 * kMillisecond);
  rt.Stop();
  const Nanos after_stop = busy->CpuTime();
  EXPECT_GE(after_stop, 5 * kMillisecond) << "CPU time must survive the thread";
  EXPECT_LT(idle->CpuTime(), after_stop);
}

TEST(ThreadRuntimeTest, ExecutorsHaveDistinctSeededRngs) {
  ThreadRuntime a(ThreadRuntimeOptions{.seed = 5});
  ThreadRuntime b(ThreadRuntimeOptions{.seed = 5});
  Executor* a0 = a.CreateExecutor("x");
  Executor* a1 = a.CreateExecutor("y");
  Executor* b0 = b.CreateExecutor("x");
  const uint64_t v = a0->Rng().Next();
  EXPECT_EQ(v, b0->Rng().Next());
  EXPECT_NE(v, a1->Rng().Next());
  EXPECT_EQ(a1->id(), 1u);
  EXPECT_EQ(a1->name(), "y");
}

TEST(ThreadRuntimeTest, StopIsFinalAndDropsPendingWork) {
  ThreadRuntime rt;
  Executor* e = rt.CreateExecutor("w");
  ASSERT_TRUE(rt.Start().ok());
  rt.Stop();
  std::atomic<bool> ran{false};
  e->Post([&] { ran = true; });
  EXPECT_FALSE(rt.Start().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(ran.load());
}

}  // namespace
}  // namespace slip::runtime
