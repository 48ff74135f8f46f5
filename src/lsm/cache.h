// BlockCache: verified SST data blocks kept in memory, so a hot key's
// lookup reads no file and checks no CRC again. Keyed by (file number,
// block offset) and by nothing else: RubbleDB ships SSTs into reusable
// slots of a pre-allocated image, so a path or a slot names different
// tables over time while the file number names one. A deleted file's
// blocks are dropped with EraseFile before its number could matter again.
//
// Sharded 16 ways, each shard an LRU under its own mutex, so readers on
// different blocks rarely contend. Blocks are immutable and shared: a
// reader holding one keeps it alive after it is evicted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace slip::lsm {

class BlockCache {
 public:
  // `capacity` bytes of charge in all, split evenly among 2^shard_bits
  // shards (so LRU order is per shard). 0 caches nothing.
  explicit BlockCache(size_t capacity, int shard_bits = 4);
  ~BlockCache();
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // The block, now the most recently used of its shard; null when absent.
  std::shared_ptr<const std::string> Lookup(uint64_t file, uint64_t offset);
  // Replaces any block at (file, offset), then evicts least recently used
  // blocks until the shard is within its capacity. A block charged more
  // than a shard holds is not kept.
  void Insert(uint64_t file, uint64_t offset, std::shared_ptr<const std::string> block, size_t charge);
  // Drops every block of `file` (deleted, or its number about to be reused).
  void EraseFile(uint64_t file);

  size_t capacity() const { return capacity_; }
  // The charge of the blocks held.
  size_t usage() const;
  // Lookups that found / did not find their block.
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct Shard;
  Shard& ShardOf(uint64_t file, uint64_t offset) const;

  const size_t capacity_;
  const int shard_bits_;
  // Counters live in the shards, under their locks: one shared atomic
  // would be a cache line every reader writes.
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace slip::lsm
