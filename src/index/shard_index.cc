#include "index/shard_index.h"

#include <cassert>
#include <mutex>

#include "common/hash.h"

namespace slip::index {

ShardIndex::ShardIndex(const EntryReader* reader, size_t initial_capacity) : reader_(reader) {
  size_t cap = 16;
  while (cap < initial_capacity) cap <<= 1;
  slots_.assign(cap, 0);
  counts_.assign(cap, 0);
}

size_t ShardIndex::Find(uint64_t hash, std::string_view key, bool* found) const {
  const size_t mask = slots_.size() - 1;
  const uint64_t tag = Tag(hash);
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    uint64_t s = slots_[i];
    if (s == 0) {
      *found = false;
      return i;
    }
    if ((s >> kOffsetBits) == tag && reader_->Read(OffsetOf(s)).key == key) {
      *found = true;
      return i;
    }
  }
}

uint64_t ShardIndex::HashOfSlot(uint64_t slot) const {
  return HashKey(reader_->Read(OffsetOf(slot)).key);
}

std::optional<uint64_t> ShardIndex::Lookup(uint64_t hash, std::string_view key) const {
  std::shared_lock lock(mu_);
  bool found;
  size_t i = Find(hash, key, &found);
  if (!found) return std::nullopt;
  return OffsetOf(slots_[i]);
}

ShardIndex::UpsertResult ShardIndex::Upsert(uint64_t hash, std::string_view key, uint64_t version,
                                            uint64_t offset) {
  assert(offset != 0 && offset <= kOffsetMask);
  std::unique_lock lock(mu_);
  if ((used_ + 1) * 10 > slots_.size() * 7) Grow();
  bool found;
  size_t i = Find(hash, key, &found);
  UpsertResult r;
  if (!found) {
    slots_[i] = Pack(Tag(hash), offset);
    counts_[i] = 1;
    ++used_;
    r.applied = true;
    return r;
  }
  ++counts_[i];
  uint64_t cur = OffsetOf(slots_[i]);
  if (version > reader_->Read(cur).version) {
    slots_[i] = Pack(Tag(hash), offset);
    r.applied = true;
    r.displaced = cur;
  }
  return r;
}

bool ShardIndex::Relocate(uint64_t hash, std::string_view key, uint64_t from, uint64_t to) {
  std::unique_lock lock(mu_);
  bool found;
  size_t i = Find(hash, key, &found);
  if (!found) return false;  // cannot happen while `from` exists; be safe
  ++counts_[i];
  if (OffsetOf(slots_[i]) != from) return false;
  slots_[i] = Pack(Tag(hash), to);
  return true;
}

uint32_t ShardIndex::Release(uint64_t hash, std::string_view key) {
  std::unique_lock lock(mu_);
  bool found;
  size_t i = Find(hash, key, &found);
  if (!found) return 0;
  assert(counts_[i] > 0);
  if (--counts_[i] > 0) return counts_[i];
  EraseAt(i);
  return 0;
}

uint32_t ShardIndex::EntryCount(uint64_t hash, std::string_view key) const {
  std::shared_lock lock(mu_);
  bool found;
  size_t i = Find(hash, key, &found);
  return found ? counts_[i] : 0;
}

// Linear-probing deletion without tombstones (Knuth 6.4 Algorithm R): pull
// later members of the probe run back into the hole.
void ShardIndex::EraseAt(size_t i) {
  const size_t mask = slots_.size() - 1;
  slots_[i] = 0;
  counts_[i] = 0;
  --used_;
  for (size_t j = (i + 1) & mask; slots_[j] != 0; j = (j + 1) & mask) {
    size_t home = HashOfSlot(slots_[j]) & mask;
    // Move j into the hole at i if its home is not cyclically in (i, j].
    bool stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      slots_[i] = slots_[j];
      counts_[i] = counts_[j];
      slots_[j] = 0;
      counts_[j] = 0;
      i = j;
    }
  }
}

void ShardIndex::Grow() {
  std::vector<uint64_t> old_slots = std::move(slots_);
  std::vector<uint32_t> old_counts = std::move(counts_);
  slots_.assign(old_slots.size() * 2, 0);
  counts_.assign(old_slots.size() * 2, 0);
  const size_t mask = slots_.size() - 1;
  for (size_t k = 0; k < old_slots.size(); ++k) {
    if (old_slots[k] == 0) continue;
    size_t i = HashOfSlot(old_slots[k]) & mask;
    while (slots_[i] != 0) i = (i + 1) & mask;
    slots_[i] = old_slots[k];
    counts_[i] = old_counts[k];
  }
}

size_t ShardIndex::size() const {
  std::shared_lock lock(mu_);
  return used_;
}

std::vector<uint64_t> ShardIndex::TakeAll() {
  std::unique_lock lock(mu_);
  std::vector<uint64_t> held;
  held.reserve(used_);
  for (uint64_t s : slots_) {
    if (s != 0) held.push_back(OffsetOf(s));
  }
  slots_.assign(16, 0);
  counts_.assign(16, 0);
  used_ = 0;
  return held;
}

void ShardIndex::ForEach(const std::function<void(uint64_t)>& fn) const {
  std::shared_lock lock(mu_);
  for (uint64_t s : slots_) {
    if (s != 0) fn(OffsetOf(s));
  }
}

}  // namespace slip::index
