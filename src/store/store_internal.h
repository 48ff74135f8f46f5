// Pieces the Store's .cc files share (private to store/).
#pragma once

#include <cstdint>

#include "log/entry.h"
#include "log/segment_table.h"

namespace slip::store::internal {

using log::EntryType;
using log::SegmentOwner;
using log::SegmentState;

constexpr uint32_t kNoSegment = UINT32_MAX;

// Blocks that hold a key's PUT or DEL (others: COMMIT_VERSION, CHECKSUM).
inline bool IsData(EntryType t) { return t == EntryType::kPut || t == EntryType::kDel; }

// A 64-byte line of zeros where a block could start: never-written space
// (or erased: a torn place, a rejected message). A crash's tear or a
// bit flip never zeroes a whole line: a block's first line always holds
// non-zero words besides the first (the version|cnt word: cnt >= 1).
inline bool BlankLine(const std::byte* p) {
  for (size_t i = 0; i < log::kAlign; ++i) {
    if (p[i] != std::byte{0}) return false;
  }
  return true;
}

// Where a walk of a receive segment goes on after the block at `pos` failed
// to decode: past the whole block when its header is intact (a transfer cut
// short — never look inside it, where a value could hold bytes that look
// like a block), else to the next stride (a hole: a line never written or
// lost in a crash).
inline uint64_t SkipInvalid(const std::byte* base, uint64_t pos, uint64_t size, const log::Limits& limits) {
  const uint64_t claimed = log::IntactHeaderBlockBytes({base + pos, size - pos}, limits);
  return pos + (claimed != 0 ? claimed : log::kAlign);
}

// The 8-byte value of a DEL entry: reserved node-local metadata (zero).
inline constexpr char kDelValue[8] = {};

}  // namespace slip::store::internal
