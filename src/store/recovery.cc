// Store: cold start by scan (docs/design-notes.md "Store recovery").
#include "store/store.h"

#include <algorithm>
#include <cstring>
#include <map>

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
// Cold start

Status Store::Recover() {
  RecoveryStats& rs = recovery_;
  struct Partial {
    uint16_t cnt = 0;
    std::vector<uint64_t> offset;   // per seq, 0 = not found yet
    std::vector<uint32_t> bytes;
    std::vector<uint64_t> firsts;   // every block-0 occurrence (cleaner copies)
    uint16_t have = 0;
  };
  std::map<std::pair<uint16_t, uint64_t>, Partial> partial;
  std::vector<uint64_t> max_version(shards_.size(), 0);

  auto apply = [&](uint64_t offset0, const Blocks& blocks) {
    IndexFound(offset0, blocks);
    ++rs.entries;
  };

  for (uint32_t seg = 0; seg < table_->num_segments(); ++seg) {
    const log::SegmentMeta m = table_->meta(seg);
    if (m.state == SegmentState::kFree) continue;
    ++rs.segments_scanned;
    const std::byte* base = table_->SegmentBase(seg);
    const uint64_t seg_off = table_->SegmentOffset(seg);
    uint64_t pos = 0;
    // A local log's tail is where the first block fails to decode: no tail
    // pointer. A receive segment can have holes (several senders' DMAs,
    // persisted in any order, then a crash): walk it stride by stride.
    const bool received = m.owner == SegmentOwner::kControl;
    uint64_t end = 0;  // just past the last valid block
    while (pos + log::kHeaderSize <= table_->segment_size()) {
      auto d = log::DecodeBlock({base + pos, table_->segment_size() - pos}, options_.limits);
      if (!d.status.ok()) {
        if (!received) break;
        pos = SkipInvalid(base, pos, table_->segment_size(), options_.limits);
        continue;
      }
      const log::BlockView& b = d.block;
      ++rs.blocks;
      rs.bytes_scanned += b.encoded_bytes;
      if (b.shard < shards_.size()) max_version[b.shard] = std::max(max_version[b.shard], b.version);
      const uint64_t off = seg_off + pos;
      if (IsData(b.type) && b.shard < shards_.size()) {
        if (b.cnt == 1) {
          apply(off, Blocks{{off}, {b.encoded_bytes}});
        } else {
          Partial& p = partial[{b.shard, b.version}];
          if (p.cnt == 0) {
            p.cnt = b.cnt;
            p.offset.assign(b.cnt, 0);
            p.bytes.assign(b.cnt, 0);
          }
          if (p.cnt == b.cnt) {
            if (p.offset[b.seq] == 0) {
              p.offset[b.seq] = off;
              p.bytes[b.seq] = b.encoded_bytes;
              ++p.have;
            }
            if (b.seq == 0) p.firsts.push_back(off);
          }
        }
      }
      pos += b.encoded_bytes;
      end = pos;
    }
    if (end == 0) {
      // Nothing valid: a segment allocated just before the crash, or one whose
      // Free() was interrupted after its first line was zeroed.
      if (m.state == SegmentState::kUsing) {
        SLIP_RETURN_IF_ERROR(table_->Transition(seg, SegmentState::kCommitted));
      } else if (m.state == SegmentState::kUsed) {
        SLIP_RETURN_IF_ERROR(table_->Transition(seg, SegmentState::kCommitted));
      }
      SLIP_RETURN_IF_ERROR(table_->Free(seg));
      ++rs.segments_freed;
      continue;
    }
    // Seal what was open: writers start on fresh segments after a restart.
    if (m.state == SegmentState::kUsing || m.state == SegmentState::kUsed) {
      SLIP_RETURN_IF_ERROR(table_->Transition(seg, SegmentState::kCommitted));
    }
  }
  // Multi-block entries: every copy whose blocks are all present somewhere.
  // Copies of one entry hold identical bytes, so any valid block of a seq serves.
  for (auto& [id, p] : partial) {
    if (p.have < p.cnt) {
      ++rs.incomplete_entries;
      continue;
    }
    for (uint64_t first : p.firsts) {
      Blocks b{p.offset, p.bytes};
      b.offsets[0] = first;
      b.bytes[0] = p.bytes[0];
      apply(first, b);
    }
  }
  for (size_t s = 0; s < shards_.size(); ++s) shards_[s].version = max_version[s];
  return Status::Ok();
}

}  // namespace slip::store
