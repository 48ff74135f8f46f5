// SegmentTable: the PM region's geometry (superblock), its segments and the
// persistent segment meta table. Specification: docs/formats/pm_layout.md.
//
// A region is: a 4 KiB superblock, the meta table (one 8-byte word per
// segment), then `num_segments` segments of `segment_size` bytes.
//
// Each meta word packs state (8 bits) | owner (8 bits) | seq (48 bits) and is
// updated with one 8-byte store followed by Persist, so a crash leaves either
// the old or the new word (8-byte stores are atomic; the crash model tears at
// 8-byte granularity, never inside a word).
//
// Invariants (docs/papers/rowan.md I7, I9):
//   * Only legal transitions happen: Free→Using, Using→Used, Using→Committed,
//     Used→Committed, Committed→Free. Illegal ones return InvalidArgument.
//   * A Free segment is all zero. Free() stamps the first 64 B line with
//     the end mark and persists it before anything else, which hides every
//     entry in the segment from a recovery scan, then zeroes the rest, then
//     the first line, and only then persists the Free state.
//   * seq is unique and increasing in allocation order; it survives restarts.
//
// Thread-safety: Allocate/Free/Transition are safe from any thread (one
// internal mutex; they are rare: one per segment's life).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "pm/region.h"

namespace slip::log {

// Persisted: never renumber. Free must stay 0 (a fresh region is all Free).
enum class SegmentState : uint8_t { kFree = 0, kUsing = 1, kUsed = 2, kCommitted = 3 };
enum class SegmentOwner : uint8_t { kNone = 0, kWorker = 1, kControl = 2, kClean = 3 };

const char* SegmentStateName(SegmentState s);

// The end mark: a 64 B line stamped with this word eight times ends a scan
// of its segment, and at a segment's start says its Free() was cut short.
// Free() and a hidden block are stamped before anything else changes, as a
// whole line: a crash can tear that store at word granularity, but any word
// of the mark that persisted still says "ended on purpose". Blanking a line
// instead could not say so: a torn blank line looks just like a block
// damaged on the media, which must never be taken for an end.
constexpr uint64_t kEndMarkWord = 0x4b52414d444e4524ull;  // "$ENDMARK"
// Stamps the line at `line` (64 B, in `region`) and persists it.
void StampEndMark(pm::PmRegion* region, std::byte* line);
// Whether any word of the 64 B line at `line` is the end mark's.
bool HasEndMark(const std::byte* line);

struct SegmentMeta {
  SegmentState state = SegmentState::kFree;
  SegmentOwner owner = SegmentOwner::kNone;
  uint64_t seq = 0;

  uint64_t Pack() const;
  static SegmentMeta Unpack(uint64_t word);
};

struct Geometry {
  uint64_t segment_size = 4 << 20;
  uint32_t num_segments = 0;  // 0: as many as fit in the region
  uint32_t num_shards = 16;
};

class SegmentTable {
 public:
  static constexpr uint64_t kMagic = 0x31304d5050494c53ull;  // "SLIPPM01"
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr uint64_t kSuperblockSize = 4096;

  // True when the region holds no superblock at all (all-zero header).
  static bool IsBlank(const pm::PmRegion& region);
  // Writes a fresh superblock and an all-Free meta table.
  static Result<std::unique_ptr<SegmentTable>> Format(pm::PmRegion* region, const Geometry& g);
  // Validates the superblock and loads the meta table. Corruption if the
  // superblock is damaged or inconsistent with the region size.
  static Result<std::unique_ptr<SegmentTable>> Open(pm::PmRegion* region);

  const Geometry& geometry() const { return geometry_; }
  uint32_t num_segments() const { return geometry_.num_segments; }
  uint64_t segment_size() const { return geometry_.segment_size; }
  pm::PmRegion* region() const { return region_; }

  uint64_t SegmentOffset(uint32_t id) const { return data_offset_ + id * geometry_.segment_size; }
  std::byte* SegmentBase(uint32_t id) const { return region_->at(SegmentOffset(id)); }
  // Which segment a region offset falls in. REQUIRES: offset in the data area.
  uint32_t SegmentOf(uint64_t offset) const {
    return static_cast<uint32_t>((offset - data_offset_) / geometry_.segment_size);
  }
  bool InDataArea(uint64_t offset) const {
    return offset >= data_offset_ &&
           offset < data_offset_ + uint64_t{geometry_.num_segments} * geometry_.segment_size;
  }

  SegmentMeta meta(uint32_t id) const;

  // Takes a Free segment (lowest id first), marks it Using with a new seq.
  // `keep_free` segments are left for callers that pass a smaller reserve
  // (the cleaner must always find one). NoSpace when none is available.
  Result<uint32_t> Allocate(SegmentOwner owner, uint32_t keep_free = 0);
  Status Transition(uint32_t id, SegmentState to);
  // Committed → Free, zeroing the segment as described above. With `hold`
  // it is not handed out again until Reuse(id) (a restart forgets the hold:
  // what it protects — one-sided readers of the old bytes — does not
  // survive a restart either).
  Status Free(uint32_t id, bool hold = false);
  void Reuse(uint32_t id);

  uint32_t free_count() const;
  uint64_t next_seq() const;

 private:
  SegmentTable(pm::PmRegion* region, Geometry g, uint64_t data_offset);
  void StoreMeta(uint32_t id, const SegmentMeta& m);
  uint64_t* MetaWord(uint32_t id) const;

  pm::PmRegion* region_;
  Geometry geometry_;
  uint64_t data_offset_;
  mutable std::mutex mu_;
  std::vector<uint32_t> free_;  // ids of Free segments, highest id at front (pop_back = lowest)
  uint64_t next_seq_ = 1;
};

}  // namespace slip::log
