// ErdaMirror: the erda design's one-sidedly readable index — a bucket table
// of 8-byte index words (erda/bucket_table.h) that mirrors which entry the
// node's store holds for every key (docs/papers/erda.md §6.3).
//
// The store's index stays the truth; the mirror is derived, kept in DRAM and
// rebuilt at start, never persisted. The store calls Changed() after every
// change of a key's entry (StoreOptions::on_index_change: commits, backup
// applies, digests, the cleaner's moves and drops), from whichever thread
// made it. Changed() looks the key up again and writes what the index says
// *now*, under a lock per bucket stripe, so racing calls for one key end
// with the newest state whatever their order; a word therefore never names
// an entry older than one the index held before the call.
//
// A word's new offset is the entry's region offset in 8-byte units; an
// update moves the former new offset into the old slot (one flip), which a
// reader tries when the new one does not check out. A key that cannot get an
// entry (its window is full, or another live key has its 64-bit
// fingerprint) is left out and its window marked: readers then ask the
// server instead of concluding "absent".
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

#include "common/status.h"
#include "erda/bucket_table.h"
#include "pm/region.h"
#include "store/store.h"

namespace slip::server {

class ErdaMirror {
 public:
  // Buckets for a store region of `region_bytes`: one 16-byte entry per
  // 256 bytes of it (a window then overflows only at very small entries).
  static uint32_t DefaultBuckets(uint64_t region_bytes);

  // InvalidArgument when the region is too large for 31-bit word offsets.
  static Result<std::unique_ptr<ErdaMirror>> Create(const store::Store* store, uint32_t num_buckets);

  // Fills every word from the store's index (after Store::Open, before the
  // store's on_index_change reaches Changed).
  void Rebuild();
  // The store's entry for `key` changed: make its word say so.
  void Changed(uint64_t hash, std::string_view key);

  // The table's bytes, to register for remote reads.
  std::byte* table_base() const { return region_->at(0); }
  size_t table_bytes() const { return erda::BucketTable::Bytes(table_.num_buckets()); }
  uint32_t num_buckets() const { return table_.num_buckets(); }

  struct Stats {
    uint64_t updates = 0, created = 0, released = 0, overflowed = 0;
  };
  Stats stats() const;

 private:
  ErdaMirror(const store::Store* store, std::unique_ptr<pm::PmRegion> region, uint32_t num_buckets);
  // The key of the entry at region offset `offset` if a valid block of a
  // PUT or DEL starts there.
  std::optional<std::string_view> KeyAt(uint64_t offset) const;
  std::mutex& StripeOf(uint64_t hash);

  const store::Store* store_;
  std::unique_ptr<pm::PmRegion> region_;
  erda::BucketTable table_;
  // A window spans two buckets, so stripes go by home bucket and a
  // neighbour's claim may race in the other bucket: claims are CAS.
  std::array<std::mutex, 64> stripes_;
  mutable std::mutex stats_mu_;
  Stats stats_;
};

}  // namespace slip::server
