#include "lsm/memtable.h"

#include <algorithm>

namespace slip::lsm {

void MemTable::Add(uint64_t sequence, ValueType type, std::string_view user_key, std::string_view value) {
  std::string key = InternalKey(user_key, sequence, type);
  bytes_ += key.size() + value.size() + 48;
  map_.emplace(std::move(key), std::string(value));
  smallest_ = std::min(smallest_, sequence);
  largest_ = std::max(largest_, sequence);
}

std::optional<MemTable::Found> MemTable::Get(std::string_view user_key, uint64_t snapshot) const {
  const auto it = map_.lower_bound(InternalKey(user_key, std::min(snapshot, kMaxSequence), ValueType::kValue));
  if (it == map_.end()) return std::nullopt;
  const auto parsed = ParseInternalKey(it->first);
  if (!parsed || parsed->user_key != user_key) return std::nullopt;
  return Found{parsed->sequence, parsed->type, it->second};
}

void MemTable::ForEach(const std::function<void(std::string_view, std::string_view)>& fn) const {
  for (const auto& [k, v] : map_) fn(k, v);
}

}  // namespace slip::lsm
