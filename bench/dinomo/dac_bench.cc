// B1 (docs/papers/dinomo.md): DAC against static cache policies, in round
// trips to the pool per GET — a count, not a time, so it does not depend
// on this machine. One KVS node; a read-only uniform workload over a
// working set of 5% of the keys; cache sizes from 1% to 16% of the data.
// A value hit costs 0 round trips, a shortcut hit 1 (READ the entry), a
// miss 2 (the index bucket, then the entry: the collision-free miss).
//
// The paper's Fig. 3 (3 M keys of 8 B + 64 B, 150 K working set): shortcut-
// only is best at 2%, value-only at 8%, DAC at 4%, and DAC is within 16% of
// the best everywhere. Here the same ratios at a tenth of the keys.
//
//   build/bench/dinomo/dac_bench [--keys N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dinomo/adaptive_cache.h"

namespace {

using slip::dinomo::AdaptiveCache;
using slip::dinomo::CacheOptions;
using slip::dinomo::PoolPointer;

struct Result {
  double rts_per_get = 0, value_hits = 0, shortcut_hits = 0;
};

Result Run(const CacheOptions& o, const std::vector<std::string>& keys, uint32_t working_set) {
  AdaptiveCache c(o);
  const std::string value(64, 'v');
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<uint32_t> pick(0, working_set - 1);
  const uint64_t ops = 10ull * working_set;
  uint64_t rts = 0, value_hits = 0, shortcut_hits = 0;
  for (uint64_t n = 0; n < 2 * ops; ++n) {  // the first half warms the cache up
    const uint32_t k = pick(rng);
    auto f = c.Lookup(keys[k]);
    const bool measured = n >= ops;
    switch (f.kind) {
      case AdaptiveCache::Kind::kValue:
        value_hits += measured;
        break;
      case AdaptiveCache::Kind::kShortcut:
        c.ShortcutRead(keys[k], value);
        rts += measured;
        shortcut_hits += measured;
        break;
      case AdaptiveCache::Kind::kMiss:
        c.Missed(keys[k], PoolPointer{uint64_t{k} * 128, 96}, value, 2);
        rts += 2 * measured;
        break;
    }
  }
  return {static_cast<double>(rts) / ops, static_cast<double>(value_hits) / ops,
          static_cast<double>(shortcut_hits) / ops};
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t num_keys = 300000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--keys") == 0) num_keys = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
  }
  const uint32_t working_set = num_keys / 20;
  std::vector<std::string> keys;
  keys.reserve(num_keys);
  for (uint32_t i = 0; i < num_keys; ++i) {
    char k[16];
    std::snprintf(k, sizeof k, "k%07u", i);  // 8 B, as the paper's
    keys.emplace_back(k);
  }
  const uint64_t data_bytes = uint64_t{num_keys} * (8 + 64);
  struct Policy {
    const char* name;
    CacheOptions::Policy policy;
    double share;
  };
  const std::vector<Policy> policies = {{"shortcut-only", CacheOptions::Policy::kStatic, 0.0},
                                        {"static-25", CacheOptions::Policy::kStatic, 0.25},
                                        {"static-50", CacheOptions::Policy::kStatic, 0.5},
                                        {"static-75", CacheOptions::Policy::kStatic, 0.75},
                                        {"value-only", CacheOptions::Policy::kStatic, 1.0},
                                        {"dac", CacheOptions::Policy::kAdaptive, 0.0}};
  std::printf("B1: round trips per GET, %u keys of 8 B + 64 B, uniform over %u (5%%), entry overhead 16 B\n",
              num_keys, working_set);
  std::printf("%-8s", "cache");
  for (const Policy& p : policies) std::printf(" %14s", p.name);
  std::printf("  %10s %12s\n", "dac/best", "dac values");
  for (double pct : {1.0, 2.0, 4.0, 8.0, 16.0}) {
    std::printf("%6.0f%% ", pct);
    double best = 1e9, dac = 0, dac_values = 0;
    for (const Policy& p : policies) {
      CacheOptions o;
      o.capacity_bytes = static_cast<uint64_t>(static_cast<double>(data_bytes) * pct / 100);
      o.policy = p.policy;
      o.value_share = p.share;
      const Result r = Run(o, keys, working_set);
      std::printf(" %14.3f", r.rts_per_get);
      if (p.policy == CacheOptions::Policy::kAdaptive) {
        dac = r.rts_per_get;
        dac_values = r.value_hits;
      } else {
        best = std::min(best, r.rts_per_get);
      }
    }
    std::printf("  %10s %11.0f%%\n", best > 0 ? std::to_string(dac / best).substr(0, 5).c_str() : "-",
                100 * dac_values);
  }
  return 0;
}
