#include "lsm/cache.h"

#include <mutex>
#include <unordered_map>

#include "common/intrusive_list.h"

namespace slip::lsm {
namespace {

uint64_t HashBlock(uint64_t file, uint64_t offset) {
  // murmur3's fmix64: every input bit reaches the top bits (the shard) and
  // the low ones (the bucket).
  uint64_t h = file * 0x9E3779B97F4A7C15ull + offset;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

}  // namespace

struct BlockCache::Shard {
  struct Key {
    uint64_t file = 0, offset = 0;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return HashBlock(k.file, k.offset); }
  };
  struct Entry {
    Key key;
    std::shared_ptr<const std::string> block;
    size_t charge = 0;
    ListLink<Entry> lru, of_file;
  };
  using Map = std::unordered_map<Key, Entry, KeyHash>;  // nodes do not move: the lists thread through them

  void Remove(Map::iterator it) {
    Entry& e = it->second;
    lru.Remove(&e);
    auto f = files.find(e.key.file);
    f->second.Remove(&e);
    if (f->second.empty()) files.erase(f);
    usage -= e.charge;
    entries.erase(it);
  }

  std::mutex mu;
  size_t capacity = 0, usage = 0;
  uint64_t hits = 0, misses = 0;
  Map entries;
  IntrusiveList<Entry, &Entry::lru> lru;  // least recently used first
  // Each file's blocks, so EraseFile visits only them.
  std::unordered_map<uint64_t, IntrusiveList<Entry, &Entry::of_file>> files;
};

BlockCache::BlockCache(size_t capacity, int shard_bits)
    : capacity_(capacity), shard_bits_(shard_bits), shards_(new Shard[size_t{1} << shard_bits]) {
  const size_t n = size_t{1} << shard_bits;
  // Split exactly: the shards' capacities sum to `capacity`.
  for (size_t i = 0; i < n; ++i) shards_[i].capacity = capacity / n + (i < capacity % n ? 1 : 0);
}

BlockCache::~BlockCache() = default;

BlockCache::Shard& BlockCache::ShardOf(uint64_t file, uint64_t offset) const {
  return shards_[shard_bits_ == 0 ? 0 : HashBlock(file, offset) >> (64 - shard_bits_)];
}

std::shared_ptr<const std::string> BlockCache::Lookup(uint64_t file, uint64_t offset) {
  Shard& s = ShardOf(file, offset);
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(Shard::Key{file, offset});
  if (it == s.entries.end()) {
    ++s.misses;
    return nullptr;
  }
  ++s.hits;
  s.lru.Remove(&it->second);
  s.lru.PushBack(&it->second);
  return it->second.block;
}

void BlockCache::Insert(uint64_t file, uint64_t offset, std::shared_ptr<const std::string> block, size_t charge) {
  Shard& s = ShardOf(file, offset);
  const Shard::Key key{file, offset};
  std::lock_guard lock(s.mu);
  if (auto it = s.entries.find(key); it != s.entries.end()) s.Remove(it);
  if (s.capacity == 0 || charge > s.capacity) return;
  Shard::Entry& e = s.entries.try_emplace(key).first->second;
  e.key = key;
  e.block = std::move(block);
  e.charge = charge;
  s.lru.PushBack(&e);
  s.files[file].PushBack(&e);
  s.usage += charge;
  // It fits alone, so this stops before reaching it.
  while (s.usage > s.capacity) s.Remove(s.entries.find(s.lru.front()->key));
}

void BlockCache::EraseFile(uint64_t file) {
  const size_t n = size_t{1} << shard_bits_;
  for (size_t i = 0; i < n; ++i) {
    Shard& s = shards_[i];
    std::lock_guard lock(s.mu);
    auto f = s.files.find(file);
    if (f == s.files.end()) continue;
    for (Shard::Entry* e = f->second.front(); e != nullptr;) {
      Shard::Entry* next = f->second.Next(e);
      s.lru.Remove(e);
      s.usage -= e->charge;
      s.entries.erase(e->key);
      e = next;
    }
    s.files.erase(f);
  }
}

size_t BlockCache::usage() const {
  size_t total = 0;
  for (size_t i = 0; i < (size_t{1} << shard_bits_); ++i) {
    std::lock_guard lock(shards_[i].mu);
    total += shards_[i].usage;
  }
  return total;
}

uint64_t BlockCache::hits() const {
  uint64_t total = 0;
  for (size_t i = 0; i < (size_t{1} << shard_bits_); ++i) {
    std::lock_guard lock(shards_[i].mu);
    total += shards_[i].hits;
  }
  return total;
}

uint64_t BlockCache::misses() const {
  uint64_t total = 0;
  for (size_t i = 0; i < (size_t{1} << shard_bits_); ++i) {
    std::lock_guard lock(shards_[i].mu);
    total += shards_[i].misses;
  }
  return total;
}

}  // namespace slip::lsm
