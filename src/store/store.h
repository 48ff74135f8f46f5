// Store: the storage engine of one node — per-writer logs of 64 B-aligned
// entries in PM segments, a DRAM index per shard, a cleaner, and cold start.
//
// The store is a passive library: it spawns no threads, reads no clock and
// never blocks on anything but its own short mutexes. Callers (a server's
// worker threads, a benchmark, the simulator) drive it; background work is
// the CleanStep() step function.
//
// Durability contract: when Put/Delete returns OK the entry is persistent
// (PmRegion::Persist returned) and visible to Get. After a crash and Open(),
// every acknowledged operation is present with its latest value, deleted keys
// stay deleted, and an operation that did not return is either wholly
// visible or not at all (docs/design-notes.md "Store recovery").
//
// Group commit: Prepare and Apply may defer the persist (Persist::kDeferred);
// Flush(writer) then persists every deferred entry of that writer with one
// PmRegion::Persist per segment, which on a file is one msync for a whole
// batch instead of one per entry. A deferred entry becomes visible only
// once persistent (Apply indexes it in Flush; Commit flushes first), so
// "visible => persistent" holds in both modes.
//
// Threading: Put/Delete with *different* writer ids, Get, and one CleanStep
// at a time may all run concurrently. A writer id is owned by one thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "index/shard_index.h"
#include "log/entry.h"
#include "log/segment_table.h"
#include "pm/region.h"

namespace slip::store {

struct StoreOptions {
  // --- correctness ---
  // Used only to format a blank region; an existing region keeps its own.
  log::Geometry geometry;
  log::Limits limits;

  // Whether power may have failed since the region was last written (the
  // machine rebooted, or unknown): then a crash can have torn a log's last
  // persist anywhere. Without a power loss only a process died: every store
  // it made is in the region, so a local log's block whose first word was
  // written (EncodeBlock writes it last) is whole, and one that does not
  // decode is damage, not a tear (docs/design-notes.md "Damage on the media").
  bool tears_possible = true;

  // --- performance ---
  uint32_t num_writers = 1;  // per-thread logs (t-logs)
  // Largest block an entry is split into. Bigger = less header overhead for
  // big values; must hold a maximal key in block 0 and fit in a segment.
  uint32_t max_block_bytes = 1 << 20;
  // The cleaner picks Committed segments whose live fraction is below this.
  double clean_threshold = 0.75;
  // NeedsCleaning() says yes while fewer than this fraction of all segments
  // (plus the reserve) are free: cleaning earlier only rewrites live data
  // that later overwrites might have killed for free.
  double clean_below_free_fraction = 0.25;
  // Free segments that writers may not take, so the cleaner can always make
  // progress (it needs at most one to relocate a segment's live data).
  uint32_t cleaner_reserve = 2;

  // --- direct client access (the erda design; docs/papers/erda.md §6) ---
  // Called after every change of which entry of a key the index holds (a
  // write committed or applied, a digest, a relocation, a key released), on
  // the thread that made it, with no store lock held. A mirror of the index
  // (erda's one-sided bucket table) looks the key up again (Locate), so
  // calls may interleave in any order and the last one wins correctly.
  std::function<void(uint64_t hash, std::string_view key)> on_index_change;
  // Freed segments are held back from reuse until two ReleaseHeldSegments()
  // calls have passed: a one-sided reader that read an index word just
  // before the cleaner moved its entry may still be reading the old place,
  // and must find it zeroed (the reader notices), never reused.
  bool hold_freed_segments = false;
};

struct StoreStats {
  uint64_t puts = 0, deletes = 0, gets = 0;
  uint64_t appended_bytes = 0;        // PM bytes this node wrote as entries (headers, padding)
  uint64_t adopted_bytes = 0;         // entries clients wrote and the node adopted (erda)
  uint64_t staged_bytes = 0;          // entries the node staged before copying them (erda-redo)
  uint64_t segments_cleaned = 0;
  uint64_t entries_relocated = 0;
  uint64_t relocated_bytes = 0;       // PM bytes the cleaner rewrote
  uint64_t tombstones_dropped = 0;
  uint32_t free_segments = 0;
  uint32_t num_segments = 0;
  uint64_t keys = 0;                  // indexed keys (incl. tombstoned ones)
};

// A place the recovery scan found damaged on the media: bytes that cannot
// be a crash's tear (docs/design-notes.md "Damage on the media").
struct Damage {
  uint32_t segment = 0;
  uint64_t offset = 0;  // within the segment
  std::string what;
};

struct RecoveryStats {
  uint32_t segments_scanned = 0;
  uint64_t bytes_scanned = 0;       // bytes of valid blocks walked
  uint64_t blocks = 0;
  uint64_t entries = 0;             // complete entries applied to the index
  uint64_t incomplete_entries = 0;  // multi-block entries missing blocks (never acknowledged)
  uint32_t segments_freed = 0;      // non-free segments found empty (e.g. crash mid-free)
  uint64_t torn_erased = 0;         // torn places of segments open at the crash, zeroed
  // Damaged places: a store with any holds entries it cannot read, so a
  // node must not count itself a complete replica of anything (it rejoins
  // empty). The first kMaxDamageListed are described.
  uint64_t damaged = 0;
  std::vector<Damage> damage;
  static constexpr size_t kMaxDamageListed = 16;
  // One line for an operator: where, what, how many more.
  std::string DescribeDamage() const;
};

class Store final : private index::EntryReader {
 public:
  // Formats a blank region, or recovers an existing one.
  static Result<std::unique_ptr<Store>> Open(pm::PmRegion* region, const StoreOptions& options);
  ~Store() override;

  Status Put(uint32_t writer, std::string_view key, std::string_view value);
  // NotFound (and nothing written) when the key is absent.
  Status Delete(uint32_t writer, std::string_view key);
  // The value, NotFound, or Corruption if the stored bytes fail their CRC.
  // With `meta`, also the winning entry's type, shard and version (filled
  // for a tombstone too, when the result is NotFound because of one).
  Result<std::string> Get(std::string_view key, log::EntryMeta* meta = nullptr) const;

  // When a write's bytes are persisted (see "Group commit" above).
  enum class Persist : uint8_t { kNow, kDeferred };
  // Persists the writer's deferred entries and indexes its deferred Applies.
  // A t-log stays a persistent prefix: every persist covers everything
  // written since the last one, so a crash never leaves an unpersisted hole
  // before a persisted (acknowledged) entry, which the recovery scan, stopping
  // at the first invalid block, would lose.
  void Flush(uint32_t writer);
  // Whether the writer holds entries that Flush would persist.
  bool HasDeferred(uint32_t writer) const;

  // --- two-phase writes (a primary replicating before it acknowledges) ---

  // A write that is persistent in the local log but not yet visible: Get
  // still returns the previous state until Commit. A primary prepares,
  // replicates meta/key/value to its backups, and commits when all acked.
  class PendingWrite {
   public:
    const log::EntryMeta& meta() const { return meta_; }
    const std::string& key() const { return key_; }

   private:
    friend class Store;
    log::EntryMeta meta_;
    uint64_t hash_ = 0;
    std::string key_;
    std::vector<uint64_t> offsets_;
    std::vector<uint32_t> bytes_;
    bool done_ = false;
    uint32_t writer_ = 0;  // kAdopted: a client wrote it, already persistent
  };
  static constexpr uint32_t kAdopted = UINT32_MAX;
  // Assigns the next version of the key's shard and persists the entry
  // (or, kDeferred, leaves that to Flush or Commit).
  // For kDel: NotFound (nothing written) when the key has no live value.
  Result<PendingWrite> Prepare(uint32_t writer, log::EntryType type, std::string_view key,
                               std::string_view value, Persist persist = Persist::kNow);
  // As Prepare, with the version ReserveVersion assigned (meta.version).
  // InvalidArgument when that version was never handed out, or the key is
  // not of meta.shard.
  Result<PendingWrite> PrepareVersioned(uint32_t writer, const log::EntryMeta& meta, std::string_view key,
                                        std::string_view value, Persist persist = Persist::kNow);
  // Makes the write visible (if no newer version of the key is), after
  // flushing its writer if the entry is not persistent yet. Once only, on
  // the thread that owns the writer.
  void Commit(PendingWrite& w);
  // The write will never be acknowledged (replication failed). It stays in
  // the log, so a later recovery may still show it: callers must report the
  // outcome as unknown (Unavailable), never as "not written".
  void Abandon(PendingWrite& w);

  // --- replication (a backup applying its primary's entries) ---

  // Writes an entry whose version the shard's primary assigned, and indexes
  // it if no newer entry of the key is indexed. Entries of one key may arrive
  // in any order; the result is the same (latest version wins). The shard's
  // version counter rises to at least meta.version, so a replica promoted to
  // primary numbers its writes above everything it holds. InvalidArgument if
  // meta.shard is not the key's shard. With kDeferred the entry is written
  // but neither persistent nor visible until Flush(writer).
  Status Apply(uint32_t writer, const log::EntryMeta& meta, std::string_view key,
               std::string_view value, Persist persist = Persist::kNow);

  struct ShardEntry {
    log::EntryMeta meta;  // kPut or kDel
    std::string key;
    std::string value;  // empty for kDel
  };
  // Calls `fn` for every indexed entry of `shard` with a version above
  // `min_version` (tombstones included, so a new replica learns of deletes
  // too), after passing over the first `skip` keys of the walk (the walk's
  // order is stable while nothing writes the shard). Not a snapshot: entries
  // written during the walk may or may not be seen. `fn` returns false to
  // stop early. Returns the number of keys walked (skipped ones included).
  Result<uint64_t> ForEachInShard(uint32_t shard, uint64_t min_version, uint64_t skip,
                                  const std::function<bool(const ShardEntry&)>& fn) const;

  // Raises the shard's version counter to at least `version` (failover: a
  // new primary must number writes above every entry any replica holds).
  void RaiseShardVersion(uint32_t shard, uint64_t version);

  // The shard left this node (its primary moved away, or this node is no
  // longer one of its backups): its keys leave the index and their bytes
  // count as dead, so the cleaner reclaims them. Entries of the shard in
  // segments allocated before the drop are not subtracted from the index's
  // entry counts again when the cleaner frees them, so a later copy of the
  // shard is counted right; and the shard's tombstones are never dropped
  // again (an older entry of the key may still lie in the log).
  // What has landed in receive segments by then is of the shard's old
  // tenure too: its blocks there are never indexed afterwards (a lazy digest
  // or a re-walk would otherwise bring stale entries back); what lands later,
  // further on in those segments, is indexed as usual.
  // Not persistent: a recovery scan indexes the dropped entries again, so
  // a node drops every shard it does not hold after a cold start too.
  // Returns the number of keys dropped. The shard must not be written
  // meanwhile.
  size_t DropShard(uint32_t shard);

  // An orderly stop, with no writer, cleaner or digest running: every
  // writer's segment is persisted and sealed, so the next recovery finds no
  // open local segment and checks everything strictly (a block there that
  // does not decode is damage, whatever happened to the machine since).
  Status SealForStop();

  // --- receive segments (one-sided replication) ---
  //
  // Peers write entries straight into this node's PM (Rowan's b-log, RWrite
  // and Tailwind buffers; replication/backup_log.h). The bytes are the same
  // log blocks a t-log holds, so the store indexes them where they landed.

  // Takes a Free segment for peers to write into: owner kControl, Using.
  // Recovery scans these segments stride by stride (a crash can leave a hole
  // where one sender's DMA did not persist while a later one's did).
  // NoSpace when only the cleaner's reserve is left.
  Result<uint32_t> AllocateReceiveSegment();
  // How far DigestReceived walks. Several senders share one receive
  // segment (rowan-kv's b-log, share-kv's shared log), so a hole — a torn
  // transfer, or one still in flight — can sit before another sender's
  // acknowledged entry.
  enum class ReceiveWalk {
    kPrefix,     // stop at the first block that does not decode
    kPastHoles,  // also index valid blocks beyond holes (the segment is
                 // still being written: a catch-up before a promotion)
    kFinal,      // as kPastHoles; nothing more will land in [from, to)
  };
  // Indexes the complete entries in [from, to) of receive segment `seg`, as
  // Apply would but without copying: it walks block by block. Returns where
  // the contiguous run of valid blocks from `from` ends, relative to the
  // segment: the next call resumes there, and finding a block beyond it
  // again is harmless (indexing is version-conditional). Past a hole the
  // walk skips an invalid block whole when its header is intact, else 64 B.
  // Blocks of multi-block entries may lie anywhere (any segment, any
  // order); an entry is indexed once all its blocks were digested.
  // CHECKSUM and COMMIT_VERSION blocks are walked over. A block for a shard
  // this store does not have, or whose key is not of its shard, is walked
  // over and not indexed (a peer's bug must not corrupt the index).
  // received_bytes() counts a block once: in the contiguous run, or beyond
  // a hole in the kFinal walk.
  Result<uint64_t> DigestReceived(uint32_t seg, uint64_t from, uint64_t to,
                                  ReceiveWalk walk = ReceiveWalk::kPrefix);
  // No more entries will land in `seg` and all of it was digested: it
  // becomes Committed, so the cleaner may reclaim it. What does not decode
  // in it (a transfer cut short) is zeroed first, so that a sealed segment
  // holds nothing a recovery could take for a tear (EraseTorn).
  Status SealReceiveSegment(uint32_t seg);
  // A receive segment nobody wrote into goes back to the free list.
  Status ReleaseReceiveSegment(uint32_t seg);
  uint64_t received_bytes() const { return received_.load(); }

  // --- direct client writes (erda: docs/papers/erda.md §6.4) ---
  //
  // A client writes a whole entry one-sidedly into a receive segment at a
  // place the node reserved; the node then adopts it as a prepared write.

  // Assigns the next version of `shard` to an entry a client will write.
  Result<uint64_t> ReserveVersion(uint32_t shard);
  // The entry at region offset `offset` (inside a Using receive segment)
  // must be one whole, CRC-valid block of `key` carrying exactly `meta`:
  // then it is persisted and returned prepared, as Prepare would (Commit or
  // Abandon it). Corruption (nothing changed) when the bytes there are
  // torn, not yet landed or anything else.
  // `*value` (optional) views the entry's value in PM; it stays readable
  // until the write is committed or abandoned.
  Result<PendingWrite> AdoptReceived(uint64_t offset, const log::EntryMeta& meta, std::string_view key,
                                     std::string_view* value = nullptr);
  // The checks of AdoptReceived alone: the block at `offset`, viewed in PM
  // (nothing persisted or counted). The copying baselines (erda-raw,
  // erda-redo) read a staged entry this way and write it again elsewhere.
  Result<log::BlockView> ReadReceived(uint64_t offset, const log::EntryMeta& meta, std::string_view key) const;
  // The node itself stages an entry at a reserved place of `bytes` (a redo
  // log record: erda-redo) and persists it. InvalidArgument when it does not
  // fit in one block there.
  Status WriteReceived(uint64_t offset, uint32_t bytes, const log::EntryMeta& meta, std::string_view key,
                       std::string_view value);
  // A reservation of `key` at `offset` that will never be adopted, but whose
  // bytes may still land: until KillReceived(offset) the key counts as
  // having an abandoned entry, so the cleaner keeps its tombstones (the
  // entry could otherwise resurface over a delete at a recovery).
  void AbandonReceived(uint64_t offset, std::string_view key);
  // A reservation that will never be adopted: zeroes [offset, offset +
  // bytes) of its receive segment and persists it, so whatever a client
  // wrote there can never resurface at a recovery, and forgets an
  // abandonment recorded there (the entry is gone).
  Status KillReceived(uint64_t offset, uint32_t bytes);
  // The region offset of the first block of the entry the index holds for
  // `key` (a tombstone included); nullopt when none.
  std::optional<uint64_t> Locate(std::string_view key) const;
  // Calls fn(hash, key) for every key the index holds, in every shard.
  void ForEachIndexedKey(const std::function<void(uint64_t hash, std::string_view key)>& fn) const;
  // Sets StoreOptions::on_index_change of an open store (a mirror of the
  // index is built from the store it mirrors). Before the store is shared
  // between threads.
  void set_on_index_change(std::function<void(uint64_t hash, std::string_view key)> fn) {
    options_.on_index_change = std::move(fn);
  }
  // Makes the segments freed before the previous call reusable (see
  // StoreOptions::hold_freed_segments).
  void ReleaseHeldSegments();

  // Cleans at most one segment (the least utilised Committed one below the
  // threshold). Returns whether it cleaned one.
  Result<bool> CleanStep();

  // Whether free space is low enough that the caller should drive
  // CleanStep() (see StoreOptions::clean_below_free_fraction).
  bool NeedsCleaning() const;

  StoreStats stats() const;
  const RecoveryStats& recovery_stats() const { return recovery_; }
  const log::SegmentTable& segments() const { return *table_; }
  const StoreOptions& options() const { return options_; }
  const pm::PmRegion& region() const { return *region_; }
  uint32_t ShardOf(uint64_t hash) const;
  uint64_t shard_version(uint32_t shard) const { return shards_[shard].version.load(); }
  // Live bytes the index references in a segment (cleaner's utilisation).
  int64_t live_bytes(uint32_t segment) const { return live_[segment].load(); }

 private:
  struct Shard {
    std::atomic<uint64_t> version{0};
    std::unique_ptr<index::ShardIndex> index;
  };
  // A log being appended to: a worker's t-log or the cleaner's log.
  // Where an entry's blocks are (offsets in the region, with padded sizes).
  struct Blocks {
    std::vector<uint64_t> offsets;
    std::vector<uint32_t> bytes;
  };
  // A deferred Apply, indexed by Flush once persistent.
  struct Unindexed {
    log::EntryMeta meta;
    uint64_t hash = 0;
    std::string key;
    Blocks blocks;
  };
  struct Writer {
    static constexpr uint32_t kNone = UINT32_MAX;
    uint32_t segment = kNone;
    uint64_t tail = 0;
    // [synced, tail) of the segment is written but not persisted; only the
    // current segment can hold such bytes (Advance flushes first).
    uint64_t synced = 0;
    std::vector<Unindexed> unindexed;
  };

  Store(pm::PmRegion* region, StoreOptions options, std::unique_ptr<log::SegmentTable> table);

  // Appends an entry whose meta (version included) is final, and indexes it
  // (kNow) or leaves that to Flush (kDeferred).
  // The receive segment holding the place at region offset `offset` (an
  // aligned offset in a Using receive segment); InvalidArgument otherwise.
  Result<uint32_t> OpenReceivePlace(uint64_t offset) const;
  Result<PendingWrite> PrepareAs(uint32_t writer, log::EntryType type, std::string_view key,
                                 std::string_view value, uint64_t version, Persist persist);
  Status WriteVersioned(uint32_t writer, const log::EntryMeta& meta, uint64_t hash,
                        std::string_view key, std::string_view value, Persist persist);
  // Appends every block of an entry to `w`, persisting them (kNow) with all
  // that was deferred before. On failure nothing of the entry stays visible
  // to a recovery scan.
  Result<Blocks> Append(Writer& w, log::SegmentOwner owner, const log::EntryMeta& meta,
                        std::string_view key, std::string_view value,
                        Persist persist = Persist::kNow);
  Status Advance(Writer& w, log::SegmentOwner owner);
  void PersistTail(Writer& w);  // [synced, tail) of w's segment
  // Whether the entry ending at region offset `end` is not yet persistent.
  bool Unpersisted(const Writer& w, uint64_t end) const;
  void FlushWriter(Writer& w);
  void Index(const log::EntryMeta& meta, uint64_t hash, std::string_view key, const Blocks& blocks);
  void Retire(const Blocks& b);            // entry instance became dead: drop its live bytes
  Blocks BlocksOf(uint64_t offset0) const;  // REQUIRES: a counted entry
  void RememberLarge(const Blocks& b);
  // The value of the entry whose block 0 is at offset0, which must hold
  // `want_key`; NotFound for a tombstone; Corruption if the bytes there fail
  // their CRC or hold another key (possibly because they moved).
  // Get without counting; fills *meta from the entry read (PUT or DEL).
  Result<std::string> Find(std::string_view key, log::EntryMeta* meta = nullptr) const;
  Result<std::string> ReadValue(uint64_t offset0, std::string_view want_key,
                                std::string* key_out, log::EntryMeta* meta_out) const;

  Status Recover();
  // Zeroes (and persists) the places of receive segment `seg` that do not
  // decode; returns how many.
  uint64_t EraseTorn(uint32_t seg);
  // Indexes a complete entry found at offset0 (recovery, digest). Returns
  // whether the index took it (its version is the newest of its key).
  void IndexFound(uint64_t offset0, const Blocks& blocks);
  Status CleanSegment(uint32_t seg);
  // Copies the entry whose block 0 is at offset0 (one of its blocks was found
  // at found_at in segment seg) to the cleaner's log if it is still live.
  Status RelocateIfLive(uint32_t seg, uint64_t found_at, uint64_t offset0);
  bool HasAbandoned(const std::string& key) const;

  index::EntryInfo Read(uint64_t offset) const override;

  pm::PmRegion* region_;
  StoreOptions options_;
  std::unique_ptr<log::SegmentTable> table_;
  std::vector<Shard> shards_;
  // Per shard: DropShard ran when the next segment would get this seq (0:
  // never dropped since the store opened). Under clean_mu_.
  std::vector<uint64_t> dropped_below_;
  // Per shard: receive segments (by index, for the allocation with `seq`)
  // whose first `extent` bytes had landed when the shard was dropped.
  struct DroppedRegion {
    uint64_t seq = 0;
    uint64_t extent = 0;
  };
  mutable std::mutex drop_mu_;  // a leaf lock
  std::vector<std::map<uint32_t, DroppedRegion>> dropped_regions_;
  std::atomic<bool> any_dropped_{false};
  // Whether the block at region offset `offset` is of `shard`'s dropped tenure.
  bool InDroppedRegion(uint32_t shard, uint64_t offset) const;
  // The end of the last valid block of receive segment `seg`.
  uint64_t LandedExtent(uint32_t seg) const;
  std::vector<Writer> writers_;
  Writer cleaner_;
  std::mutex clean_mu_;
  std::unique_ptr<std::atomic<int64_t>[]> live_;  // per segment

  // Multi-block entries: block-0 offset -> all blocks, and the reverse for
  // blocks 1..n. Only entries that were applied to an index appear here.
  mutable std::mutex large_mu_;
  std::unordered_map<uint64_t, Blocks> large_;
  std::unordered_multimap<uint64_t, uint64_t> large_rev_;
  // Abandoned writes: in the log but never indexed, so the index's entry
  // counts miss them. Block-0 offset -> key, and per key how many exist: a
  // tombstone may be dropped only when its key has none (else the abandoned
  // entry could resurface at recovery over an acknowledged delete).
  std::unordered_map<uint64_t, std::string> abandoned_;
  std::unordered_map<std::string, uint32_t> abandoned_keys_;

  // Multi-block entries being digested from receive segments, by
  // (shard, version): per seq the block's offset and padded size (0: missing).
  struct ReceivedPartial {
    std::vector<uint64_t> offsets;
    std::vector<uint32_t> bytes;
    uint16_t have = 0;
  };
  std::map<std::pair<uint16_t, uint64_t>, ReceivedPartial> received_partial_;  // under large_mu_
  // Per segment, how many blocks of received_partial_ lie in it: the
  // cleaner leaves such a segment alone, since the entry, once complete,
  // points into it (its blocks are no entry's until then, so relocation
  // would not see them), and until it is indexed. A partial that will never
  // complete — its sender failed or restarted between the pieces of an
  // entry over the piece limit, abandoning it — holds its segments until
  // the next Open, which drops it (DropShard drops its shard's). Under
  // large_mu_.
  std::unordered_map<uint32_t, uint32_t> partial_blocks_;

  // Freed while hold_freed_segments: [0] since the last release, [1] before.
  std::mutex held_mu_;
  std::vector<uint32_t> held_[2];

  void IndexChanged(uint64_t hash, std::string_view key) const {
    if (options_.on_index_change) options_.on_index_change(hash, key);
  }
  // Frees a cleaned segment now, or holds it (hold_freed_segments).
  Status FreeCleaned(uint32_t seg);

  RecoveryStats recovery_;
  std::atomic<uint64_t> received_{0};
  mutable std::atomic<uint64_t> gets_{0};
  std::atomic<uint64_t> puts_{0}, deletes_{0}, appended_{0}, adopted_{0}, staged_{0};
  std::atomic<uint64_t> cleaned_{0}, relocated_{0}, relocated_bytes_{0}, tombstones_dropped_{0};
};

}  // namespace slip::store
