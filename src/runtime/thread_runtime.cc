#include "runtime/thread_runtime.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <queue>
#include <thread>
#include <unordered_map>

namespace slip::runtime {
namespace {

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Nanos ClockNanos(clockid_t clock) {
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) return 0;
  return Nanos{ts.tv_sec} * kSecond + ts.tv_nsec;
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

uint64_t MixSeed(uint64_t seed, uint64_t id) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (id + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return z ^ (z >> 31);
}

thread_local const Executor* tls_current = nullptr;

}  // namespace

class ThreadExecutor final : public Executor {
 public:
  ThreadExecutor(uint32_t id, std::string name, const ThreadRuntimeOptions& options,
                 int64_t epoch_ns)
      : id_(id),
        name_(std::move(name)),
        options_(options),
        epoch_ns_(epoch_ns),
        rng_(MixSeed(options.seed, id)),
        efd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

  ~ThreadExecutor() override {
    Stop();
    if (efd_ >= 0) ::close(efd_);
  }

  Status Start() {
    if (efd_ < 0) return Status::IoError(std::string("eventfd: ") + std::strerror(errno));
    started_ = true;
    thread_ = std::thread([this] { Loop(); });
    return Status::Ok();
  }

  void Stop() {
    stop_.store(true);
    Wake();
    if (thread_.joinable()) thread_.join();
  }

  std::string_view name() const override { return name_; }
  uint32_t id() const override { return id_; }
  Nanos Now() const override { return SteadyNanos() - epoch_ns_; }
  Random& Rng() override { return rng_; }
  bool IsCurrent() const override { return tls_current == this; }

  TimerId After(Nanos delay, std::function<void()> fn) override {
    const Nanos due = Now() + std::max<Nanos>(delay, 0);
    TimerId id;
    {
      std::lock_guard lock(mu_);
      id = next_timer_++;
      heap_.push({due, id});
      timers_.emplace(id, std::move(fn));
      if (due < next_due_.load(std::memory_order_relaxed)) next_due_.store(due, std::memory_order_release);
    }
    // The parked loop computed its timeout from the old earliest timer.
    if (!IsCurrent()) Wake();
    return id;
  }

  bool Cancel(TimerId id) override {
    std::lock_guard lock(mu_);
    return timers_.erase(id) == 1;  // the heap entry is skipped lazily
  }

  void Post(std::function<void()> fn) override {
    {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(fn));
      has_tasks_.store(true, std::memory_order_release);
    }
    if (!IsCurrent()) Wake();
  }

  PollerId AddPoller(std::function<bool()> poll) override {
    const PollerId id = next_poller_.fetch_add(1);
    auto add = [this, id, poll = std::move(poll)]() mutable {
      pollers_.push_back(std::make_unique<Poller>(Poller{id, std::move(poll), false}));
    };
    RunHereOrPost(std::move(add));
    return id;
  }

  void RemovePoller(PollerId id) override {
    RunHereOrPost([this, id] {
      for (auto& p : pollers_) {
        if (p->id == id) p->removed = true;  // compacted after the current turn
      }
      pollers_dirty_ = true;
    });
  }

  void Wake() override {
    wake_requested_.store(true);
    if (parked_.load()) {
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t n = ::write(efd_, &one, sizeof(one));
    }
  }

  void AddWaitFd(int fd, std::function<bool()> can_block, bool sees_all) override {
    RunHereOrPost([this, fd, can_block = std::move(can_block), sees_all]() mutable {
      wait_fds_.push_back({fd, std::move(can_block), sees_all});
    });
  }

  Nanos CpuTime() const override {
    std::lock_guard lock(cpu_mu_);
    if (cpu_clock_valid_) return ClockNanos(cpu_clock_);
    return final_cpu_;
  }

 private:
  struct Poller {
    PollerId id;
    std::function<bool()> fn;
    // Set instead of clearing fn: a poller may remove itself while running.
    bool removed = false;
  };
  struct TimerEntry {
    Nanos due;
    TimerId id;  // ties: setting order
    bool operator>(const TimerEntry& o) const { return due != o.due ? due > o.due : id > o.id; }
  };
  struct WaitFd {
    int fd;
    std::function<bool()> can_block;
    bool sees_all;
  };

  // Poller and wait-fd lists belong to the loop thread once it runs.
  void RunHereOrPost(std::function<void()> fn) {
    if (!started_ || IsCurrent()) {
      fn();
    } else {
      Post(std::move(fn));
    }
  }

  void Loop() {
    tls_current = this;
    // The executor's name on its thread (15 characters at most), so top -H,
    // perf and gdb show roles ("node0/nic") instead of the process name.
    ::pthread_setname_np(::pthread_self(), name_.substr(0, 15).c_str());
    {
      std::lock_guard lock(cpu_mu_);
      cpu_clock_valid_ = ::pthread_getcpuclockid(::pthread_self(), &cpu_clock_) == 0;
    }
    int idle = 0;
    while (!stop_.load()) {
      wake_requested_.store(false);
      if (RunTurn()) {
        idle = 0;
        continue;
      }
      if (idle < options_.spin_turns) {
        ++idle;
        CpuRelax();
        continue;
      }
      if (Park()) idle = 0;  // woken by an event: spin again before the next park
    }
    std::lock_guard lock(cpu_mu_);
    final_cpu_ = ClockNanos(CLOCK_THREAD_CPUTIME_ID);
    cpu_clock_valid_ = false;
    tls_current = nullptr;
  }

  bool RunTurn() {
    bool work = false;

    // The lock only when there is something to take: an idle or
    // poll-driven loop turn costs no mutex round trips (has_tasks_ and
    // next_due_ are set under the lock by Post/After; a stale next_due_
    // only costs one needless look).
    if (has_tasks_.load(std::memory_order_acquire)) {
      std::vector<std::function<void()>> batch;
      {
        std::lock_guard lock(mu_);
        batch.swap(tasks_);
        has_tasks_.store(false, std::memory_order_relaxed);
      }
      for (auto& fn : batch) fn();
      work = !batch.empty();
    }

    // Only timers that existed when the phase began: a timer re-arming itself
    // with After(0) runs once per turn instead of starving the pollers.
    const Nanos now = Now();
    if (next_due_.load(std::memory_order_acquire) <= now) {
      TimerId limit;
      {
        std::lock_guard lock(mu_);
        limit = next_timer_;
      }
      for (;;) {
        std::function<void()> fn;
        {
          std::lock_guard lock(mu_);
          while (!heap_.empty() && !timers_.contains(heap_.top().id)) heap_.pop();
          next_due_.store(heap_.empty() ? kNever : heap_.top().due, std::memory_order_relaxed);
          if (heap_.empty() || heap_.top().due > now || heap_.top().id >= limit) break;
          auto it = timers_.find(heap_.top().id);
          fn = std::move(it->second);
          timers_.erase(it);
          heap_.pop();
        }
        fn();
        work = true;
      }
    }

    // Index loop: a poller may add pollers (the vector may grow).
    const size_t n = pollers_.size();
    for (size_t i = 0; i < n; ++i) {
      Poller& p = *pollers_[i];
      if (!p.removed && p.fn()) work = true;
    }
    if (pollers_dirty_) {
      std::erase_if(pollers_, [](const auto& p) { return p->removed; });
      pollers_dirty_ = false;
    }
    return work;
  }

  // Blocks until the next timer, a Post/Wake, a wait fd, or — while some
  // poller may have no wait fd to wake it — max_park.
  // Returns true when woken by an event rather than by the time bound.
  bool Park() {
    size_t live_pollers = 0, full_fds = 0;
    for (const auto& p : pollers_) live_pollers += p->removed ? 0 : 1;
    for (const auto& w : wait_fds_) full_fds += w.sees_all ? 1 : 0;
    Nanos timeout = live_pollers > full_fds ? options_.max_park : kIdlePark;
    {
      std::lock_guard lock(mu_);
      if (!tasks_.empty()) return true;
      while (!heap_.empty() && !timers_.contains(heap_.top().id)) heap_.pop();
      if (!heap_.empty()) timeout = std::min(timeout, heap_.top().due - Now());
    }
    if (timeout <= 0) return true;
    for (auto& w : wait_fds_) {
      if (w.can_block && !w.can_block()) return true;
    }
    // Announce the park, then re-check for a Wake that raced with it: either
    // the waker sees parked_ and signals the eventfd, or we see its request.
    parked_.store(true);
    if (wake_requested_.exchange(false) || stop_.load()) {
      parked_.store(false);
      return true;
    }
    std::vector<pollfd> fds;
    fds.reserve(1 + wait_fds_.size());
    fds.push_back({efd_, POLLIN, 0});
    for (auto& w : wait_fds_) fds.push_back({w.fd, POLLIN, 0});
    timespec ts{static_cast<time_t>(timeout / kSecond), static_cast<long>(timeout % kSecond)};
    const int r = ::ppoll(fds.data(), fds.size(), &ts, nullptr);
    parked_.store(false);
    if (r > 0 && (fds[0].revents & POLLIN)) {
      uint64_t drained;
      [[maybe_unused]] ssize_t n = ::read(efd_, &drained, sizeof(drained));
    }
    return r > 0;
  }

  const uint32_t id_;
  const std::string name_;
  const ThreadRuntimeOptions options_;
  const int64_t epoch_ns_;
  Random rng_;
  const int efd_;
  bool started_ = false;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> parked_{false};
  std::atomic<bool> wake_requested_{false};

  std::mutex mu_;  // tasks_, heap_, timers_, next_timer_
  std::vector<std::function<void()>> tasks_;
  static constexpr Nanos kNever = INT64_MAX;
  // A park every poller's source can end by its wait fd: bounded only so a
  // lost wake-up could never stall a loop for good.
  static constexpr Nanos kIdlePark = kSecond;
  std::atomic<bool> has_tasks_{false};    // tasks_ is not empty (written under mu_)
  std::atomic<Nanos> next_due_{kNever};   // <= the earliest timer's due time (written under mu_)
  std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<>> heap_;
  std::unordered_map<TimerId, std::function<void()>> timers_;
  TimerId next_timer_ = 1;

  // Loop thread only (or before Start).
  std::vector<std::unique_ptr<Poller>> pollers_;
  bool pollers_dirty_ = false;
  std::vector<WaitFd> wait_fds_;
  std::atomic<PollerId> next_poller_{1};

  mutable std::mutex cpu_mu_;
  clockid_t cpu_clock_{};
  bool cpu_clock_valid_ = false;  // the thread is alive and cpu_clock_ names it
  Nanos final_cpu_ = 0;           // its CPU time when the loop exited
};

ThreadRuntime::ThreadRuntime(ThreadRuntimeOptions options)
    : options_(options), epoch_ns_(SteadyNanos()) {}

ThreadRuntime::~ThreadRuntime() { Stop(); }

Executor* ThreadRuntime::CreateExecutor(std::string name) {
  std::lock_guard lock(mu_);
  const auto id = static_cast<uint32_t>(executors_.size());
  executors_.push_back(std::make_unique<ThreadExecutor>(id, std::move(name), options_, epoch_ns_));
  ThreadExecutor* e = executors_.back().get();
  if (running_) {
    // A thread that cannot start leaves an executor that never runs; the
    // alternative (returning null) would crash callers that cannot fail.
    (void)e->Start();
  }
  return e;
}

Nanos ThreadRuntime::Now() const { return SteadyNanos() - epoch_ns_; }

Status ThreadRuntime::Start() {
  std::lock_guard lock(mu_);
  if (running_) return Status::Ok();
  if (stopped_) return Status::Aborted("a stopped ThreadRuntime does not restart");
  running_ = true;
  for (auto& e : executors_) SLIP_RETURN_IF_ERROR(e->Start());
  return Status::Ok();
}

void ThreadRuntime::Stop() {
  std::lock_guard lock(mu_);
  for (auto& e : executors_) e->Stop();
  stopped_ = stopped_ || running_;
  running_ = false;
}

}  // namespace slip::runtime
