#include "cli/local_bench.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "bench/workload/ycsb.h"
#include "common/histogram.h"
#include "store/store.h"

namespace slip::cli {
namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct ThreadResult {
  Histogram reads, updates;
  uint64_t ops = 0, errors = 0;
  double cpu_seconds = 0;
};

}  // namespace

int RunLocalBench(const LocalBenchOptions& o) {
  double read_fraction;
  if (o.workload == "a") read_fraction = 0.5;
  else if (o.workload == "b") read_fraction = 0.95;
  else if (o.workload == "c") read_fraction = 1.0;
  else if (o.workload == "load") read_fraction = 0.0;
  else {
    std::fprintf(stderr, "slip bench: unknown workload '%s' (load, a, b, c)\n", o.workload.c_str());
    return 2;
  }
  if (o.distribution != "zipfian" && o.distribution != "uniform") {
    std::fprintf(stderr, "slip bench: unknown distribution '%s' (zipfian, uniform)\n",
                 o.distribution.c_str());
    return 2;
  }
  if (o.threads == 0 || o.records == 0 || o.seconds <= 0) {
    std::fprintf(stderr, "slip bench: threads, records and duration must be positive\n");
    return 2;
  }

  pm::RegionOptions ro;
  Result<std::unique_ptr<pm::PmRegion>> region = Status::InvalidArgument("unset");
  if (o.dir.empty()) {
    ro.mode = pm::PersistMode::kFlush;
    region = pm::PmRegion::Anonymous(o.region_mb << 20, ro);
  } else {
    region = pm::PmRegion::OpenFile(o.dir + "/pm", o.region_mb << 20, ro);
  }
  if (!region.ok()) {
    std::fprintf(stderr, "slip bench: %s\n", region.status().ToString().c_str());
    return 1;
  }
  store::StoreOptions so;
  so.num_writers = o.threads;
  auto opened = store::Store::Open(region->get(), so);
  if (!opened.ok()) {
    std::fprintf(stderr, "slip bench: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  store::Store& st = **opened;
  const std::string value(o.value_size, 'v');

  std::printf("slip bench: single node, workload %s, %s keys, %llu records x %u B, %u threads, %.1f s\n",
              o.workload.c_str(), o.distribution.c_str(),
              static_cast<unsigned long long>(o.records), o.value_size, o.threads, o.seconds);
  std::printf("  PM: %s, persist=%s (%s)\n", o.dir.empty() ? "anonymous DRAM" : (o.dir + "/pm").c_str(),
              (*region)->mode() == pm::PersistMode::kFlush ? "flush"
              : (*region)->mode() == pm::PersistMode::kMsync ? "msync" : "none",
              pm::PmRegion::FlushInstruction());

  // Load phase (not timed for a/b/c): every record once.
  if (o.workload != "load") {
    for (uint64_t i = 0; i < o.records; ++i) {
      Status s = st.Put(static_cast<uint32_t>(i % o.threads), ycsb::KeyName(i), value);
      if (!s.ok()) {
        std::fprintf(stderr, "slip bench: load failed: %s\n", s.ToString().c_str());
        return 1;
      }
    }
  }

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> next_insert{0};
  std::vector<ThreadResult> results(o.threads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      ThreadResult& r = results[t];
      Random rng(o.seed * 7919 + t);
      ycsb::ScrambledZipfian zipf(o.records);
      const double cpu0 = ThreadCpuSeconds();
      while (!stop.load(std::memory_order_relaxed)) {
        const bool is_read = rng.NextDouble() < read_fraction;
        uint64_t rec = o.workload == "load" ? next_insert.fetch_add(1) % o.records
                       : o.distribution == "zipfian" ? zipf.Next(rng)
                                                     : rng.Uniform(o.records);
        const std::string key = ycsb::KeyName(rec);
        auto t0 = std::chrono::steady_clock::now();
        bool ok;
        if (is_read) {
          auto v = st.Get(key);
          ok = v.ok();
        } else {
          Status s = st.Put(t, key, value);
          while (s.Is(Code::kNoSpace)) {
            // The store is passive: a writer that runs out of segments drives
            // the cleaner itself.
            (void)st.CleanStep();
            s = st.Put(t, key, value);
          }
          ok = s.ok();
        }
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - t0).count();
        (is_read ? r.reads : r.updates).Record(static_cast<uint64_t>(ns));
        ++r.ops;
        if (!ok) ++r.errors;
        if (t == 0 && (r.ops & 255) == 0 && st.NeedsCleaning()) (void)st.CleanStep();
      }
      r.cpu_seconds = ThreadCpuSeconds() - cpu0;
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop = true;
  for (auto& th : threads) th.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  ThreadResult all;
  double cpu = 0;
  for (auto& r : results) {
    all.reads.Merge(r.reads);
    all.updates.Merge(r.updates);
    all.ops += r.ops;
    all.errors += r.errors;
    cpu += r.cpu_seconds;
  }
  auto stats = st.stats();
  std::printf("  throughput   %12.0f ops/s  (%llu ops in %.2f s, %llu errors)\n",
              static_cast<double>(all.ops) / elapsed, static_cast<unsigned long long>(all.ops),
              elapsed, static_cast<unsigned long long>(all.errors));
  auto line = [](const char* name, const Histogram& h) {
    if (h.count() == 0) return;
    std::printf("  %-7s      p50 %7.2f us  p99 %7.2f us  p99.9 %8.2f us  max %9.2f us  (%llu)\n", name,
                static_cast<double>(h.Percentile(0.5)) / 1e3, static_cast<double>(h.Percentile(0.99)) / 1e3,
                static_cast<double>(h.Percentile(0.999)) / 1e3, static_cast<double>(h.max()) / 1e3,
                static_cast<unsigned long long>(h.count()));
  };
  line("read", all.reads);
  line("update", all.updates);
  std::printf("  cpu/op       %12.2f us (worker threads)\n", cpu * 1e6 / static_cast<double>(all.ops));
  std::printf("  pm bytes/put %12.1f  (value %u B; header + padding to 64 B)\n",
              stats.puts ? static_cast<double>(stats.appended_bytes) / static_cast<double>(stats.puts) : 0.0,
              o.value_size);
  std::printf("  cleaner      %llu segments cleaned, %llu entries relocated (%.1f B/put), %u/%u segments free\n",
              static_cast<unsigned long long>(stats.segments_cleaned),
              static_cast<unsigned long long>(stats.entries_relocated),
              stats.puts ? static_cast<double>(stats.relocated_bytes) / static_cast<double>(stats.puts) : 0.0,
              stats.free_segments, stats.num_segments);
  return all.errors ? 1 : 0;
}

}  // namespace slip::cli
