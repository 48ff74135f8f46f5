#include "proto/kv.h"

#include <cstring>

#include "common/coding.h"

namespace slip::proto {
namespace {

// Appends fixed-width little-endian integers and byte strings.
class Writer {
 public:
  explicit Writer(size_t reserve) { out_.reserve(reserve); }
  template <typename T>
  void Put(T v) {
    char buf[sizeof(T)];
    StoreLE<T>(reinterpret_cast<std::byte*>(buf), v);
    out_.append(buf, sizeof(T));
  }
  void Bytes(std::string_view s) { out_.append(s); }
  // key_len u32 | value_len u32 | key | value: every message ends this way.
  void KeyValue(std::string_view key, std::string_view value) {
    Put<uint32_t>(static_cast<uint32_t>(key.size()));
    Put<uint32_t>(static_cast<uint32_t>(value.size()));
    Bytes(key);
    Bytes(value);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads what Writer wrote; every read is bounds-checked and a failure is
// sticky, so decoders check once at the end.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> buf) : buf_(buf) {}
  template <typename T>
  T Get() {
    if (!Need(sizeof(T))) return T{};
    T v = LoadLE<T>(buf_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::string_view Bytes(size_t n) {
    if (!Need(n)) return {};
    std::string_view s(reinterpret_cast<const char*>(buf_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return pos_ == buf_.size(); }

 private:
  bool Need(size_t n) {
    if (!ok_ || buf_.size() - pos_ < n) {
      ok_ = false;
      return false;
    }
    return true;
  }
  std::span<const std::byte> buf_;
  size_t pos_ = 0;
  bool ok_ = true;
};

Status CheckLengths(uint32_t key_len, uint32_t value_len, const log::Limits& limits) {
  if (key_len > limits.max_key) {
    return Status::TooLarge("key of " + std::to_string(key_len) + " bytes exceeds the limit of " +
                            std::to_string(limits.max_key));
  }
  if (value_len > limits.max_value) {
    return Status::TooLarge("value of " + std::to_string(value_len) +
                            " bytes exceeds the limit of " + std::to_string(limits.max_value));
  }
  return Status::Ok();
}

Status Finish(const Reader& r, const char* what) {
  if (!r.ok()) return Status::Corruption(std::string(what) + ": message shorter than its fields");
  if (!r.at_end()) return Status::Corruption(std::string(what) + ": trailing bytes");
  return Status::Ok();
}

// Reads Writer::KeyValue's tail and requires the message to end there.
Status ReadKeyValue(Reader& rd, const log::Limits& limits, const char* what,
                    std::string_view* key, std::string_view* value) {
  const uint32_t key_len = rd.Get<uint32_t>();
  const uint32_t value_len = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption(std::string(what) + " shorter than its header");
  SLIP_RETURN_IF_ERROR(CheckLengths(key_len, value_len, limits));
  *key = rd.Bytes(key_len);
  *value = rd.Bytes(value_len);
  return Finish(rd, what);
}

}  // namespace

const char* MethodName(uint16_t method) {
  switch (static_cast<Method>(method)) {
    case Method::kPut: return "PUT";
    case Method::kGet: return "GET";
    case Method::kDel: return "DEL";
    case Method::kReplicate: return "REPLICATE";
    case Method::kGetConfig: return "GET_CONFIG";
  }
  return "UNKNOWN";
}

// KvRequest: term u64 | shard u32 | key_len u32 | value_len u32 | key | value
std::string Encode(const KvRequest& r) {
  Writer w(20 + r.key.size() + r.value.size());
  w.Put<uint64_t>(r.term);
  w.Put<uint32_t>(r.shard);
  w.KeyValue(r.key, r.value);
  return w.Take();
}

Result<KvRequest> DecodeKvRequest(std::span<const std::byte> buf, const log::Limits& limits) {
  Reader rd(buf);
  KvRequest r;
  r.term = rd.Get<uint64_t>();
  r.shard = rd.Get<uint32_t>();
  SLIP_RETURN_IF_ERROR(ReadKeyValue(rd, limits, "KV request", &r.key, &r.value));
  if (r.key.empty()) return Status::InvalidArgument("empty key");
  return r;
}

// KvResponse: term u64 | version u64 | value_len u32 | value
std::string Encode(const KvResponse& r) {
  Writer w(20 + r.value.size());
  w.Put<uint64_t>(r.term);
  w.Put<uint64_t>(r.version);
  w.Put<uint32_t>(static_cast<uint32_t>(r.value.size()));
  w.Bytes(r.value);
  return w.Take();
}

Result<KvResponse> DecodeKvResponse(std::span<const std::byte> buf, const log::Limits& limits) {
  Reader rd(buf);
  KvResponse r;
  r.term = rd.Get<uint64_t>();
  r.version = rd.Get<uint64_t>();
  const uint32_t value_len = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption("KV response shorter than its header");
  SLIP_RETURN_IF_ERROR(CheckLengths(0, value_len, limits));
  r.value = rd.Bytes(value_len);
  SLIP_RETURN_IF_ERROR(Finish(rd, "KV response"));
  return r;
}

// ReplicateRequest: term u64 | version u64 | shard u16 | type u8 | pad u8 |
//                   key_len u32 | value_len u32 | key | value
std::string Encode(const ReplicateRequest& r) {
  Writer w(28 + r.key.size() + r.value.size());
  w.Put<uint64_t>(r.term);
  w.Put<uint64_t>(r.meta.version);
  w.Put<uint16_t>(r.meta.shard);
  w.Put<uint8_t>(static_cast<uint8_t>(r.meta.type));
  w.Put<uint8_t>(0);
  w.KeyValue(r.key, r.value);
  return w.Take();
}

Result<ReplicateRequest> DecodeReplicateRequest(std::span<const std::byte> buf,
                                                const log::Limits& limits) {
  Reader rd(buf);
  ReplicateRequest r;
  r.term = rd.Get<uint64_t>();
  r.meta.version = rd.Get<uint64_t>();
  r.meta.shard = rd.Get<uint16_t>();
  const uint8_t type = rd.Get<uint8_t>();
  const uint8_t pad = rd.Get<uint8_t>();
  if (!rd.ok()) return Status::Corruption("replicate request shorter than its header");
  if (pad != 0) return Status::Corruption("replicate request: reserved byte set");
  if (type != static_cast<uint8_t>(log::EntryType::kPut) &&
      type != static_cast<uint8_t>(log::EntryType::kDel)) {
    return Status::Corruption("replicate request: entry type " + std::to_string(type) +
                              " is neither PUT nor DEL");
  }
  r.meta.type = static_cast<log::EntryType>(type);
  if (r.meta.version == 0 || r.meta.version > log::kMaxVersion) {
    return Status::Corruption("replicate request: version out of range");
  }
  SLIP_RETURN_IF_ERROR(ReadKeyValue(rd, limits, "replicate request", &r.key, &r.value));
  if (r.key.empty()) return Status::Corruption("replicate request: empty key");
  if (r.meta.type == log::EntryType::kDel && !r.value.empty()) {
    return Status::Corruption("replicate request: DEL with a value");
  }
  return r;
}

}  // namespace slip::proto
