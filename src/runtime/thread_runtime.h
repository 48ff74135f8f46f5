// ThreadRuntime: the real runtime. One OS thread per executor, the monotonic
// clock, adaptive idling.
//
// Each executor's loop turn runs every posted task, every due timer and every
// poller. When a turn did no work the loop spins for `spin_turns` more empty
// turns (cheap latency while busy), then parks until the earliest of: the
// next timer, a Post()/Wake(), a registered wait fd becoming readable, or
// `max_park` (so pollers over providers without wait objects, like
// libfabric's shm, still make progress while many idle nodes share 2 cores).
// The max_park bound applies only while an executor has more pollers than
// wait fds: one whose every poller's source can wake it (tcp endpoints with
// their wait fd registered) and one without pollers park until an event, so
// an idle cluster costs next to no CPU.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/runtime.h"

namespace slip::runtime {

struct ThreadRuntimeOptions {
  uint64_t seed = 1;  // executors' Rng() seeds derive from it
  // Empty loop turns before parking. 0 parks at the first empty turn.
  int spin_turns = 256;
  // Upper bound on one park of an executor with pollers not covered by wait
  // fds; the loop re-runs its pollers at least this often.
  Nanos max_park = kMillisecond;
};

class ThreadExecutor;

class ThreadRuntime : public Runtime {
 public:
  explicit ThreadRuntime(ThreadRuntimeOptions options = {});
  ~ThreadRuntime() override;  // Stop()s
  ThreadRuntime(const ThreadRuntime&) = delete;
  ThreadRuntime& operator=(const ThreadRuntime&) = delete;

  // Before Start(): the executor's thread starts with Start(). After Start():
  // its thread starts at once.
  Executor* CreateExecutor(std::string name) override;
  Nanos Now() const override;

  // Starts one thread per executor. IoError if a thread cannot be created;
  // Aborted after Stop() (a runtime runs once).
  Status Start();
  // Makes every loop exit after its current turn and joins the threads.
  // Pending timers and tasks are dropped. Idempotent; final.
  void Stop();

 private:
  const ThreadRuntimeOptions options_;
  const int64_t epoch_ns_;  // steady_clock at construction
  std::mutex mu_;           // guards executors_ and running_ transitions
  std::vector<std::unique_ptr<ThreadExecutor>> executors_;
  bool running_ = false;
  bool stopped_ = false;
};

}  // namespace slip::runtime
