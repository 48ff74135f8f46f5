#include "dinomo/adaptive_cache.h"

#include <algorithm>
#include <vector>

#include "runtime/cost.h"

namespace slip::dinomo {

AdaptiveCache::AdaptiveCache(CacheOptions options)
    : options_(options), capacity_(options.capacity_bytes), miss_rts_(options.initial_miss_rts) {
  options_.value_share = std::clamp(options_.value_share, 0.0, 1.0);
  if (options_.sketch_counters != 0) {
    uint32_t n = 1;
    while (n < options_.sketch_counters) n <<= 1;
    options_.sketch_counters = n;
    sketch_.assign(4 * size_t{n}, 0);
  }
}

namespace {
// Row r's counter for a key hash: a different mix of the hash per row.
size_t SketchSlot(size_t hash, uint32_t row, uint32_t counters) {
  uint64_t h = hash + 0x9e3779b97f4a7c15ull * (row + 1);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 29;
  return size_t{row} * counters + (h & (counters - 1));
}
}  // namespace

void AdaptiveCache::Count(std::string_view key) {
  if (sketch_.empty()) return;
  const size_t h = std::hash<std::string_view>{}(key);
  for (uint32_t r = 0; r < 4; ++r) {
    uint32_t& c = sketch_[SketchSlot(h, r, options_.sketch_counters)];
    if (c != UINT32_MAX) ++c;
  }
}

uint64_t AdaptiveCache::Remembered(std::string_view key) const {
  if (sketch_.empty()) return 1;
  const size_t h = std::hash<std::string_view>{}(key);
  uint32_t least = UINT32_MAX;
  for (uint32_t r = 0; r < 4; ++r) least = std::min(least, sketch_[SketchSlot(h, r, options_.sketch_counters)]);
  return std::max<uint64_t>(1, least);
}

uint64_t AdaptiveCache::value_capacity() const {
  return static_cast<uint64_t>(static_cast<double>(capacity_) * options_.value_share);
}

// ---------------------------------------------------------------------------
// Bookkeeping: every entry is in exactly one order — values in values_lru_;
// shortcuts in shortcuts_lfu_ (adaptive) or shortcuts_lru_ (static).

void AdaptiveCache::Link(Node* n) {
  Entry& e = n->second;
  if (e.is_value) {
    values_lru_.push_front(n);
    e.lru = values_lru_.begin();
    value_pool_ += ValueBytes(n->first, e.value.size());
    used_ += ValueBytes(n->first, e.value.size());
  } else {
    if (adaptive()) {
      e.lfu = shortcuts_lfu_.emplace(e.hits, n);
    } else {
      shortcuts_lru_.push_front(n);
      e.lru = shortcuts_lru_.begin();
    }
    used_ += ShortcutBytes(n->first);
  }
}

void AdaptiveCache::Unlink(Node* n) {
  Entry& e = n->second;
  if (e.is_value) {
    values_lru_.erase(e.lru);
    value_pool_ -= ValueBytes(n->first, e.value.size());
    used_ -= ValueBytes(n->first, e.value.size());
  } else {
    if (adaptive()) {
      shortcuts_lfu_.erase(e.lfu);
    } else {
      shortcuts_lru_.erase(e.lru);
    }
    used_ -= ShortcutBytes(n->first);
  }
}

void AdaptiveCache::MakeValue(Node* n, std::string_view value) {
  Unlink(n);
  n->second.is_value = true;
  n->second.value.assign(value);
  runtime::ChargeBytes(runtime::Cost::kCacheLookup, value.size());
  Link(n);
}

void AdaptiveCache::Demote(Node* n) {
  Unlink(n);
  n->second.is_value = false;
  n->second.value.clear();
  n->second.value.shrink_to_fit();
  Link(n);
  ++stats_.demotions;
}

void AdaptiveCache::Evict(Node* n) {
  Unlink(n);
  map_.erase(n->first);
  ++stats_.evictions;
}

bool AdaptiveCache::MakeRoom(uint64_t need, Node* keep) {
  const auto fits = [&] { return used_ + need <= capacity_; };
  // Demote LRU values first (each frees its value bytes, keeps the key).
  while (!fits()) {
    auto victim = std::find_if(values_lru_.rbegin(), values_lru_.rend(), [&](Node* n) { return n != keep; });
    if (victim == values_lru_.rend()) break;
    Demote(*victim);
  }
  // Then evict shortcuts: least frequently used (adaptive), least recently
  // used (static).
  while (!fits()) {
    Node* victim = nullptr;
    if (adaptive()) {
      for (auto& [hits, n] : shortcuts_lfu_) {
        if (n != keep) {
          victim = n;
          break;
        }
      }
    } else {
      auto it = std::find_if(shortcuts_lru_.rbegin(), shortcuts_lru_.rend(), [&](Node* n) { return n != keep; });
      if (it != shortcuts_lru_.rend()) victim = *it;
    }
    if (victim == nullptr) return false;
    Evict(victim);
  }
  return true;
}

void AdaptiveCache::FitValuePool(Node* keep) {
  const uint64_t cap = value_capacity();
  while (value_pool_ > cap) {
    auto victim = std::find_if(values_lru_.rbegin(), values_lru_.rend(), [&](Node* n) { return n != keep; });
    if (victim == values_lru_.rend()) break;
    if (options_.value_share >= 1.0) {
      Evict(*victim);  // value-only: nothing to demote into
    } else {
      Demote(*victim);
    }
  }
}

void AdaptiveCache::FitShortcutPool(Node* keep) {
  const uint64_t cap = capacity_ - std::min(capacity_, value_capacity());
  while (used_ - value_pool_ > cap) {
    auto victim = std::find_if(shortcuts_lru_.rbegin(), shortcuts_lru_.rend(), [&](Node* n) { return n != keep; });
    if (victim == shortcuts_lru_.rend()) break;
    Evict(*victim);
  }
}

// ---------------------------------------------------------------------------

// The simulator's cost model prices each public call as one
// Cost::kCacheLookup and a value's bytes where one is copied in or out
// (runtime/cost.h); free outside a modelled simulation.
AdaptiveCache::Found AdaptiveCache::Lookup(std::string_view key) {
  ++stats_.lookups;
  if (options_.age_every != 0 && stats_.lookups % options_.age_every == 0) Age();
  Count(key);
  auto it = map_.find(key);
  if (it == map_.end()) {
    runtime::Charge(runtime::Cost::kCacheLookup);
    ++stats_.misses;
    return {};
  }
  Node* n = &*it;
  Entry& e = n->second;
  if (!e.is_value) runtime::Charge(runtime::Cost::kCacheLookup);
  if (e.is_value) {
    runtime::Charge(runtime::Cost::kCacheLookup, e.value.size());  // the caller copies the value out
    ++e.hits;
    values_lru_.splice(values_lru_.begin(), values_lru_, e.lru);
    ++stats_.value_hits;
    return {Kind::kValue, e.pointer, e.value};
  }
  if (adaptive()) {
    shortcuts_lfu_.erase(e.lfu);
    ++e.hits;
    e.lfu = shortcuts_lfu_.emplace(e.hits, n);
  } else {
    ++e.hits;
    shortcuts_lru_.splice(shortcuts_lru_.begin(), shortcuts_lru_, e.lru);
  }
  ++stats_.shortcut_hits;
  return {Kind::kShortcut, e.pointer, {}};
}

void AdaptiveCache::ShortcutRead(std::string_view key, std::string_view value, bool shared) {
  runtime::Charge(runtime::Cost::kCacheLookup);
  auto it = map_.find(key);
  if (it == map_.end() || it->second.is_value || shared) return;
  Node* p = &*it;
  if (!adaptive()) {
    // LRU tiers: a shortcut hit moves the key up into the value pool.
    if (options_.value_share <= 0.0 || ValueBytes(key, value.size()) > value_capacity()) return;
    MakeValue(p, value);
    ++stats_.promotions;
    FitValuePool(p);
    return;
  }
  // Eq. 1: what the promotion costs is the hits of the shortcuts evicted to
  // make room, each then a miss of M̄ round trips; it gains hits(P) round
  // trips (each a value hit instead of a shortcut hit).
  const uint64_t extra = value.size();
  if (free_bytes() < extra) {
    uint64_t freed = free_bytes(), lost_hits = 0;
    std::vector<Node*> victims;
    for (auto& [hits, n] : shortcuts_lfu_) {
      if (freed >= extra) break;
      if (n == p) continue;
      victims.push_back(n);
      freed += ShortcutBytes(n->first);
      lost_hits += hits;
    }
    if (freed < extra) return;  // only shortcuts may go for a promotion
    if (static_cast<double>(p->second.hits) < static_cast<double>(lost_hits) * miss_rts_) return;
    for (Node* v : victims) Evict(v);
  }
  MakeValue(p, value);
  ++stats_.promotions;
}

void AdaptiveCache::Missed(std::string_view key, PoolPointer pointer, std::string_view value, double rts,
                           bool shared) {
  miss_rts_ += options_.miss_rts_weight * (rts - miss_rts_);
  if (map_.contains(key)) return Wrote(key, pointer, value, shared);
  runtime::Charge(runtime::Cost::kCacheLookup);
  Insert(key, pointer, value, shared, Remembered(key));
}

void AdaptiveCache::Wrote(std::string_view key, PoolPointer pointer, std::string_view value, bool shared) {
  runtime::Charge(runtime::Cost::kCacheLookup);
  auto it = map_.find(key);
  if (it == map_.end()) return Insert(key, pointer, value, shared, Remembered(key) - 1);
  Node* n = &*it;
  n->second.pointer = pointer;
  if (!n->second.is_value) return;
  if (shared) return Demote(n);
  MakeValue(n, value);
  if (adaptive()) {
    // A larger value may not fit: make room as a miss would, else keep the
    // key as a shortcut, else drop it.
    if (!MakeRoom(0, n)) Demote(n);
    if (used_ > capacity_) Evict(n);
  } else {
    FitValuePool(n);
    if (used_ > capacity_) Demote(n);
    if (used_ > capacity_) Evict(n);
  }
}

void AdaptiveCache::Insert(std::string_view key, PoolPointer pointer, std::string_view value, bool shared,
                           uint64_t hits) {
  if (ShortcutBytes(key) > capacity_) return;
  auto it = map_.try_emplace(std::string(key)).first;
  Node* n = &*it;
  n->second.pointer = pointer;
  n->second.hits = hits;
  if (adaptive()) {
    // BEGIN: spare space holds values.
    if (!shared && free_bytes() >= ValueBytes(key, value.size())) {
      n->second.is_value = true;
      n->second.value.assign(value);
      runtime::ChargeBytes(runtime::Cost::kCacheLookup, value.size());
      Link(n);
      return;
    }
    if (!MakeRoom(ShortcutBytes(key), n)) {
      map_.erase(it);
      return;
    }
    Link(n);
    return;
  }
  const bool as_value = !shared && options_.value_share > 0.0 && ValueBytes(key, value.size()) <= value_capacity();
  if (as_value) {
    n->second.is_value = true;
    n->second.value.assign(value);
    runtime::ChargeBytes(runtime::Cost::kCacheLookup, value.size());
    Link(n);
    FitValuePool(n);
  } else {
    Link(n);
  }
  FitShortcutPool(n);
  if (used_ > capacity_ && n->second.is_value) Demote(n);
  if (used_ > capacity_) Evict(n);
}

void AdaptiveCache::Erase(std::string_view key) {
  auto it = map_.find(key);
  if (it == map_.end()) return;
  Unlink(&*it);
  map_.erase(it);
}

void AdaptiveCache::Clear() {
  map_.clear();
  values_lru_.clear();
  shortcuts_lru_.clear();
  shortcuts_lfu_.clear();
  used_ = value_pool_ = 0;
}

void AdaptiveCache::SetCapacity(uint64_t bytes) {
  capacity_ = bytes;
  if (adaptive()) {
    MakeRoom(0, nullptr);
    return;
  }
  FitValuePool(nullptr);
  FitShortcutPool(nullptr);
}

void AdaptiveCache::Age() {
  for (auto& [key, e] : map_) e.hits /= 2;
  for (uint32_t& c : sketch_) c /= 2;
  if (!adaptive()) return;
  std::multimap<uint64_t, Node*> rebuilt;
  for (auto& [hits, n] : shortcuts_lfu_) n->second.lfu = rebuilt.emplace(n->second.hits, n);
  shortcuts_lfu_.swap(rebuilt);
}

CacheStats AdaptiveCache::stats() const {
  CacheStats s = stats_;
  s.values = values_lru_.size();
  s.shortcuts = map_.size() - values_lru_.size();
  s.used_bytes = used_;
  return s;
}

}  // namespace slip::dinomo
