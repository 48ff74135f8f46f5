// Store: receive segments — the PM peers write into one-sidedly, and their
// digest (docs/architecture.md "One-sided designs: receive segments
// digested in place").
#include "store/store.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/coding.h"
#include "common/hash.h"
#include "runtime/cost.h"
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
// Receive segments

void Store::IndexFound(uint64_t offset0, const Blocks& blocks) {
  const log::BlockHeader h = log::PeekHeader(region_->at(offset0));
  index::EntryInfo info = Read(offset0);
  const uint64_t hash = HashKey(info.key);
  if (h.shard >= shards_.size() || ShardOf(hash) != h.shard) return;  // foreign or corrupt
  // Landed before this node let the shard go (DropShard): stale.
  if (any_dropped_.load(std::memory_order_relaxed) && InDroppedRegion(h.shard, offset0)) return;
  RememberLarge(blocks);
  RaiseShardVersion(h.shard, h.version);
  auto r = shards_[h.shard].index->Upsert(hash, info.key, h.version, offset0);
  // Live bytes: the winner's blocks count, a displaced entry's stop counting.
  if (r.applied) {
    for (size_t i = 0; i < blocks.offsets.size(); ++i) {
      live_[table_->SegmentOf(blocks.offsets[i])] += blocks.bytes[i];
    }
    if (r.displaced) Retire(BlocksOf(*r.displaced));
    IndexChanged(hash, info.key);
  }
}

Result<uint32_t> Store::AllocateReceiveSegment() {
  return table_->Allocate(SegmentOwner::kControl, options_.cleaner_reserve);
}

Result<uint64_t> Store::DigestReceived(uint32_t seg, uint64_t from, uint64_t to, ReceiveWalk walk) {
  if (seg >= table_->num_segments()) return Status::InvalidArgument("no segment " + std::to_string(seg));
  const log::SegmentMeta m = table_->meta(seg);
  if (m.owner != SegmentOwner::kControl || m.state == SegmentState::kFree) {
    return Status::InvalidArgument("segment " + std::to_string(seg) + " is not a receive segment");
  }
  to = std::min(to, table_->segment_size());
  if (from % log::kAlign != 0 || from > to) return Status::InvalidArgument("bad digest range");
  const std::byte* base = table_->SegmentBase(seg);
  const uint64_t seg_off = table_->SegmentOffset(seg);
  uint64_t pos = from;
  uint64_t prefix_end = UINT64_MAX;  // set at the first hole
  while (pos + log::kHeaderSize <= to) {
    // Never written (or not landed yet): a hole, told apart without a
    // decode — a catch-up walks the whole unwritten rest of a segment.
    if (LoadLE<uint64_t>(base + pos) == 0) {
      if (prefix_end == UINT64_MAX) prefix_end = pos;
      if (walk == ReceiveWalk::kPrefix) break;
      pos += log::kAlign;
      continue;
    }
    // Decode a copy: a peer may be writing right behind us (a DMA in flight
    // shows up as a torn block).
    auto d = log::DecodeBlock({base + pos, to - pos}, options_.limits);
    if (!d.status.ok()) {
      if (prefix_end == UINT64_MAX) prefix_end = pos;
      if (walk == ReceiveWalk::kPrefix) break;
      pos = SkipInvalid(base, pos, to, options_.limits);
      continue;
    }
    const log::BlockView& b = d.block;
    runtime::Charge(runtime::Cost::kDigest, b.encoded_bytes);
    const uint64_t off = seg_off + pos;
    pos += b.encoded_bytes;
    if (prefix_end == UINT64_MAX || walk == ReceiveWalk::kFinal) {
      received_.fetch_add(b.encoded_bytes, std::memory_order_relaxed);
    }
    if (!IsData(b.type) || b.shard >= shards_.size()) continue;
    if (b.cnt == 1) {
      IndexFound(off, Blocks{{off}, {b.encoded_bytes}});
      continue;
    }
    std::optional<Blocks> complete;
    {
      std::lock_guard<std::mutex> lock(large_mu_);
      // A block of an entry already assembled and indexed (a walk past a
      // hole found it before this walk from the hole): nothing to add.
      if (b.seq == 0 ? large_.contains(off) : large_rev_.contains(off)) continue;
      ReceivedPartial& p = received_partial_[{b.shard, b.version}];
      if (p.offsets.empty()) {
        p.offsets.assign(b.cnt, 0);
        p.bytes.assign(b.cnt, 0);
      }
      if (p.offsets.size() == b.cnt && p.offsets[b.seq] == 0) {
        p.offsets[b.seq] = off;
        p.bytes[b.seq] = b.encoded_bytes;
        ++partial_blocks_[table_->SegmentOf(off)];
        if (++p.have == b.cnt) {
          complete = Blocks{std::move(p.offsets), std::move(p.bytes)};
          received_partial_.erase({b.shard, b.version});
        }
      }
    }
    if (complete) {
      IndexFound(complete->offsets[0], *complete);
      // Unpinned only now that the entry is indexed (and remembered): until
      // then the cleaner would see its blocks as no entry's.
      std::lock_guard<std::mutex> lock(large_mu_);
      for (uint64_t o : complete->offsets) {
        auto it = partial_blocks_.find(table_->SegmentOf(o));
        if (--it->second == 0) partial_blocks_.erase(it);
      }
    }
  }
  return prefix_end == UINT64_MAX ? pos : prefix_end;
}

Status Store::SealReceiveSegment(uint32_t seg) {
  if (seg >= table_->num_segments() || table_->meta(seg).owner != SegmentOwner::kControl) {
    return Status::InvalidArgument("segment " + std::to_string(seg) + " is not a receive segment");
  }
  (void)EraseTorn(seg);
  return table_->Transition(seg, SegmentState::kCommitted);
}

uint64_t Store::EraseTorn(uint32_t seg) {
  // A transfer cut short (its sender died mid-write) stays in the segment
  // as bytes that do not decode. Zeroed now, while nothing can land any
  // more, a sealed segment holds only valid blocks and blank lines — so a
  // recovery that finds anything else there knows it is damage, not a tear.
  std::byte* base = table_->SegmentBase(seg);
  const uint64_t size = table_->segment_size();
  uint64_t pos = 0, erased = 0;
  while (pos + log::kHeaderSize <= size) {
    if (internal::BlankLine(base + pos)) {
      pos += log::kAlign;
      continue;
    }
    auto d = log::DecodeBlock({base + pos, size - pos}, options_.limits);
    if (d.status.ok()) {
      pos += d.block.encoded_bytes;
      continue;
    }
    const uint64_t next = SkipInvalid(base, pos, size, options_.limits);
    std::memset(base + pos, 0, next - pos);
    region_->Persist(base + pos, next - pos);
    ++erased;
    pos = next;
  }
  return erased;
}

Status Store::ReleaseReceiveSegment(uint32_t seg) {
  if (seg >= table_->num_segments() || table_->meta(seg).owner != SegmentOwner::kControl) {
    return Status::InvalidArgument("segment " + std::to_string(seg) + " is not a receive segment");
  }
  SLIP_RETURN_IF_ERROR(table_->Transition(seg, SegmentState::kCommitted));
  return table_->Free(seg);
}

}  // namespace slip::store
