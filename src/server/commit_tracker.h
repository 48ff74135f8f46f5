// CommitTracker: the primary's CommitVer per shard (docs/papers/rowan.md §3.5) —
// the largest version c such that every entry of the shard with a version
// <= c that this node assigned is on every backup it was sent to.
//
// Every `interval` (15 ms in Rowan) the primary writes c into its backups as
// an ordinary replicated write of a reserved per-shard key (CommitKey), so
// the record travels each design's own path (b-log, private buffers, rpc),
// survives crashes and cleaning like any live entry, and a backup reads it
// back with a GET of its own store. A promotion then exchanges only the
// entries above the new primary's recorded c: everything at or below it is
// on every in-sync replica already (Promoter).
//
// Versions hold c back while their write is in flight, and for good once it
// was abandoned (some backups may have it, others not) — until this node is
// promoted for the shard again, whose gather-and-scatter reconciles them.
// Versions come from Store::Prepare on the one worker that owns the shard
// (WorkerPool); Begin runs in the same task, so no version is assigned but
// unregistered when c is read.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace slip::server {

// The reserved keys that carry each shard's CommitVer, indexed by shard:
// for shard s, the first of "\0slip:commit:<i>" that hashes to s. Clients
// may not use keys beginning with kReservedKeyPrefix.
inline constexpr std::string_view kReservedKeyPrefix{"\0slip:", 6};
std::vector<std::string> CommitKeys(uint32_t num_shards);
bool IsReservedKey(std::string_view key);
std::string EncodeCommitVersion(uint64_t version);
// Nullopt if `value` is not an encoded version (then it is not trusted).
std::optional<uint64_t> DecodeCommitVersion(std::string_view value);

class CommitTracker {
 public:
  // A write of `version` was prepared and is being replicated.
  void Begin(uint32_t shard, uint64_t version);
  // Every backup acknowledged it.
  void Acked(uint32_t shard, uint64_t version);
  // Replication failed: it may be on some backups only.
  void Abandoned(uint32_t shard, uint64_t version);
  // This node finished promoting the shard: every version <= `version` is
  // on every replica (writes still in flight keep holding).
  void Promoted(uint32_t shard, uint64_t version);

  uint64_t CommitVersion(uint32_t shard) const;
  // The CommitVersion if it moved by at least `min_advance` since the last
  // call that returned one.
  std::optional<uint64_t> TakeNewCommitVersion(uint32_t shard, uint64_t min_advance = 1);
  // The record carrying it failed: offer the current one again next time.
  void Unpublish(uint32_t shard);

 private:
  struct Shard {
    uint64_t assigned = 0;           // highest version begun (or promoted to)
    std::set<uint64_t> in_flight;
    std::set<uint64_t> abandoned;
    uint64_t published = 0;
  };
  static uint64_t Compute(const Shard& s);

  mutable std::mutex mu_;
  std::map<uint32_t, Shard> shards_;
};

}  // namespace slip::server
