// Erda's object: what a client writes one-sidedly into a key's log region
// and what a reader checks on its own, without the server (docs/papers/erda.md
// §2.1, §6.5; byte layout in docs/formats/erda.md).
//
//   off 0  1 B   type: 'P' put, 'D' delete (never 0: zeroed space is no object)
//   off 1  4 B   CRC32C over byte 0 and bytes [5, end)
//   off 5  2 B   key length
//   off 7  4 B   value length (0 for a delete)
//   off 11       key, then value
//
// Little-endian. An object occupies ObjectBytes() bytes and starts on an
// 8-byte boundary of its region; the padding to the next object is never
// written. The lengths are ours (the paper's code had fixed sizes): a reader
// that does not know the size reads a default span, learns the size from
// the header, and reads the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "log/entry.h"

namespace slip::erda {

enum class ObjectType : uint8_t { kPut = 'P', kDel = 'D' };

constexpr size_t kObjectHeader = 11;

constexpr size_t ObjectBytes(size_t key_len, size_t value_len) {
  return kObjectHeader + key_len + value_len;
}
// The space an object takes in its region: the next object starts here.
constexpr size_t AlignedObjectBytes(size_t key_len, size_t value_len) {
  return (ObjectBytes(key_len, value_len) + 7) & ~size_t{7};
}

// Writes the object into dst[0, ObjectBytes()). A delete carries no value.
void EncodeObject(ObjectType type, std::string_view key, std::string_view value, std::byte* dst);
std::string EncodeObject(ObjectType type, std::string_view key, std::string_view value);

struct ObjectView {
  ObjectType type = ObjectType::kPut;
  std::string_view key;
  std::string_view value;
  size_t bytes = 0;  // ObjectBytes of this object
};

// The size the object starting at `head` claims (its header only: at least
// kObjectHeader bytes). Corruption when no object can start like this — a
// zero or unknown type, lengths beyond `limits`, a delete with a value —
// so a reader never trusts a length from garbage before the CRC is checked.
Result<size_t> PeekObjectBytes(std::span<const std::byte> head, const log::Limits& limits);

// Checks everything: the header as PeekObjectBytes does, that `bytes` holds
// the whole object, and its CRC. The views point into `bytes`. Corruption on
// any failure (a torn, never-written, overwritten or bit-flipped object).
Result<ObjectView> DecodeObject(std::span<const std::byte> bytes, const log::Limits& limits);

}  // namespace slip::erda
