// Indirect cells: how several KVS nodes share a hot key (selective
// replication, docs/papers/dinomo.md §4d; layout in docs/formats/
// dinomo_pool.md). The index points a shared key at its cell instead of an
// entry; the cell's 8-byte word points at the key's current entry. An owner
// writes an entry into its own log as usual, then moves the word to it with
// one one-sided compare-and-swap; a reader reads the cell, then the entry.
// The pool creates and removes cells (POOL_SHARE, POOL_UNSHARE); nodes only
// ever swap the word.
//
// A cell is 64-byte aligned:
//   off size
//    0   8   magic       kCellMagic (kCellRemoved once unshared)
//    8   8   word        IndexPointer::Encode() of the current entry, 0: none
//   16   4   key_len
//   20   4   key_crc     CRC32C of the key
//   24   8   zero
//   32   -   key bytes, zero-padded to a multiple of 64
// Byte 0 of a magic is never 1..4, so a cell never reads as a log block
// (whose first byte is its type): a reader holding a stale cell address in
// a segment reused for a log sees "no cell", never a wrong one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace slip::dinomo {

constexpr uint64_t kCellMagic = 0x4c4c4543504c53f0ull;    // "\xf0SLPCELL"
constexpr uint64_t kCellRemoved = 0x4c4c4543504c53f1ull;  // the same, unshared
constexpr uint64_t kCellWordOffset = 8;
constexpr size_t kCellHeader = 32;

// The cell's size for a key of `key_len` bytes.
uint32_t CellBytes(size_t key_len);

// Writes the cell for `key` holding `word`, magic included (the caller
// orders persistence: everything before the magic).
void EncodeCell(std::span<std::byte> cell, std::string_view key, uint64_t word, uint64_t magic = kCellMagic);

struct CellView {
  uint64_t magic = 0;
  uint64_t word = 0;
  std::string_view key;  // into the bytes parsed
  uint32_t bytes = 0;    // the cell's size
};
// A cell (live or removed) whose key checks, or nullopt. The word is read
// as the 8 bytes at kCellWordOffset of `cell` (one-sided readers: as the
// READ brought it).
std::optional<CellView> ParseCell(std::span<const std::byte> cell);

}  // namespace slip::dinomo
