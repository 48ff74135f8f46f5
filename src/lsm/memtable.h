// MemTable: the LSM engine's writes not yet in an SST, ordered by internal
// key (newest version of a key first). A std::map under the engine's one
// writer: the lock-free skiplist of LevelDB serves concurrent readers, and
// this engine reads and writes on one executor (issue "RubbleDB"; the
// chain's head seals MemTables at operation counts it chooses, so they are
// whole values here, not a stream).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "lsm/format.h"

namespace slip::lsm {

class MemTable {
 public:
  // REQUIRES: `sequence` not used before in this MemTable.
  void Add(uint64_t sequence, ValueType type, std::string_view user_key, std::string_view value);

  struct Found {
    uint64_t sequence = 0;
    ValueType type = ValueType::kValue;
    std::string_view value;  // valid while the MemTable lives and is not added to
  };
  // The newest version of `user_key` at or before `snapshot`.
  std::optional<Found> Get(std::string_view user_key, uint64_t snapshot = kMaxSequence) const;

  // Every entry in internal-key order (what a flush writes).
  void ForEach(const std::function<void(std::string_view internal_key, std::string_view value)>& fn) const;

  size_t entries() const { return map_.size(); }
  // Keys, values and a per-entry overhead: when to seal it.
  size_t ApproximateBytes() const { return bytes_; }
  uint64_t smallest_sequence() const { return smallest_; }
  uint64_t largest_sequence() const { return largest_; }

 private:
  struct Order {
    bool operator()(const std::string& a, const std::string& b) const { return CompareInternalKeys(a, b) < 0; }
  };
  std::map<std::string, std::string, Order> map_;
  size_t bytes_ = 0;
  uint64_t smallest_ = kMaxSequence, largest_ = 0;
};

}  // namespace slip::lsm
