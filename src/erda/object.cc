#include "erda/object.h"

#include <cstring>

#include "common/coding.h"
#include "common/crc32c.h"
#include "runtime/cost.h"

namespace slip::erda {
namespace {

uint32_t ObjectCrc(const std::byte* p, size_t bytes) {
  runtime::Charge(runtime::Cost::kChecksum, bytes);
  const uint32_t c = Crc32c(0, p, 1);
  return Crc32c(c, p + 5, bytes - 5);
}

}  // namespace

void EncodeObject(ObjectType type, std::string_view key, std::string_view value, std::byte* dst) {
  if (type == ObjectType::kDel) value = {};
  const size_t bytes = ObjectBytes(key.size(), value.size());
  dst[0] = static_cast<std::byte>(type);
  StoreLE<uint16_t>(dst + 5, static_cast<uint16_t>(key.size()));
  StoreLE<uint32_t>(dst + 7, static_cast<uint32_t>(value.size()));
  std::memcpy(dst + kObjectHeader, key.data(), key.size());
  if (!value.empty()) std::memcpy(dst + kObjectHeader + key.size(), value.data(), value.size());
  StoreLE<uint32_t>(dst + 1, ObjectCrc(dst, bytes));
}

std::string EncodeObject(ObjectType type, std::string_view key, std::string_view value) {
  if (type == ObjectType::kDel) value = {};
  std::string out(ObjectBytes(key.size(), value.size()), '\0');
  EncodeObject(type, key, value, reinterpret_cast<std::byte*>(out.data()));
  return out;
}

Result<size_t> PeekObjectBytes(std::span<const std::byte> head, const log::Limits& limits) {
  if (head.size() < kObjectHeader) return Status::Corruption("object header cut short");
  const auto type = static_cast<ObjectType>(head[0]);
  if (type != ObjectType::kPut && type != ObjectType::kDel) {
    return Status::Corruption("no object here (type byte " + std::to_string(static_cast<int>(head[0])) + ")");
  }
  const uint16_t key_len = LoadLE<uint16_t>(head.data() + 5);
  const uint32_t value_len = LoadLE<uint32_t>(head.data() + 7);
  if (key_len == 0 || key_len > limits.max_key) {
    return Status::Corruption("object key length " + std::to_string(key_len) + " out of range");
  }
  if (value_len > limits.max_value) {
    return Status::Corruption("object value length " + std::to_string(value_len) + " out of range");
  }
  if (type == ObjectType::kDel && value_len != 0) return Status::Corruption("a delete object with a value");
  return ObjectBytes(key_len, value_len);
}

Result<ObjectView> DecodeObject(std::span<const std::byte> bytes, const log::Limits& limits) {
  SLIP_ASSIGN_OR_RETURN(size_t n, PeekObjectBytes(bytes, limits));
  if (bytes.size() < n) {
    return Status::Corruption("object of " + std::to_string(n) + " bytes, only " +
                              std::to_string(bytes.size()) + " read");
  }
  if (LoadLE<uint32_t>(bytes.data() + 1) != ObjectCrc(bytes.data(), n)) {
    return Status::Corruption("object CRC mismatch");
  }
  ObjectView v;
  v.type = static_cast<ObjectType>(bytes[0]);
  const uint16_t key_len = LoadLE<uint16_t>(bytes.data() + 5);
  const char* p = reinterpret_cast<const char*>(bytes.data()) + kObjectHeader;
  v.key = std::string_view(p, key_len);
  v.value = std::string_view(p + key_len, n - kObjectHeader - key_len);
  v.bytes = n;
  return v;
}

}  // namespace slip::erda
