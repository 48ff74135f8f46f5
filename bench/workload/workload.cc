#include "bench/workload/workload.h"

#include <algorithm>
#include <cctype>

namespace slip::ycsb {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const char* OpTypeName(OpType t) {
  switch (t) {
    case OpType::kRead: return "read";
    case OpType::kUpdate: return "update";
    case OpType::kInsert: return "insert";
    case OpType::kScan: return "scan";
    case OpType::kReadModifyWrite: return "rmw";
  }
  return "?";
}

const char* DistributionName(Distribution d) {
  switch (d) {
    case Distribution::kUniform: return "uniform";
    case Distribution::kZipfian: return "zipfian";
    case Distribution::kLatest: return "latest";
    case Distribution::kZipfianRanked: return "zipfian-ranked";
  }
  return "?";
}

Result<SizeSpec> NamedSizes(std::string_view name, uint32_t fixed_value_bytes) {
  const std::string n = Lower(name);
  // Key/value splits of the Facebook traces as given in docs/papers/rowan.md §5
  // (averages from the paper; the split is marked unverified there).
  if (n == "fixed") return SizeSpec{"fixed", 0, fixed_value_bytes};
  if (n == "zippydb") return SizeSpec{"zippydb", 48, 43};
  if (n == "up2x") return SizeSpec{"up2x", 10, 47};
  if (n == "udb") return SizeSpec{"udb", 27, 127};
  return Status::InvalidArgument("unknown object sizes '" + std::string(name) +
                                 "' (fixed, zippydb, up2x, udb)");
}

Result<Distribution> ParseDistribution(std::string_view name) {
  const std::string n = Lower(name);
  if (n == "uniform") return Distribution::kUniform;
  if (n == "zipfian") return Distribution::kZipfian;
  if (n == "latest") return Distribution::kLatest;
  if (n == "zipfian-ranked") return Distribution::kZipfianRanked;
  return Status::InvalidArgument("unknown distribution '" + std::string(name) +
                                 "' (uniform, zipfian, latest, zipfian-ranked)");
}

Result<WorkloadSpec> StandardWorkload(std::string_view name) {
  WorkloadSpec w;
  w.name = Lower(name);
  if (w.name == "load") {
    w.insert = 1;
  } else if (w.name == "a") {
    w.read = 0.5, w.update = 0.5;
  } else if (w.name == "b") {
    w.read = 0.95, w.update = 0.05;
  } else if (w.name == "c") {
    w.read = 1;
  } else if (w.name == "d") {
    w.read = 0.95, w.insert = 0.05, w.distribution = Distribution::kLatest;
  } else if (w.name == "e") {
    w.scan = 0.95, w.insert = 0.05;
  } else if (w.name == "f") {
    w.read = 0.5, w.rmw = 0.5;
  } else {
    return Status::InvalidArgument("unknown workload '" + std::string(name) +
                                   "' (load, a, b, c, d, e, f)");
  }
  return w;
}

OpGenerator::OpGenerator(const WorkloadSpec& spec, InsertCounter* inserts)
    : spec_(spec),
      inserts_(inserts),
      scrambled_(std::max<uint64_t>(spec.records, 1), spec.theta),
      latest_(std::max<uint64_t>(spec.records, 1), spec.theta) {
  if (spec.distribution == Distribution::kZipfianRanked) ranked_.emplace(std::max<uint64_t>(spec.records, 1), spec.theta);
}

uint64_t OpGenerator::ChooseExisting(Random& rng) {
  // Records [0, count) exist; inserts raise count while we run.
  const uint64_t count = std::max<uint64_t>(inserts_->Count(), 1);
  switch (spec_.distribution) {
    case Distribution::kUniform:
      return rng.Uniform(count);
    case Distribution::kZipfian: {
      // YCSB draws over the records loaded, hashed; inserted ones are reached
      // through the hash too once they exist.
      uint64_t r = scrambled_.Next(rng);
      return r < count ? r : r % count;
    }
    case Distribution::kZipfianRanked: {
      const uint64_t r = ranked_->Next(rng);
      return r < count ? r : r % count;
    }
    case Distribution::kLatest: {
      // YCSB's SkewedLatestGenerator: the newest record is the hottest.
      const uint64_t back = latest_.Next(rng) % count;
      return count - 1 - back;
    }
  }
  return 0;
}

Op OpGenerator::Next(Random& rng) {
  const double u = rng.NextDouble();
  Op op{OpType::kRead, 0, 0};
  double acc = spec_.read;
  if (u < acc) {
    op.type = OpType::kRead;
  } else if (u < (acc += spec_.update)) {
    op.type = OpType::kUpdate;
  } else if (u < (acc += spec_.insert)) {
    op.type = OpType::kInsert;
  } else if (u < (acc += spec_.scan)) {
    op.type = OpType::kScan;
  } else if (spec_.rmw > 0) {
    op.type = OpType::kReadModifyWrite;
  } else {
    op.type = spec_.insert > 0 ? OpType::kInsert : OpType::kRead;  // rounding at u ≈ 1
  }
  if (op.type == OpType::kInsert) {
    op.record = inserts_->Take();
  } else {
    op.record = ChooseExisting(rng);
  }
  if (op.type == OpType::kScan) op.scan_len = 1 + static_cast<uint32_t>(rng.Uniform(spec_.max_scan));
  return op;
}

std::string OpGenerator::Key(uint64_t record) const {
  std::string k = KeyName(record);
  const uint32_t want = spec_.sizes.key_bytes;
  if (want == 0) return k;
  if (k.size() <= want) return std::string(want - k.size(), 'k') + k;
  // Shorter than YCSB's names (UP2X: 10 B): the record number in base 36,
  // zero-padded, which stays unique (a cut hash would collide).
  static constexpr char kDigits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string out(want, '0');
  for (size_t i = want; i-- > 0 && record > 0; record /= 36) out[i] = kDigits[record % 36];
  return out;
}

std::string OpGenerator::Value(uint64_t record, uint64_t version) const {
  std::string v(spec_.sizes.value_bytes, '\0');
  uint64_t x = ScrambledZipfian::Fnv64(record * 0x9E3779B97F4A7C15ull + version);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % 8 == 0) x = ScrambledZipfian::Fnv64(x + i);
    v[i] = static_cast<char>('a' + (x >> ((i % 8) * 8)) % 26);
  }
  return v;
}

}  // namespace slip::ycsb
