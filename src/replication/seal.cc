#include "replication/seal.h"

#include <string_view>

#include "common/coding.h"
#include "log/entry.h"

namespace slip::replication {

void EncodeSeal(uint64_t token, uint32_t covered, std::byte* dst) {
  std::byte value[16] = {};
  StoreLE<uint64_t>(value, token);
  StoreLE<uint32_t>(value + 8, covered);
  const log::EntryMeta meta{log::EntryType::kSeal, 0, 0};
  auto layout = log::PlanEntry(0, sizeof(value), 128);  // one 64-byte block
  log::EncodeBlock(meta, {}, std::string_view(reinterpret_cast<const char*>(value), sizeof(value)), *layout,
                   0, dst);
}

std::optional<uint64_t> ReadSeal(std::span<const std::byte> message) {
  if (message.size() < kSealBytes) return std::nullopt;
  auto d = log::DecodeBlock(message.first(kSealBytes), log::Limits{});
  if (!d.status.ok() || d.block.type != log::EntryType::kSeal || d.block.encoded_bytes != kSealBytes) {
    return std::nullopt;
  }
  const std::byte* v = d.block.chunk.data();
  if (LoadLE<uint32_t>(v + 8) != message.size() - kSealBytes || LoadLE<uint32_t>(v + 12) != 0) return std::nullopt;
  return LoadLE<uint64_t>(v);
}

}  // namespace slip::replication
