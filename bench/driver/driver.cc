#include "bench/driver/driver.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "common/log.h"

namespace slip::bench {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// This process's CPU, every thread: the driver threads and whatever the
// target runs in-process (a client library's I/O threads, an embedded
// engine's background work).
double ProcessCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

void SleepUntilNs(int64_t t) {
  const int64_t now = NowNs();
  if (t > now) std::this_thread::sleep_for(std::chrono::nanoseconds(t - now));
}

// A thread that keeps failing is talking to a dead target: stop the run
// instead of reporting a throughput of errors.
constexpr uint64_t kMaxConsecutiveErrors = 1000;

struct alignas(64) ThreadState {
  std::array<Histogram, kNumOpTypes> hist;
  uint64_t ops = 0, errors = 0, not_found = 0, consecutive_errors = 0;
  std::string first_error;
  bool started = false;  // first op of the measured window completed
  uint64_t rtts_start = 0, rtts_end = 0;
  Status fatal;
  std::atomic<uint64_t> progress{0};  // ops completed in any phase (progress line)
};

// Runs one op; returns OK, NotFound (a read of an absent record) or the error.
Status DoOp(KvSession& s, const ycsb::OpGenerator& gen, const ycsb::Op& op, uint64_t& version,
            std::vector<std::pair<std::string, std::string>>& scratch) {
  const std::string key = gen.Key(op.record);
  switch (op.type) {
    case ycsb::OpType::kRead:
      return s.Get(key).status();
    case ycsb::OpType::kUpdate:
      return s.Put(key, gen.Value(op.record, ++version));
    case ycsb::OpType::kInsert:
      return s.Put(key, gen.Value(op.record, 0));
    case ycsb::OpType::kScan:
      scratch.clear();
      return s.Scan(key, op.scan_len, &scratch);
    case ycsb::OpType::kReadModifyWrite: {
      auto v = s.Get(key);
      if (!v.ok() && !v.status().Is(Code::kNotFound)) return v.status();
      return s.Put(key, gen.Value(op.record, ++version));
    }
  }
  return Status::InvalidArgument("unknown op type");
}

struct Window {
  int64_t begin_ns, measure_ns, end_ns;
};

void RunThread(KvSession& session, const DriverOptions& o, ycsb::InsertCounter* inserts,
               uint32_t t, const Window& w, std::atomic<bool>& abort_run, ThreadState& st) {
  // Default timer slack (50 us) would make every open-loop sleep overshoot,
  // and that lateness would be charged to the target.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  ycsb::OpGenerator gen(o.workload, inserts);
  Random rng(o.seed * 0x9E3779B97F4A7C15ull + t + 1);
  uint64_t version = static_cast<uint64_t>(t) << 40;  // distinct values per thread
  std::vector<std::pair<std::string, std::string>> scratch;
  const bool open_loop = o.rate > 0;
  const double interval_ns = open_loop ? 1e9 / o.rate : 0;
  // Stagger threads' schedules so open-loop sends do not arrive in bursts.
  double next_intended = static_cast<double>(w.begin_ns) +
                         (open_loop ? interval_ns * t / std::max<uint32_t>(o.threads, 1) : 0);
  uint64_t done = 0;

  while (!abort_run.load(std::memory_order_relaxed)) {
    int64_t start_ns;
    if (open_loop) {
      const auto intended = static_cast<int64_t>(next_intended);
      next_intended += interval_ns;
      if (intended >= w.end_ns) break;
      SleepUntilNs(intended);
      start_ns = intended;  // latency from the intended send time
    } else {
      start_ns = NowNs();
    }
    const ycsb::Op op = gen.Next(rng);
    const uint64_t rtts_before = st.started ? 0 : session.round_trips();
    Status s = DoOp(session, gen, op, version, scratch);
    const int64_t end_ns = NowNs();
    st.progress.store(++done, std::memory_order_relaxed);
    if (end_ns >= w.end_ns) break;  // completed after the window: not counted

    if (s.Is(Code::kNotSupported)) {
      st.fatal = s;
      abort_run.store(true);
      break;
    }
    const bool failed = !s.ok() && !s.Is(Code::kNotFound);
    st.consecutive_errors = failed ? st.consecutive_errors + 1 : 0;
    if (st.consecutive_errors >= kMaxConsecutiveErrors) {
      st.fatal = Status(s.code(), std::to_string(kMaxConsecutiveErrors) +
                                      " consecutive failures, last: " + s.ToString());
      abort_run.store(true);
      break;
    }
    if (end_ns < w.measure_ns) continue;  // warm-up

    if (!st.started) {
      st.started = true;
      st.rtts_start = rtts_before;
    }
    st.hist[static_cast<int>(op.type)].Record(static_cast<uint64_t>(end_ns - start_ns));
    ++st.ops;
    if (failed) {
      if (st.errors++ == 0) st.first_error = std::string(ycsb::OpTypeName(op.type)) + ": " + s.ToString();
    } else if (s.Is(Code::kNotFound) && op.type == ycsb::OpType::kRead) {
      ++st.not_found;
    }
    st.rtts_end = session.round_trips();
  }
}

// The pipelined loop (depth > 1): `depth` ops in flight; completions come
// back on the target's threads and are accounted here, on the driver thread.
void RunThreadPipelined(KvSession& session, const DriverOptions& o, ycsb::InsertCounter* inserts,
                        uint32_t t, const Window& w, std::atomic<bool>& abort_run, ThreadState& st) {
  ycsb::OpGenerator gen(o.workload, inserts);
  Random rng(o.seed * 0x9E3779B97F4A7C15ull + t + 1);
  uint64_t version = static_cast<uint64_t>(t) << 40;
  struct Completed {
    ycsb::OpType type;
    int64_t start_ns, end_ns;
    Status status;
  };
  // Shared with the callbacks; a shared_ptr so that a callback running after
  // this function returned (it drains first, but a target may be late) is safe.
  struct Mailbox {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<Completed> done;
  };
  auto box = std::make_shared<Mailbox>();
  uint32_t in_flight = 0;
  uint64_t progress = 0;
  bool stop_issuing = false;

  auto issue = [&] {
    const ycsb::Op op = gen.Next(rng);
    const int64_t start = NowNs();
    auto finish = [box, type = op.type, start](Status s) {
      const int64_t end = NowNs();
      std::lock_guard lock(box->mu);
      box->done.push_back({type, start, end, std::move(s)});
      box->cv.notify_one();
    };
    std::string key = gen.Key(op.record);
    ++in_flight;
    switch (op.type) {
      case ycsb::OpType::kRead:
        return session.GetAsync(std::move(key), std::move(finish));
      case ycsb::OpType::kUpdate:
        return session.PutAsync(std::move(key), gen.Value(op.record, ++version), std::move(finish));
      case ycsb::OpType::kInsert:
        return session.PutAsync(std::move(key), gen.Value(op.record, 0), std::move(finish));
      case ycsb::OpType::kReadModifyWrite: {
        std::string value = gen.Value(op.record, ++version);
        KvSession* s = &session;
        return session.GetAsync(key, [s, key, value = std::move(value), finish = std::move(finish)](Status g) mutable {
          if (!g.ok() && !g.Is(Code::kNotFound)) return finish(g);
          s->PutAsync(std::move(key), std::move(value), std::move(finish));
        });
      }
      case ycsb::OpType::kScan:
        return finish(Status::NotSupported("scans are not pipelined"));
    }
  };

  for (uint32_t i = 0; i < o.depth; ++i) issue();
  std::vector<Completed> batch;
  while (in_flight > 0) {
    {
      std::unique_lock lock(box->mu);
      box->cv.wait(lock, [&] { return !box->done.empty(); });
      batch.swap(box->done);
    }
    for (const Completed& c : batch) {
      --in_flight;
      st.progress.store(++progress, std::memory_order_relaxed);
      if (c.end_ns >= w.end_ns || abort_run.load(std::memory_order_relaxed)) stop_issuing = true;
      if (c.status.Is(Code::kNotSupported) && !stop_issuing) {
        st.fatal = c.status;
        abort_run.store(true);
        stop_issuing = true;
      }
      if (c.end_ns >= w.end_ns) continue;
      const bool failed = !c.status.ok() && !c.status.Is(Code::kNotFound);
      st.consecutive_errors = failed ? st.consecutive_errors + 1 : 0;
      if (st.consecutive_errors >= kMaxConsecutiveErrors && st.fatal.ok()) {
        st.fatal = Status(c.status.code(), std::to_string(kMaxConsecutiveErrors) +
                                               " consecutive failures, last: " + c.status.ToString());
        abort_run.store(true);
        stop_issuing = true;
      }
      if (c.end_ns < w.measure_ns) continue;  // warm-up
      if (!st.started) {
        st.started = true;
        st.rtts_start = session.round_trips();
      }
      // Issued before the window opened: its latency still counts, as in the
      // closed loop (an op counts if it completes inside the window).
      st.hist[static_cast<int>(c.type)].Record(static_cast<uint64_t>(c.end_ns - c.start_ns));
      ++st.ops;
      if (failed) {
        if (st.errors++ == 0) st.first_error = std::string(ycsb::OpTypeName(c.type)) + ": " + c.status.ToString();
      } else if (c.status.Is(Code::kNotFound) && c.type == ycsb::OpType::kRead) {
        ++st.not_found;
      }
    }
    batch.clear();
    if (st.started) st.rtts_end = session.round_trips();
    while (!stop_issuing && in_flight < o.depth) issue();
  }
}

// Inserts records [0, n) with `threads` sessions in parallel (untimed).
Status Load(std::vector<std::unique_ptr<KvSession>>& sessions, const DriverOptions& o,
            ycsb::InsertCounter* inserts) {
  const uint64_t n = o.workload.records;
  const auto threads = static_cast<uint32_t>(sessions.size());
  std::vector<Status> status(threads);
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ycsb::OpGenerator gen(o.workload, inserts);
      for (uint64_t i = t; i < n; i += threads) {
        if (o.cancel && o.cancel->load(std::memory_order_relaxed)) return;
        Status s = sessions[t]->Put(gen.Key(i), gen.Value(i, 0));
        if (!s.ok()) {
          status[t] = Status(s.code(), "load of record " + std::to_string(i) + ": " + s.message());
          return;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  for (auto& s : status) SLIP_RETURN_IF_ERROR(s);
  if (o.cancel && o.cancel->load()) return Status::Aborted("interrupted during the load phase");
  return Status::Ok();
}

std::optional<double> PerOp(const std::optional<double>& a, const std::optional<double>& b, uint64_t ops) {
  if (!a || !b || ops == 0) return std::nullopt;
  return (*b - *a) / static_cast<double>(ops);
}

}  // namespace

Result<RunReport> RunWorkload(KvTarget& target, const DriverOptions& o) {
  if (o.threads == 0) return Status::InvalidArgument("threads must be positive");
  if (!(o.seconds > 0)) return Status::InvalidArgument("the measured time must be positive");
  if (o.warmup < 0 || o.rate < 0) return Status::InvalidArgument("warm-up and rate must not be negative");
  if (o.depth == 0) return Status::InvalidArgument("depth must be positive");
  if (o.depth > 1 && o.rate > 0) return Status::InvalidArgument("a pipelined run (depth > 1) is closed loop: no rate");
  if (o.depth > 1 && o.workload.scan > 0) return Status::InvalidArgument("scans are not pipelined (depth 1)");
  if (o.workload.records == 0 && o.workload.name != "load")
    return Status::InvalidArgument("records must be positive");

  std::vector<std::unique_ptr<KvSession>> sessions;
  for (uint32_t t = 0; t < o.threads; ++t) {
    auto s = target.Connect(t);
    if (!s.ok()) return Status(s.status().code(), "connect: " + s.status().message());
    sessions.push_back(std::move(s).value());
    if (o.depth > 1 && !sessions.back()->SupportsAsync()) {
      return Status::InvalidArgument("target " + target.name() + " has no asynchronous calls: run it with depth 1");
    }
  }

  // The "load" workload measures the inserts themselves; every other one
  // runs over records loaded beforehand.
  const bool is_load = o.workload.name == "load";
  ycsb::InsertCounter inserts(is_load ? 0 : o.workload.records);
  if (!is_load) SLIP_RETURN_IF_ERROR(Load(sessions, o, &inserts));
  if (o.workload.scan > 0) {
    std::vector<std::pair<std::string, std::string>> probe;
    Status s = sessions[0]->Scan(ycsb::OpGenerator(o.workload, &inserts).Key(0), 1, &probe);
    if (s.Is(Code::kNotSupported))
      return Status::NotSupported("workload " + o.workload.name + " scans, and target " + target.name() +
                                  " cannot: " + s.message());
  }

  std::vector<std::unique_ptr<ThreadState>> states;
  for (uint32_t t = 0; t < o.threads; ++t) states.push_back(std::make_unique<ThreadState>());
  const int64_t begin = NowNs() + 1'000'000;  // 1 ms for the threads to start
  const Window w{begin, begin + static_cast<int64_t>(o.warmup * 1e9),
                 begin + static_cast<int64_t>((o.warmup + o.seconds) * 1e9)};
  std::atomic<bool> abort_run{false};
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < o.threads; ++t) {
    pool.emplace_back([&, t] {
      if (o.depth > 1) {
        RunThreadPipelined(*sessions[t], o, &inserts, t, w, abort_run, *states[t]);
      } else {
        RunThread(*sessions[t], o, &inserts, t, w, abort_run, *states[t]);
      }
    });
  }

  // Target counters at the window's edges; a progress line meanwhile.
  const bool progress = o.progress_after_seconds >= 0 && o.warmup + o.seconds > o.progress_after_seconds;
  auto wait_until = [&](int64_t deadline) {
    constexpr int64_t kProgressEveryNs = 5'000'000'000;
    while (!abort_run.load() && NowNs() < deadline) {
      if (o.cancel && o.cancel->load()) {
        abort_run.store(true);
        break;
      }
      const int64_t step = progress ? std::min(deadline, NowNs() + kProgressEveryNs) : deadline;
      // Short sleeps so an aborted run ends promptly.
      while (NowNs() < step && !abort_run.load() && !(o.cancel && o.cancel->load()))
        SleepUntilNs(std::min(step, NowNs() + 50'000'000));
      if (progress && NowNs() < deadline) {
        uint64_t total = 0;
        for (auto& s : states) total += s->progress.load(std::memory_order_relaxed);
        const double at = static_cast<double>(NowNs() - w.begin_ns) * 1e-9;
        logging::Info("bench {}: {:5.1f}/{:.0f} s, {} ops ({})", target.name(), at, o.warmup + o.seconds, total,
                      NowNs() < w.measure_ns ? "warm-up" : "measuring");
      }
    }
  };
  wait_until(w.measure_ns);
  const double cpu0 = ProcessCpuUs();
  const std::optional<HostCpuTimes> host0 = ReadHostCpu();
  const TargetSample s0 = target.Sample();
  wait_until(w.end_ns);
  const double cpu1 = ProcessCpuUs();
  const std::optional<HostCpuTimes> host1 = ReadHostCpu();
  const TargetSample s1 = target.Sample();
  for (auto& th : pool) th.join();

  for (auto& st : states)
    if (!st->fatal.ok()) return st->fatal;
  if (o.cancel && o.cancel->load()) return Status::Aborted("interrupted");

  RunReport r;
  r.design = target.name();
  r.target_description = target.Describe();
  r.durability = target.Durability();
  r.options = o;
  r.measured_seconds = o.seconds;
  uint64_t rtts = 0;
  for (auto& st : states) {
    for (int i = 0; i < kNumOpTypes; ++i) r.latency_ns[i].Merge(st->hist[i]);
    r.ops += st->ops;
    r.errors += st->errors;
    r.not_found += st->not_found;
    if (r.first_error.empty()) r.first_error = st->first_error;
    rtts += st->rtts_end - st->rtts_start;
  }
  r.client_cpu_us = cpu1 - cpu0;
  if (host0 && host1) r.host_cpu = ShareBetween(*host0, *host1);
  r.throughput_ops = static_cast<double>(r.ops) / r.measured_seconds;
  r.cpu_us_per_op.worker = PerOp(s0.cpu_us.worker, s1.cpu_us.worker, r.ops);
  r.cpu_us_per_op.backup_worker = PerOp(s0.cpu_us.backup_worker, s1.cpu_us.backup_worker, r.ops);
  r.cpu_us_per_op.nic = PerOp(s0.cpu_us.nic, s1.cpu_us.nic, r.ops);
  r.cpu_us_per_op.control = PerOp(s0.cpu_us.control, s1.cpu_us.control, r.ops);
  r.cpu_us_per_op.digest = PerOp(s0.cpu_us.digest, s1.cpu_us.digest, r.ops);
  r.cpu_us_per_op.clean = PerOp(s0.cpu_us.clean, s1.cpu_us.clean, r.ops);
  r.cpu_us_per_op.pool = PerOp(s0.cpu_us.pool, s1.cpu_us.pool, r.ops);
  if (s0.round_trips && s1.round_trips) {
    r.rtts_per_op = PerOp(s0.round_trips, s1.round_trips, r.ops);
  } else if (s0.counts_round_trips && r.ops) {
    r.rtts_per_op = static_cast<double>(rtts) / static_cast<double>(r.ops);
  }
  r.fabric_bytes_per_op = PerOp(s0.fabric_bytes, s1.fabric_bytes, r.ops);
  r.pm_bytes_per_op = PerOp(s0.pm_bytes, s1.pm_bytes, r.ops);
  if (s0.rpc_sends && s1.rpc_sends && r.ops) {
    const double n = static_cast<double>(r.ops);
    const RpcSends& a = *s0.rpc_sends;
    const RpcSends& b = *s1.rpc_sends;
    r.rpc_sends_per_op = RpcSends{(b.client_frames - a.client_frames) / n, (b.client_messages - a.client_messages) / n,
                                  (b.server_frames - a.server_frames) / n, (b.server_messages - a.server_messages) / n};
  }
  if (s0.media_bytes && s1.media_bytes && s0.media_requested && s1.media_requested &&
      *s1.media_requested > *s0.media_requested) {
    r.dlwa = (*s1.media_bytes - *s0.media_bytes) / (*s1.media_requested - *s0.media_requested);
  }
  return r;
}

}  // namespace slip::bench
