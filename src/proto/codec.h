// The message codec's pieces shared by proto/*.cc (not installed, not for
// other modules): fixed-width little-endian writers and bounds-checked
// readers.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "common/coding.h"
#include "common/status.h"

namespace slip::proto::internal {


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

inline Status Finish(const Reader& r, const char* what) {
  if (!r.ok()) return Status::Corruption(std::string(what) + ": message shorter than its fields");
  if (!r.at_end()) return Status::Corruption(std::string(what) + ": trailing bytes");
  return Status::Ok();
}

}  // namespace slip::proto::internal
