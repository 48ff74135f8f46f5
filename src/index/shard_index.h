// ShardIndex: the DRAM hash index of one shard (docs/papers/rowan.md §3.1).
//
// Slots are 64-bit words: a 16-bit tag from the key hash and the 48-bit PM
// offset of the entry that currently wins for the key (a PUT, or a DEL
// tombstone: keeping tombstones indexed is what makes updates order-
// independent). Versions and full keys live in PM; the index reads them
// through an EntryReader, so a slot stays one word.
//
// Order independence (invariant I12): Upsert replaces the slot only if the
// new entry's version is greater than the indexed one's, so applying any set
// of entries in any order yields the same index as applying them in version
// order. This is what lets the cold-start scan and (later) backup digest
// apply entries as they find them.
//
// Entry counts: beside each slot the index keeps how many log entries of the
// key (live or dead, in any non-free segment) exist. The store adds one per
// appended or copied entry and removes one per entry in a segment it frees; a
// slot whose count drops to zero is removed. A tombstone may be dropped by the
// cleaner only when it is the key's last entry (count == 1): then no older
// version can resurface at recovery. See docs/design-notes.md "Tombstones".
//
// Thread-safety: all methods are safe to call concurrently; a shared mutex
// per index (readers shared, mutations exclusive). One index per shard keeps
// contention low; lock-free slots can replace it if a profile asks.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <shared_mutex>
#include <string_view>
#include <vector>

namespace slip::index {

constexpr uint64_t kOffsetBits = 48;
constexpr uint64_t kOffsetMask = (uint64_t{1} << kOffsetBits) - 1;

// What the index needs to know about the entry at a PM offset.
struct EntryInfo {
  std::string_view key;  // valid until the entry's segment is freed
  uint64_t version = 0;
};

class EntryReader {
 public:
  virtual ~EntryReader() = default;
  // REQUIRES: `offset` was given to the index and its segment is not freed.
  virtual EntryInfo Read(uint64_t offset) const = 0;
};

class ShardIndex {
 public:
  explicit ShardIndex(const EntryReader* reader, size_t initial_capacity = 1024);

  // Offset of the winning entry for `key`, if any.
  std::optional<uint64_t> Lookup(uint64_t hash, std::string_view key) const;

  struct UpsertResult {
    bool applied = false;                 // the new entry now wins
    std::optional<uint64_t> displaced;    // the entry it replaced (now dead)
  };
  // A new entry (PUT or DEL) of `key` with `version` was written at `offset`.
  // Counts it, and makes it the winner if its version is greater.
  UpsertResult Upsert(uint64_t hash, std::string_view key, uint64_t version, uint64_t offset);

  // The cleaner copied the entry at `from` to `to`. Counts the copy; moves the
  // slot only if it still points at `from`. Returns whether it moved.
  bool Relocate(uint64_t hash, std::string_view key, uint64_t from, uint64_t to);

  // An entry of `key` was destroyed (its segment is being freed). Removes the
  // slot when no entry is left. Returns the remaining count.
  uint32_t Release(uint64_t hash, std::string_view key);

  // Entries of `key` that exist in the log (0 if unknown).
  uint32_t EntryCount(uint64_t hash, std::string_view key) const;

  size_t size() const;  // keys indexed
  // Empties the index (entry counts too) and returns the offsets it held:
  // the shard left this node (Store::DropShard).
  std::vector<uint64_t> TakeAll();
  // Visits every (offset) slot; for recovery bookkeeping and tests.
  void ForEach(const std::function<void(uint64_t offset)>& fn) const;

 private:
  // Bits 32..47: shards own ranges of the hash, so its top bits are nearly
  // constant within a shard; the bucket uses the low bits. Never 0 (= empty).
  static uint64_t Tag(uint64_t hash) { return ((hash >> 32) & 0xFFFF) | 1; }
  static uint64_t Pack(uint64_t tag, uint64_t offset) { return tag << kOffsetBits | offset; }
  static uint64_t OffsetOf(uint64_t slot) { return slot & kOffsetMask; }
  // Slot index holding `key`, or the empty slot where it would go.
  size_t Find(uint64_t hash, std::string_view key, bool* found) const;
  void Grow();
  void EraseAt(size_t i);
  uint64_t HashOfSlot(uint64_t slot) const;

  const EntryReader* reader_;
  mutable std::shared_mutex mu_;
  std::vector<uint64_t> slots_;   // capacity is a power of two
  std::vector<uint32_t> counts_;  // parallel to slots_
  size_t used_ = 0;
};

}  // namespace slip::index
