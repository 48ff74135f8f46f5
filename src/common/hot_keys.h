// HotKeys: the most requested keys of a stream, in bounded memory — the
// Space-Saving sketch (Metwally, Agrawal and El Abbadi, 2005). It tracks
// `capacity` keys; a key not tracked takes the place of the least counted
// one and inherits its count plus one, so a key's count may overstate it by
// at most that inherited part (`error`), never understate it, and every key
// requested more than total/capacity times is tracked.
//
// DINOMO's policy engine asks for the hot keys of each epoch (docs/papers/
// dinomo.md §5c): a node keeps one sketch per window and hands out the last
// complete one.
//
// Not synchronised.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace slip {

class HotKeys {
 public:
  explicit HotKeys(size_t capacity = 32) : capacity_(capacity == 0 ? 1 : capacity) {}

  void Record(std::string_view key) {
    ++total_;
    if (auto it = counts_.find(std::string(key)); it != counts_.end()) {
      ++it->second.count;
      return;
    }
    if (counts_.size() < capacity_) {
      counts_.emplace(std::string(key), Count{1, 0});
      return;
    }
    // O(capacity), only for a key not tracked.
    auto least = std::min_element(counts_.begin(), counts_.end(),
                                  [](const auto& a, const auto& b) { return a.second.count < b.second.count; });
    const uint64_t inherited = least->second.count;
    counts_.erase(least);
    counts_.emplace(std::string(key), Count{inherited + 1, inherited});
  }

  struct Key {
    std::string key;
    uint64_t count = 0;  // at least the true count, at most count - error below
    uint64_t error = 0;
  };
  // The `n` most counted, most first.
  std::vector<Key> Top(size_t n) const {
    std::vector<Key> all;
    all.reserve(counts_.size());
    for (const auto& [k, c] : counts_) all.push_back(Key{k, c.count, c.error});
    std::sort(all.begin(), all.end(), [](const Key& a, const Key& b) {
      return a.count != b.count ? a.count > b.count : a.key < b.key;
    });
    if (all.size() > n) all.resize(n);
    return all;
  }
  uint64_t total() const { return total_; }
  void Clear() {
    counts_.clear();
    total_ = 0;
  }

 private:
  struct Count {
    uint64_t count = 0, error = 0;
  };
  size_t capacity_;
  std::unordered_map<std::string, Count> counts_;
  uint64_t total_ = 0;
};

}  // namespace slip
