// Pool: DINOMO's disaggregated PM pool on one region (docs/papers/dinomo.md
// §2; layout in docs/formats/dinomo_pool.md) — the ground truth a set of
// KVS nodes shares: each node's log (segments it is given one at a time),
// the index the pool's merge threads keep over all logs, and the segment
// table saying whose log each segment is part of.
//
// A node's log is its segments in the order the pool handed them out. The
// node writes a segment one-sidedly, then seals it (Seal: "I wrote up to
// here"); the pool merges it into the index in log order and the segment is
// merged. A node that died leaves open segments: MergeAll merges them, as a
// reconfiguration must before another node serves the dead one's keys
// (merge-before-serve, invariant D4). Merges are version-conditional, so
// merging again after a crash changes nothing.
//
// Garbage: the pool counts, per segment, the entries merged from it and
// how many of those the index no longer points at; a merged segment whose
// every entry is dead is freed (reused by the next Allocate). A DEL's
// tombstone stays indexed, so a segment holding one is never freed
// (compaction is not built; the paper has none either).
//
// Thread-safe: Allocate, Seal and MergeAll may run concurrently (merges of
// different nodes' segments in parallel, as the paper's merge threads do).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <shared_mutex>
#include <vector>

#include "common/status.h"
#include "dinomo/merge.h"
#include "dinomo/pool_index.h"
#include "log/entry.h"
#include "pm/region.h"

namespace slip::dinomo {

struct PoolOptions {
  uint64_t segment_bytes = 8 << 20;  // the paper's 8 MB
  uint32_t num_buckets = 1 << 16;    // home buckets of the index
  uint64_t index_bytes = 0;          // 0: home buckets plus as many overflow ones
  log::Limits limits;
};

struct PoolStats {
  uint32_t segments = 0, free_segments = 0, open_segments = 0;
  uint64_t merged_entries = 0, freed_segments = 0;
  uint32_t shared_keys = 0;  // keys with an indirect cell
};

class Pool {
 public:
  // Formats a zeroed region, or opens one formatted before (then `options`
  // other than the limits are read from it) and rebuilds the garbage
  // counters from the segments and the index.
  static Result<std::unique_ptr<Pool>> Open(pm::PmRegion* region, const PoolOptions& options);

  // A free segment for `node`'s log: its region offset. NoSpace when none.
  Result<uint64_t> Allocate(uint32_t node);
  // `node` wrote [0, end) of its open segment at `segment` and will write no
  // more there: merges it and marks it merged. InvalidArgument when the
  // segment is not an open segment of `node`.
  Result<MergeResult> Seal(uint32_t node, uint64_t segment, uint64_t end);
  // Merges and closes every open segment of `node`, oldest first (the node
  // is gone). Returns the entries merged; `walked` (if given) gets the log
  // bytes the merge walked — what a reconfiguration costs the pool.
  Result<uint64_t> MergeAll(uint32_t node, uint64_t* walked = nullptr);
  // Open segments of `node`, oldest first.
  std::vector<uint64_t> OpenSegments(uint32_t node) const;

  // --- access tokens (fencing; the pool's server enforces them) ---
  //
  // A node works with the pool under a token: the epoch (configuration
  // term) in which it owns its keys, also the high half of its entries'
  // versions. The pool keeps, persistently, the lowest token it accepts per
  // node; fencing a node raises it, so a node cut off by a reconfiguration
  // — alive or not — can never allocate, seal or (the server revokes its
  // registration) write again.

  // `node` starts working under `epoch`: StaleTerm below the node's fence.
  Status Admit(uint32_t node, uint64_t epoch);
  // StaleTerm unless `epoch` is the token `node` was admitted with.
  Status CheckToken(uint32_t node, uint64_t epoch) const;
  // No work of `node` under a token below `epoch` from now on.
  Status Fence(uint32_t node, uint64_t epoch);
  static constexpr uint32_t kMaxNodes = 500;  // node ids the token table holds

  // Replaces the index with one of twice the home buckets, in a run of
  // free segments, when the index is full (merges, CLOVER_INSERT and
  // DINOMO-N's copies call it on NoSpace): every pointer is applied to the
  // new index, the superblock is switched with one 8-byte store, and every
  // bucket of the old one is marked moved for one-sided readers (they ask
  // for POOL_INDEX). The old area is not reused while the pool runs (a slow
  // reader may still read it); a restarted pool frees it. NoSpace when no
  // run of free segments is large enough.
  Status GrowIndex();
  // GrowIndex unless the index no longer has `seen_buckets` home buckets
  // (another caller grew it meanwhile).
  Status GrowIndexFrom(uint32_t seen_buckets);
  uint64_t index_grows() const { return index_grows_; }

  // --- shared keys (selective replication, dinomo/cell.h) ---
  //
  // A shared key's cell is the truth about it: the index points the key at
  // the cell, merges leave it so, and an entry of the key is live while the
  // cell's word points at it (each merge sweeps the cells, so an entry the
  // word moved away from becomes garbage). Cells live in segments of their
  // own, bump-allocated; a segment whose cells are all removed is freed.

  // Makes `key` shared: a cell holding what the index points the key at now
  // and the index pointing at the cell; returns the cell (the same one if
  // the key is shared already). The caller has every earlier writer's
  // entries of the key merged (the owner settles before it shares).
  Result<IndexPointer> Share(std::string_view key);
  // Points the index back at the entry the key's cell holds (or forgets the
  // key if it holds none) and removes the cell. The caller has stopped every
  // owner's writes to the cell and had their logs merged. OK if not shared.
  Status Unshare(std::string_view key);
  // The keys shared now.
  std::vector<std::string> SharedKeys() const;

  // Clover's metadata (CLOVER_INSERT, its GC pass): PoolIndex::CompareAndSet
  // on the current index, growing it when full. Thread-safe against merges
  // and growth.
  Result<IndexPointer> CompareAndSetIndex(std::optional<IndexPointer> expected, IndexPointer entry);
  // Where the index is now, for POOL_LAYOUT and POOL_INDEX.
  struct IndexPlace {
    uint64_t table_offset = 0, overflow_offset = 0;
    uint32_t num_buckets = 0;
  };
  IndexPlace index_place() const;
  // InvalidArgument unless [offset, offset + bytes) lies inside one open
  // segment of `node` (overflow-safe: the range comes from the wire).
  Status CheckInOpenSegment(uint32_t node, uint64_t offset, uint64_t bytes) const;
  const log::Limits& limits() const { return limits_; }

  // The current index: valid until the next GrowIndex (single-threaded
  // users: the pool's tests, the GC pass and copies run on its executor).
  PoolIndex& index() { return *index_; }
  const PoolIndex& index() const { return *index_; }
  uint64_t segment_bytes() const { return segment_bytes_; }
  uint64_t segments_offset() const { return segments_offset_; }
  uint32_t num_segments() const { return num_segments_; }
  PoolStats stats() const;

 private:
  // kIndex: part of a run of segments holding a grown index. kCells:
  // shared keys' cells.
  enum class State : uint8_t { kFree = 0, kOpen = 1, kMerged = 2, kIndex = 3, kCells = 4 };
  struct Segment {
    State state = State::kFree;
    uint32_t owner = 0;
    uint64_t seq = 0;  // allocation order: a node's log order
    // Segment-relative end of what was merged; of a kCells segment, of the
    // cells allocated (DRAM).
    uint64_t merged_to = 0;
    // Garbage counters (DRAM, rebuilt at open); of a kCells segment,
    // `entries` counts its live cells.
    uint64_t entries = 0, dead = 0;
    bool merging = false;
    uint64_t freed_at = 0;  // of a free segment: when (free_clock_) it was freed; 0 never used
  };
  struct Cell {
    std::string key;
    uint32_t bytes = 0;
    // The entry counted live for the cell (the word's, when last looked).
    std::optional<IndexPointer> counted;
  };

  Pool(pm::PmRegion* region, const PoolOptions& options);
  Status Format(const PoolOptions& options);
  Status Load();
  void Persist(uint32_t s);  // the table row of segment s
  uint32_t SegmentOf(uint64_t offset) const;
  // Merges open segment s of `node` up to `end`, counts garbage, marks it
  // merged, frees what became all garbage.
  Result<MergeResult> MergeOpen(uint32_t s, uint64_t end);
  void CountDead(const std::vector<IndexPointer>& garbage);
  void Free(uint32_t s);  // REQUIRES: mu_ held
  // The free segment freed longest ago (never used ones first), or
  // num_segments_: reusing late leaves a slow one-sided reader holding an
  // old pointer the most time before the bytes it names change.
  uint32_t LeastRecentlyFreed() const;  // REQUIRES: mu_ held
  // A cell's word: the entry it points at, if any.
  std::optional<IndexPointer> CellWord(uint64_t cell) const;
  // Counts dead what cells no longer point at. REQUIRES: mu_ held.
  void SweepCells();
  // Share's one attempt: NoSpace with `*index_full` set (to the index's
  // home buckets) when the index had no slot for the key.
  Result<IndexPointer> ShareOnce(std::string_view key, uint32_t bytes, uint32_t* index_full);
  // Rebuilds the cell registry at open (live cells the index points at).
  Status LoadCells(uint32_t s);

  pm::PmRegion* const region_;
  const log::Limits limits_;
  uint64_t segment_bytes_ = 0, table_offset_ = 0, index_offset_ = 0, segments_offset_ = 0;
  uint32_t num_segments_ = 0;
  uint64_t next_seq_ = 1;
  std::unique_ptr<PoolIndex> index_;
  uint64_t index_grows_ = 0;
  // Merges hold it shared, GrowIndex exclusively (it swaps index_).
  mutable std::shared_mutex index_mu_;
  mutable std::mutex mu_;  // the table and the counters
  std::vector<Segment> segments_;
  uint64_t merged_entries_ = 0, freed_ = 0, free_clock_ = 0;
  std::map<uint64_t, Cell> cells_;                    // by region offset
  std::unordered_map<std::string, uint64_t> cell_of_;  // key -> offset
  // Per node: the token admitted (0: none) and the fence (the lowest token
  // accepted), persisted in the superblock's page.
  std::vector<uint64_t> admitted_, fence_;
  void PersistToken(uint32_t node);
};

}  // namespace slip::dinomo
