// Erda's server side on one node (docs/papers/erda.md §6): a PM region
// holding a bucket table that clients read one-sidedly and one log region
// per head into which clients write objects one-sidedly.
//
// A write is RESERVE (this engine hands out the space; at most one write per
// key is pending — the paper's gap G1), the client's one-sided write of the
// object, then Check (the landed object: CRC, key, type, size; persisted)
// and Publish (one atomic store of the key's index word, persisted). The
// caller replicates the object between Check and Publish, so the new offset
// only ever names a complete, persistent, replicated object ("flip at
// commit", §6.4): a reader never sees a write no client was told of, and
// recovery never has to roll an entry back because of a torn object.
//
// Region layout: a 64-byte superblock, the bucket table from offset 4096,
// then the heads' log regions, each a whole number of segments; no object
// spans a segment. Docs: docs/formats/erda.md.
//
// Threading: head h belongs to the one thread that writes the shards s with
// s % num_heads == h (server/worker_pool.h gives each shard one worker):
// Reserve, Check, Publish and Abort of a key run on its head's thread. Get
// and one-sided readers may run anywhere, any time.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "erda/bucket_table.h"
#include "erda/object.h"
#include "log/entry.h"
#include "pm/region.h"

namespace slip::erda {

struct EngineOptions {
  // Used only to format a blank region; an existing region keeps its own.
  uint32_t num_buckets = 1 << 16;
  uint32_t num_heads = 1;
  uint32_t num_shards = 16;
  uint64_t segment_bytes = 8 << 20;
  log::Limits limits;
};

// What a client needs to read and write one-sidedly (sent when it connects).
struct Layout {
  uint64_t table_offset = 0;
  uint32_t num_buckets = 0;
  uint32_t num_heads = 0;
  uint32_t num_shards = 0;
  uint64_t heads_offset = 0;  // head h starts at heads_offset + h * head_bytes
  uint64_t head_bytes = 0;
  uint64_t segment_bytes = 0;

  uint32_t HeadOf(uint64_t key_hash) const;
  // Where a key's probe window (kWindowBytes) starts in the region.
  uint64_t WindowOffset(uint64_t key_hash) const {
    return table_offset + uint64_t{BucketTable::HomeBucketOf(key_hash, num_buckets)} * kBucketBytes;
  }
  // The region offset of an index word's offset field in head h.
  uint64_t ObjectOffset(uint32_t head, uint32_t units) const {
    return heads_offset + uint64_t{head} * head_bytes + uint64_t{units} * IndexWord::kUnit;
  }
};

struct Reservation {
  uint32_t head = 0;
  uint32_t units = 0;  // where the object goes, in 8-byte units of the head
  uint32_t bytes = 0;  // ObjectBytes of the object the client will write
  ObjectType type = ObjectType::kPut;
  std::string key;
};

struct EngineStats {
  uint64_t reserves = 0, publishes = 0, aborts = 0, refused_checks = 0;
  uint64_t busy = 0;  // reservations refused: a write of the key was pending
  // NVM bytes written, as Table 1 counts them (docs/papers/erda.md §6.6):
  uint64_t object_bytes = 0;  // objects (client-written, persisted by Check)
  uint64_t index_bytes = 0;   // entries: a create 16 (fingerprint, word), an update 4
};

struct EngineRecovery {
  uint64_t entries = 0;        // published entries found
  uint64_t rolled_back = 0;    // new object bad, old one good: new := old
  uint64_t released = 0;       // no good object (or never published): entry freed
};

class Engine {
 public:
  // Formats a blank (all-zero) region or recovers an existing one.
  static Result<std::unique_ptr<Engine>> Open(pm::PmRegion* region, const EngineOptions& options);

  const Layout& layout() const { return layout_; }
  const log::Limits& limits() const { return limits_; }

  // Space for the object of a write of `key`. InvalidArgument for a key or
  // value the limits refuse; Busy while another write of the key is pending;
  // NoSpace when the key's head is full.
  Result<Reservation> Reserve(std::string_view key, ObjectType type, size_t value_len);
  // The object the client wrote, checked and persisted. Corruption if it is
  // not (all) there or is not the reserved one: the reservation stays, so the
  // client may write again and ask again. The view points into the region.
  Result<ObjectView> Check(const Reservation& r);
  // Makes the checked object the key's newest version and ends the
  // reservation. NoSpace if the key is new and its probe window is full
  // (the reservation ends; nothing became visible).
  Status Publish(const Reservation& r);
  // Ends a reservation that will not be published.
  void Abort(const Reservation& r);

  // Server-side writes (the baselines' apply step, tests): Reserve, encode
  // in place, Check, Publish.
  Status Put(std::string_view key, std::string_view value);
  // NotFound (nothing written) when the key has no live value.
  Status Delete(std::string_view key);

  // Two-sided read: the value, NotFound (absent or deleted), or Corruption.
  Result<std::string> Get(std::string_view key) const;

  EngineStats stats() const;
  const EngineRecovery& recovery() const { return recovery_; }

  // A reader's verdict on the bytes at one of a key's offsets, shared by Get
  // and the one-sided client.
  struct Found {
    enum Kind { kValue, kDeleted, kOtherKey, kBad } kind;
    std::string value;
  };
  // kBad: torn, never written, damaged (try the old offset); kOtherKey: a
  // good object of another key (another entry with the same fingerprint).
  static Found Examine(std::span<const std::byte> object, std::string_view key, const log::Limits& limits);

 private:
  Engine(pm::PmRegion* region, Layout layout, log::Limits limits);
  Status Recover();
  // The entry of `key` and its newest version that checks out (new, else
  // old), if any; `damaged` when some version of the key failed its check.
  struct Located {
    std::optional<Slot> slot;
    Found found{Found::kBad, {}};
    bool damaged = false;
  };
  Located Locate(std::string_view key, uint64_t hash) const;
  std::span<const std::byte> ObjectAt(uint32_t head, uint32_t units, size_t max_bytes) const;
  // The size of the object at (head, units) if it decodes and holds a key
  // of `fingerprint`.
  std::optional<size_t> GoodObject(uint32_t head, uint32_t units, uint64_t fingerprint) const;

  pm::PmRegion* region_;
  Layout layout_;
  log::Limits limits_;
  BucketTable table_;
  // Per head: where the next object goes (8-byte units) — only its thread
  // touches it.
  std::vector<uint32_t> tails_;
  mutable std::mutex pending_mu_;
  std::unordered_set<std::string> pending_;  // keys with a reservation (G1)
  EngineRecovery recovery_;
  std::atomic<uint64_t> reserves_{0}, publishes_{0}, aborts_{0}, refused_{0}, busy_{0};
  std::atomic<uint64_t> object_bytes_{0}, index_bytes_{0};
};

}  // namespace slip::erda
