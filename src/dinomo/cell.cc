#include "dinomo/cell.h"

#include <cstring>

#include "common/crc32c.h"

namespace slip::dinomo {

uint32_t CellBytes(size_t key_len) { return static_cast<uint32_t>((kCellHeader + key_len + 63) / 64 * 64); }

void EncodeCell(std::span<std::byte> cell, std::string_view key, uint64_t word, uint64_t magic) {
  std::memset(cell.data(), 0, CellBytes(key.size()));
  const uint32_t len = static_cast<uint32_t>(key.size());
  const uint32_t crc = Crc32c(0, key.data(), key.size());
  std::memcpy(cell.data() + 8, &word, 8);
  std::memcpy(cell.data() + 16, &len, 4);
  std::memcpy(cell.data() + 20, &crc, 4);
  std::memcpy(cell.data() + kCellHeader, key.data(), key.size());
  std::memcpy(cell.data(), &magic, 8);
}

std::optional<CellView> ParseCell(std::span<const std::byte> cell) {
  if (cell.size() < kCellHeader) return std::nullopt;
  CellView v;
  uint32_t len, crc;
  std::memcpy(&v.magic, cell.data(), 8);
  std::memcpy(&v.word, cell.data() + 8, 8);
  std::memcpy(&len, cell.data() + 16, 4);
  std::memcpy(&crc, cell.data() + 20, 4);
  if (v.magic != kCellMagic && v.magic != kCellRemoved) return std::nullopt;
  if (len > cell.size() - kCellHeader) return std::nullopt;
  const char* key = reinterpret_cast<const char*>(cell.data() + kCellHeader);
  if (Crc32c(0, key, len) != crc) return std::nullopt;
  v.key = std::string_view(key, len);
  v.bytes = CellBytes(len);
  return v;
}

}  // namespace slip::dinomo
