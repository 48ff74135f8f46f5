#include "runtime/sim_runtime.h"

#include <time.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <deque>
#include <map>
#include <utility>

namespace slip::runtime {
namespace {

uint64_t MixSeed(uint64_t seed, uint64_t id) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (id + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return z ^ (z >> 31);
}

Nanos ThreadCpuNanos() {
  timespec ts{};
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return Nanos{ts.tv_sec} * kSecond + ts.tv_nsec;
}

constexpr uint32_t kNoExecutor = 0xFFFFFFFF;

}  // namespace

class SimExecutor final : public Executor {
 public:
  SimExecutor(SimRuntime* rt, uint32_t id, std::string name, uint64_t seed)
      : rt_(rt), id_(id), name_(std::move(name)), rng_(seed) {}

  std::string_view name() const override { return name_; }
  uint32_t id() const override { return id_; }
  Nanos Now() const override { return rt_->Now(); }
  Random& Rng() override { return rng_; }
  Nanos CpuTime() const override { return cpu_; }
  bool IsCurrent() const override { return rt_->current_ == this; }

  TimerId After(Nanos delay, std::function<void()> fn) override {
    const TimerId id = rt_->next_timer_++;
    rt_->live_timers_.insert(id);
    rt_->Push(rt_->Now() + std::max<Nanos>(delay, 0), this, kEventTimer, "timer", id, id,
              std::move(fn));
    return id;
  }

  bool Cancel(TimerId id) override { return rt_->live_timers_.erase(id) == 1; }

  void Post(std::function<void()> fn) override {
    rt_->Push(rt_->Now(), this, kEventPost, "post", 0, 0, std::move(fn));
  }

  PollerId AddPoller(std::function<bool()> poll) override {
    const PollerId id = next_poller_++;
    pollers_.push_back(std::make_unique<Poller>(Poller{id, std::move(poll), false}));
    return id;
  }

  void RemovePoller(PollerId id) override {
    for (auto& p : pollers_) {
      if (p->id == id) p->removed = true;
    }
    pollers_dirty_ = true;
    if (!running_pollers_) Compact();
  }

  void Wake() override {
    if (wake_pending_) return;  // one pending turn covers any number of wakes
    wake_pending_ = true;
    rt_->Push(rt_->Now(), this, kEventWake, "wake", 0, 0, [this] { wake_pending_ = false; });
  }

  void AddWaitFd(int, std::function<bool()>, bool) override {}  // never parks

  // Runs pollers until none reports work, bounded by max_poll_rounds.
  void RunPollers(int max_rounds) {
    running_pollers_ = true;
    for (int round = 0; round < max_rounds; ++round) {
      bool work = false;
      const size_t n = pollers_.size();  // a poller may add pollers
      for (size_t i = 0; i < n; ++i) {
        Poller& p = *pollers_[i];
        if (!p.removed && p.fn()) work = true;
      }
      if (!work) break;
    }
    running_pollers_ = false;
    if (pollers_dirty_) Compact();
  }

  void AddCpu(Nanos n) { cpu_ += n; }

  // The cost model's state (SimRuntime drives it).
  int64_t host = -1;      // index into SimRuntime::hosts_; -1: not modelled
  Nanos busy_until = 0;   // the end of its last handler
  bool ran = false;       // has run a handler (a fresh executor pays no wake-up)
  uint32_t core = 0;      // the core its last turn ran on
  bool woken = false;     // parked, and a waker already paid to wake it
  std::deque<SimRuntime::Event> ready;  // FIFO of events waiting to run
  bool resume_pending = false;          // a kEventResume is queued
  uint64_t parks = 0;                   // turns that began after it had parked
  // Spins cut short, or turns cut (wake-up preemption), by another
  // executor taking the core: counts by that executor's id.
  std::map<uint32_t, uint64_t> preempted_by;
  Nanos park_after = -1;                // its spin after a turn (PlaceOn: the host's or its own)
  Nanos parks_at = 0;                   // when it parks: its spin after the last turn ends
  Nanos spin_from = 0;                  // its spin since then is core time not yet counted busy
  Nanos spun = 0;                       // spin counted busy so far (SpunBy)
  Nanos switch_in_owed = 0;             // woken, or preempted spinning, since its last turn
  bool waits_locally = false;           // parks on no endpoint (PlaceOn's Wait::kLocal)
  // Per-core run queues (a host with a migration cost):
  int32_t queued_on = -1;        // the core whose queue it waits in (-1: none)
  int32_t wake_core = -1;        // its waker's core, on its host (wake-affine placement)
  bool preempts = false;         // woken by a turn with every core busy: may preempt a turn
  Nanos wake_at = 0;             // when
  std::array<Nanos, kCostCount> charged{};  // its virtual CPU, by input
  std::array<uint64_t, kCostCount> steps{};  // whole steps charged, by input
  Cost SwitchIn() const { return waits_locally ? Cost::kSwitchInLocal : Cost::kSwitchIn; }

 private:
  struct Poller {
    PollerId id;
    std::function<bool()> fn;
    // Set instead of clearing fn: a poller may remove itself while running.
    bool removed = false;
  };

  void Compact() {
    std::erase_if(pollers_, [](const auto& p) { return p->removed; });
    pollers_dirty_ = false;
  }

  SimRuntime* const rt_;
  const uint32_t id_;
  const std::string name_;
  Random rng_;
  std::vector<std::unique_ptr<Poller>> pollers_;
  PollerId next_poller_ = 1;
  bool pollers_dirty_ = false;
  bool running_pollers_ = false;
  bool wake_pending_ = false;
  Nanos cpu_ = 0;
};

SimRuntime::SimRuntime(SimRuntimeOptions options)
    : options_(options), rng_(MixSeed(options.seed, 0xFFFF'FFFF)) {}

SimRuntime::~SimRuntime() = default;

Executor* SimRuntime::CreateExecutor(std::string name) {
  const auto id = static_cast<uint32_t>(executors_.size());
  executors_.push_back(
      std::make_unique<SimExecutor>(this, id, std::move(name), MixSeed(options_.seed, id)));
  return executors_.back().get();
}

void SimRuntime::Schedule(Nanos at, Executor* exec, uint16_t kind, const char* label,
                          uint64_t tag, std::function<void()> fn) {
  // Only this runtime's executors can be scheduled on; they are SimExecutors.
  Push(std::max(at, Now()), static_cast<SimExecutor*>(exec), kind, label, tag, 0, std::move(fn));
}

TimerId SimRuntime::ScheduleTimer(Nanos at, Executor* exec, uint16_t kind, const char* label,
                                  uint64_t tag, std::function<void()> fn) {
  const TimerId id = next_timer_++;
  live_timers_.insert(id);
  Push(std::max(at, Now()), static_cast<SimExecutor*>(exec), kind, label, tag, id, std::move(fn));
  return id;
}

void SimRuntime::Push(Nanos at, SimExecutor* exec, uint16_t kind, const char* label,
                      uint64_t tag, TimerId timer, std::function<void()> fn) {
  queue_.push_back(Event{at, next_seq_++, exec, kind, label, tag, timer, std::move(fn)});
  std::push_heap(queue_.begin(), queue_.end(), Later{});
}

bool SimRuntime::Step() { return StepBefore(INT64_MAX); }

// Skips cancelled timers at the head so their times do not count.
void SimRuntime::DropCancelledHead() {
  while (!queue_.empty() && queue_.front().timer != 0 && !live_timers_.contains(queue_.front().timer)) {
    std::pop_heap(queue_.begin(), queue_.end(), Later{});
    queue_.pop_back();
  }
}

bool SimRuntime::StepBefore(Nanos limit) {
  for (;;) {
    DropCancelledHead();
    if (queue_.empty() || queue_.front().time > limit) return false;
    std::pop_heap(queue_.begin(), queue_.end(), Later{});
    Event e = std::move(queue_.back());
    queue_.pop_back();
    // A cancelled timer is not an event: it neither advances time nor counts.
    if (e.timer != 0 && live_timers_.erase(e.timer) == 0) continue;
    SimExecutor* x = e.exec;
    if (x == nullptr || x->host < 0) {
      ++turn_;
      Dispatch(e);
      return true;
    }
    // Modelled: every event goes through the executor's FIFO, so a busy
    // executor runs its events in the order they came due. A turn starts
    // from a resume event queued behind everything already due at its
    // time, so it takes in all of the executor's events due by then (what
    // one poll would return), not only the first.
    const Nanos t = e.time;
    now_ = std::max(now_, t);
    if (e.kind != kEventResume) {
      x->ready.push_back(std::move(e));
      if (!x->resume_pending) {
        x->resume_pending = true;
        Push(t, x, kEventResume, "resume", 0, 0, {});
      }
      continue;
    }
    x->resume_pending = false;
    if (RunReady(x, t)) return true;
  }
}

// The queue a thread joins when it finds no core: woken, the one of its
// waker's core and its previous core with fewer threads on it (Linux's
// wake_affine_weight, loads as queue lengths; a tie to the waker's: its
// caches hold what the waker just handed over); else its previous core's.
size_t SimRuntime::QueueFor(const SimExecutor* x, bool woken) const {
  if (!woken || x->wake_core < 0) return x->core;
  const auto waker = static_cast<size_t>(x->wake_core);
  const size_t prev = x->core;
  if (waker == prev) return waker;
  const Host& h = hosts_[static_cast<size_t>(x->host)];
  auto load = [&](size_t k) { return h.queued[k] + (h.core_free[k] > now_ ? 1 : 0); };
  return load(prev) < load(waker) ? prev : waker;
}

bool SimRuntime::RunReady(SimExecutor* x, Nanos t) {
  if (x->ready.empty()) return false;
  Host& h = hosts_[static_cast<size_t>(x->host)];
  const bool spins = x->park_after >= 0;
  // Still spinning after its last turn, on a core nobody took from it: it
  // takes the work at once. Otherwise it needs a core.
  const bool spinning = x->ran && spins && h.holder[x->core] == x && t < x->parks_at;
  size_t core = x->core;
  Nanos start = std::max(t, x->busy_until);
  SimExecutor* preempted = nullptr;    // a spinner whose core this turn takes
  SimExecutor* interrupted = nullptr;  // a thread whose turn this one preempts
  // Per-core run queues (a migration cost): a thread waits for the core
  // whose queue it is in. Woken from a park it takes any idle core
  // (Linux's select_idle_sibling), else joins a queue (QueueFor); once
  // cache-cold, off a core for the migration cost, load balancing may
  // move it to any core (can_migrate_task's task_hot).
  const bool queues = !spinning && h.migration_cost > 0 && x->ran && spins;
  const bool woken = x->queued_on < 0 && t >= x->parks_at;
  const size_t home = !queues ? x->core : x->queued_on >= 0 ? static_cast<size_t>(x->queued_on) : QueueFor(x, woken);
  if (!spinning) {
    // A core free now: one nobody spins on first (the scheduler's idle
    // core), else one whose thread only spins, which it preempts; a core
    // whose thread has work waiting is that thread's. Else it waits for
    // the first core to come free.
    size_t best = h.core_free.size();
    bool best_spun = true;
    Nanos next = INT64_MAX;
    const Nanos cold_at = x->busy_until + h.migration_cost;
    for (size_t k = 0; k < h.core_free.size(); ++k) {
      SimExecutor* y = h.holder[k];
      const bool other = y != nullptr && y != x;
      Nanos free_at = h.core_free[k];
      if (other && !y->ready.empty()) free_at = std::max(free_at, t + 1);  // its turn comes first
      const bool spun = other && y->park_after >= 0 && t < y->parks_at;
      if (queues && k != home && !(woken && free_at <= t && !spun)) {
        free_at = std::max(free_at, cold_at);
      }
      if (free_at > t) {
        next = std::min(next, free_at);
        continue;
      }
      if (best == h.core_free.size() || (best_spun && !spun)) {
        best = k;
        best_spun = spun;
        preempted = spun ? y : nullptr;
      }
    }
    if (best == h.core_free.size()) {
      start = std::max(start, next);
    } else {
      core = best;
    }
    // Wake-up preemption: woken with every core busy, it preempts the
    // turn running on the core whose queue it joins (most often its
    // waker's), one wakee at a time; that turn resumes after it (below).
    // Only as it is woken: the first look after the wake-up decides.
    if (x->preempts && t >= x->wake_at) {
      x->preempts = false;
      SimExecutor* y = h.holder[home];
      if (start > t && y != nullptr && y != x && x->busy_until <= t && y->busy_until > t &&
          h.preempted_until[home] <= t) {
        interrupted = y;
        core = home;
        start = t;
      }
    }
  }
  if (start > t) {
    if (queues && x->queued_on < 0) {  // it waits in home's queue
      x->queued_on = static_cast<int32_t>(home);
      ++h.queued[home];
    }
    if (!x->resume_pending) {
      x->resume_pending = true;
      Push(start, x, kEventResume, "resume", 0, 0, {});
    }
    return false;
  }
  ++turn_;
  // The spin since its last turn held a core (a preempted spin was counted
  // when it was cut). A turn after the spin ran out began with a wake-up.
  if (x->ran && spins) {
    const Nanos spun = std::max<Nanos>(0, std::min(t, x->parks_at) - x->spin_from);
    h.busy += spun;
    x->spun += spun;
    if (t >= x->parks_at) ++x->parks;
  }
  if (!spinning && interrupted == nullptr) {
    if (x->ran && h.holder[x->core] == x) h.holder[x->core] = nullptr;
    h.holder[core] = x;
  } else if (interrupted != nullptr && x->ran && h.holder[x->core] == x) {
    h.holder[x->core] = nullptr;
  }
  x->core = static_cast<uint32_t>(core);
  if (x->queued_on >= 0) --h.queued[static_cast<size_t>(x->queued_on)];
  x->queued_on = -1;
  x->wake_core = -1;
  x->preempts = false;
  x->woken = false;
  meter_.charged = 0;
  meter_.own = &x->charged;
  meter_.own_steps = &x->steps;
  metering_ = true;
  detail::t_meter = &meter_;
  // Woken, it pays its part of the wake-up, its switch-in, before it runs
  // anything (ChargeWake). A spinner preempted since its last turn was switched back in
  // to spin the rest, once per preemption; the model gives the rest of a
  // spin no turn of its own, so this turn pays those too, on its path even
  // if it parked since — the core time a resumed spin takes from others.
  // (Counting them off the path, as CPU that occupies no core, left the
  // model's cores too free: 32 and 34 of 42 cells on two sets of
  // measurements, against 37 and 38 this way.)
  ChargeNanos(x->SwitchIn(), std::exchange(x->switch_in_owed, 0));
  // One loop turn of a real executor: everything pending when it starts
  // (what one poll returns), handled back to back.
  while (!x->ready.empty()) {
    Event e = std::move(x->ready.front());
    x->ready.pop_front();
    e.time = t;  // it starts now (later than it came due if it waited)
    Dispatch(e);
  }
  detail::t_meter = nullptr;
  meter_.own = nullptr;
  meter_.own_steps = nullptr;
  metering_ = false;
  const Nanos end = t + meter_.charged;
  if (preempted != nullptr && end == t) {
    h.holder[core] = preempted;  // a turn that took no time: the spinner keeps its core
  } else if (preempted != nullptr) {
    // Its spin was cut short: it stays runnable, off the core, and spins
    // the rest of it later (when the scheduler next gives it a core; here:
    // after this turn) unless work comes first. Its spin so far was core
    // time; the rest runs beside this executor's own and is not counted.
    ++preempted->preempted_by[x->id()];
    preempted->switch_in_owed += model_->Of(preempted->SwitchIn(), 0);
    const Nanos spun = std::max<Nanos>(0, t - preempted->spin_from);
    h.busy += spun;
    preempted->spun += spun;
    preempted->spin_from = INT64_MAX;
    preempted->parks_at = end + (preempted->parks_at - t);
  }
  if (interrupted != nullptr) {
    // The preempted turn resumes after this one, plus its thread's switch
    // back in on that core, priced as a same-core hand-over (kWakeupBusy).
    // The wakee parks at once: on that core its spin would hold up the
    // preempted turn, or run beside it. What the preempted turn sent after
    // this one began keeps its time: the model delays its core, not its
    // messages.
    const Nanos back = model_->Of(Cost::kWakeupBusy, 0);
    const Nanos d = meter_.charged + back;
    h.core_free[core] += d;
    h.preempted_until[core] = end;
    h.busy += back;
    interrupted->busy_until += d;
    if (interrupted->park_after >= 0) interrupted->parks_at += d;
    interrupted->spin_from += d;
    ++interrupted->preempted_by[x->id()];
    interrupted->charged[static_cast<size_t>(Cost::kWakeupBusy)] += back;
    cost_totals_[static_cast<size_t>(Cost::kWakeupBusy)] += back;
    interrupted->AddCpu(back);
  } else {
    // Then it spins for park_after before it parks, on that core, unless
    // work for another executor takes the core (above).
    h.core_free[core] = end;
  }
  x->parks_at = !spins ? INT64_MAX : interrupted != nullptr ? end : end + x->park_after;
  x->spin_from = end;
  h.busy += meter_.charged;
  x->busy_until = end;
  x->ran = true;
  x->AddCpu(meter_.charged);
  return true;
}

void SimRuntime::Dispatch(Event& e) {
  now_ = e.time;
  ++events_run_;
  Fold(e);
  SimExecutor* prev = current_;
  current_ = e.exec;
  const Nanos cpu0 = options_.measure_cpu && e.exec ? ThreadCpuNanos() : 0;
  e.fn();
  if (e.exec != nullptr) e.exec->RunPollers(options_.max_poll_rounds);
  if (options_.measure_cpu && e.exec) e.exec->AddCpu(ThreadCpuNanos() - cpu0);
  current_ = prev;
}

void SimRuntime::ChargeWake(Executor* target, Wake how) {
  auto* x = static_cast<SimExecutor*>(target);
  if (model_ == nullptr || x == nullptr || x->host < 0 || x == current_ || x->woken || !x->ran) return;
  if (x->park_after < 0 || Now() < x->parks_at) return;  // spinning or runnable: no wake-up
  x->woken = true;
  const bool queues = hosts_[static_cast<size_t>(x->host)].migration_cost > 0;
  const bool local_waker = current_ != nullptr && current_->host == x->host;
  x->wake_core = queues && local_waker ? static_cast<int32_t>(current_->core) : -1;
  if (HasIdleCore(static_cast<size_t>(x->host), x)) {
    // The waker's part of a whole wake-up; the woken thread's part is its
    // switch-in. (Until 2026-11-28 the waker paid it all, and the woken
    // executor ran at once: it then acknowledged what woke it while its
    // waker still spun, and the acks' wake-ups went missing — workers
    // parked once per operation, not ~1.5 times, and ran at half their
    // measured CPU.)
    const Nanos own = model_->Of(x->SwitchIn(), 0);
    if (how == Wake::kLocal) {
      Charge(Cost::kWakeupLocal);
      x->switch_in_owed += own;
    } else {
      const Nanos whole = model_->Of(Cost::kWakeup, 0);
      const Nanos woken = std::min(whole, own);
      ChargeNanos(Cost::kWakeup, whole - woken);
      x->switch_in_owed += woken;
    }
  } else {
    Charge(Cost::kWakeupBusy);
    x->switch_in_owed += model_->Of(x->SwitchIn(), 0);
    if (queues && local_waker && x->ready.empty()) {  // parked, not waiting for a core
      x->preempts = true;  // Linux's wake-up preemption (RunReady)
      x->wake_at = Now();
    }
  }
}

// A core the woken executor `x` could start on at once, as RunReady would
// give it one: free now, not the running handler's, not about to run its
// holder's waiting work, and held by nobody, by x itself, by a thread that
// has parked or by one on a dedicated core (whose polling RunReady lets
// others take); a spinner's is busy — Linux would have to preempt it.
bool SimRuntime::HasIdleCore(size_t host, const SimExecutor* x) const {
  const Host& h = hosts_[host];
  const Nanos now = Now();
  for (size_t k = 0; k < h.core_free.size(); ++k) {
    if (h.core_free[k] > now) continue;
    const SimExecutor* y = h.holder[k];
    if (y != nullptr && y == current_) continue;  // the waker's own core
    const bool other = y != nullptr && y != x;
    if (other && !y->ready.empty()) continue;
    const bool spinning = other && y->park_after >= 0 && now < y->parks_at;
    if (!spinning) return true;
  }
  return false;
}

uint64_t SimRuntime::Parks(const Executor* exec) const { return static_cast<const SimExecutor*>(exec)->parks; }
Nanos SimRuntime::CpuBy(const Executor* exec, Nanos t) const {
  const auto* x = static_cast<const SimExecutor*>(exec);
  return x->CpuTime() - std::max<Nanos>(0, x->busy_until - t);
}
Nanos SimRuntime::SpunBy(const Executor* exec) const { return static_cast<const SimExecutor*>(exec)->spun; }
const std::array<Nanos, kCostCount>& SimRuntime::CostsOf(const Executor* exec) const {
  return static_cast<const SimExecutor*>(exec)->charged;
}
const std::array<uint64_t, kCostCount>& SimRuntime::StepsOf(const Executor* exec) const {
  return static_cast<const SimExecutor*>(exec)->steps;
}
uint64_t SimRuntime::Preemptions(const Executor* exec) const {
  uint64_t n = 0;
  for (const auto& [by, count] : static_cast<const SimExecutor*>(exec)->preempted_by) n += count;
  return n;
}
uint64_t SimRuntime::PreemptionsBy(const Executor* exec, const Executor* by) const {
  const auto& m = static_cast<const SimExecutor*>(exec)->preempted_by;
  const auto it = m.find(by->id());
  return it == m.end() ? 0 : it->second;
}

void SimRuntime::SetCostModel(const CostModel& model) {
  model_ = std::make_unique<CostModel>(model);
  meter_.model = model_.get();
  meter_.totals = &cost_totals_;
}

uint32_t SimRuntime::AddHost(uint32_t cores, Nanos park_after, Nanos migration_cost) {
  const uint32_t n = std::max<uint32_t>(cores, 1);
  hosts_.push_back(Host{std::vector<Nanos>(n, 0), std::vector<SimExecutor*>(n, nullptr), park_after, 0,
                        std::max<Nanos>(migration_cost, 0), std::vector<uint32_t>(n, 0),
                        std::vector<Nanos>(n, 0)});
  return static_cast<uint32_t>(hosts_.size() - 1);
}

void SimRuntime::PlaceOn(Executor* exec, uint32_t host, std::optional<Nanos> park_after, Wait wait) {
  if (model_ == nullptr || host >= hosts_.size()) return;
  auto* x = static_cast<SimExecutor*>(exec);
  x->host = host;
  x->park_after = park_after.value_or(hosts_[host].park_after);
  x->waits_locally = wait == Wait::kLocal;
}

void SimRuntime::Fold(const Event& e) {
  struct Record {
    int64_t time;
    uint64_t tag;
    uint32_t exec;
    uint16_t kind;
    uint16_t pad;
  } r{e.time, e.tag, e.exec ? e.exec->id() : kNoExecutor, e.kind, 0};
  trace_hash_ = XXH3_64bits_withSeed(&r, sizeof(r), trace_hash_);
  if (sink_) {
    char line[192];
    std::snprintf(line, sizeof(line), "t=%" PRId64 " ex=%d(%.*s) kind=%u %s tag=%" PRIu64,
                  e.time, e.exec ? static_cast<int>(e.exec->id()) : -1,
                  e.exec ? static_cast<int>(e.exec->name().size()) : 1,
                  e.exec ? e.exec->name().data() : "-", e.kind, e.label, e.tag);
    sink_(line);
  }
}

uint64_t SimRuntime::RunUntil(Nanos t) {
  uint64_t n = 0;
  while (StepBefore(t)) ++n;
  now_ = std::max(now_, t);
  return n;
}

bool SimRuntime::RunUntil(const std::function<bool()>& done, Nanos deadline) {
  for (;;) {
    if (done()) return true;
    if (!StepBefore(deadline)) {
      now_ = std::max(now_, deadline);
      return done();
    }
  }
}

uint64_t SimRuntime::RunUntilIdle(uint64_t max_events) {
  uint64_t n = 0;
  while (n < max_events && Step()) ++n;
  return n;
}

}  // namespace slip::runtime
