// PoolIndex: DINOMO's shared hash index in the PM pool (docs/papers/
// dinomo.md §4; layout in docs/formats/dinomo_pool.md). Written only by the
// pool's merge threads; read by KVS nodes one-sidedly, bucket by bucket.
//
// Buckets are one 64-byte line: a begin version, three slots of (key hash,
// entry pointer), and a word holding an end version and the next bucket of
// the chain. A pointer names a log entry — a log block (docs/formats/
// log_entry.md) in some node's log in the pool — never a copy: values are
// written once, by the node that wrote them.
//
// A writer changes a bucket as: end := v+1, slots and next, begin := v+2,
// end := v+2 (v even). A reader takes a bucket only when begin == end and
// both are even; a reader copying the line in ascending order can then never
// take a half-written bucket. Neither RDMA nor our fabrics promise that
// order, so the version is a filter, not the guarantee: every reader checks
// the key (and CRC) of the entry a pointer leads to, and a pointer that
// leads elsewhere means "read the bucket again", never a wrong answer.
//
// Merging is version-conditional: the index moves a key to an entry only
// if that entry's version is above the one it points at, so merging a
// segment twice (after the pool crashed mid-merge) changes nothing.
//
// Resizing is the pool's (Pool::GrowIndex): an index has a fixed number of
// home buckets and a bump-allocated overflow area, and Apply fails with
// NoSpace when that is full; the pool then builds one twice as large and
// marks every bucket of this one moved.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "log/entry.h"
#include "pm/region.h"

namespace slip::dinomo {

constexpr uint64_t kBucketBytes = 64;
constexpr int kSlotsPerBucket = 3;

// Where an entry lives: its region offset (64-byte aligned) and padded size
// — or, for a shared key, where its indirect cell is (dinomo/cell.h).
struct IndexPointer {
  uint64_t offset = 0;
  uint32_t bytes = 0;
  bool cell = false;
  bool operator==(const IndexPointer&) const = default;
  // 0 is "no entry". Offset in 64 B units in bits 0..39, size in 64 B units
  // in bits 40..62, bit 63 set for a cell.
  uint64_t Encode() const {
    return (offset / 64) | (uint64_t{bytes / 64} << 40) | (cell ? uint64_t{1} << 63 : 0);
  }
  static IndexPointer Decode(uint64_t w) {
    return {(w & ((uint64_t{1} << 40) - 1)) * 64, static_cast<uint32_t>(((w >> 40) & ((uint64_t{1} << 23) - 1)) * 64),
            (w >> 63) != 0};
  }
};

// A bucket as a reader got it.
struct BucketView {
  bool consistent = false;  // begin == end, even
  // The pool moved to a larger index (Pool::GrowIndex): ask it where the
  // index is now (POOL_INDEX) and look again there.
  bool moved = false;
  struct Slot {
    uint64_t hash = 0;  // 0: empty
    IndexPointer pointer;
  };
  std::array<Slot, kSlotsPerBucket> slots;
  uint32_t next = 0;  // overflow bucket + 1; 0: end of chain
};
BucketView ParseBucket(std::span<const std::byte, kBucketBytes> line);

// The hash a slot holds for a key (never 0) and its home bucket.
uint64_t SlotHash(std::string_view key);
uint32_t HomeBucket(uint64_t slot_hash, uint32_t num_buckets);

// Bucket lines a merge changed and has not persisted yet: persisted
// together before the merge counts as done. On a file (msync) one call
// covers their whole span — a merge of a full segment would otherwise make
// one msync per entry (seconds for 8 MB); elsewhere each line is written
// back on its own.
class PendingLines {
 public:
  void Add(const std::byte* line) {
    lo_ = std::min(lo_, line);
    hi_ = std::max(hi_, line + kBucketBytes);
    lines_.push_back(line);
  }
  void Persist(pm::PmRegion& region);
  bool empty() const { return lines_.empty(); }

 private:
  const std::byte* lo_ = reinterpret_cast<const std::byte*>(UINTPTR_MAX);
  const std::byte* hi_ = nullptr;
  std::vector<const std::byte*> lines_;
};

class PoolIndex {
 public:
  // Formats [offset, offset + bytes) of `region`: a header line, then
  // `num_buckets` home buckets (a power of two), then overflow buckets in
  // the rest. Entries the index points at must lie in the same region.
  static Result<std::unique_ptr<PoolIndex>> Create(pm::PmRegion* region, uint64_t offset, uint64_t bytes,
                                                   uint32_t num_buckets, const log::Limits& limits = {});
  // An index formatted before (after a restart of the pool).
  static Result<std::unique_ptr<PoolIndex>> Open(pm::PmRegion* region, uint64_t offset,
                                                 const log::Limits& limits = {});

  struct Applied {
    bool applied = false;                  // the key now points at the entry
    bool current = false;                  // it already did (merged before)
    std::optional<IndexPointer> displaced;  // what it pointed at before
    // The key is shared: the index points it at this cell and a merge
    // leaves it so (the cell's word says which entry is current).
    std::optional<IndexPointer> shared;
  };
  // Merges the entry at `entry` (a single-block PUT or DEL, CRC-valid):
  // the key points at it unless the index points at a version of the key
  // at least as new. A DEL's tombstone stays pointed at (its version keeps
  // older PUTs from coming back at a re-merge). Thread-safe.
  // With `pending`, the bucket lines it changes are left for the caller to
  // persist (PendingLines::Persist) instead of one by one.
  Result<Applied> Apply(IndexPointer entry, PendingLines* pending = nullptr);
  // Persists what Apply left pending.
  void Persist(PendingLines& pending) { pending.Persist(*region_); }

  // Points `key` at `to` whatever it pointed at (nullopt: forgets the key)
  // — how the pool installs and removes a shared key's cell. `to`, if
  // given, must be an entry or live cell of `key`. Thread-safe.
  Result<Applied> Set(std::string_view key, std::optional<IndexPointer> to);

  // Clover's metadata (dinomo/clover.h): points the key of the entry at
  // `entry` iff the index holds `expected` for it (nullopt: nothing).
  // Returns what the index holds for the key afterwards. Thread-safe.
  Result<IndexPointer> CompareAndSet(std::optional<IndexPointer> expected, IndexPointer entry);

  // The entry the index holds for `key`, as a one-sided reader would find
  // it, on local memory; `bucket_reads` counts the lines read.
  std::optional<IndexPointer> Find(std::string_view key, uint32_t* bucket_reads = nullptr) const;

  // Every pointer the index holds (tombstones included), in no order.
  void ForEachPointer(const std::function<void(IndexPointer)>& fn) const;

  // The pool replaced this index with a larger one: every bucket reads as
  // moved from now on (begin word all ones, never a version), so one-sided
  // readers go and find the new one. Nothing may use this object after.
  void MarkMoved();
  // The area's size, header included.
  uint64_t area_bytes() const { return kBucketBytes * (1 + uint64_t{num_buckets_} + overflow_capacity_); }

  // For remote readers: home bucket b is at region offset
  // table_offset() + b * 64, overflow bucket k at overflow_offset() + k * 64.
  uint64_t table_offset() const { return offset_ + kBucketBytes; }
  uint64_t overflow_offset() const { return table_offset() + uint64_t{num_buckets_} * kBucketBytes; }
  uint32_t num_buckets() const { return num_buckets_; }
  uint32_t overflow_used() const;

 private:
  PoolIndex(pm::PmRegion* region, uint64_t offset, uint32_t num_buckets, uint32_t overflow_capacity,
            const log::Limits& limits);

  std::byte* Line(uint32_t home_or_overflow, bool overflow) const;
  // The key and version of the entry at `p` (local read, checked).
  struct EntryKey {
    std::string_view key;
    uint64_t version = 0;
  };
  std::optional<EntryKey> ReadEntry(IndexPointer p) const;
  // Apply, CompareAndSet and Set: `decide` sees what `key` points at now
  // (nullopt: nothing) and says whether it is to point at `entry`
  // (nullopt: at nothing). With `keep_cells` (merges), an entry meeting the
  // key's cell changes nothing (Applied::shared).
  Result<Applied> Update(const EntryKey& key, std::optional<IndexPointer> entry, bool keep_cells,
                         const std::function<bool(std::optional<IndexPointer>, const std::optional<EntryKey>&,
                                                  const EntryKey&)>& decide,
                         PendingLines* pending = nullptr);
  void WriteBucket(std::byte* line, const BucketView& b, PendingLines* pending = nullptr);

  pm::PmRegion* const region_;
  const uint64_t offset_;
  const uint32_t num_buckets_;
  const uint32_t overflow_capacity_;
  const log::Limits limits_;
  std::vector<std::mutex> stripes_;  // writers: per home bucket % stripes
  std::mutex overflow_mu_;
};

}  // namespace slip::dinomo
