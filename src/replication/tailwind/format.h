// Tailwind's buffer format (docs/papers/tailwind.md §2.2, §2.7), on top of the log
// codec: a backup buffer holds log blocks back to back, and every one-sided
// transfer ends with a CHECKSUM block whose value is the running CRC32C over
// the 32-byte headers of every non-checksum block before it in the buffer
// (stored as 1 when it computes to 0, so zeroed space never passes).
//
// The backup's CPU never looks at a buffer while it is open. At recovery
// (promotion, or the buffer's close) ScanTailwindBuffer finds the prefix that
// is certainly whole: the hardened Algorithm 1 — bounded lengths, and every
// block's own CRC checked too (so the result does not depend on the NIC
// placing a transfer's bytes in address order).
//
// Cost: a checksum block is 64 B (the codec's alignment), where the paper's
// RAMCloud log spends 4 B; bench results report it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "log/entry.h"

namespace slip::replication {

constexpr size_t kChecksumBlockBytes = 64;

// The running checksum of one buffer, kept by its writer.
class TailwindChain {
 public:
  // Folds in the header of every block of `blocks` (encoded entries back to
  // back, as they will be written). REQUIRES: valid encoded blocks.
  void Absorb(std::span<const std::byte> blocks);
  // Encodes the CHECKSUM block that closes the transfer: 64 bytes at dst.
  void EncodeChecksum(std::byte* dst) const;
  uint32_t running() const { return running_; }
  // Checksums encoded so far in this buffer (the checksum block's version).
  uint64_t count() const { return count_; }
  void Reset() { running_ = 0, count_ = 0; }

 private:
  uint32_t running_ = 0;
  mutable uint64_t count_ = 0;
};

// The stored form of a running checksum: never 0.
inline uint32_t StoredChecksum(uint32_t running) { return running == 0 ? 1u : running; }

// Length of the valid prefix of a buffer: it ends just after the last
// CHECKSUM block that matches the running checksum of the headers before it,
// with every block up to there decoding cleanly (CRC included); 0 when there
// is none. Never reads outside `buf`, whatever it holds.
size_t ScanTailwindBuffer(std::span<const std::byte> buf, const log::Limits& limits);

}  // namespace slip::replication
