// B4 (docs/papers/dinomo.md): can the pool's merge threads keep up with
// what KVS nodes append? Insert-only: every node appends distinct keys to
// its log; the pool then merges the sealed segments into the index with 1
// to 4 merge threads (each merging other nodes' segments, as the paper's
// threads do). The paper's Fig. 4: 4 merge threads match the append maximum
// on DRAM; on PM they fall 16% short.
//
// "Append" here is what a node's one-sided WRITE leaves in the pool —
// entries encoded (CRC32C) and copied into the segment — done by one
// thread as fast as it can, and persisted the way the region's class
// persists (the pool's CPU is not involved in a real append: this is the
// rate one node's worth of bytes can arrive at, bounded by memory
// bandwidth here rather than by a NIC). "Merge" is Pool::Seal, the pool's
// real merge (walk the segment, CRC-check every block, update the index
// buckets, persist them, count garbage).
//
// Two classes: dram (no persistence) and flush (every persisted range
// flushed line by line and fenced, what real PM costs the CPU; on a
// machine without PM it flushes DRAM, which is the CPU-side cost only).
// This machine has 2 cores: more than 2 merge threads cannot run in
// parallel here; the ratio per thread is the number that carries over.
//
//   build/bench/dinomo/merge_bench [--keys N] [--value-bytes N] [--threads-max N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dinomo/pool.h"
#include "log/entry.h"

namespace {

using namespace slip;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Log {
  uint32_t node = 0;
  std::vector<std::pair<uint64_t, uint64_t>> segments;  // (offset, end), log order
  uint64_t entries = 0;
};

struct Run {
  double append_per_s = 0;  // entries per second, one appending thread
  double merge_per_s = 0;   // entries per second, all merge threads together
};

Run Measure(pm::PersistMode mode, uint64_t keys, uint64_t value_bytes, uint32_t threads) {
  dinomo::PoolOptions po;
  po.segment_bytes = 8 << 20;  // the paper's
  po.num_buckets = 1u << 10;
  while (po.num_buckets < keys / 2) po.num_buckets <<= 1;
  const log::Layout layout = *log::PlanEntry(16, value_bytes, 1 << 20);  // one block per entry
  const uint64_t entry_bytes = layout.total_bytes;
  const uint64_t data = keys * entry_bytes;
  // Every node's last segment is partly full: room for one more per node.
  const uint64_t region_bytes = data + (threads + 2) * po.segment_bytes + (keys / 2 + 64) * 512 + (64 << 20);
  // Populated: first-touch page faults are not what either side costs.
  auto region = pm::PmRegion::Anonymous(region_bytes, pm::RegionOptions{.mode = mode, .populate = true});
  if (!region.ok()) {
    std::fprintf(stderr, "region: %s\n", region.status().ToString().c_str());
    std::exit(1);
  }
  auto pool = dinomo::Pool::Open(region->get(), po);
  if (!pool.ok()) {
    std::fprintf(stderr, "pool: %s\n", pool.status().ToString().c_str());
    std::exit(1);
  }
  pm::PmRegion& r = **region;

  // Append: nodes 1..threads take turns, one entry each, on this thread.
  std::vector<Log> logs(threads);
  std::vector<uint64_t> tails(threads, 0);
  for (uint32_t t = 0; t < threads; ++t) logs[t].node = t + 1;
  const std::string value(value_bytes, 'v');
  // Keys arrive from clients: formatting them is not the node's work.
  std::vector<std::string> key_of(keys);
  char key[32];
  for (uint64_t i = 0; i < keys; ++i) {
    std::snprintf(key, sizeof key, "key%013llu", static_cast<unsigned long long>(i));  // 16 B
    key_of[i] = key;
  }
  const auto a0 = Clock::now();
  for (uint64_t i = 0; i < keys; ++i) {
    Log& l = logs[i % threads];
    uint64_t& tail = tails[i % threads];
    if (l.segments.empty() || tail + entry_bytes > po.segment_bytes) {
      if (!l.segments.empty()) l.segments.back().second = tail;
      auto s = (*pool)->Allocate(l.node);
      if (!s.ok()) {
        std::fprintf(stderr, "allocate: %s\n", s.status().ToString().c_str());
        std::exit(1);
      }
      l.segments.push_back({*s, 0});
      tail = 0;
    }
    const uint64_t at = l.segments.back().first + tail;
    log::EncodeBlock({log::EntryType::kPut, static_cast<uint16_t>(l.node), (uint64_t{1} << 32) | (i + 1)}, key_of[i], value,
                     layout, 0, r.at(at));
    r.Persist(r.at(at), entry_bytes);
    tail += entry_bytes;
    ++l.entries;
  }
  const auto a1 = Clock::now();
  for (uint32_t t = 0; t < threads; ++t) logs[t].segments.back().second = tails[t];

  // Merge: one thread per node's log, sealing its segments in log order.
  std::vector<std::thread> mergers;
  const auto m0 = Clock::now();
  for (uint32_t t = 0; t < threads; ++t) {
    mergers.emplace_back([&, t] {
      for (const auto& [segment, end] : logs[t].segments) {
        auto m = (*pool)->Seal(logs[t].node, segment, end);
        if (!m.ok() || m->entries == 0) {
          std::fprintf(stderr, "seal: %s\n", m.ok() ? "merged nothing" : m.status().ToString().c_str());
          std::exit(1);
        }
      }
    });
  }
  for (auto& m : mergers) m.join();
  const auto m1 = Clock::now();
  if ((*pool)->stats().merged_entries != keys) {
    std::fprintf(stderr, "merged %llu entries of %llu\n",
                 static_cast<unsigned long long>((*pool)->stats().merged_entries),
                 static_cast<unsigned long long>(keys));
    std::exit(1);
  }
  return Run{keys / Seconds(a0, a1), keys / Seconds(m0, m1)};
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t keys = 400000, value_bytes = 256;
  uint32_t threads_max = 4;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--keys") == 0) keys = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--value-bytes") == 0) value_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--threads-max") == 0) threads_max = static_cast<uint32_t>(std::atoi(argv[i + 1]));
  }
  std::printf("B4: DINOMO merge capacity, insert-only, %llu keys of 16 B + %llu B, 8 MB segments, %u cores\n",
              static_cast<unsigned long long>(keys), static_cast<unsigned long long>(value_bytes),
              std::thread::hardware_concurrency());
  std::printf("%-6s %8s %16s %16s %12s %16s\n", "class", "mergers", "append Kentry/s", "merge Kentry/s", "merge/append",
              "per merger");
  for (const auto& [name, mode] : {std::pair{"dram", pm::PersistMode::kNone}, std::pair{"flush", pm::PersistMode::kFlush}}) {
    for (uint32_t t = 1; t <= threads_max; ++t) {
      const Run r = Measure(mode, keys, value_bytes, t);
      const double ratio = r.merge_per_s / r.append_per_s;
      std::printf("%-6s %8u %16.0f %16.0f %11.2fx %15.2fx\n", name, t, r.append_per_s / 1e3, r.merge_per_s / 1e3, ratio,
                  ratio / t);
      std::fflush(stdout);
    }
  }
  return 0;
}
