// YCSB core workloads (Cooper et al., SoCC'10; YCSB's CoreWorkload and its
// workloads/workload[a-f] property files) as operation generators that every
// driver shares: `slip bench` against any design, and the peers.
//
//   load  100% insert (the load phase)
//   a     50% read, 50% update                 zipfian
//   b     95% read,  5% update                 zipfian
//   c    100% read                             zipfian
//   d     95% read,  5% insert                 latest
//   e     95% scan,  5% insert                 zipfian (scan length uniform 1..100)
//   f     50% read, 50% read-modify-write      zipfian
//
// Sizes: YCSB's default key names ("user" + FNV hash of the record number)
// with a fixed value size, or the Facebook object-size mixes that Rowan-KV
// evaluates with (docs/papers/rowan.md §5: ZippyDB 90.8 B, UP2X 57.25 B, UDB
// 153.8 B on average; the key/value split there is marked unverified, so it
// is used as given and said so in every report).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "bench/workload/ycsb.h"
#include "common/random.h"
#include "common/status.h"

namespace slip::ycsb {

// kZipfian is YCSB's (scrambled: a zipfian over 10^10 items hashed onto the
// records, so the hottest record gets 3.8% at theta 0.99 whatever their
// count, and the tail is nearly uniform). kZipfianRanked draws the records
// themselves by rank — record r is the r-th hottest — as Anna's and
// DINOMO's benchmarks do: far more skewed over the tail (at 0.99 the
// hottest half of 50,000 records takes 94% of the draws, against ~70%).
enum class Distribution { kUniform, kZipfian, kLatest, kZipfianRanked };
enum class OpType { kRead, kUpdate, kInsert, kScan, kReadModifyWrite };

const char* OpTypeName(OpType t);
const char* DistributionName(Distribution d);

struct SizeSpec {
  std::string name = "fixed";  // fixed | zippydb | up2x | udb
  uint32_t key_bytes = 0;      // 0: YCSB's natural key names (~23 B)
  uint32_t value_bytes = 100;
};
// "fixed" with `value_bytes`, or one of the named mixes. InvalidArgument otherwise.
Result<SizeSpec> NamedSizes(std::string_view name, uint32_t fixed_value_bytes);

struct WorkloadSpec {
  std::string name;  // load, a..f
  double read = 0, update = 0, insert = 0, scan = 0, rmw = 0;  // proportions, sum 1
  Distribution distribution = Distribution::kZipfian;
  double theta = 0.99;
  uint64_t records = 100000;  // loaded before the run (the load phase inserts them)
  uint32_t max_scan = 100;
  SizeSpec sizes;
};

// The standard workload `name` (case-insensitive: load, a, b, c, d, e, f).
Result<WorkloadSpec> StandardWorkload(std::string_view name);
// Overrides the request distribution: "uniform", "zipfian", "latest",
// "zipfian-ranked".
Result<Distribution> ParseDistribution(std::string_view name);

struct Op {
  OpType type;
  uint64_t record;     // record number (key = Key(record))
  uint32_t scan_len;   // kScan only
};

// Record counter shared by all threads of one run: inserts take the next
// record number, and "latest" picks near the newest one.
class InsertCounter {
 public:
  explicit InsertCounter(uint64_t loaded) : next_(loaded) {}
  uint64_t Take() { return next_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t Count() const { return next_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> next_;
};

// Draws operations for one client thread. Cheap to construct per thread;
// the zeta constants are computed once per generator (O(records)).
class OpGenerator {
 public:
  OpGenerator(const WorkloadSpec& spec, InsertCounter* inserts);
  Op Next(Random& rng);
  std::string Key(uint64_t record) const;
  // The value written for a record: deterministic in (record, version) so a
  // checker can recompute it; `version` distinguishes successive updates.
  std::string Value(uint64_t record, uint64_t version) const;

 private:
  uint64_t ChooseExisting(Random& rng);

  WorkloadSpec spec_;
  InsertCounter* inserts_;
  ScrambledZipfian scrambled_;
  Zipfian latest_;  // over the records loaded; offsets back from the newest
  std::optional<Zipfian> ranked_;  // kZipfianRanked: over the records loaded
};

}  // namespace slip::ycsb
