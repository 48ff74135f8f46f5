#include "lsm/memtable.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "common/coding.h"

namespace slip::lsm {

namespace {

// Records are written by Add and never change, so their lengths decode
// without bounds checks: this runs in every comparison of a search.
inline const char* DecodeLength(const char* p, uint32_t* v) {
  uint32_t b = static_cast<uint8_t>(*p);
  if (b < 0x80) {  // internal keys and most values are under 128 bytes
    *v = b;
    return p + 1;
  }
  uint32_t result = 0;
  for (int shift = 0;; shift += 7) {
    b = static_cast<uint8_t>(*p++);
    result |= (b & 0x7fu) << shift;
    if (b < 0x80) break;
  }
  *v = result;
  return p;
}

inline char* EncodeLength(char* p, uint32_t v) {
  while (v >= 0x80) {
    *p++ = static_cast<char>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<char>(v);
  return p;
}

inline size_t LengthBytes(uint32_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

inline char* Append(char* p, std::string_view bytes) {
  if (!bytes.empty()) std::memcpy(p, bytes.data(), bytes.size());  // data() may be null when empty
  return p + bytes.size();
}

inline std::string_view RecordKey(const char* record) {
  uint32_t n;
  const char* p = DecodeLength(record, &n);
  return {p, n};
}

inline std::string_view RecordValue(const char* record) {
  const std::string_view key = RecordKey(record);
  uint32_t n;
  const char* p = DecodeLength(key.data() + key.size(), &n);
  return {p, n};
}

inline uint64_t Trailer(uint64_t sequence, ValueType type) {
  assert(sequence <= kMaxSequence);
  return (sequence << 8) | static_cast<uint8_t>(type);
}

// CompareInternalKeys, inlined: it runs at every step of every search.
// (skiplist_test checks the order against CompareInternalKeys itself.)
inline int CompareParts(std::string_view user_a, uint64_t trailer_a, std::string_view user_b, uint64_t trailer_b) {
  const size_t common = std::min(user_a.size(), user_b.size());
  if (common != 0) {
    if (const int c = std::memcmp(user_a.data(), user_b.data(), common); c != 0) return c;
  }
  if (user_a.size() != user_b.size()) return user_a.size() < user_b.size() ? -1 : 1;
  return trailer_a > trailer_b ? -1 : trailer_a < trailer_b ? 1 : 0;  // newer (larger sequence, then type) first
}

inline int CompareRecordTo(const char* record, std::string_view user_key, uint64_t trailer) {
  const std::string_view k = RecordKey(record);
  return CompareParts(k.substr(0, k.size() - 8), LoadLE<uint64_t>(k.data() + k.size() - 8), user_key, trailer);
}

}  // namespace

int MemTable::RecordOrder::operator()(const char* a, const char* b) const {
  const std::string_view kb = RecordKey(b);
  return CompareRecordTo(a, kb.substr(0, kb.size() - 8), LoadLE<uint64_t>(kb.data() + kb.size() - 8));
}

int MemTable::RecordOrder::operator()(const char* record, const Target& target) const {
  return CompareRecordTo(record, target.user_key, target.trailer);
}

void MemTable::Add(uint64_t sequence, ValueType type, std::string_view user_key, std::string_view value) {
  assert(user_key.size() + 8 <= UINT32_MAX && value.size() <= UINT32_MAX);
  const auto key_len = static_cast<uint32_t>(user_key.size() + 8);
  const auto value_len = static_cast<uint32_t>(value.size());
  char* const record = arena_.Allocate(LengthBytes(key_len) + key_len + LengthBytes(value_len) + value_len);
  char* p = Append(EncodeLength(record, key_len), user_key);
  StoreLE<uint64_t>(p, Trailer(sequence, type));
  Append(EncodeLength(p + 8, value_len), value);
  list_.Insert(record);
  // Only this (the one writer) stores them; readers may read them stale.
  entries_.store(entries_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (sequence < smallest_.load(std::memory_order_relaxed)) smallest_.store(sequence, std::memory_order_relaxed);
  if (sequence > largest_.load(std::memory_order_relaxed)) largest_.store(sequence, std::memory_order_relaxed);
}

std::optional<MemTable::Found> MemTable::Get(std::string_view user_key, uint64_t snapshot) const {
  // (user_key, snapshot) with the largest type sorts before every version
  // of the key at or below the snapshot and after every newer one.
  List::Iterator it(&list_);
  it.Seek(Target{user_key, Trailer(std::min(snapshot, kMaxSequence), ValueType::kValue)});
  if (!it.Valid()) return std::nullopt;
  const auto parsed = ParseInternalKey(RecordKey(it.key()));
  if (!parsed || parsed->user_key != user_key) return std::nullopt;
  return Found{parsed->sequence, parsed->type, RecordValue(it.key())};
}

void MemTable::ForEach(const std::function<void(std::string_view, std::string_view)>& fn) const {
  List::Iterator it(&list_);
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    fn(RecordKey(it.key()), RecordValue(it.key()));
  }
}

std::string_view MemTable::Iterator::key() const { return RecordKey(it_.key()); }
std::string_view MemTable::Iterator::value() const { return RecordValue(it_.key()); }

void MemTable::Iterator::Seek(std::string_view internal_key) {
  assert(internal_key.size() >= 8);
  const size_t n = internal_key.size() - 8;
  it_.Seek(Target{internal_key.substr(0, n), LoadLE<uint64_t>(internal_key.data() + n)});
}

}  // namespace slip::lsm
