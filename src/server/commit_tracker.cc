#include "server/commit_tracker.h"

#include <algorithm>

#include "common/coding.h"
#include "common/hash.h"

namespace slip::server {

std::vector<std::string> CommitKeys(uint32_t num_shards) {
  // One pass over candidates fills every shard (about n ln n hashes).
  std::vector<std::string> keys(num_shards);
  uint32_t missing = num_shards;
  for (uint64_t i = 0; missing > 0; ++i) {
    std::string key(kReservedKeyPrefix);
    key += "commit:" + std::to_string(i);
    std::string& slot = keys[ShardOfHash(HashKey(key), num_shards)];
    if (!slot.empty()) continue;
    slot = std::move(key);
    --missing;
  }
  return keys;
}

bool IsReservedKey(std::string_view key) { return key.starts_with(kReservedKeyPrefix); }

std::string EncodeCommitVersion(uint64_t version) {
  std::string v(8, '\0');
  StoreLE<uint64_t>(v.data(), version);
  return v;
}

std::optional<uint64_t> DecodeCommitVersion(std::string_view value) {
  if (value.size() != 8) return std::nullopt;
  return LoadLE<uint64_t>(value.data());
}

void CommitTracker::Begin(uint32_t shard, uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  Shard& s = shards_[shard];
  s.in_flight.insert(version);
  s.assigned = std::max(s.assigned, version);
}

void CommitTracker::Acked(uint32_t shard, uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  shards_[shard].in_flight.erase(version);
}

void CommitTracker::Abandoned(uint32_t shard, uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  Shard& s = shards_[shard];
  s.in_flight.erase(version);
  s.abandoned.insert(version);
}

void CommitTracker::Promoted(uint32_t shard, uint64_t version) {
  std::lock_guard<std::mutex> lock(mu_);
  Shard& s = shards_[shard];
  s.abandoned.clear();
  s.assigned = std::max(s.assigned, version);
}

uint64_t CommitTracker::Compute(const Shard& s) {
  uint64_t c = s.assigned;
  if (!s.in_flight.empty()) c = std::min(c, *s.in_flight.begin() - 1);
  if (!s.abandoned.empty()) c = std::min(c, *s.abandoned.begin() - 1);
  return c;
}

uint64_t CommitTracker::CommitVersion(uint32_t shard) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = shards_.find(shard);
  return it == shards_.end() ? 0 : Compute(it->second);
}

std::optional<uint64_t> CommitTracker::TakeNewCommitVersion(uint32_t shard, uint64_t min_advance) {
  std::lock_guard<std::mutex> lock(mu_);
  Shard& s = shards_[shard];
  const uint64_t c = Compute(s);
  if (c <= s.published || c - s.published < min_advance) return std::nullopt;
  s.published = c;
  return c;
}

void CommitTracker::Unpublish(uint32_t shard) {
  std::lock_guard<std::mutex> lock(mu_);
  shards_[shard].published = 0;
}

}  // namespace slip::server
