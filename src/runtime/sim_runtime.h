// SimRuntime: the deterministic simulator's runtime. Every executor of a
// whole cluster runs on ONE OS thread (the caller's), on virtual time.
//
// All work is an event in one global queue ordered by (time, sequence
// number); the sequence number is the order events were scheduled, so ties
// resolve identically on every run. Running an event advances virtual time
// to its timestamp (handlers themselves take zero virtual time). After an
// event that ran on an executor, that executor's pollers run until none
// reports work. Pollers do NOT run otherwise: code that discovers work by
// reading memory (not through a completion source that schedules events)
// must re-check on a timer in the simulator.
//
// Every dispatched event folds (time, executor id, kind, tag) into a 64-bit
// xxh3 chain, TraceHash(): two runs of the same seed and workload produce the
// same hash, and any divergence in timing or order changes it.
//
// Not thread-safe: everything, including Post(), happens on the thread that
// drives the simulation.
//
// The cost model (docs/model.md), off unless SetCostModel() is called:
// executors placed on a host (a machine with some cores) run their handlers
// on its cores. A handler then lasts the virtual time it Charge()s
// (runtime/cost.h): Now() advances as it charges, so what it sends or sets
// leaves when it is done; its executor runs nothing else meanwhile, and the
// core it took is busy. An event for a busy executor, or arriving while all
// its host's cores are busy, waits in that executor's FIFO. Executors not
// placed on a host keep handlers instantaneous.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/random.h"
#include "runtime/cost.h"
#include "runtime/runtime.h"

namespace slip::runtime {

struct SimRuntimeOptions {
  uint64_t seed = 1;  // world Rng() and every executor's Rng() derive from it
  // Measure real CPU time around each handler (CLOCK_THREAD_CPUTIME_ID,
  // a system call per event) so Executor::CpuTime() is meaningful.
  bool measure_cpu = false;
  // Bound on poller rounds after one event, so a poller that always claims
  // work cannot stall virtual time.
  int max_poll_rounds = 64;
};

// Event kinds folded into the trace. Simulated devices (the fabric) use
// values >= kFirstDeviceKind for their own events.
enum EventKind : uint16_t {
  kEventTimer = 1,
  kEventPost = 2,
  kEventWake = 3,
  kEventResume = 4,  // cost model: a waiting executor's FIFO may run
  kFirstDeviceKind = 16,
};

class SimExecutor;

class SimRuntime : public Runtime {
 public:
  explicit SimRuntime(SimRuntimeOptions options = {});
  ~SimRuntime() override;
  SimRuntime(const SimRuntime&) = delete;
  SimRuntime& operator=(const SimRuntime&) = delete;

  Executor* CreateExecutor(std::string name) override;
  // Inside a modelled handler: the time it started plus what it charged.
  Nanos Now() const override { return metering_ ? now_ + meter_.charged : now_; }

  // Runs the next event. False when the queue is empty.
  bool Step();
  // Runs every event due at or before `t`, then sets Now() to `t` (if later).
  // Returns the number of events run.
  uint64_t RunUntil(Nanos t);
  // Runs events until done() holds (checked before each event) or the next
  // event lies past `deadline` (then Now() becomes `deadline`). Returns done().
  bool RunUntil(const std::function<bool()>& done, Nanos deadline);
  // Runs until the queue is empty or `max_events` ran. Returns events run.
  uint64_t RunUntilIdle(uint64_t max_events = UINT64_MAX);

  bool idle() const { return queue_.empty(); }
  // Counts executor loop turns: each unmodelled event is one; a modelled
  // executor's turn runs every event waiting for it.
  uint64_t turn() const { return turn_; }
  uint64_t events_run() const { return events_run_; }
  uint64_t TraceHash() const { return trace_hash_; }

  // Optional human-readable trace: one line per event
  // ("t=1200 ex=2(node1/nic) kind=17 place tag=42"). Null turns it off.
  void SetTraceSink(std::function<void(const std::string&)> sink) { sink_ = std::move(sink); }

  // --- the cost model ---
  void SetCostModel(const CostModel& model);
  bool modelled() const { return model_ != nullptr; }
  // A machine of `cores` cores. After a turn an executor spins for
  // `park_after` on its core (work arriving meanwhile runs at once), then
  // parks. Work for another executor takes a free core nobody spins on
  // first, else a spinner's: the scheduler preempts a thread that only
  // polls, which spins the rest after that turn. Turns themselves are not
  // preempted, nor is a thread with work waiting. Negative park_after:
  // threads on dedicated cores that never park, and whose spinning costs
  // the others nothing.
  //
  // `migration_cost` 0: the cores share one run queue, and a turn is never
  // cut. Positive: Linux's scheduler as threads on a small machine meet it
  // (docs/model.md, "The scheduler"): each core has its own queue; a woken
  // thread takes an idle core if there is one, else joins its waker's or
  // its previous core's queue, whichever is shorter, and preempts the turn
  // running there at once (wake-up preemption: that turn resumes after the
  // wakee's, plus a switch back, kWakeupBusy; the wakee parks at once); a
  // thread waiting in a queue moves to another core only once it has been
  // off a core for `migration_cost` (cache-cold; Linux's
  // sched_migration_cost).
  uint32_t AddHost(uint32_t cores, Nanos park_after, Nanos migration_cost = 0);
  // What a parked executor waits on: its endpoints (a transport's wait; its
  // return is Cost::kSwitchIn), or only an eventfd or futex of its process
  // (an application thread blocked in a call: Cost::kSwitchInLocal).
  enum class Wait : uint8_t { kEndpoints, kLocal };
  // Before `exec` runs anything. Requires SetCostModel(). `park_after`:
  // this executor's spin instead of the host's (0: a thread that blocks at
  // once, as one waiting on a future does).
  void PlaceOn(Executor* exec, uint32_t host, std::optional<Nanos> park_after = std::nullopt,
               Wait wait = Wait::kEndpoints);
  // How a wake-up comes: a message through a socket, or a Post or an
  // answer inside the process (an eventfd write, a futex wake).
  enum class Wake : uint8_t { kSocket, kLocal };
  // Handing `target` work (a message, a packet, a task) wakes it if it is
  // parked, once per park. On a real host the waker's system call does the
  // wake-up (loopback: the receiver's socket callback runs in the send).
  // The woken executor pays its own part, its switch-in (kSwitchIn, or
  // kSwitchInLocal if it waits locally), first thing in its turn, so it
  // starts later than its waker goes on, and a message it acknowledges at
  // once can find its sender parked (the tcp provider's acks: real workers
  // park more than once per operation). The waker pays, with a core of the
  // host idle: for a socket's wake-up Cost::kWakeup less the woken part
  // (~40-60% of it by model_calibrate; a switch-in above the wake-up, in a
  // hand-written model, is cut to it, so the wake-up costs kWakeup in all),
  // for a local one Cost::kWakeupLocal; with every core busy (running or
  // spinning) Cost::kWakeupBusy, a hand-over (docs/model.md). A waker
  // outside a modelled handler pays nothing, and the woken executor its
  // part all the same: that CPU is its own.
  void ChargeWake(Executor* target, Wake how = Wake::kSocket);
  // Times a modelled executor parked and was woken (a turn that began
  // after its spin ran out).
  uint64_t Parks(const Executor* exec) const;
  // Times another executor took its core while it spun (an involuntary
  // switch: it needs a core, not a wake-up, if work comes before its spin
  // would have ended), or, with per-core queues, a thread woken onto its
  // core preempted its turn.
  uint64_t Preemptions(const Executor* exec) const;
  // Of those, the ones `by` preempted (what `perf sched` shows as the
  // thread that ran next).
  uint64_t PreemptionsBy(const Executor* exec, const Executor* by) const;
  // Virtual CPU time charged so far, per input (all executors).
  const std::array<Nanos, kCostCount>& CostTotals() const { return cost_totals_; }
  // The same, one modelled executor's (credited whole when a turn runs).
  const std::array<Nanos, kCostCount>& CostsOf(const Executor* exec) const;
  // Whole steps it was charged, per input (Charge(); its fabric messages
  // sent are its kMessageSend steps).
  const std::array<uint64_t, kCostCount>& StepsOf(const Executor* exec) const;
  // A modelled executor's CPU time up to `t`: CpuTime() credits a turn
  // whole when it starts, this counts the part of its last turn before `t`
  // only (a window's share is then at most the window). REQUIRES: no turn
  // of it started after `t` (call it at `t`, or once the run reached `t`).
  Nanos CpuBy(const Executor* exec, Nanos t) const;
  // Core time it spent spinning so far, as HostBusy counts it: a real
  // thread's clock counts its empty turns before a park, CpuTime() and the
  // inputs do not. A spin is counted when it ends (at the executor's next
  // turn, or when another executor takes its core), so a window's edge
  // puts a spin in the window where it ended; an executor on a dedicated
  // core (park_after < 0) counts none, its polling costing others nothing.
  Nanos SpunBy(const Executor* exec) const;
  // Core time a host's handlers used so far, and its executors' spinning
  // between them (counted when the spin ends: at the executor's next turn).
  Nanos HostBusy(uint32_t host) const { return hosts_.at(host).busy; }
  uint32_t host_count() const { return static_cast<uint32_t>(hosts_.size()); }
  uint32_t HostCores(uint32_t host) const { return static_cast<uint32_t>(hosts_.at(host).core_free.size()); }

  // The world's randomness, for simulated devices (drops, jitter, tears);
  // executors' handlers use Executor::Rng().
  Random& Rng() { return rng_; }

  // For simulated devices: runs `fn` at absolute virtual time `at` (clamped
  // to Now()). `exec` is the executor the event belongs to: its pollers run
  // afterwards. Null for a device-internal event that runs no pollers.
  // `label` must be a string literal (kept for trace lines); `tag` is folded
  // into the trace hash (e.g. an operation id).
  void Schedule(Nanos at, Executor* exec, uint16_t kind, const char* label, uint64_t tag,
                std::function<void()> fn);
  // As Schedule(), but cancellable with CancelTimer() (e.g. a deadline that
  // usually becomes moot). A cancelled event neither runs nor counts.
  TimerId ScheduleTimer(Nanos at, Executor* exec, uint16_t kind, const char* label, uint64_t tag,
                        std::function<void()> fn);
  bool CancelTimer(TimerId id) { return live_timers_.erase(id) == 1; }

 private:
  friend class SimExecutor;
  struct Event {
    Nanos time;
    uint64_t seq;
    SimExecutor* exec;
    uint16_t kind;
    const char* label;
    uint64_t tag;
    TimerId timer;  // nonzero: cancellable timer
    std::function<void()> fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };

  struct Host {
    std::vector<Nanos> core_free;      // when each core's work ends
    std::vector<SimExecutor*> holder;  // who ran on it last (and may spin on it)
    Nanos park_after = -1;
    Nanos busy = 0;
    Nanos migration_cost = 0;  // 0: one shared run queue (AddHost)
    std::vector<uint32_t> queued;         // per core: threads waiting in its queue
    std::vector<Nanos> preempted_until;   // per core: a wakee's preempting turn ends
  };

  void Push(Nanos at, SimExecutor* exec, uint16_t kind, const char* label, uint64_t tag,
            TimerId timer, std::function<void()> fn);
  // Runs the next event due at or before `limit`; false if there is none.
  // A modelled executor's event may only join its FIFO (nothing runs).
  bool StepBefore(Nanos limit);
  void DropCancelledHead();
  // Modelled executors: run the head of x's FIFO at `t` if x and a core of
  // its host are free then; otherwise make sure a resume event is pending.
  bool RunReady(SimExecutor* x, Nanos t);
  bool HasIdleCore(size_t host, const SimExecutor* x) const;
  // Per-core queues: the core whose queue x joins when it finds none free.
  size_t QueueFor(const SimExecutor* x, bool woken) const;
  void Dispatch(Event& e);
  void Fold(const Event& e);

  const SimRuntimeOptions options_;
  Nanos now_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t events_run_ = 0;
  uint64_t trace_hash_ = 0;
  Random rng_;
  std::vector<Event> queue_;  // a min-heap under Later (std::push_heap)
  std::unordered_set<TimerId> live_timers_;
  TimerId next_timer_ = 1;
  std::vector<std::unique_ptr<SimExecutor>> executors_;
  SimExecutor* current_ = nullptr;  // executor whose handler is running
  std::unique_ptr<CostModel> model_;
  std::vector<Host> hosts_;
  CostMeter meter_;
  bool metering_ = false;  // a modelled handler is running
  std::array<Nanos, kCostCount> cost_totals_{};
  uint64_t turn_ = 0;
  std::function<void(const std::string&)> sink_;
};

}  // namespace slip::runtime
