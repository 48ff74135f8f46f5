// runtime/: the only way protocol code may observe time, wait, or run code
// on another thread.
//
// Every node component is an event-driven state machine of run-to-completion
// handlers. Handlers run on an Executor (one per role: worker, NIC, control,
// digest, clean ...). They never block, never read the OS clock, never
// sleep, never spawn threads, and draw randomness only from Executor::Rng().
// That discipline is what lets the same code run
//   * for real (ThreadRuntime: one OS thread per executor, monotonic clock), or
//   * inside the deterministic simulator (SimRuntime: every executor of a
//     whole cluster on one OS thread, virtual time, seeded), where a seed
//     reproduces a run exactly.
//
// An executor's loop, in both implementations, runs: posted tasks, due
// timers, and its pollers (functions called every loop turn, e.g. "poll my
// fabric endpoint's completion queue").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/random.h"

namespace slip::runtime {

// Nanoseconds: a duration, or a point on the runtime's clock (nanoseconds
// since the runtime was created; virtual in the simulator).
using Nanos = int64_t;
constexpr Nanos kMicrosecond = 1000;
constexpr Nanos kMillisecond = 1000 * kMicrosecond;
constexpr Nanos kSecond = 1000 * kMillisecond;

// Names a pending timer. 0 is never a valid id.
using TimerId = uint64_t;
// Names a registered poller. 0 is never a valid id.
using PollerId = uint64_t;

class Executor {
 public:
  virtual ~Executor() = default;

  virtual std::string_view name() const = 0;
  // Dense index in creation order within its runtime (0, 1, ...).
  virtual uint32_t id() const = 0;

  // The runtime's clock. Monotonic; virtual in the simulator.
  virtual Nanos Now() const = 0;

  // Runs `fn` on this executor once, no earlier than Now() + delay (a
  // negative delay counts as 0). Timers due at the same time run in the
  // order they were set. Call from this executor's handlers (the thread
  // runtime also accepts other threads).
  virtual TimerId After(Nanos delay, std::function<void()> fn) = 0;
  // True when the timer was pending and now never runs; false when it
  // already ran, was cancelled, or never existed.
  virtual bool Cancel(TimerId id) = 0;

  // Runs `fn` on this executor soon, after the handler that is running now.
  // Tasks posted by one thread run in posting order. ThreadRuntime: safe
  // from any thread. SimRuntime: single-threaded, like everything there.
  virtual void Post(std::function<void()> fn) = 0;

  // `poll` is called every loop turn (sim: after every event that ran on this
  // executor) and returns true if it did work, which keeps the executor from
  // parking. This is how fabric endpoints and other completion sources are
  // driven. Call from this executor's handlers or before the runtime runs.
  virtual PollerId AddPoller(std::function<bool()> poll) = 0;
  // Safe from inside a poller (including the one being removed).
  virtual void RemovePoller(PollerId id) = 0;

  // Makes a parked executor run a loop turn now (e.g. a completion source
  // without a wait object signals new work). Thread-safe. The simulator
  // schedules a turn at the current virtual time.
  virtual void Wake() = 0;

  // Also leave the park when `fd` becomes readable (e.g. a libfabric
  // FI_WAIT_FD completion queue). `can_block`, if set, is asked just before
  // parking and must return false when events may already be pending
  // (fi_trywait's contract); then the executor takes another turn instead.
  // `sees_all`: the fd signals every event of its poller's source; false
  // (shm's doorbell, fabric::Endpoint::wait_fd_sees_all) keeps the park
  // bounded as for a poller without one. The simulator never parks and
  // ignores this.
  virtual void AddWaitFd(int fd, std::function<bool()> can_block, bool sees_all) = 0;

  // Seeded from the runtime's seed and id(): the only randomness handlers
  // may use. Only this executor's handlers may draw from it.
  virtual Random& Rng() = 0;

  // CPU time consumed by this executor's handlers and pollers (thread
  // runtime: the thread's CLOCK_THREAD_CPUTIME_ID, including spinning and
  // parking overhead; simulator: measured around each handler when
  // SimRuntimeOptions::measure_cpu, else 0). For per-role CPU accounting.
  virtual Nanos CpuTime() const = 0;

  // True when called from inside one of this executor's handlers/pollers.
  virtual bool IsCurrent() const = 0;
};

// Owns executors. How a runtime is run (threads vs. a simulation loop) is
// specific to the implementation; see thread_runtime.h and sim_runtime.h.
class Runtime {
 public:
  virtual ~Runtime() = default;

  // The executor lives as long as the runtime. `name` is for logs, traces
  // and CPU reports ("node3/worker0", "node3/nic").
  virtual Executor* CreateExecutor(std::string name) = 0;

  virtual Nanos Now() const = 0;
};

}  // namespace slip::runtime
