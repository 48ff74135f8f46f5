#include "erda/engine.h"

#include <algorithm>
#include <cstring>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/hash.h"

namespace slip::erda {
namespace {

constexpr uint64_t kMagic = 0x4144524550494c53;  // "SLIPERDA"
constexpr uint32_t kFormat = 1;
constexpr uint64_t kTableOffset = 4096;
constexpr size_t kSuperblockBytes = 64;
constexpr uint32_t kMaxKeyField = 0xffff;  // the object's 2-byte key length
constexpr uint64_t kMaxHeadBytes = (uint64_t{IndexWord::kMaxOffset} + 1) * IndexWord::kUnit;

// Superblock: magic, format, buckets, heads, shards, segment bytes, head
// bytes, heads offset, table offset, CRC32C of the bytes before it.
void EncodeSuperblock(const Layout& l, std::byte* p) {
  std::memset(p, 0, kSuperblockBytes);
  StoreLE<uint64_t>(p, kMagic);
  StoreLE<uint32_t>(p + 8, kFormat);
  StoreLE<uint32_t>(p + 12, l.num_buckets);
  StoreLE<uint32_t>(p + 16, l.num_heads);
  StoreLE<uint32_t>(p + 20, l.num_shards);
  StoreLE<uint64_t>(p + 24, l.segment_bytes);
  StoreLE<uint64_t>(p + 32, l.head_bytes);
  StoreLE<uint64_t>(p + 40, l.heads_offset);
  StoreLE<uint64_t>(p + 48, l.table_offset);
  StoreLE<uint32_t>(p + 56, Crc32c(0, p, 56));
}

Result<Layout> DecodeSuperblock(const std::byte* p, uint64_t region_size) {
  if (LoadLE<uint64_t>(p) != kMagic) return Status::Corruption("not an Erda region (bad magic)");
  if (LoadLE<uint32_t>(p + 56) != Crc32c(0, p, 56)) return Status::Corruption("Erda superblock CRC mismatch");
  if (LoadLE<uint32_t>(p + 8) != kFormat) {
    return Status::Corruption("Erda region format " + std::to_string(LoadLE<uint32_t>(p + 8)) + ", want " +
                              std::to_string(kFormat));
  }
  Layout l;
  l.num_buckets = LoadLE<uint32_t>(p + 12);
  l.num_heads = LoadLE<uint32_t>(p + 16);
  l.num_shards = LoadLE<uint32_t>(p + 20);
  l.segment_bytes = LoadLE<uint64_t>(p + 24);
  l.head_bytes = LoadLE<uint64_t>(p + 32);
  l.heads_offset = LoadLE<uint64_t>(p + 40);
  l.table_offset = LoadLE<uint64_t>(p + 48);
  if (l.num_heads == 0 || l.num_shards == 0 || l.num_buckets < kProbeBuckets || l.segment_bytes == 0 ||
      l.head_bytes < l.segment_bytes || l.head_bytes % l.segment_bytes != 0 || l.head_bytes > kMaxHeadBytes ||
      l.table_offset + BucketTable::Bytes(l.num_buckets) > l.heads_offset ||
      l.heads_offset + l.head_bytes * l.num_heads > region_size) {
    return Status::Corruption("Erda superblock describes an impossible layout");
  }
  return l;
}

}  // namespace

uint32_t Layout::HeadOf(uint64_t key_hash) const { return ShardOfHash(key_hash, num_shards) % num_heads; }

Engine::Engine(pm::PmRegion* region, Layout layout, log::Limits limits)
    : region_(region),
      layout_(layout),
      limits_(limits),
      table_(region, layout.table_offset, layout.num_buckets),
      tails_(layout.num_heads, 1) {}  // unit 0 is never an object

Result<std::unique_ptr<Engine>> Engine::Open(pm::PmRegion* region, const EngineOptions& o) {
  if (o.limits.max_key > kMaxKeyField) {
    return Status::InvalidArgument("Erda keys are at most " + std::to_string(kMaxKeyField) + " bytes; limit " +
                                   std::to_string(o.limits.max_key));
  }
  if (region->size() < kTableOffset) return Status::InvalidArgument("region too small for Erda");
  Layout l;
  if (LoadLE<uint64_t>(region->at(0)) == 0) {
    if (o.num_heads == 0 || o.num_shards == 0 || o.num_buckets < kProbeBuckets || o.segment_bytes < 4096 ||
        o.segment_bytes % IndexWord::kUnit != 0) {
      return Status::InvalidArgument("Erda options: heads, shards > 0, >= 2 buckets, segments >= 4 KiB of 8-byte units");
    }
    l.table_offset = kTableOffset;
    l.num_buckets = o.num_buckets;
    l.num_heads = o.num_heads;
    l.num_shards = o.num_shards;
    l.segment_bytes = o.segment_bytes;
    l.heads_offset = AlignUp(kTableOffset + BucketTable::Bytes(o.num_buckets), 4096);
    if (l.heads_offset >= region->size()) return Status::InvalidArgument("region too small for the bucket table");
    const uint64_t per_head = std::min((region->size() - l.heads_offset) / o.num_heads, kMaxHeadBytes);
    l.head_bytes = per_head / o.segment_bytes * o.segment_bytes;
    if (l.head_bytes == 0) {
      return Status::InvalidArgument("region too small for " + std::to_string(o.num_heads) + " heads of a " +
                                     std::to_string(o.segment_bytes) + "-byte segment");
    }
    // A blank table: the region may be a reused file whose superblock alone was cleared.
    std::memset(region->at(l.table_offset), 0, BucketTable::Bytes(l.num_buckets));
    region->Persist(region->at(l.table_offset), BucketTable::Bytes(l.num_buckets));
    EncodeSuperblock(l, region->at(0));
    region->Persist(region->at(0), kSuperblockBytes);
  } else {
    SLIP_ASSIGN_OR_RETURN(l, DecodeSuperblock(region->at(0), region->size()));
  }
  if (AlignedObjectBytes(o.limits.max_key, o.limits.max_value) > l.segment_bytes) {
    return Status::InvalidArgument("the largest object (" +
                                   std::to_string(ObjectBytes(o.limits.max_key, o.limits.max_value)) +
                                   " bytes) does not fit a " + std::to_string(l.segment_bytes) + "-byte segment");
  }
  std::unique_ptr<Engine> e(new Engine(region, l, o.limits));
  SLIP_RETURN_IF_ERROR(e->Recover());
  return e;
}

std::span<const std::byte> Engine::ObjectAt(uint32_t head, uint32_t units, size_t max_bytes) const {
  const uint64_t in_head = uint64_t{units} * IndexWord::kUnit;
  if (head >= layout_.num_heads || in_head >= layout_.head_bytes) return {};
  // Never past the segment: no object spans one.
  const uint64_t seg_left = layout_.segment_bytes - in_head % layout_.segment_bytes;
  return {region_->at(layout_.ObjectOffset(head, units)), static_cast<size_t>(std::min<uint64_t>(max_bytes, seg_left))};
}

Engine::Found Engine::Examine(std::span<const std::byte> object, std::string_view key, const log::Limits& limits) {
  auto d = DecodeObject(object, limits);
  if (!d.ok()) return {Found::kBad, {}};
  if (d->key != key) return {Found::kOtherKey, {}};
  if (d->type == ObjectType::kDel) return {Found::kDeleted, {}};
  return {Found::kValue, std::string(d->value)};
}

std::optional<size_t> Engine::GoodObject(uint32_t head, uint32_t units, uint64_t fingerprint) const {
  if (units == 0) return std::nullopt;
  auto d = DecodeObject(ObjectAt(head, units, layout_.segment_bytes), limits_);
  if (!d.ok() || Fingerprint(HashKey(d->key)) != fingerprint) return std::nullopt;
  return d->bytes;
}

Status Engine::Recover() {
  // Every claimed entry must name a good object of its key (E5): with flip
  // at commit the new one always was persistent before the word; a bad one
  // means damaged media, and the old version is the fallback. Tails resume
  // past every object an entry still names; the rest of a head is space
  // reserved by writes that were never published.
  table_.ForEach([&](Slot s, uint64_t fp, IndexWord w) {
    if (!w.valid()) {  // claimed, never published (a torn create)
      table_.Release(s);
      ++recovery_.released;
      return;
    }
    ++recovery_.entries;
    const uint32_t head = layout_.HeadOf(fp);  // fp == hash except for the hash 0
    auto extend = [&](uint32_t units, size_t bytes) {
      tails_[head] = std::max<uint32_t>(tails_[head], units + static_cast<uint32_t>(AlignUp(bytes, IndexWord::kUnit) / IndexWord::kUnit));
    };
    auto fresh = GoodObject(head, w.new_offset(), fp);
    auto old = GoodObject(head, w.old_offset(), fp);
    if (old) extend(w.old_offset(), *old);
    if (fresh) {
      extend(w.new_offset(), *fresh);
    } else if (old) {
      table_.Store(s, w.WithNew(w.old_offset()));
      ++recovery_.rolled_back;
    } else {
      table_.Release(s);
      ++recovery_.released;
    }
  });
  return Status::Ok();
}

Engine::Located Engine::Locate(std::string_view key, uint64_t hash) const {
  const uint32_t head = layout_.HeadOf(hash);
  Located out;
  for (Slot s : table_.Find(hash)) {
    const IndexWord w = table_.Load(s);
    if (!w.valid()) continue;
    for (uint32_t units : {w.new_offset(), w.old_offset()}) {
      if (units == 0) break;
      Found f = Examine(ObjectAt(head, units, layout_.segment_bytes), key, limits_);
      if (f.kind == Found::kOtherKey) break;  // another key's entry
      if (f.kind == Found::kBad) {
        out.damaged = true;  // try the old version
        continue;
      }
      out.slot = s;
      out.found = std::move(f);
      return out;
    }
  }
  return out;
}

Result<Reservation> Engine::Reserve(std::string_view key, ObjectType type, size_t value_len) {
  if (key.empty() || key.size() > limits_.max_key) {
    return Status::InvalidArgument("key length " + std::to_string(key.size()) + " not in 1.." +
                                   std::to_string(limits_.max_key));
  }
  if (type == ObjectType::kDel) value_len = 0;
  if (value_len > limits_.max_value) {
    return Status::TooLarge("value of " + std::to_string(value_len) + " bytes exceeds " +
                            std::to_string(limits_.max_value));
  }
  const uint64_t aligned = AlignedObjectBytes(key.size(), value_len);
  {
    std::lock_guard lock(pending_mu_);
    if (!pending_.emplace(key).second) {
      ++busy_;
      return Status::Busy("a write of this key is pending");
    }
  }
  const uint64_t hash = HashKey(key);
  const uint32_t head = layout_.HeadOf(hash);
  uint64_t at = uint64_t{tails_[head]} * IndexWord::kUnit;
  if (at % layout_.segment_bytes + aligned > layout_.segment_bytes) {
    at = AlignUp(at + 1, layout_.segment_bytes);  // no object spans a segment
  }
  if (at + aligned > layout_.head_bytes) {
    std::lock_guard lock(pending_mu_);
    pending_.erase(std::string(key));
    return Status::NoSpace("Erda head " + std::to_string(head) + " is full");
  }
  tails_[head] = static_cast<uint32_t>((at + aligned) / IndexWord::kUnit);
  ++reserves_;
  return Reservation{head, static_cast<uint32_t>(at / IndexWord::kUnit),
                     static_cast<uint32_t>(ObjectBytes(key.size(), value_len)), type, std::string(key)};
}

Result<ObjectView> Engine::Check(const Reservation& r) {
  std::span<const std::byte> bytes = ObjectAt(r.head, r.units, r.bytes);
  auto d = DecodeObject(bytes, limits_);
  Status s;
  if (!d.ok()) {
    s = Status::Corruption("the object for " + std::to_string(r.bytes) + " reserved bytes is not (all) there: " +
                           d.status().message());
  } else if (d->bytes != r.bytes || d->key != r.key || d->type != r.type) {
    s = Status::Corruption("the object written is not the one reserved");
  }
  if (!s.ok()) {
    ++refused_;
    return s;
  }
  region_->Persist(bytes.data(), r.bytes);
  object_bytes_ += r.bytes;
  return *d;
}

Status Engine::Publish(const Reservation& r) {
  const uint64_t hash = HashKey(r.key);
  Status result;
  if (auto s = Locate(r.key, hash).slot) {
    table_.Store(*s, table_.Load(*s).Updated(r.units));
    index_bytes_ += 4;  // the flip bit and one 31-bit field
  } else if (auto claimed = table_.Claim(hash); claimed.ok()) {
    table_.Store(*claimed, IndexWord::Create(r.units));
    index_bytes_ += 2 * sizeof(uint64_t);
  } else {
    result = claimed.status();
  }
  {
    std::lock_guard lock(pending_mu_);
    pending_.erase(r.key);
  }
  if (result.ok()) ++publishes_;
  return result;
}

void Engine::Abort(const Reservation& r) {
  std::lock_guard lock(pending_mu_);
  if (pending_.erase(r.key)) ++aborts_;
}

Status Engine::Put(std::string_view key, std::string_view value) {
  SLIP_ASSIGN_OR_RETURN(Reservation r, Reserve(key, ObjectType::kPut, value.size()));
  EncodeObject(r.type, key, value, region_->at(layout_.ObjectOffset(r.head, r.units)));
  if (auto c = Check(r); !c.ok()) {
    Abort(r);
    return c.status();
  }
  return Publish(r);
}

Status Engine::Delete(std::string_view key) {
  SLIP_RETURN_IF_ERROR(Get(key).status());
  SLIP_ASSIGN_OR_RETURN(Reservation r, Reserve(key, ObjectType::kDel, 0));
  EncodeObject(r.type, key, {}, region_->at(layout_.ObjectOffset(r.head, r.units)));
  if (auto c = Check(r); !c.ok()) {
    Abort(r);
    return c.status();
  }
  return Publish(r);
}

Result<std::string> Engine::Get(std::string_view key) const {
  Located l = Locate(key, HashKey(key));
  if (l.slot && l.found.kind == Found::kValue) return std::move(l.found.value);
  if (l.slot) return Status::NotFound("deleted");
  if (l.damaged) return Status::Corruption("every stored version of the key fails its check");
  return Status::NotFound("no such key");
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.reserves = reserves_.load();
  s.publishes = publishes_.load();
  s.aborts = aborts_.load();
  s.refused_checks = refused_.load();
  s.busy = busy_.load();
  s.object_bytes = object_bytes_.load();
  s.index_bytes = index_bytes_.load();
  return s;
}

}  // namespace slip::erda
