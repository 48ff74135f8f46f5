#include "lsm/format.h"

#include <cassert>

#include "common/coding.h"

namespace slip::lsm {

void PutVarint32(std::string* out, uint32_t v) { PutVarint64(out, v); }

void PutVarint64(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

std::optional<uint64_t> GetVarint64(std::string_view* in) {
  uint64_t v = 0;
  for (size_t i = 0; i < in->size() && i < 10; ++i) {
    const auto b = static_cast<uint8_t>((*in)[i]);
    if (i == 9 && b > 1) return std::nullopt;  // past 64 bits
    v |= uint64_t{b & 0x7fu} << (7 * i);
    if ((b & 0x80) == 0) {
      in->remove_prefix(i + 1);
      return v;
    }
  }
  return std::nullopt;
}

std::optional<uint32_t> GetVarint32Slow(std::string_view* in) {
  std::string_view probe = *in;
  auto v = GetVarint64(&probe);
  if (!v || *v > UINT32_MAX) return std::nullopt;
  *in = probe;
  return static_cast<uint32_t>(*v);
}

void PutFixed32(std::string* out, uint32_t v) {
  char b[4];
  StoreLE(b, v);
  out->append(b, 4);
}

void PutFixed64(std::string* out, uint64_t v) {
  char b[8];
  StoreLE(b, v);
  out->append(b, 8);
}

uint32_t DecodeFixed32(const char* p) { return LoadLE<uint32_t>(p); }
uint64_t DecodeFixed64(const char* p) { return LoadLE<uint64_t>(p); }

void AppendInternalKey(std::string* out, std::string_view user_key, uint64_t sequence, ValueType type) {
  assert(sequence <= kMaxSequence);
  out->append(user_key);
  PutFixed64(out, (sequence << 8) | static_cast<uint8_t>(type));
}

std::string InternalKey(std::string_view user_key, uint64_t sequence, ValueType type) {
  std::string k;
  k.reserve(user_key.size() + 8);
  AppendInternalKey(&k, user_key, sequence, type);
  return k;
}

std::optional<ParsedInternalKey> ParseInternalKey(std::string_view internal_key) {
  if (internal_key.size() < 8) return std::nullopt;
  const uint64_t trailer = DecodeFixed64(internal_key.data() + internal_key.size() - 8);
  const auto type = static_cast<uint8_t>(trailer & 0xff);
  if (type > static_cast<uint8_t>(ValueType::kValue)) return std::nullopt;
  return ParsedInternalKey{internal_key.substr(0, internal_key.size() - 8), trailer >> 8, static_cast<ValueType>(type)};
}

int CompareInternalKeys(std::string_view a, std::string_view b) {
  const int c = a.substr(0, a.size() - 8).compare(b.substr(0, b.size() - 8));
  if (c != 0) return c;
  const uint64_t ta = DecodeFixed64(a.data() + a.size() - 8), tb = DecodeFixed64(b.data() + b.size() - 8);
  // Newer (larger sequence, then type) first.
  return ta > tb ? -1 : ta < tb ? 1 : 0;
}

}  // namespace slip::lsm
