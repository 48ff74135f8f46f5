#include "dinomo/pool_index.h"

#include <atomic>
#include <cstring>

#include "common/hash.h"
#include "dinomo/cell.h"

namespace slip::dinomo {

namespace {

constexpr uint64_t kMagic = 0x3158444950494c53ull;  // "SLIPIDX1"
constexpr size_t kStripes = 1024;

// Header line: magic | num_buckets u32 | overflow_capacity u32 | overflow_used u32.
constexpr size_t kHdrBuckets = 8, kHdrCapacity = 12, kHdrUsed = 16;

uint64_t LoadWord(const std::byte* p) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(const_cast<std::byte*>(p)))
      .load(std::memory_order_acquire);
}
void StoreWord(std::byte* p, uint64_t v) {
  std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(p)).store(v, std::memory_order_release);
}
uint32_t LoadU32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void StoreU32(std::byte* p, uint32_t v) { std::memcpy(p, &v, 4); }

}  // namespace

BucketView ParseBucket(std::span<const std::byte, kBucketBytes> line) {
  uint64_t w[8];
  std::memcpy(w, line.data(), sizeof w);
  BucketView b;
  const uint64_t begin = w[0];
  const uint64_t end = w[7] >> 32;
  b.consistent = begin == end && begin % 2 == 0;
  b.moved = begin == ~uint64_t{0};
  for (int i = 0; i < kSlotsPerBucket; ++i) {
    b.slots[i].hash = w[1 + 2 * i];
    b.slots[i].pointer = IndexPointer::Decode(w[2 + 2 * i]);
  }
  b.next = static_cast<uint32_t>(w[7]);
  return b;
}

uint64_t SlotHash(std::string_view key) {
  const uint64_t h = HashKey(key);
  return h == 0 ? 1 : h;
}

uint32_t HomeBucket(uint64_t slot_hash, uint32_t num_buckets) {
  // High bits: the low ones also pick shards and owners elsewhere.
  return static_cast<uint32_t>((slot_hash >> 24) & (num_buckets - 1));
}

PoolIndex::PoolIndex(pm::PmRegion* region, uint64_t offset, uint32_t num_buckets, uint32_t overflow_capacity,
                     const log::Limits& limits)
    : region_(region),
      offset_(offset),
      num_buckets_(num_buckets),
      overflow_capacity_(overflow_capacity),
      limits_(limits),
      stripes_(kStripes) {}

Result<std::unique_ptr<PoolIndex>> PoolIndex::Create(pm::PmRegion* region, uint64_t offset, uint64_t bytes,
                                                     uint32_t num_buckets, const log::Limits& limits) {
  if (num_buckets == 0 || (num_buckets & (num_buckets - 1)) != 0) {
    return Status::InvalidArgument("the number of buckets must be a power of two, not " + std::to_string(num_buckets));
  }
  if (offset % kBucketBytes != 0 || offset + bytes > region->size()) {
    return Status::InvalidArgument("the index area does not lie aligned inside the region");
  }
  const uint64_t fixed = kBucketBytes * (1 + uint64_t{num_buckets});
  if (bytes < fixed) {
    return Status::InvalidArgument(std::to_string(num_buckets) + " buckets need " + std::to_string(fixed) +
                                   " bytes, the area has " + std::to_string(bytes));
  }
  const uint64_t overflow = std::min<uint64_t>((bytes - fixed) / kBucketBytes, UINT32_MAX - 1);
  std::byte* base = region->at(offset);
  std::memset(base, 0, fixed + overflow * kBucketBytes);
  StoreU32(base + kHdrBuckets, num_buckets);
  StoreU32(base + kHdrCapacity, static_cast<uint32_t>(overflow));
  StoreU32(base + kHdrUsed, 0);
  region->Persist(base + kBucketBytes, fixed - kBucketBytes + overflow * kBucketBytes);
  // The magic last: an index is formatted only once all of it is zero.
  std::memcpy(base, &kMagic, 8);
  region->Persist(base, kBucketBytes);
  return std::unique_ptr<PoolIndex>(
      new PoolIndex(region, offset, num_buckets, static_cast<uint32_t>(overflow), limits));
}

Result<std::unique_ptr<PoolIndex>> PoolIndex::Open(pm::PmRegion* region, uint64_t offset,
                                                   const log::Limits& limits) {
  if (offset % kBucketBytes != 0 || offset + kBucketBytes > region->size()) {
    return Status::InvalidArgument("the index area does not lie aligned inside the region");
  }
  const std::byte* base = region->at(offset);
  uint64_t magic;
  std::memcpy(&magic, base, 8);
  if (magic != kMagic) return Status::Corruption("no pool index at offset " + std::to_string(offset));
  const uint32_t buckets = LoadU32(base + kHdrBuckets);
  const uint32_t capacity = LoadU32(base + kHdrCapacity);
  const uint32_t used = LoadU32(base + kHdrUsed);
  if (buckets == 0 || (buckets & (buckets - 1)) != 0 || used > capacity ||
      offset + kBucketBytes * (1 + uint64_t{buckets} + capacity) > region->size()) {
    return Status::Corruption("the pool index header is inconsistent");
  }
  return std::unique_ptr<PoolIndex>(new PoolIndex(region, offset, buckets, capacity, limits));
}

uint32_t PoolIndex::overflow_used() const { return LoadU32(region_->at(offset_) + kHdrUsed); }

std::byte* PoolIndex::Line(uint32_t n, bool overflow) const {
  return region_->at((overflow ? overflow_offset() : table_offset()) + uint64_t{n} * kBucketBytes);
}

std::optional<PoolIndex::EntryKey> PoolIndex::ReadEntry(IndexPointer p) const {
  // Overflow-safe: a pointer may come from a node (CLOVER_INSERT).
  if (p.bytes < log::kAlign || p.offset % log::kAlign != 0 || p.bytes > region_->size() ||
      p.offset > region_->size() - p.bytes) {
    return std::nullopt;
  }
  if (p.cell) {
    auto c = ParseCell({region_->at(p.offset), p.bytes});
    if (!c || c->magic != kCellMagic || c->bytes != p.bytes) return std::nullopt;
    return EntryKey{c->key, 0};
  }
  auto d = log::DecodeBlock({region_->at(p.offset), p.bytes}, limits_);
  if (!d.status.ok() || !d.block.single() || d.block.encoded_bytes != p.bytes) return std::nullopt;
  if (d.block.type != log::EntryType::kPut && d.block.type != log::EntryType::kDel) return std::nullopt;
  return EntryKey{d.block.key(), d.block.version};
}

void PoolIndex::MarkMoved() {
  // Home buckets, then the overflow ones in use: contiguous after the header.
  const uint64_t lines = uint64_t{num_buckets_} + overflow_used();
  for (uint64_t i = 0; i < lines; ++i) {
    std::byte* line = region_->at(table_offset() + kBucketBytes * i);
    StoreWord(line, ~uint64_t{0});
    StoreWord(line + 56, ~uint64_t{0});
    region_->Persist(line, kBucketBytes);
  }
}

void PendingLines::Persist(pm::PmRegion& region) {
  if (lines_.empty()) return;
  if (region.mode() == pm::PersistMode::kMsync) {
    region.Persist(lo_, static_cast<size_t>(hi_ - lo_));
  } else {
    for (const std::byte* line : lines_) region.Persist(line, kBucketBytes);
  }
  *this = PendingLines();
}

void PoolIndex::WriteBucket(std::byte* line, const BucketView& b, PendingLines* pending) {
  // end := v+1, the slots and next, begin := v+2, end := v+2.
  const uint64_t v = LoadWord(line);
  const uint32_t old_next = static_cast<uint32_t>(LoadWord(line + 56));
  StoreWord(line + 56, ((v + 1) << 32) | old_next);
  for (int i = 0; i < kSlotsPerBucket; ++i) {
    StoreWord(line + 8 + 16 * i, b.slots[i].hash);
    StoreWord(line + 16 + 16 * i, b.slots[i].hash == 0 ? 0 : b.slots[i].pointer.Encode());
  }
  StoreWord(line, v + 2);
  StoreWord(line + 56, ((v + 2) << 32) | b.next);
  if (pending != nullptr) return pending->Add(line);
  region_->Persist(line, kBucketBytes);
}

Result<PoolIndex::Applied> PoolIndex::Apply(IndexPointer entry, PendingLines* pending) {
  const std::optional<EntryKey> key = ReadEntry(entry);
  if (!key) return Status::Corruption("no whole single-block entry at offset " + std::to_string(entry.offset));
  return Update(*key, entry, /*keep_cells=*/true, [&](std::optional<IndexPointer> now, const std::optional<EntryKey>& cur, const EntryKey& e) {
    if (!now) return true;
    return !cur || cur->version < e.version;
  }, pending);
}

Result<IndexPointer> PoolIndex::CompareAndSet(std::optional<IndexPointer> expected, IndexPointer entry) {
  const std::optional<EntryKey> e = ReadEntry(entry);
  if (!e) return Status::Corruption("no whole single-block entry at offset " + std::to_string(entry.offset));
  std::optional<IndexPointer> after;
  auto r = Update(*e, entry, /*keep_cells=*/false, [&](std::optional<IndexPointer> now, const std::optional<EntryKey>&, const EntryKey&) {
    after = now == expected ? entry : *now;
    return now == expected;
  });
  if (!r.ok()) return r.status();
  return after.value_or(entry);
}

Result<PoolIndex::Applied> PoolIndex::Set(std::string_view key, std::optional<IndexPointer> to) {
  if (to) {
    const std::optional<EntryKey> e = ReadEntry(*to);
    if (!e || e->key != key) return Status::InvalidArgument("the pointer leads to no entry or cell of the key");
  }
  return Update(EntryKey{key, 0}, to, /*keep_cells=*/false, [](std::optional<IndexPointer>, const std::optional<EntryKey>&, const EntryKey&) {
    return true;
  });
}

Result<PoolIndex::Applied> PoolIndex::Update(
    const EntryKey& key, std::optional<IndexPointer> entry, bool keep_cells,
    const std::function<bool(std::optional<IndexPointer>, const std::optional<EntryKey>&, const EntryKey&)>& decide,
    PendingLines* pending) {
  const EntryKey* e = &key;
  const bool is_cell = entry && entry->cell;
  const uint64_t h = SlotHash(e->key);
  const uint32_t home = HomeBucket(h, num_buckets_);
  std::lock_guard<std::mutex> lock(stripes_[home % stripes_.size()]);

  std::byte* free_line = nullptr;
  int free_slot = -1;
  std::byte* last = nullptr;
  BucketView last_view;
  std::byte* line = Line(home, false);
  for (uint32_t hops = 0; line != nullptr; ++hops) {
    if (hops > overflow_capacity_ + 1) return Status::Corruption("the bucket chain has a cycle");
    const BucketView b = ParseBucket(std::span<const std::byte, kBucketBytes>(line, kBucketBytes));
    for (int i = 0; i < kSlotsPerBucket; ++i) {
      const BucketView::Slot& s = b.slots[i];
      if (s.hash == 0) {
        if (free_line == nullptr) {
          free_line = line;
          free_slot = i;
        }
        continue;
      }
      if (s.hash != h) continue;
      const std::optional<EntryKey> cur = ReadEntry(s.pointer);
      if (cur && cur->key != e->key) continue;  // another key with the same hash
      // The key's slot (or one whose entry no longer decodes: taken over).
      if (entry && s.pointer == *entry) {
        (void)decide(s.pointer, cur, *e);
        return Applied{false, true, std::nullopt, std::nullopt};
      }
      if (keep_cells && cur && s.pointer.cell && !is_cell) return Applied{false, false, std::nullopt, s.pointer};
      if (!decide(s.pointer, cur, *e)) return Applied{false, false, std::nullopt, std::nullopt};
      BucketView nb = b;
      if (entry) {
        nb.slots[i].pointer = *entry;
      } else {
        nb.slots[i] = {};
      }
      WriteBucket(line, nb, pending);
      return Applied{true, false, s.pointer, std::nullopt};
    }
    last = line;
    last_view = b;
    if (b.next == 0) break;
    if (b.next - 1 >= overflow_capacity_) return Status::Corruption("a bucket chain leaves the overflow area");
    line = Line(b.next - 1, true);
  }
  if (!entry) return Applied{false, true, std::nullopt, std::nullopt};  // nothing to forget
  if (!decide(std::nullopt, std::nullopt, *e)) return Applied{false, false, std::nullopt, std::nullopt};
  if (free_line != nullptr) {
    BucketView nb = ParseBucket(std::span<const std::byte, kBucketBytes>(free_line, kBucketBytes));
    nb.slots[free_slot] = {h, *entry};
    WriteBucket(free_line, nb, pending);
    return Applied{true, false, std::nullopt, std::nullopt};
  }
  // A new overflow bucket, written whole before the chain links to it.
  uint32_t n;
  {
    std::lock_guard<std::mutex> olock(overflow_mu_);
    std::byte* hdr = region_->at(offset_);
    n = LoadU32(hdr + kHdrUsed);
    if (n >= overflow_capacity_) return Status::NoSpace("the pool index is full (resizing is not built)");
    StoreU32(hdr + kHdrUsed, n + 1);
    region_->Persist(hdr + kHdrUsed, 4);
  }
  BucketView fresh;
  fresh.slots[0] = {h, *entry};
  // Whole before the chain links to it, and the link only after.
  WriteBucket(Line(n, true), fresh);
  last_view.next = n + 1;
  WriteBucket(last, last_view, pending);
  return Applied{true, false, std::nullopt, std::nullopt};
}

std::optional<IndexPointer> PoolIndex::Find(std::string_view key, uint32_t* bucket_reads) const {
  const uint64_t h = SlotHash(key);
  uint32_t reads = 0;
  std::optional<IndexPointer> found;
  const std::byte* line = Line(HomeBucket(h, num_buckets_), false);
  for (uint32_t hops = 0; line != nullptr && hops <= overflow_capacity_ + 1; ++hops) {
    std::array<std::byte, kBucketBytes> copy;
    BucketView b;
    // A concurrent writer: read the line again (a one-sided reader would
    // post another READ).
    do {
      for (size_t w = 0; w < kBucketBytes; w += 8) StoreWord(copy.data() + w, LoadWord(line + w));
      ++reads;
      b = ParseBucket(copy);
    } while (!b.consistent);
    for (const BucketView::Slot& s : b.slots) {
      if (s.hash != h) continue;
      const std::optional<EntryKey> e = ReadEntry(s.pointer);
      if (e && e->key == key) {
        found = s.pointer;
        break;
      }
    }
    if (found || b.next == 0 || b.next - 1 >= overflow_capacity_) break;
    line = Line(b.next - 1, true);
  }
  if (bucket_reads) *bucket_reads = reads;
  return found;
}

}  // namespace slip::dinomo

namespace slip::dinomo {

void PoolIndex::ForEachPointer(const std::function<void(IndexPointer)>& fn) const {
  const uint32_t used = overflow_used();
  for (uint64_t n = 0; n < uint64_t{num_buckets_} + used; ++n) {
    const bool overflow = n >= num_buckets_;
    const std::byte* line = Line(static_cast<uint32_t>(overflow ? n - num_buckets_ : n), overflow);
    const BucketView b = ParseBucket(std::span<const std::byte, kBucketBytes>(line, kBucketBytes));
    for (const BucketView::Slot& s : b.slots) {
      if (s.hash != 0) fn(s.pointer);
    }
  }
}

}  // namespace slip::dinomo
