// MemTable: the LSM engine's writes not yet in an SST, ordered by internal
// key (newest version of a key first), in a lock-free skiplist over an
// arena (lsm/skiplist.h). The engine's readers — Get, scans, a flush of a
// sealed MemTable — run beside its writer without taking its mutex, so the
// structure must let one writer add while readers walk it; a skiplist that
// only ever links complete nodes in does, and the arena makes each Add one
// copy of the entry instead of node and string allocations. (The chain's
// head seals MemTables at operation counts it chooses — issue "RubbleDB" —
// so they are whole values here, not a stream.)
//
// Each entry is one record in the arena, which the skiplist's node points
// to: varint32 internal-key length · internal key · varint32 value length ·
// value.
//
// Concurrency contract:
//  - Add needs external synchronisation (the engine's mutex): one at a time.
//  - Get, ForEach, Iterator and the accessors need no lock and may run
//    concurrently with one Add. A reader sees each entry either not yet or
//    whole; an iterator may or may not see entries added after it was
//    positioned. The counters (entries, sequences, bytes) may lag the list
//    by the Add in flight.
//  - Views returned (Found::value, Iterator::key/value, ForEach's
//    arguments) point into the arena and stay valid as long as the MemTable
//    lives, across later Adds.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "lsm/arena.h"
#include "lsm/format.h"
#include "lsm/skiplist.h"

namespace slip::lsm {

class MemTable {
  // A search target: an internal key in its parts, so a lookup builds
  // nothing (no encoded record, no string).
  struct Target {
    std::string_view user_key;
    uint64_t trailer;  // (sequence << 8) | type
  };
  // Orders records by their internal keys (CompareInternalKeys), and a
  // record against a Target.
  struct RecordOrder {
    int operator()(const char* a, const char* b) const;
    int operator()(const char* record, const Target& target) const;
  };
  using List = SkipList<const char*, RecordOrder>;

 public:
  static constexpr uint64_t kDefaultSeed = List::kDefaultSeed;

  // `seed` fixes the skiplist's shape (tests replay it exactly).
  explicit MemTable(uint64_t seed = kDefaultSeed) : list_(RecordOrder{}, &arena_, seed) {}
  // Entries point into the arena and the list into itself: not copyable or
  // movable; hold it by pointer to hand it around.
  MemTable(const MemTable&) = delete;
  MemTable& operator=(const MemTable&) = delete;

  // REQUIRES: `sequence` not used before in this MemTable; no concurrent Add.
  void Add(uint64_t sequence, ValueType type, std::string_view user_key, std::string_view value);

  struct Found {
    uint64_t sequence = 0;
    ValueType type = ValueType::kValue;
    std::string_view value;  // valid while the MemTable lives
  };
  // The newest version of `user_key` at or before `snapshot`.
  std::optional<Found> Get(std::string_view user_key, uint64_t snapshot = kMaxSequence) const;

  // Every entry in internal-key order (what a flush writes).
  void ForEach(const std::function<void(std::string_view internal_key, std::string_view value)>& fn) const;

  size_t entries() const { return entries_.load(std::memory_order_relaxed); }
  // The arena's memory (records, nodes, unused block tails): when to seal it.
  size_t ApproximateBytes() const { return arena_.MemoryUsage(); }
  uint64_t smallest_sequence() const { return smallest_.load(std::memory_order_relaxed); }
  uint64_t largest_sequence() const { return largest_.load(std::memory_order_relaxed); }

  // A cursor over the entries in internal-key order, for scans and flushes.
  // Unpositioned (!Valid()) until a Seek*. The MemTable must outlive it.
  class Iterator {
   public:
    explicit Iterator(const MemTable* mem) : it_(&mem->list_) {}
    explicit Iterator(const MemTable& mem) : Iterator(&mem) {}

    bool Valid() const { return it_.Valid(); }
    // REQUIRES: Valid() for key, value, Next, Prev.
    std::string_view key() const;  // the internal key
    std::string_view value() const;
    void Next() { it_.Next(); }
    void Prev() { it_.Prev(); }  // O(log n): the list links forwards only
    void SeekToFirst() { it_.SeekToFirst(); }
    void SeekToLast() { it_.SeekToLast(); }
    // The first entry at or after `internal_key` in internal-key order.
    // REQUIRES: internal_key at least 8 bytes (it has a trailer).
    void Seek(std::string_view internal_key);

   private:
    List::Iterator it_;
  };

 private:
  Arena arena_;
  List list_;  // after arena_: built on it
  std::atomic<size_t> entries_{0};
  std::atomic<uint64_t> smallest_{kMaxSequence}, largest_{0};
};

}  // namespace slip::lsm
