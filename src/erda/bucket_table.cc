#include "erda/bucket_table.h"

#include <atomic>
#include <cassert>

#include "common/coding.h"

namespace slip::erda {
namespace {

uint64_t AtomicLoad(const uint64_t* p) {
  return std::atomic_ref<const uint64_t>(*p).load(std::memory_order_acquire);
}

}  // namespace

BucketTable::BucketTable(pm::PmRegion* region, uint64_t offset, uint32_t num_buckets)
    : region_(region), offset_(offset), num_buckets_(num_buckets) {
  assert(num_buckets_ >= kProbeBuckets);
  assert(offset_ % kBucketBytes == 0);
}

uint32_t BucketTable::HomeBucketOf(uint64_t key_hash, uint32_t num_buckets) {
  // High bits: the fingerprint is the whole hash, but bucket choice and
  // fingerprint should not share their low bits' patterns.
  return static_cast<uint32_t>((key_hash >> 20) % (num_buckets - kProbeBuckets + 1));
}

uint64_t* BucketTable::FingerprintAt(Slot s) const {
  return reinterpret_cast<uint64_t*>(region_->at(offset_ + uint64_t{s} * kEntryBytes));
}
uint64_t* BucketTable::WordAt(Slot s) const { return FingerprintAt(s) + 1; }

std::vector<Slot> BucketTable::Find(uint64_t key_hash) const {
  const uint64_t fp = Fingerprint(key_hash);
  const Slot first = HomeBucket(key_hash) * static_cast<Slot>(kEntriesPerBucket);
  std::vector<Slot> out;
  for (Slot s = first; s < first + kProbeBuckets * kEntriesPerBucket; ++s) {
    if (AtomicLoad(FingerprintAt(s)) == fp) out.push_back(s);
  }
  return out;
}

Result<Slot> BucketTable::Claim(uint64_t key_hash, bool keep_one) {
  const uint64_t fp = Fingerprint(key_hash);
  const Slot first = HomeBucket(key_hash) * static_cast<Slot>(kEntriesPerBucket);
  const Slot end = first + kProbeBuckets * kEntriesPerBucket;
  if (keep_one) {
    int empty = 0;
    for (Slot s = first; s < end; ++s) empty += AtomicLoad(FingerprintAt(s)) == 0 ? 1 : 0;
    if (empty < 2) return Status::NoSpace("the key's probe window keeps its last entry for the overflow mark");
  }
  for (Slot s = first; s < end; ++s) {
    uint64_t expected = 0;
    if (std::atomic_ref<uint64_t>(*FingerprintAt(s)).compare_exchange_strong(expected, fp, std::memory_order_acq_rel)) {
      region_->Persist(FingerprintAt(s), sizeof(uint64_t));
      return s;
    }
  }
  return Status::NoSpace("the key's probe window (" + std::to_string(kProbeBuckets * kEntriesPerBucket) +
                         " entries) is full");
}

void BucketTable::MarkOverflow(uint64_t key_hash) {
  const Slot first = HomeBucket(key_hash) * static_cast<Slot>(kEntriesPerBucket);
  const Slot end = first + kProbeBuckets * kEntriesPerBucket;
  for (Slot s = first; s < end; ++s) {
    if (AtomicLoad(FingerprintAt(s)) == kOverflowMark) return;
  }
  for (Slot s = first; s < end; ++s) {
    uint64_t expected = 0;
    if (std::atomic_ref<uint64_t>(*FingerprintAt(s)).compare_exchange_strong(expected, kOverflowMark,
                                                                              std::memory_order_acq_rel)) {
      region_->Persist(FingerprintAt(s), sizeof(uint64_t));
      return;
    }
  }
}

bool BucketTable::OverflowIn(std::span<const std::byte> window) {
  for (size_t off = 0; off + kEntryBytes <= window.size(); off += kEntryBytes) {
    if (LoadLE<uint64_t>(window.data() + off) == kOverflowMark) return true;
  }
  return false;
}

void BucketTable::Release(Slot slot) {
  std::atomic_ref<uint64_t>(*WordAt(slot)).store(0, std::memory_order_release);
  region_->Persist(WordAt(slot), sizeof(uint64_t));
  std::atomic_ref<uint64_t>(*FingerprintAt(slot)).store(0, std::memory_order_release);
  region_->Persist(FingerprintAt(slot), sizeof(uint64_t));
}

IndexWord BucketTable::Load(Slot slot) const { return IndexWord(AtomicLoad(WordAt(slot))); }

void BucketTable::Store(Slot slot, IndexWord w) {
  std::atomic_ref<uint64_t>(*WordAt(slot)).store(w.raw(), std::memory_order_release);
  region_->Persist(WordAt(slot), sizeof(uint64_t));
}

uint64_t BucketTable::fingerprint(Slot slot) const { return AtomicLoad(FingerprintAt(slot)); }

std::vector<IndexWord> BucketTable::WordsIn(std::span<const std::byte> window, uint64_t key_hash) {
  const uint64_t fp = Fingerprint(key_hash);
  std::vector<IndexWord> out;
  for (size_t off = 0; off + kEntryBytes <= window.size(); off += kEntryBytes) {
    if (LoadLE<uint64_t>(window.data() + off) != fp) continue;
    const IndexWord w(LoadLE<uint64_t>(window.data() + off + 8));
    if (w.valid()) out.push_back(w);
  }
  return out;
}

void BucketTable::ForEach(const std::function<void(Slot, uint64_t, IndexWord)>& fn) const {
  const Slot n = num_buckets_ * static_cast<Slot>(kEntriesPerBucket);
  for (Slot s = 0; s < n; ++s) {
    const uint64_t fp = AtomicLoad(FingerprintAt(s));
    if (fp != 0) fn(s, fp, Load(s));
  }
}

}  // namespace slip::erda
