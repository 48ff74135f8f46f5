// Micro-benchmarks of one node's storage engine: put/get/del and the cold
// start recovery scan. Persistence modes: `flush` (clwb/clflushopt + sfence
// on ordinary DRAM: the instruction cost real PM pays, without PM's media
// latency) and `none` (volatile; the engine's own cost).
//
//   build/bench/micro/store_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "common/random.h"
#include "store/store.h"

namespace slip {
namespace {

constexpr size_t kRegionBytes = size_t{1} << 30;
constexpr int kKeys = 1 << 20;

std::string KeyOf(uint64_t i) {
  char buf[24];
  int n = snprintf(buf, sizeof buf, "user%016llx", static_cast<unsigned long long>(i));
  return std::string(buf, static_cast<size_t>(n));
}

struct Fixture {
  std::unique_ptr<pm::PmRegion> region;
  std::unique_ptr<store::Store> store;

  Fixture(pm::PersistMode mode, size_t bytes = kRegionBytes) {
    pm::RegionOptions ro;
    ro.mode = mode;
    region = std::move(pm::PmRegion::Anonymous(bytes, ro)).value();
    store::StoreOptions o;
    store = std::move(store::Store::Open(region.get(), o)).value();
  }
};

pm::PersistMode ModeArg(int64_t a) { return a ? pm::PersistMode::kFlush : pm::PersistMode::kNone; }

void BM_Put(benchmark::State& state) {
  Fixture f(ModeArg(state.range(0)));
  const std::string value(static_cast<size_t>(state.range(1)), 'v');
  Random rng(1);
  for (auto _ : state) {
    Status s = f.store->Put(0, KeyOf(rng.Uniform(kKeys)), value);
    if (s.Is(Code::kNoSpace)) {
      state.PauseTiming();
      while (*f.store->CleanStep()) {
      }
      state.ResumeTiming();
    } else if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * state.range(1));
  state.SetLabel(state.range(0) ? std::string("flush:") + pm::PmRegion::FlushInstruction() : "none");
}
BENCHMARK(BM_Put)->ArgsProduct({{0, 1}, {64, 1024}})->ArgNames({"flush", "value"});

void BM_Get(benchmark::State& state) {
  Fixture f(pm::PersistMode::kNone);
  const std::string value(static_cast<size_t>(state.range(0)), 'v');
  const int keys = 200000;
  for (int i = 0; i < keys; ++i) (void)f.store->Put(0, KeyOf(i), value);
  Random rng(2);
  for (auto _ : state) {
    auto v = f.store->Get(KeyOf(rng.Uniform(keys)));
    benchmark::DoNotOptimize(v);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Get)->Arg(64)->Arg(1024)->ArgName("value");

void BM_PutDelete(benchmark::State& state) {
  Fixture f(ModeArg(state.range(0)));
  Random rng(3);
  uint64_t i = 0;
  for (auto _ : state) {
    std::string k = KeyOf(i++);
    Status a = f.store->Put(0, k, "value");
    Status b = f.store->Delete(0, k);
    if (a.Is(Code::kNoSpace) || b.Is(Code::kNoSpace)) {
      state.PauseTiming();
      while (*f.store->CleanStep()) {
      }
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_PutDelete)->Arg(0)->Arg(1)->ArgName("flush");

// Cold start: scan every segment, validate every block's CRC, rebuild the
// index. Reported per core (the scan is single-threaded).
void BM_RecoveryScan(benchmark::State& state) {
  const size_t value_bytes = static_cast<size_t>(state.range(0));
  Fixture f(pm::PersistMode::kNone, size_t{512} << 20);
  const std::string value(value_bytes, 'v');
  uint64_t n = 0;
  while (f.store->Put(0, KeyOf(n), value).ok()) ++n;  // fill until NoSpace
  uint64_t bytes = 0, entries = 0;
  for (auto _ : state) {
    f.store.reset();
    store::StoreOptions o;
    f.store = std::move(store::Store::Open(f.region.get(), o)).value();
    bytes += f.store->recovery_stats().bytes_scanned;
    entries += f.store->recovery_stats().entries;
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) / 1e9, benchmark::Counter::kIsRate);
  state.counters["Mentries/s"] =
      benchmark::Counter(static_cast<double>(entries) / 1e6, benchmark::Counter::kIsRate);
  state.counters["entries"] = static_cast<double>(n);
}
BENCHMARK(BM_RecoveryScan)->Arg(64)->Arg(1024)->ArgName("value")->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace slip

BENCHMARK_MAIN();
