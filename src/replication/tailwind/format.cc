#include "replication/tailwind/format.h"

#include <cstring>

#include "common/coding.h"
#include "common/crc32c.h"

namespace slip::replication {

void TailwindChain::Absorb(std::span<const std::byte> blocks) {
  size_t pos = 0;
  while (pos + log::kHeaderSize <= blocks.size()) {
    const log::BlockHeader h = log::PeekHeader(blocks.data() + pos);
    running_ = Crc32c(running_, blocks.data() + pos, log::kHeaderSize);
    pos += h.BlockBytes();
  }
}

void TailwindChain::EncodeChecksum(std::byte* dst) const {
  std::byte value[8] = {};
  StoreLE<uint32_t>(value, StoredChecksum(running_));
  const log::EntryMeta meta{log::EntryType::kChecksum, 0, ++count_};
  auto layout = log::PlanEntry(0, sizeof(value), 128);  // one 64-byte block
  log::EncodeBlock(meta, {}, std::string_view(reinterpret_cast<const char*>(value), sizeof(value)),
                   *layout, 0, dst);
}

size_t ScanTailwindBuffer(std::span<const std::byte> buf, const log::Limits& limits) {
  size_t pos = 0, valid = 0;
  uint32_t running = 0;
  while (pos + log::kHeaderSize <= buf.size()) {
    // DecodeBlock bounds every length by the buffer and checks the block's
    // CRC: a torn header or body stops the scan here.
    auto d = log::DecodeBlock(buf.subspan(pos), limits);
    if (!d.status.ok()) return valid;
    const log::BlockView& b = d.block;
    if (b.type == log::EntryType::kChecksum) {
      const uint32_t stored = LoadLE<uint32_t>(b.chunk.data());
      if (stored != StoredChecksum(running)) return valid;  // a transfer cut short
      valid = pos + b.encoded_bytes;
    } else {
      running = Crc32c(running, buf.data() + pos, log::kHeaderSize);
    }
    pos += b.encoded_bytes;
  }
  return valid;
}

}  // namespace slip::replication
