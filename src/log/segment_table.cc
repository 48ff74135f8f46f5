#include "log/segment_table.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"

namespace slip::log {
namespace {

// Superblock field offsets (docs/formats/pm_layout.md).
constexpr size_t kOffMagic = 0;
constexpr size_t kOffFormat = 8;
constexpr size_t kOffSegments = 12;
constexpr size_t kOffSegmentSize = 16;
constexpr size_t kOffMetaOffset = 24;
constexpr size_t kOffDataOffset = 32;
constexpr size_t kOffShards = 40;
constexpr size_t kOffCrc = 44;
constexpr uint64_t kMetaOffset = SegmentTable::kSuperblockSize;
constexpr uint64_t kDataAlign = 4096;

bool LegalTransition(SegmentState from, SegmentState to) {
  switch (from) {
    case SegmentState::kFree: return to == SegmentState::kUsing;
    case SegmentState::kUsing: return to == SegmentState::kUsed || to == SegmentState::kCommitted;
    case SegmentState::kUsed: return to == SegmentState::kCommitted;
    case SegmentState::kCommitted: return to == SegmentState::kFree;
  }
  return false;
}

}  // namespace

const char* SegmentStateName(SegmentState s) {
  switch (s) {
    case SegmentState::kFree: return "Free";
    case SegmentState::kUsing: return "Using";
    case SegmentState::kUsed: return "Used";
    case SegmentState::kCommitted: return "Committed";
  }
  return "?";
}

uint64_t SegmentMeta::Pack() const {
  return uint64_t{static_cast<uint8_t>(state)} | uint64_t{static_cast<uint8_t>(owner)} << 8 |
         (seq & ((uint64_t{1} << 48) - 1)) << 16;
}

void StampEndMark(pm::PmRegion* region, std::byte* line) {
  for (size_t i = 0; i < pm::kCacheLine; i += 8) StoreLE<uint64_t>(line + i, kEndMarkWord);
  region->Persist(line, pm::kCacheLine);
}

bool HasEndMark(const std::byte* line) {
  for (size_t i = 0; i < pm::kCacheLine; i += 8) {
    if (LoadLE<uint64_t>(line + i) == kEndMarkWord) return true;
  }
  return false;
}

SegmentMeta SegmentMeta::Unpack(uint64_t w) {
  SegmentMeta m;
  m.state = static_cast<SegmentState>(w & 0xFF);
  m.owner = static_cast<SegmentOwner>((w >> 8) & 0xFF);
  m.seq = w >> 16;
  return m;
}

SegmentTable::SegmentTable(pm::PmRegion* region, Geometry g, uint64_t data_offset)
    : region_(region), geometry_(g), data_offset_(data_offset) {}

bool SegmentTable::IsBlank(const pm::PmRegion& region) {
  if (region.size() < kSuperblockSize) return true;
  const std::byte* p = region.base();
  return std::all_of(p, p + 64, [](std::byte b) { return b == std::byte{0}; });
}

Result<std::unique_ptr<SegmentTable>> SegmentTable::Format(pm::PmRegion* region,
                                                           const Geometry& g_in) {
  Geometry g = g_in;
  if (g.segment_size < 4096 || g.segment_size % 4096 != 0) {
    return Status::InvalidArgument("segment size must be a multiple of 4096, got " +
                                   std::to_string(g.segment_size));
  }
  if (g.num_shards == 0 || g.num_shards > 65536) {
    return Status::InvalidArgument("shard count must be 1..65536");
  }
  const uint64_t size = region->size();
  if (g.num_segments == 0) {
    // Solve meta + segments <= size for the largest count.
    if (size <= kMetaOffset + kDataAlign) return Status::InvalidArgument("region too small");
    uint64_t n = (size - kMetaOffset - kDataAlign) / (g.segment_size + 8);
    g.num_segments = static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
  }
  const uint64_t data_offset = AlignUp(kMetaOffset + uint64_t{g.num_segments} * 8, kDataAlign);
  if (g.num_segments == 0 || data_offset + uint64_t{g.num_segments} * g.segment_size > size) {
    return Status::InvalidArgument("region of " + std::to_string(size) + " bytes cannot hold " +
                                   std::to_string(g.num_segments) + " segments of " +
                                   std::to_string(g.segment_size) + " bytes");
  }
  // Meta table first (all Free = zero), superblock last: a crash mid-format
  // leaves a blank region, which formats again.
  std::memset(region->at(kMetaOffset), 0, data_offset - kMetaOffset);
  region->Persist(region->at(kMetaOffset), data_offset - kMetaOffset);
  std::byte sb[64] = {};
  StoreLE<uint64_t>(sb + kOffMagic, kMagic);
  StoreLE<uint32_t>(sb + kOffFormat, kFormatVersion);
  StoreLE<uint32_t>(sb + kOffSegments, g.num_segments);
  StoreLE<uint64_t>(sb + kOffSegmentSize, g.segment_size);
  StoreLE<uint64_t>(sb + kOffMetaOffset, kMetaOffset);
  StoreLE<uint64_t>(sb + kOffDataOffset, data_offset);
  StoreLE<uint32_t>(sb + kOffShards, g.num_shards);
  StoreLE<uint32_t>(sb + kOffCrc, Crc32c(0, sb, kOffCrc));
  std::memcpy(region->base(), sb, sizeof(sb));
  region->Persist(region->base(), sizeof(sb));
  return Open(region);
}

Result<std::unique_ptr<SegmentTable>> SegmentTable::Open(pm::PmRegion* region) {
  if (region->size() < kSuperblockSize) return Status::Corruption("region smaller than superblock");
  const std::byte* sb = region->base();
  if (LoadLE<uint64_t>(sb + kOffMagic) != kMagic) {
    return Status::Corruption("no Slipstream superblock (bad magic)");
  }
  if (LoadLE<uint32_t>(sb + kOffCrc) != Crc32c(0, sb, kOffCrc)) {
    return Status::Corruption("superblock checksum mismatch");
  }
  if (LoadLE<uint32_t>(sb + kOffFormat) != kFormatVersion) {
    return Status::NotSupported("superblock format " +
                                std::to_string(LoadLE<uint32_t>(sb + kOffFormat)));
  }
  Geometry g;
  g.num_segments = LoadLE<uint32_t>(sb + kOffSegments);
  g.segment_size = LoadLE<uint64_t>(sb + kOffSegmentSize);
  g.num_shards = LoadLE<uint32_t>(sb + kOffShards);
  const uint64_t data_offset = LoadLE<uint64_t>(sb + kOffDataOffset);
  if (LoadLE<uint64_t>(sb + kOffMetaOffset) != kMetaOffset || g.segment_size == 0 ||
      data_offset < kMetaOffset + uint64_t{g.num_segments} * 8 ||
      data_offset + uint64_t{g.num_segments} * g.segment_size > region->size()) {
    return Status::Corruption("superblock geometry inconsistent with a region of " +
                              std::to_string(region->size()) + " bytes");
  }
  std::unique_ptr<SegmentTable> t(new SegmentTable(region, g, data_offset));
  for (uint32_t id = g.num_segments; id-- > 0;) {
    SegmentMeta m = t->meta(id);
    if (static_cast<uint8_t>(m.state) > 3 || static_cast<uint8_t>(m.owner) > 3) {
      return Status::Corruption("segment " + std::to_string(id) + " has an invalid meta word");
    }
    if (m.state == SegmentState::kFree) t->free_.push_back(id);
    t->next_seq_ = std::max(t->next_seq_, m.seq + 1);
  }
  return t;
}

uint64_t* SegmentTable::MetaWord(uint32_t id) const {
  return reinterpret_cast<uint64_t*>(region_->at(kMetaOffset + uint64_t{id} * 8));
}

SegmentMeta SegmentTable::meta(uint32_t id) const {
  return SegmentMeta::Unpack(__atomic_load_n(MetaWord(id), __ATOMIC_ACQUIRE));
}

void SegmentTable::StoreMeta(uint32_t id, const SegmentMeta& m) {
  __atomic_store_n(MetaWord(id), m.Pack(), __ATOMIC_RELEASE);
  region_->Persist(MetaWord(id), 8);
}

Result<uint32_t> SegmentTable::Allocate(SegmentOwner owner, uint32_t keep_free) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() <= keep_free) {
    return Status::NoSpace("no free segment (" + std::to_string(free_.size()) + " free, " +
                           std::to_string(keep_free) + " reserved)");
  }
  uint32_t id = free_.back();
  free_.pop_back();
  StoreMeta(id, SegmentMeta{SegmentState::kUsing, owner, next_seq_++});
  return id;
}

Status SegmentTable::Transition(uint32_t id, SegmentState to) {
  if (id >= geometry_.num_segments) return Status::InvalidArgument("no such segment");
  std::lock_guard<std::mutex> lock(mu_);
  SegmentMeta m = meta(id);
  if (to == SegmentState::kFree || !LegalTransition(m.state, to)) {
    return Status::InvalidArgument(std::string("illegal segment transition ") +
                                   SegmentStateName(m.state) + " -> " + SegmentStateName(to));
  }
  m.state = to;
  StoreMeta(id, m);
  return Status::Ok();
}

Status SegmentTable::Free(uint32_t id, bool hold) {
  if (id >= geometry_.num_segments) return Status::InvalidArgument("no such segment");
  SegmentMeta m = meta(id);
  if (m.state != SegmentState::kCommitted) {
    return Status::InvalidArgument(std::string("only Committed segments can be freed, segment ") +
                                   std::to_string(id) + " is " + SegmentStateName(m.state));
  }
  std::byte* base = SegmentBase(id);
  // The mark first: from here on a recovery scan sees a segment being freed.
  StampEndMark(region_, base);
  std::memset(base + pm::kCacheLine, 0, geometry_.segment_size - pm::kCacheLine);
  region_->Persist(base + pm::kCacheLine, geometry_.segment_size - pm::kCacheLine);
  std::memset(base, 0, pm::kCacheLine);
  region_->Persist(base, pm::kCacheLine);
  std::lock_guard<std::mutex> lock(mu_);
  StoreMeta(id, SegmentMeta{SegmentState::kFree, SegmentOwner::kNone, m.seq});
  if (!hold) {
    // Keep lowest ids at the back so allocation stays address-ordered.
    free_.insert(std::upper_bound(free_.begin(), free_.end(), id, std::greater<>()), id);
  }
  return Status::Ok();
}

void SegmentTable::Reuse(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= geometry_.num_segments || meta(id).state != SegmentState::kFree) return;
  if (std::find(free_.begin(), free_.end(), id) != free_.end()) return;
  free_.insert(std::upper_bound(free_.begin(), free_.end(), id, std::greater<>()), id);
}

uint32_t SegmentTable::free_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<uint32_t>(free_.size());
}

uint64_t SegmentTable::next_seq() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_seq_;
}

}  // namespace slip::log
