// Store: the cleaner (docs/design-notes.md "Cleaning").
#include "store/store.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "common/coding.h"
#include "common/hash.h"
#include "store/store_internal.h"

namespace slip::store {

using internal::EntryType;
using internal::IsData;
using internal::kDelValue;
using internal::kNoSegment;
using internal::SegmentOwner;
using internal::SegmentState;
using internal::SkipInvalid;

// ---------------------------------------------------------------------------
// Cleaner

Result<bool> Store::CleanStep() {
  std::lock_guard<std::mutex> lock(clean_mu_);
  // Committed segments first, their pins after: a block is pinned only
  // while its segment is still being digested (not yet sealed), so a
  // segment read as Committed has every pin it will ever get by now.
  std::vector<std::pair<double, uint32_t>> candidates;  // utilisation, segment
  for (uint32_t seg = 0; seg < table_->num_segments(); ++seg) {
    if (table_->meta(seg).state != SegmentState::kCommitted) continue;
    const double util = static_cast<double>(live_[seg].load()) / static_cast<double>(table_->segment_size());
    if (util < options_.clean_threshold) candidates.emplace_back(util, seg);
  }
  uint32_t best = kNoSegment;
  double best_util = options_.clean_threshold;
  {
    std::lock_guard<std::mutex> lk(large_mu_);
    for (const auto& [util, seg] : candidates) {
      // Part of a received entry still to be completed (or just completed
      // and being indexed) lies here.
      if (partial_blocks_.contains(seg)) continue;
      if (util < best_util) {
        best_util = util;
        best = seg;
      }
    }
  }
  if (best == kNoSegment) return false;
  SLIP_RETURN_IF_ERROR(CleanSegment(best));
  return true;
}

Status Store::RelocateIfLive(uint32_t seg, uint64_t found_at, uint64_t offset0) {
  const log::BlockHeader h = log::PeekHeader(region_->at(offset0));
  index::EntryInfo info = Read(offset0);
  const std::string key(info.key);
  const uint64_t hash = HashKey(key);
  index::ShardIndex& idx = *shards_[h.shard].index;
  if (idx.Lookup(hash, key) != offset0) return Status::Ok();  // dead
  if (offset0 != found_at && table_->SegmentOf(offset0) == seg) return Status::Ok();  // done at block 0
  // Of a shard dropped once, older entries of the key may lie in the log uncounted.
  if (h.type == EntryType::kDel && idx.EntryCount(hash, key) == 1 && !HasAbandoned(key) &&
      dropped_below_[h.shard] == 0) {
    tombstones_dropped_.fetch_add(1, std::memory_order_relaxed);
    return Status::Ok();  // the key's only entry: nothing older can resurface
  }
  std::string stored_key;
  SLIP_ASSIGN_OR_RETURN(std::string value, h.type == EntryType::kDel
                                               ? Result<std::string>(std::string(kDelValue, 8))
                                               : ReadValue(offset0, key, &stored_key, nullptr));
  log::EntryMeta meta{h.type, h.shard, h.version};
  SLIP_ASSIGN_OR_RETURN(Blocks copy, Append(cleaner_, SegmentOwner::kClean, meta, key, value));
  RememberLarge(copy);
  if (idx.Relocate(hash, key, offset0, copy.offsets[0])) {
    Retire(BlocksOf(offset0));
    IndexChanged(hash, key);
  } else {
    Retire(copy);  // a writer overwrote it meanwhile; the copy is dead but counted
  }
  relocated_.fetch_add(1, std::memory_order_relaxed);
  for (uint32_t bytes : copy.bytes) relocated_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return Status::Ok();
}

Status Store::CleanSegment(uint32_t seg) {
  const std::byte* base = table_->SegmentBase(seg);
  const uint64_t seg_off = table_->SegmentOffset(seg);
  struct Found {
    uint64_t offset;
    bool first;  // a block 0 (carries the key)
  };
  std::vector<Found> found;
  // Receive segments may hold holes (see Recover): walk them by stride.
  const bool received = table_->meta(seg).owner == SegmentOwner::kControl;
  for (uint64_t pos = 0; pos + log::kHeaderSize <= table_->segment_size();) {
    auto d = log::DecodeBlock({base + pos, table_->segment_size() - pos}, options_.limits);
    if (!d.status.ok()) {
      if (!received) break;
      pos = SkipInvalid(base, pos, table_->segment_size(), options_.limits);
      continue;
    }
    // A block of a shard this store does not have was never indexed.
    if (IsData(d.block.type) && d.block.shard < shards_.size()) found.push_back({seg_off + pos, d.block.seq == 0});
    pos += d.block.encoded_bytes;
  }

  // 1. Relocate every live entry with a block here (whole entry, all blocks).
  std::vector<uint64_t> owners;  // block-0 offsets of entries with a block here
  for (const Found& f : found) {
    owners.clear();
    if (f.first) {
      owners.push_back(f.offset);
    } else {
      std::lock_guard<std::mutex> lk(large_mu_);
      auto [lo, hi] = large_rev_.equal_range(f.offset);
      for (auto it = lo; it != hi; ++it) owners.push_back(it->second);
      // None: an orphan block of an entry never applied.
    }
    for (uint64_t offset0 : owners) SLIP_RETURN_IF_ERROR(RelocateIfLive(seg, f.offset, offset0));
  }

  // 2. Forget every counted entry instance whose block 0 is here.
  for (const Found& f : found) {
    const log::BlockHeader h = log::PeekHeader(region_->at(f.offset));
    if (h.cnt > 1) {
      std::lock_guard<std::mutex> lk(large_mu_);
      if (!f.first) {
        large_rev_.erase(f.offset);
        continue;
      }
      auto it = large_.find(f.offset);
      if (it == large_.end()) continue;  // never counted (incomplete)
      // Its other blocks may sit in segments cleaned later: they must not
      // lead back to this offset once the segment is reused. (Only where they
      // still do: a block freed earlier may now belong to another entry.)
      for (size_t i = 1; i < it->second.offsets.size(); ++i) {
        auto [lo, hi] = large_rev_.equal_range(it->second.offsets[i]);
        for (auto rev = lo; rev != hi; ++rev) {
          if (rev->second == f.offset) {
            large_rev_.erase(rev);
            break;
          }
        }
      }
      large_.erase(it);
    } else if (!f.first) {
      continue;
    }
    {
      std::lock_guard<std::mutex> lk(large_mu_);
      auto ab = abandoned_.find(f.offset);
      if (ab != abandoned_.end()) {  // never counted by the index
        if (--abandoned_keys_[ab->second] == 0) abandoned_keys_.erase(ab->second);
        abandoned_.erase(ab);
        continue;
      }
    }
    // Not counted since its shard was dropped (DropShard).
    if (table_->meta(seg).seq < dropped_below_[h.shard]) continue;
    index::EntryInfo info = Read(f.offset);
    const std::string key(info.key);
    const uint64_t hash = HashKey(key);
    if (shards_[h.shard].index->Release(hash, key) == 0) IndexChanged(hash, key);
  }

  // 3. The cleaner's copies must be durable before the originals vanish:
  //    they are (Append persists each block), so free the segment.
  SLIP_RETURN_IF_ERROR(FreeCleaned(seg));
  live_[seg] = 0;
  cleaned_.fetch_add(1, std::memory_order_relaxed);
  return Status::Ok();
}

}  // namespace slip::store
