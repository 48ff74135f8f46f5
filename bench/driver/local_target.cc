#include "bench/driver/local_target.h"

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "pm/region.h"
#include "store/store.h"

namespace slip::bench {
namespace {

double ThreadCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

class LocalSession final : public KvSession {
 public:
  LocalSession(store::Store* st, uint32_t writer) : st_(st), writer_(writer) {}

  Status Put(std::string_view key, std::string_view value) override {
    Status s = st_->Put(writer_, key, value);
    // Out of segments: the cleaner thread is behind. Wait for it (bounded)
    // rather than clean here, so cleaning CPU stays in its own role.
    for (int i = 0; s.Is(Code::kNoSpace) && i < 100'000; ++i) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      s = st_->Put(writer_, key, value);
    }
    return s;
  }
  Result<std::string> Get(std::string_view key) override { return st_->Get(key); }
  Status Del(std::string_view key) override { return st_->Delete(writer_, key); }

 private:
  store::Store* st_;
  uint32_t writer_;
};

class LocalTarget final : public KvTarget {
 public:
  LocalTarget(LocalTargetOptions o, std::unique_ptr<pm::PmRegion> region, std::unique_ptr<store::Store> st)
      : options_(std::move(o)), region_(std::move(region)), store_(std::move(st)) {
    cleaner_ = std::thread([this] { CleanLoop(); });
  }
  ~LocalTarget() override {
    stop_.store(true);
    cleaner_.join();
  }

  std::string name() const override { return "local"; }
  std::string Durability() const override {
    if (options_.dir.empty()) return "memory";  // anonymous DRAM (its flushes order, nothing more)
    if (region_->mode() == pm::PersistMode::kFlush) return "dax";
    return DurabilityOfPath(options_.dir);
  }
  std::string Describe() const override {
    const char* mode = region_->mode() == pm::PersistMode::kFlush ? "flush"
                       : region_->mode() == pm::PersistMode::kMsync ? "msync" : "none";
    return std::string("in-process Store, ") + std::to_string(options_.threads) + " writers, PM " +
           (options_.dir.empty() ? "anonymous DRAM" : options_.dir + "/pm") + " (" +
           std::to_string(options_.region_mb) + " MiB, persist=" + mode + " " + pm::PmRegion::FlushInstruction() +
           "); unreplicated; a write is acked once persisted locally";
  }
  Result<std::unique_ptr<KvSession>> Connect(uint32_t thread) override {
    if (thread >= options_.threads)
      return Status::InvalidArgument("local target was opened for " + std::to_string(options_.threads) +
                                     " writers");
    return std::unique_ptr<KvSession>(new LocalSession(store_.get(), thread));
  }
  TargetSample Sample() override {
    TargetSample s;
    // The store runs on the driver threads themselves: its request work is
    // inside the client CPU figure and cannot be split out without timing
    // every call, so "worker" stays unmeasured. Cleaning has its own thread.
    s.cpu_us.clean = cleaner_cpu_us_.load();
    s.counts_round_trips = true;  // in-process: no network, 0 per op
    s.fabric_bytes = 0;
    const store::StoreStats st = store_->stats();
    s.pm_bytes = static_cast<double>(st.appended_bytes + st.relocated_bytes);
    // DLWA needs every PM write fed to pm::MediaModel; PmRegion has no hook
    // for that yet, so it stays unmeasured.
    return s;
  }

 private:
  void CleanLoop() {
    while (!stop_.load(std::memory_order_relaxed)) {
      bool cleaned = false;
      if (store_->NeedsCleaning()) {
        auto r = store_->CleanStep();
        cleaned = r.ok() && *r;
      }
      cleaner_cpu_us_.store(ThreadCpuUs(), std::memory_order_relaxed);
      if (!cleaned) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }

  LocalTargetOptions options_;
  std::unique_ptr<pm::PmRegion> region_;
  std::unique_ptr<store::Store> store_;
  std::atomic<bool> stop_{false};
  std::atomic<double> cleaner_cpu_us_{0};
  std::thread cleaner_;
};

}  // namespace

Result<std::unique_ptr<KvTarget>> MakeLocalTarget(const LocalTargetOptions& o) {
  if (o.threads == 0) return Status::InvalidArgument("local target needs at least one writer");
  pm::RegionOptions ro;
  Result<std::unique_ptr<pm::PmRegion>> region = Status::InvalidArgument("unset");
  if (o.dir.empty()) {
    ro.mode = pm::PersistMode::kFlush;
    region = pm::PmRegion::Anonymous(o.region_mb << 20, ro);
  } else {
    // A fresh store per run: results must not depend on what a previous
    // run left behind.
    std::error_code ec;
    std::filesystem::create_directories(o.dir, ec);
    std::filesystem::remove(o.dir + "/pm", ec);
    region = pm::PmRegion::OpenFile(o.dir + "/pm", o.region_mb << 20, ro);
  }
  if (!region.ok()) return region.status();
  store::StoreOptions so;
  so.num_writers = o.threads;
  auto st = store::Store::Open(region->get(), so);
  if (!st.ok()) return st.status();
  return std::unique_ptr<KvTarget>(new LocalTarget(o, std::move(region).value(), std::move(st).value()));
}

}  // namespace slip::bench
