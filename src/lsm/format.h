// The LSM engine's key and integer encodings (docs/formats/lsm_sst.md),
// shared by its MemTable, SST blocks and version edits.
//
// An *internal key* is the user key followed by an 8-byte trailer,
// (sequence << 8) | type, little-endian. Internal keys order by user key
// ascending, then by sequence descending — the newest write of a key comes
// first, so a seek to (key, snapshot) lands on the newest version visible
// at the snapshot — then by type descending.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace slip::lsm {

enum class ValueType : uint8_t { kDeletion = 0, kValue = 1 };
constexpr uint64_t kMaxSequence = (uint64_t{1} << 56) - 1;

// Unsigned LEB128: 7 bits per byte, low first.
void PutVarint32(std::string* out, uint32_t v);
void PutVarint64(std::string* out, uint64_t v);
// Reads one from the front of `in` and advances it; nullopt (and `in`
// unchanged) when it is cut short or longer than the type allows.
// GetVarint32 is inline for the one-byte case, most of a block entry's
// lengths: a lookup decodes three per entry it passes.
std::optional<uint32_t> GetVarint32Slow(std::string_view* in);  // any length
inline std::optional<uint32_t> GetVarint32(std::string_view* in) {
  if (!in->empty() && static_cast<uint8_t>(in->front()) < 0x80) {
    const auto v = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    return v;
  }
  return GetVarint32Slow(in);
}
std::optional<uint64_t> GetVarint64(std::string_view* in);
void PutFixed32(std::string* out, uint32_t v);
void PutFixed64(std::string* out, uint64_t v);
uint32_t DecodeFixed32(const char* p);
uint64_t DecodeFixed64(const char* p);

// REQUIRES: sequence <= kMaxSequence.
void AppendInternalKey(std::string* out, std::string_view user_key, uint64_t sequence, ValueType type);
std::string InternalKey(std::string_view user_key, uint64_t sequence, ValueType type);

struct ParsedInternalKey {
  std::string_view user_key;
  uint64_t sequence = 0;
  ValueType type = ValueType::kValue;
};
// nullopt when shorter than the trailer or of an unknown type.
std::optional<ParsedInternalKey> ParseInternalKey(std::string_view internal_key);

// <0, 0, >0 as a is before, equal to, after b in internal-key order.
// REQUIRES: both at least 8 bytes (the trailer).
int CompareInternalKeys(std::string_view a, std::string_view b);

}  // namespace slip::lsm
