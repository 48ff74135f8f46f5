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

namespace {

// Whether any 64 B line of [pos, size) starts a block that decodes.
bool ValidBlockAfter(const std::byte* base, uint64_t pos, uint64_t size, const log::Limits& limits) {
  for (; pos + log::kHeaderSize <= size; pos += log::kAlign) {
    if (LoadLE<uint64_t>(base + pos) != 0 && log::DecodeBlock({base + pos, size - pos}, limits).status.ok()) {
      return true;
    }
  }
  return false;
}

}  // namespace

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

  auto note_damage = [&](uint32_t seg, uint64_t pos, std::string what) {
    ++rs.damaged;
    if (rs.damage.size() < RecoveryStats::kMaxDamageListed) {
      rs.damage.push_back(Damage{.segment = seg, .offset = pos, .what = std::move(what)});
    }
  };

  for (uint32_t seg = 0; seg < table_->num_segments(); ++seg) {
    const log::SegmentMeta m = table_->meta(seg);
    if (m.state == SegmentState::kFree) {
      // Free() zeroes a segment before its word says Free, and Allocate
      // says Using before anything is written: data under a Free word means
      // the word is damaged (a flip of Used's bit), and the data is lost to
      // this scan.
      if (!internal::BlankLine(table_->SegmentBase(seg))) {
        note_damage(seg, 0, "marked free but holds data: its meta word is damaged");
      }
      continue;
    }
    ++rs.segments_scanned;
    const std::byte* base = table_->SegmentBase(seg);
    const uint64_t seg_off = table_->SegmentOffset(seg);
    const uint64_t size = table_->segment_size();
    uint64_t pos = 0;
    // A local log's tail is its first blank line: no tail pointer. A receive
    // segment can have holes (several senders' DMAs, persisted in any order,
    // then a crash): walk it stride by stride.
    const bool received = m.owner == SegmentOwner::kControl;
    // Everything in a sealed segment (Used, Committed) was persisted before
    // it was sealed, and a torn place was erased first (below, and
    // SealReceiveSegment): a block there that fails to decode on a line
    // that is not blank cannot be a crash's tear — it is damage. Only a
    // segment open at the crash (Using) may hold a torn persist or transfer.
    const bool sealed = m.state != SegmentState::kUsing;
    uint64_t end = 0;  // just past the last valid block
    const uint64_t damaged_before = rs.damaged;
    bool in_damage = false;
    while (pos + log::kHeaderSize <= size) {
      // Ended on purpose: a hidden block, or (at 0) a Free() cut short. (A
      // receive segment's walk also looks between blocks, where a value's
      // bytes could hold the word: there only its start counts.)
      if ((pos == 0 || !received) && log::HasEndMark(base + pos)) break;
      auto d = log::DecodeBlock({base + pos, size - pos}, options_.limits);
      if (!d.status.ok()) {
        const bool blank = internal::BlankLine(base + pos);
        if (blank && !received) break;  // the end of a local log
        if (blank) {
          in_damage = false;
          pos += log::kAlign;
          continue;
        }
        const uint64_t next = SkipInvalid(base, pos, size, options_.limits);
        // A local log's block with its first word unwritten: a write cut
        // short by the process's death (EncodeBlock writes that word last).
        // Only the last write can be cut short: a valid block after it
        // means the word was lost later (one process writes a t-log, in order).
        const bool cut_short = LoadLE<uint64_t>(base + pos) == 0 &&
                               (options_.tears_possible || !ValidBlockAfter(base, next, size, options_.limits));
        if (sealed || (!received && !cut_short && !options_.tears_possible)) {
          // A run of lines that do not decode is one damaged place (a torn
          // header leaves its body to be walked line by line).
          if (!in_damage) note_damage(seg, pos, d.status.message());
          in_damage = log::IntactHeaderBlockBytes({base + pos, size - pos}, options_.limits) == 0;
        } else if (!received) {
          // The torn tail of a local log: nothing after it was acknowledged.
          // The end mark ends the log here for every later scan.
          log::StampEndMark(region_, table_->SegmentBase(seg) + pos);
          ++rs.torn_erased;
          break;
        }  // else a receive segment's torn place: erased below, before it is sealed
        pos = next;
        continue;
      }
      in_damage = false;
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
    if (received && !sealed) rs.torn_erased += EraseTorn(seg);
    if (end == 0 && rs.damaged == damaged_before) {
      // Nothing valid: a segment allocated just before the crash, or one whose
      // Free() was cut short (its end mark). A damaged one is kept: what it
      // holds is evidence.
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

std::string RecoveryStats::DescribeDamage() const {
  if (damaged == 0) return "no damage";
  std::string out = std::to_string(damaged) + " damaged place" + (damaged == 1 ? "" : "s") + ":";
  for (const Damage& d : damage) {
    out += " segment " + std::to_string(d.segment) + " +" + std::to_string(d.offset) + " (" + d.what + ");";
  }
  if (damaged > damage.size()) out += " and " + std::to_string(damaged - damage.size()) + " more";
  return out;
}

}  // namespace slip::store
