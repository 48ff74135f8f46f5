// The simulator's cost model: charged handlers take virtual time, occupy a
// core, delay what they send, queue what comes for a busy executor, and pay
// a wake-up after parking; without a model nothing changes.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "runtime/cost.h"
#include "runtime/sim_runtime.h"

namespace slip::runtime {
namespace {

CostModel Model() {
  CostModel m;
  m[Cost::kRequest] = {1000, 0};
  m[Cost::kStorePut] = {200, 0.5};
  m[Cost::kWakeup] = {3000, 0};
  return m;
}

// A new executor named `name`, placed on `host`.
Executor* Placed(SimRuntime& rt, uint32_t host, const std::string& name) {
  Executor* x = rt.CreateExecutor(name);
  rt.PlaceOn(x, host);
  return x;
}

// At `at`, `by` wakes `x` (ChargeWake) and hands it work; then the runtime
// runs until idle. What the waker paid in its handler, and when x's work ran.
struct Woken {
  Nanos waker_paid = -1, ran = -1;
};
Woken WakeAndRun(SimRuntime& rt, Nanos at, Executor* by, Executor* x,
                 SimRuntime::Wake how = SimRuntime::Wake::kSocket) {
  Woken w;
  rt.Schedule(at, by, kFirstDeviceKind, "wake", 0, [&] {
    const Nanos t0 = by->Now();
    rt.ChargeWake(x, how);
    w.waker_paid = by->Now() - t0;
    rt.Schedule(by->Now(), x, kFirstDeviceKind, "work", 0, [&] { w.ran = x->Now(); });
  });
  rt.RunUntilIdle();
  return w;
}

// What waking `x` from the running handler charges it: a wake-up, or
// nothing if x spins or is runnable.
Nanos WakeCharge(SimRuntime& rt, Executor* x) {
  const Nanos before = rt.CostTotals()[static_cast<size_t>(Cost::kWakeup)];
  rt.ChargeWake(x);
  return rt.CostTotals()[static_cast<size_t>(Cost::kWakeup)] - before;
}

TEST(CostTest, ChargeOutsideAModelledSimulationDoesNothing) {
  SimRuntime rt;
  Executor* x = rt.CreateExecutor("x");
  Nanos seen = -1;
  x->Post([&] {
    Charge(Cost::kRequest);
    seen = x->Now();
  });
  rt.RunUntilIdle();
  EXPECT_EQ(seen, 0);
  EXPECT_EQ(x->CpuTime(), 0);
  Charge(Cost::kRequest);  // not in a handler at all: harmless
}

TEST(CostTest, ChargedTimeAdvancesTheHandlersClockAndDelaysWhatItSends) {
  SimRuntime rt;
  rt.SetCostModel(Model());
  const uint32_t host = rt.AddHost(4, -1);
  Executor* a = Placed(rt, host, "a");
  Executor* b = Placed(rt, host, "b");
  Nanos inside = 0, arrived = 0;
  a->Post([&] {
    Charge(Cost::kRequest);
    Charge(Cost::kStorePut, 1000);  // 200 + 500
    ChargeBytes(Cost::kStorePut, 0);  // a part: no step of its own
    inside = a->Now();
    rt.Schedule(rt.Now() + 100, b, kFirstDeviceKind, "msg", 0, [&] { arrived = b->Now(); });
  });
  rt.RunUntilIdle();
  EXPECT_EQ(inside, 1700);
  EXPECT_EQ(arrived, 1800);
  EXPECT_EQ(a->CpuTime(), 1700);
  EXPECT_EQ(rt.CostTotals()[static_cast<size_t>(Cost::kStorePut)], 700);
  EXPECT_EQ(rt.HostBusy(host), 1700);
  EXPECT_EQ(rt.StepsOf(a)[static_cast<size_t>(Cost::kStorePut)], 1u);
  EXPECT_EQ(rt.StepsOf(a)[static_cast<size_t>(Cost::kRequest)], 1u);
  EXPECT_EQ(rt.StepsOf(b)[static_cast<size_t>(Cost::kStorePut)], 0u);
}

// A turn is credited whole when it starts (CpuTime); CpuBy splits the last
// one at a window's edge, so a share of a window never exceeds it.
TEST(CostTest, CpuBySplitsATurnAcrossAWindowsEdge) {
  SimRuntime rt;
  rt.SetCostModel(Model());
  Executor* x = Placed(rt, rt.AddHost(4, -1), "x");
  x->Post([] { Charge(Cost::kRequest); });  // 0 .. 1000
  Nanos at_400 = -1;
  rt.Schedule(400, nullptr, kFirstDeviceKind, "probe", 0, [&] { at_400 = rt.CpuBy(x, 400); });
  rt.RunUntilIdle();
  EXPECT_EQ(at_400, 400);
  EXPECT_EQ(x->CpuTime(), 1000);
  EXPECT_EQ(rt.CpuBy(x, 1000), 1000);
  EXPECT_EQ(rt.CpuBy(x, 5000), 1000);
}

TEST(CostTest, ABusyExecutorRunsItsEventsInOrderAfterwards) {
  SimRuntime rt;
  rt.SetCostModel(Model());
  const uint32_t host = rt.AddHost(4, -1);
  Executor* x = Placed(rt, host, "x");
  std::vector<std::pair<int, Nanos>> ran;
  x->Post([&] {
    Charge(Cost::kRequest);  // busy until 1000
    ran.push_back({0, x->Now()});
  });
  for (int i = 1; i <= 3; ++i) {
    rt.Schedule(100 * i, x, kFirstDeviceKind, "msg", i, [&, i] {
      ran.push_back({i, x->Now()});
      Charge(Cost::kRequest);
    });
  }
  rt.RunUntilIdle();
  ASSERT_EQ(ran.size(), 4u);
  EXPECT_EQ(ran[0], (std::pair<int, Nanos>{0, 1000}));
  EXPECT_EQ(ran[1], (std::pair<int, Nanos>{1, 1000}));  // it starts at 1000, its clock shows its start
  EXPECT_EQ(ran[2], (std::pair<int, Nanos>{2, 2000}));
  EXPECT_EQ(ran[3], (std::pair<int, Nanos>{3, 3000}));
  EXPECT_EQ(x->CpuTime(), 4000);
}

TEST(CostTest, ExecutorsShareTheirHostsCores) {
  // Three executors, each with one 1 us handler at t=0: two cores finish
  // two at 1 us and the third at 2 us; three cores finish all at 1 us.
  for (uint32_t cores : {2u, 3u}) {
    SimRuntime rt;
    rt.SetCostModel(Model());
    const uint32_t host = rt.AddHost(cores, -1);
    std::vector<Nanos> ends;
    for (int i = 0; i < 3; ++i) {
      Executor* x = Placed(rt, host, "x" + std::to_string(i));
      x->Post([&ends, x] {
        Charge(Cost::kRequest);
        ends.push_back(x->Now());
      });
    }
    rt.RunUntilIdle();
    std::sort(ends.begin(), ends.end());
    EXPECT_EQ(ends.back(), cores == 2 ? 2000 : 1000) << cores;
    EXPECT_EQ(rt.HostBusy(host), 3000);
  }
}

TEST(CostTest, SeparateHostsRunInParallel) {
  SimRuntime rt;
  rt.SetCostModel(Model());
  std::vector<Nanos> ends;
  for (int i = 0; i < 3; ++i) {
    Executor* x = rt.CreateExecutor("x" + std::to_string(i));
    rt.PlaceOn(x, rt.AddHost(1, -1));
    x->Post([&ends, x] {
      Charge(Cost::kRequest);
      ends.push_back(x->Now());
    });
  }
  rt.RunUntilIdle();
  EXPECT_EQ(ends, (std::vector<Nanos>{1000, 1000, 1000}));
}

TEST(CostTest, WakingAParkedExecutorCostsTheWakerOnce) {
  for (Nanos park_after : {Nanos{5000}, Nanos{-1}}) {
    SimRuntime rt;
    rt.SetCostModel(Model());
    const uint32_t host = rt.AddHost(2, park_after);
    Executor* x = Placed(rt, host, "x");
    Executor* sender = Placed(rt, host, "sender");
    x->Post([] { Charge(Cost::kRequest); });  // x runs 0..1000, then spins
    // 2 us after x's turn: x still spins, a message costs no wake-up.
    Nanos near_cost = -1, far_cost = -1, again_cost = -1;
    rt.Schedule(3000, sender, kFirstDeviceKind, "near", 0, [&] {
      const Nanos t0 = sender->Now();
      rt.ChargeWake(x);
      near_cost = sender->Now() - t0;
    });
    // 20 us after: x parked (when park_after is 5 us); the sender pays,
    // once, however many messages it hands x before x runs.
    rt.Schedule(21000, sender, kFirstDeviceKind, "far", 0, [&] {
      const Nanos t0 = sender->Now();
      rt.ChargeWake(x);
      far_cost = sender->Now() - t0;
      rt.ChargeWake(x);
      again_cost = sender->Now() - t0 - far_cost;
    });
    rt.Schedule(40000, x, kFirstDeviceKind, "late", 0, [] {});  // x's second turn, after its park
    rt.RunUntilIdle();
    EXPECT_EQ(near_cost, 0);
    EXPECT_EQ(far_cost, park_after < 0 ? 0 : 3000) << park_after;
    EXPECT_EQ(again_cost, 0);
    EXPECT_EQ(x->CpuTime(), 1000);  // the woken executor pays nothing for it
    EXPECT_EQ(rt.Parks(x), park_after < 0 ? 0u : 1u) << park_after;
    // Its spin 1000..6000, counted at its next turn (a thread on a
    // dedicated core spins for nothing the host could use).
    EXPECT_EQ(rt.SpunBy(x), park_after < 0 ? 0 : 5000) << park_after;
  }
}

TEST(CostTest, ASpinningExecutorTakesItsWorkAtOnceAndYieldsItsCoreToOthers) {
  SimRuntime rt;
  rt.SetCostModel(Model());
  const uint32_t host = rt.AddHost(1, 5000);
  Executor* x = Placed(rt, host, "x");
  Executor* y = Placed(rt, host, "y");
  Nanos x_again = 0, y_ran = 0, x_last = 0, y_again = 0;
  Nanos x_wake_cost = -1;
  x->Post([] { Charge(Cost::kRequest); });  // 0..1000, then spins until 6000
  rt.Schedule(1500, x, kFirstDeviceKind, "x", 0, [&] { x_again = x->Now(); });
  // y's work takes the core from the spinning x at once (a scheduler
  // preempts a thread that only polls) and runs 2000..3000 ...
  rt.Schedule(2000, y, kFirstDeviceKind, "y", 0, [&] {
    y_ran = y->Now();
    Charge(Cost::kRequest);
  });
  // ... x, preempted at 2000 with 4500 of its spin left (its turn at 1500
  // restarted it), is runnable, not parked, until 7500: its work at 3500
  // needs a core (it takes y's, y only spinning), not a wake-up.
  rt.Schedule(3500, y, kFirstDeviceKind, "poke", 0, [&] {
    x_wake_cost = WakeCharge(rt, x);
    x->Post([&] {
      x_last = x->Now();
      Charge(Cost::kRequest);
    });
  });
  // y, preempted in turn, is not parked either when this comes; x's turn
  // (3500..4500) is not preempted.
  rt.Schedule(4000, y, kFirstDeviceKind, "y", 0, [&] { y_again = y->Now(); });
  rt.RunUntilIdle();
  EXPECT_EQ(x_again, 1500);  // still spinning: at once, no wake-up
  EXPECT_EQ(y_ran, 2000);    // not at 6000, when x's spin would have ended
  EXPECT_EQ(x_wake_cost, 0);
  EXPECT_EQ(x_last, 3500);
  EXPECT_EQ(y_again, 4500);
  EXPECT_EQ(rt.Parks(x), 0u);
  EXPECT_EQ(rt.Parks(y), 0u);
  EXPECT_EQ(rt.Preemptions(x), 1u);  // at 2000 (y's turn at 4500 takes no time: x keeps its core)
  EXPECT_EQ(rt.Preemptions(y), 1u);  // at 3500
  EXPECT_EQ(rt.PreemptionsBy(x, y), 1u);  // each by the other
  EXPECT_EQ(rt.PreemptionsBy(y, x), 1u);
  EXPECT_EQ(rt.PreemptionsBy(x, x), 0u);
  // Spun so far: x 1000..1500 and 1500..2000 (then preempted; the rest of
  // that spin runs beside others' turns, and its spin after 4500 has not
  // ended); y 3000..3500.
  EXPECT_EQ(rt.SpunBy(x), 1000);
  EXPECT_EQ(rt.SpunBy(y), 500);
}

TEST(CostTest, WorkTakesAnIdleCoreBeforeASpinnersAndAThreadThatBlocksAtOnceIsWoken) {
  SimRuntime rt;
  rt.SetCostModel(Model());
  const uint32_t host = rt.AddHost(3, 5000);  // the third core idle when app is woken
  Executor* x = Placed(rt, host, "x");
  Executor* y = Placed(rt, host, "y");
  Executor* app = rt.CreateExecutor("app");
  rt.PlaceOn(app, host, 0);  // blocks at once after a turn
  x->Post([] { Charge(Cost::kRequest); });  // core 0: 0..1000, then spins
  Nanos y_ran = 0, app_ran = 0;
  Nanos wake_cost = -1;
  rt.Schedule(1500, y, kFirstDeviceKind, "y", 0, [&] { y_ran = y->Now(); });
  rt.Schedule(1500, app, kFirstDeviceKind, "app", 0, [] {});
  rt.Schedule(1600, x, kFirstDeviceKind, "x", 0, [&] {
    wake_cost = WakeCharge(rt, app);  // 100 ns after its turn: already parked
    app->Post([&] { app_ran = app->Now(); });
  });
  rt.RunUntilIdle();
  EXPECT_EQ(y_ran, 1500);
  EXPECT_EQ(rt.Preemptions(x), 0u);  // y took the idle core, not x's
  EXPECT_EQ(wake_cost, 3000);
  EXPECT_EQ(app_ran, 4600);  // after its waker's turn paid the wake-up
  EXPECT_EQ(rt.Parks(app), 1u);
}

TEST(CostTest, AnotherExecutorsTurnIsNotPreempted) {
  SimRuntime rt;
  rt.SetCostModel(Model());
  const uint32_t host = rt.AddHost(1, 5000);
  Executor* x = Placed(rt, host, "x");
  Executor* y = Placed(rt, host, "y");
  Nanos y_ran = 0;
  x->Post([] { Charge(Cost::kRequest, 0); Charge(Cost::kRequest, 0); });  // 0..2000
  rt.Schedule(500, y, kFirstDeviceKind, "y", 0, [&] {
    y_ran = y->Now();
    Charge(Cost::kRequest);
  });
  rt.RunUntilIdle();
  EXPECT_EQ(y_ran, 2000);  // the core is busy until x's turn ends, then x only spins
  EXPECT_EQ(rt.Preemptions(x), 1u);
}

// Model() with the busy-host prices set (the other tests leave them zero).
CostModel BusyModel() {
  CostModel m = Model();
  m[Cost::kWakeupBusy] = {400, 0};
  m[Cost::kSwitchIn] = {700, 0};
  return m;
}

// With per-core run queues (a migration cost), a thread woken by a turn
// while every core is busy preempts that turn at once, as Linux's wake-up
// preemption does; the waker's turn ends later by the wakee's turn, its
// spin and a switch back. With one shared queue the wakee waits.
TEST(CostTest, WithPerCoreQueuesAWokenThreadPreemptsItsWakersTurn) {
  for (const Nanos migration : {Nanos{0}, Nanos{500000}}) {
    SimRuntime rt;
    rt.SetCostModel(BusyModel());
    const uint32_t host = rt.AddHost(1, 5000, migration);
    Executor* x = Placed(rt, host, "x");
    Executor* y = Placed(rt, host, "y");
    y->Post([] { Charge(Cost::kRequest); });  // 0..1000, spins until 6000, parks
    Nanos y_ran = -1, x_next = -1;
    rt.Schedule(10000, x, kFirstDeviceKind, "turn", 0, [&] {
      Charge(Cost::kRequest);
      Charge(Cost::kRequest);
      rt.ChargeWake(y);  // at 12000, a hand-over: 400
      rt.Schedule(x->Now(), y, kFirstDeviceKind, "work", 0, [&] {
        y_ran = y->Now();
        Charge(Cost::kRequest);
      });
      for (int i = 0; i < 3; ++i) Charge(Cost::kRequest);  // ends at 15400
    });
    rt.Schedule(16000, x, kFirstDeviceKind, "next", 0, [&] { x_next = x->Now(); });
    rt.RunUntilIdle();
    SCOPED_TRACE(migration);
    if (migration == 0) {
      EXPECT_EQ(y_ran, 15400 + 700);  // after x's turn, its switch-in first,
      EXPECT_EQ(rt.Preemptions(x), 1u);  // taking the core x then spins on
      EXPECT_EQ(x_next, 15400 + 1700 + 700);
    } else {
      EXPECT_EQ(y_ran, 12400 + 700);  // at once, on x's core
      EXPECT_EQ(rt.Preemptions(x), 1u);
      // y's turn (700 + 1000), then x's switch back (400); y parks at once.
      EXPECT_EQ(x_next, 15400 + 1700 + 400);
      EXPECT_EQ(x->CpuTime(), 5400 + 400);
      // The one core was busy for y's first turn and spin, its second
      // turn, x's switch back and x's turn (x's spins end no later turn).
      EXPECT_EQ(rt.HostBusy(host), 1000 + 5000 + 1700 + 400 + 5400);
    }
  }
}

// With per-core run queues, a woken thread that finds no core joins the
// shorter of its waker's queue and its previous core's (Linux's
// wake_affine_weight), a tie going to the waker's.
TEST(CostTest, WithPerCoreQueuesAWokenThreadJoinsTheShorterOfTwoQueues) {
  for (const bool crowd_waker : {false, true}) {
    SimRuntime rt;
    rt.SetCostModel(BusyModel());
    const uint32_t host = rt.AddHost(2, 0, 500000);  // threads park at once
    Executor* y = Placed(rt, host, "y");
    Executor* other = Placed(rt, host, "other");  // core 1's long turn
    Executor* waker = Placed(rt, host, "waker");
    Executor* crowd = Placed(rt, host, "crowd");
    y->Post([] {  // core 0, 0..3000: y's previous core
      for (int i = 0; i < 3; ++i) Charge(Cost::kRequest);
    });
    waker->Post([] { Charge(Cost::kRequest); });  // core 1, 0..1000
    rt.Schedule(1500, crowd, kFirstDeviceKind, "first", 0, [] {});  // core 1 too
    rt.Schedule(5000, other, kFirstDeviceKind, "long", 0, [] {  // core 0 until 405,000
      for (int i = 0; i < 400; ++i) Charge(Cost::kRequest);
    });
    rt.Schedule(5000, waker, kFirstDeviceKind, "long", 0, [&] {  // core 1 until 205,000 (+ wakes)
      // crowd, woken with both cores busy, waits in its previous core's queue
      if (crowd_waker) rt.Schedule(waker->Now(), crowd, kFirstDeviceKind, "crowd", 0, [] {});
      for (int i = 0; i < 100; ++i) Charge(Cost::kRequest);
      rt.ChargeWake(y);  // at 105,000: no idle core
      rt.Schedule(waker->Now(), y, kFirstDeviceKind, "work", 0, [&] {});
      for (int i = 0; i < 100; ++i) Charge(Cost::kRequest);
    });
    rt.RunUntilIdle();
    SCOPED_TRACE(crowd_waker);
    // Alone, the queues tie (each core busy, nobody waiting): y goes to its
    // waker's core and preempts the waker's turn. With a thread already
    // waiting for the waker's core, y joins its previous core's queue.
    EXPECT_EQ(rt.Preemptions(waker), crowd_waker ? 0u : 1u);
    EXPECT_EQ(rt.PreemptionsBy(waker, y), crowd_waker ? 0u : 1u);  // the wakee took its turn's core
  }
}

// With per-core run queues, a thread that found no core waits in one
// core's queue: another core coming free does not take it until it has
// been off a core for the migration cost (cache-cold), as Linux's load
// balancing leaves a cache-hot thread where it is.
TEST(CostTest, WithPerCoreQueuesAQueuedThreadMovesCoresOnlyOnceCacheCold) {
  for (const Nanos migration : {Nanos{0}, Nanos{500000}}) {
    SimRuntime rt;
    rt.SetCostModel(BusyModel());
    const uint32_t host = rt.AddHost(2, 0, migration);  // threads park at once
    Executor* y = Placed(rt, host, "y");
    Executor* long_turn = Placed(rt, host, "long");
    Executor* short_turn = Placed(rt, host, "short");
    y->Post([] { Charge(Cost::kRequest); });  // core 0, 0..1000, then parks
    auto turn = [](int requests) {
      return [requests] {
        for (int i = 0; i < requests; ++i) Charge(Cost::kRequest);
      };
    };
    rt.Schedule(10000, long_turn, kFirstDeviceKind, "long", 0, turn(2000));   // core 0 until 2,010,000
    rt.Schedule(10000, short_turn, kFirstDeviceKind, "short", 0, turn(300));  // core 1 until 310,000
    Nanos y_ran = -1;
    rt.Schedule(20000, y, kFirstDeviceKind, "work", 0, [&] { y_ran = y->Now(); });
    rt.RunUntilIdle();
    SCOPED_TRACE(migration);
    // One shared queue: the first core to come free. Per-core queues: y
    // waits in its previous core's, and moves to core 1 once cold, at its
    // last turn's end plus the migration cost.
    EXPECT_EQ(y_ran, migration == 0 ? 310000 : 1000 + 500000);
  }
}

Nanos Total(const SimRuntime& rt, Cost c) { return rt.CostTotals()[static_cast<size_t>(c)]; }

TEST(CostTest, AWakeUpSplitsBetweenWakerAndWokenOrIsAHandOverWithNoIdleCore) {
  // Two cores: the waker's, and one that is idle, busy with a turn, or
  // held by a spinning thread.
  enum class Other { kIdle, kTurn, kSpinner };
  for (Other other : {Other::kIdle, Other::kTurn, Other::kSpinner}) {
    SimRuntime rt;
    rt.SetCostModel(BusyModel());
    const uint32_t host = rt.AddHost(2, 5000);
    Executor* x = Placed(rt, host, "x");
    Executor* waker = Placed(rt, host, "waker");
    Executor* z = Placed(rt, host, "z");
    x->Post([] { Charge(Cost::kRequest); });  // 0..1000, spins until 6000, parks
    if (other == Other::kTurn) {  // z's turn covers the wake-up: 9000..19000
      rt.Schedule(9000, z, kFirstDeviceKind, "long", 0, [] {
        for (int i = 0; i < 10; ++i) Charge(Cost::kRequest);
      });
    } else if (other == Other::kSpinner) {  // z spins 10000..15000 after a turn
      rt.Schedule(9000, z, kFirstDeviceKind, "turn", 0, [] { Charge(Cost::kRequest); });
    }
    // The waker takes x's old core (free since x parked); the idle core, if
    // any, is z's.
    const Woken w = WakeAndRun(rt, 12000, waker, x);
    SCOPED_TRACE(static_cast<int>(other));
    if (other == Other::kIdle) {
      EXPECT_EQ(w.waker_paid, 3000 - 700);  // the waker's part of a whole wake-up ...
      EXPECT_EQ(x->CpuTime(), 1000 + 700);  // ... the woken's, its switch-in,
      EXPECT_EQ(w.ran, 14300 + 700);        // both on the path
      EXPECT_EQ(Total(rt, Cost::kWakeupBusy), 0);
    } else {
      EXPECT_EQ(w.waker_paid, 400);          // a hand-over ...
      EXPECT_EQ(x->CpuTime(), 1000 + 700);   // ... and the woken pays to be switched in,
      EXPECT_EQ(w.ran, 12400 + 700);         // first thing in its turn
      EXPECT_EQ(Total(rt, Cost::kWakeup), 0);
    }
    EXPECT_EQ(rt.Parks(x), 1u);
  }
}

// A wake-up onto an idle core costs kWakeup in all, however it splits: a
// switch-in priced above the wake-up (a hand-written model) is cut to it.
// Woken from outside any modelled handler, the woken still pays its part.
TEST(CostTest, AWakeUpOntoAnIdleCoreCostsTheWakeUpInAll) {
  for (bool from_handler : {true, false}) {
    SimRuntime rt;
    CostModel m = BusyModel();
    m[Cost::kSwitchIn] = {5000, 0};
    rt.SetCostModel(m);
    const uint32_t host = rt.AddHost(2, 5000);
    Executor* x = Placed(rt, host, "x");
    Executor* waker = Placed(rt, host, "waker");
    Executor* outside = rt.CreateExecutor("outside");  // not placed: not modelled
    x->Post([] { Charge(Cost::kRequest); });  // 0..1000, spins until 6000, parks
    const Woken w = WakeAndRun(rt, 12000, from_handler ? waker : outside, x);
    SCOPED_TRACE(from_handler);
    EXPECT_EQ(w.waker_paid, 0);
    EXPECT_EQ(w.ran, 12000 + 3000);
    EXPECT_EQ(x->CpuTime(), 1000 + 3000);
    EXPECT_EQ(Total(rt, Cost::kWakeup) + Total(rt, Cost::kSwitchIn), 3000);
  }
}

// A wake-up inside the process costs the waker kWakeupLocal; the woken
// pays the switch-in of what it waits on: kSwitchInLocal if nothing but
// its process wakes it, kSwitchIn if it waits on endpoints.
TEST(CostTest, ALocalWakeUpCostsTheWakerItsPostAndTheWokenItsOwnReturn) {
  for (bool waits_locally : {true, false}) {
    SimRuntime rt;
    CostModel m = BusyModel();
    m[Cost::kWakeupLocal] = {250, 0};
    m[Cost::kSwitchInLocal] = {450, 0};
    rt.SetCostModel(m);
    const uint32_t host = rt.AddHost(2, 5000);
    Executor* x = rt.CreateExecutor("x");
    rt.PlaceOn(x, host, 0, waits_locally ? SimRuntime::Wait::kLocal : SimRuntime::Wait::kEndpoints);
    Executor* waker = Placed(rt, host, "waker");
    x->Post([] { Charge(Cost::kRequest); });  // 0..1000, parks at once
    const Woken w = WakeAndRun(rt, 12000, waker, x, SimRuntime::Wake::kLocal);
    SCOPED_TRACE(waits_locally);
    const Nanos own = waits_locally ? 450 : 700;
    EXPECT_EQ(w.waker_paid, 250);
    EXPECT_EQ(w.ran, 12250 + own);
    EXPECT_EQ(x->CpuTime(), 1000 + own);
    EXPECT_EQ(Total(rt, Cost::kWakeup) + Total(rt, Cost::kWakeupBusy), 0);
  }
}

TEST(CostTest, APreemptedSpinnerPaysItsSwitchInWhenItNextRuns) {
  SimRuntime rt;
  rt.SetCostModel(BusyModel());
  const uint32_t host = rt.AddHost(1, 5000);
  Executor* x = Placed(rt, host, "x");
  Executor* y = Placed(rt, host, "y");
  x->Post([] { Charge(Cost::kRequest); });  // 0..1000, then spins
  rt.Schedule(2000, y, kFirstDeviceKind, "y", 0, [] { Charge(Cost::kRequest); });  // preempts x: 2000..3000
  Nanos x_ran = -1, x_done = -1;
  rt.Schedule(3500, x, kFirstDeviceKind, "x", 0, [&] {
    x_ran = x->Now();
    Charge(Cost::kRequest);
    x_done = x->Now();
  });
  rt.RunUntilIdle();
  EXPECT_EQ(rt.Preemptions(x), 1u);
  EXPECT_EQ(rt.Parks(x), 0u);              // runnable, not parked: no wake-up ...
  EXPECT_EQ(Total(rt, Cost::kWakeup), 0);
  EXPECT_EQ(x_ran, 3500 + 700);            // ... but a switch back in
  EXPECT_EQ(x_done, 3500 + 700 + 1000);
  EXPECT_EQ(x->CpuTime(), 1000 + 700 + 1000);
  EXPECT_EQ(y->CpuTime(), 1000);           // y took a spinner's core: no switch-in for it
}

TEST(CostTest, APreemptedSpinnerThatParksPaysItsSwitchInWhenNextWoken) {
  SimRuntime rt;
  rt.SetCostModel(BusyModel());
  const uint32_t host = rt.AddHost(2, 5000);
  Executor* x = Placed(rt, host, "x");
  Executor* y = Placed(rt, host, "y");
  Executor* z = Placed(rt, host, "z");
  x->Post([] { Charge(Cost::kRequest); });  // core 0: 0..1000, then spins
  z->Post([] { Charge(Cost::kRequest); });  // core 1: 0..1000, then spins
  // y takes a spinner's core at 2000 (2000..3000); the one preempted parks
  // at 7000 (the 4000 left of its spin, after y's turn).
  rt.Schedule(2000, y, kFirstDeviceKind, "y", 0, [] { Charge(Cost::kRequest); });
  Executor* preempted = nullptr;
  Nanos ran = -1;
  rt.Schedule(20000, y, kFirstDeviceKind, "wake", 0, [&] {
    preempted = rt.Preemptions(x) == 1 ? x : z;
    rt.ChargeWake(preempted);  // every other core idle: a whole wake-up, split
    rt.Schedule(y->Now(), preempted, kFirstDeviceKind, "work", 0, [&] { ran = preempted->Now(); });
  });
  rt.RunUntilIdle();
  ASSERT_NE(preempted, nullptr);
  EXPECT_EQ(rt.Preemptions(x) + rt.Preemptions(z), 1u);
  EXPECT_EQ(rt.Parks(preempted), 1u);
  // Its resumed spin's switch-in is paid in its next turn (the core time a
  // spin took from others, which has no turn of its own), with its part of
  // the wake-up.
  EXPECT_EQ(ran, 20000 + (3000 - 700) + 700 + 700);
  EXPECT_EQ(preempted->CpuTime(), 1000 + 700 + 700);
  EXPECT_EQ(Total(rt, Cost::kSwitchIn), 2 * 700);
}

TEST(CostTest, TimersAndPostsOfAChargedHandlerStartWhenItEnds) {
  SimRuntime rt;
  rt.SetCostModel(Model());
  const uint32_t host = rt.AddHost(2, -1);
  Executor* x = Placed(rt, host, "x");
  Executor* y = Placed(rt, host, "y");
  Nanos timer = 0, posted = 0;
  x->Post([&] {
    Charge(Cost::kRequest);
    x->After(500, [&] { timer = x->Now(); });
    y->Post([&] { posted = y->Now(); });
  });
  rt.RunUntilIdle();
  EXPECT_EQ(posted, 1000);
  EXPECT_EQ(timer, 1500);
}

TEST(CostTest, ModelledRunsAreDeterministicAndInputsMoveTime) {
  auto run = [](uint64_t seed, Nanos request) {
    SimRuntime rt(SimRuntimeOptions{seed, false, 64});
    CostModel m = Model();
    m[Cost::kRequest].per_op = request;
    rt.SetCostModel(m);
    const uint32_t host = rt.AddHost(2, 2000);
    std::vector<Executor*> xs;
    for (int i = 0; i < 4; ++i) {
      xs.push_back(Placed(rt, host, "x" + std::to_string(i)));
    }
    // Each executor pings a random one 200 times.
    int left = 800;
    std::function<void(int)> hop = [&](int i) {
      Charge(Cost::kRequest);
      if (--left <= 0) return;
      const int to = static_cast<int>(xs[i]->Rng().Uniform(4));
      rt.Schedule(rt.Now() + 100 + static_cast<Nanos>(rt.Rng().Uniform(50)), xs[to], kFirstDeviceKind, "hop", 0,
                  [&hop, to] { hop(to); });
    };
    for (int i = 0; i < 4; ++i) xs[i]->Post([&hop, i] { hop(i); });
    rt.RunUntilIdle();
    return std::pair<uint64_t, Nanos>{rt.TraceHash(), rt.Now()};
  };
  EXPECT_EQ(run(7, 1000), run(7, 1000));
  EXPECT_NE(run(7, 1000).first, run(8, 1000).first);
  EXPECT_GT(run(7, 2000).second, run(7, 1000).second);
}

TEST(CostTest, NamesAreDistinct) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < kCostCount; ++i) names.insert(CostName(static_cast<Cost>(i)));
  EXPECT_EQ(names.size(), kCostCount);
  EXPECT_EQ(names.count("?"), 0u);
}

}  // namespace
}  // namespace slip::runtime
