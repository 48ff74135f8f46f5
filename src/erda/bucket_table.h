// Erda's hash table, laid out so a client can read it one-sidedly
// (docs/papers/erda.md §6.3; byte layout in docs/formats/erda.md).
//
// A bucket is one 64-byte line of four 16-byte entries {fingerprint, index
// word}. A key lives in one of the entries of its probe window — its home
// bucket and the next — so one 128-byte READ fetches every place it can be.
// The table holds a 64-bit fingerprint of the key, not the key (keys are
// variable-length): a reader checks the key inside the object, which also
// settles two keys with one fingerprint (each gets its own entry; the
// reader tries both).
//
// Concurrency: entries are claimed with a compare-and-swap on the
// fingerprint (several workers may insert into one bucket), words are read
// and written as single atomic 8-byte accesses — a one-sided reader sees a
// word whole, old or new. The table lives in memory someone else owns (a PM
// region registered with the fabric) and persists through that region.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"
#include "erda/index_word.h"
#include "pm/region.h"

namespace slip::erda {

constexpr size_t kBucketBytes = 64;
constexpr size_t kEntryBytes = 16;
constexpr size_t kEntriesPerBucket = kBucketBytes / kEntryBytes;
constexpr size_t kProbeBuckets = 2;
constexpr size_t kWindowBytes = kProbeBuckets * kBucketBytes;

// An entry whose fingerprint is kOverflowMark holds no key: it says some key
// of this window has no entry (the window was full, or two keys share a
// fingerprint), so a reader that finds nothing must ask the server.
constexpr uint64_t kOverflowMark = 1;
// Never 0 (an empty entry) nor kOverflowMark.
constexpr uint64_t Fingerprint(uint64_t key_hash) { return key_hash <= kOverflowMark ? 2 : key_hash; }

// An entry, by its index in the table (bucket * kEntriesPerBucket + i).
using Slot = uint32_t;

class BucketTable {
 public:
  static size_t Bytes(uint32_t num_buckets) { return size_t{num_buckets} * kBucketBytes; }

  // The table over region bytes [offset, offset + Bytes(num_buckets)),
  // 64-byte aligned. REQUIRES: num_buckets >= kProbeBuckets.
  BucketTable(pm::PmRegion* region, uint64_t offset, uint32_t num_buckets);

  uint32_t num_buckets() const { return num_buckets_; }
  // The first bucket of the key's probe window; the window is contiguous
  // (it never wraps), so its bytes start at WindowOffset.
  uint32_t HomeBucket(uint64_t key_hash) const { return HomeBucketOf(key_hash, num_buckets_); }
  static uint32_t HomeBucketOf(uint64_t key_hash, uint32_t num_buckets);
  uint64_t WindowOffset(uint64_t key_hash) const { return offset_ + uint64_t{HomeBucket(key_hash)} * kBucketBytes; }

  // Entries of the window that hold `fingerprint`, in window order.
  std::vector<Slot> Find(uint64_t key_hash) const;
  // Claims an empty entry of the window for `fingerprint` (its word stays 0:
  // absent until published). NoSpace when the window is full.
  // With `keep_one`, the window's last empty entry is not taken (it is
  // left for MarkOverflow).
  Result<Slot> Claim(uint64_t key_hash, bool keep_one = false);
  // Puts the overflow mark into the key's window (once; needs an empty entry).
  void MarkOverflow(uint64_t key_hash);
  // Gives an entry back (its word must be 0 or no longer needed): the
  // fingerprint is cleared after the word, persistently.
  void Release(Slot slot);

  IndexWord Load(Slot slot) const;
  // One atomic 8-byte store, then persisted: the publication point of a write.
  void Store(Slot slot, IndexWord w);
  uint64_t fingerprint(Slot slot) const;

  // Client side: the words of `window` (kWindowBytes read from WindowOffset)
  // whose fingerprint matches, in window order. Pure: no table needed.
  static std::vector<IndexWord> WordsIn(std::span<const std::byte> window, uint64_t key_hash);
  // Whether `window` holds the overflow mark.
  static bool OverflowIn(std::span<const std::byte> window);

  // Every claimed entry (recovery, cleaning).
  void ForEach(const std::function<void(Slot, uint64_t fingerprint, IndexWord)>& fn) const;

 private:
  uint64_t* FingerprintAt(Slot s) const;
  uint64_t* WordAt(Slot s) const;

  pm::PmRegion* region_;
  uint64_t offset_;
  uint32_t num_buckets_;
};

}  // namespace slip::erda
