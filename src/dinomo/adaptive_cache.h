// AdaptiveCache: a DINOMO KVS node's cache over the disaggregated pool —
// DAC, "disaggregated adaptive caching" (docs/papers/dinomo.md §3).
//
// A cached key is either a *value* (the key's bytes in DRAM: a hit costs 0
// round trips to the pool) or a *shortcut* (the pool address of the key's
// latest entry: a hit costs 1, the READ of that entry). A miss costs M ≥ 2:
// index bucket(s), then the entry. A shortcut saves M−1 round trips over a
// miss in a few bytes; a value saves one more in many, so shortcuts come
// first and values are what spare space buys. The rules (the paper's
// Table 3 and Eq. 1):
//
//   miss       cache the key: as a value while there is free space, else
//              as a shortcut, freeing space by DEMOTING the least recently
//              used value to a shortcut, or, with no values left, EVICTING
//              the least frequently used shortcut;
//   shortcut   PROMOTE it to a value iff hits(P) × 1 ≥ Σ hits(Sᵢ) × M̄, the
//   hit        Sᵢ being the LFU shortcuts whose eviction makes room and M̄
//              the moving average of what recent misses cost. Promotion
//              only evicts shortcuts; values are demoted only for misses.
//
// Counts are inherited across promotion and demotion. The paper's counts
// never decay, so an old burst can pin shortcuts forever; `age_every`
// halves every count that often (gap 2; 0 = the paper's rule). And the
// paper's counts start at 1 for every key that enters — also a key evicted
// a moment ago — so the newest shortcuts are always the cheapest victims of
// a promotion: under a uniform working set promotions keep evicting them,
// they keep missing, and the mix never settles (seen in this class's
// tests: 363 of 500 keys cached, 145 values where 100 is optimal). So a key
// enters with the count a small frequency sketch remembers for it
// (count-min, 4 rows; `sketch_counters` = 0 gives the paper's rule).
//
// The static policies the paper compares against (Fig. 3) come from the
// same class: a fixed share of the capacity for values, the rest for
// shortcuts, each pool LRU; a miss enters as a value whose LRU victim is
// demoted into the shortcut pool. Share 0 is shortcut-only, 1 value-only.
//
// Single-threaded: one per KVS node thread (or under the caller's lock).
// Deterministic: the same calls give the same state.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace slip::dinomo {

// Where a key's latest entry lives in the pool.
struct PoolPointer {
  uint64_t offset = 0;
  uint32_t length = 0;
  bool operator==(const PoolPointer&) const = default;
};

struct CacheOptions {
  uint64_t capacity_bytes = 1 << 20;
  enum class Policy { kAdaptive, kStatic } policy = Policy::kAdaptive;
  // kStatic: the share of the capacity that holds values (0 shortcut-only,
  // 1 value-only).
  double value_share = 0;
  // Bytes an entry takes besides its key (and its value, for a value):
  // pointer, length, count. The paper's shortcut is 24–64 B with the key.
  uint32_t entry_overhead = 16;
  // Halve every access count after this many lookups (0: never).
  uint64_t age_every = 0;
  // Counters per row of the frequency sketch new entries take their count
  // from (a power of two; 0: every entry starts at 1, as the paper's).
  uint32_t sketch_counters = 1 << 14;
  // M̄ before any miss was seen, and the weight of each new miss in it.
  double initial_miss_rts = 2.0;
  double miss_rts_weight = 1.0 / 64;
};

struct CacheStats {
  uint64_t lookups = 0, value_hits = 0, shortcut_hits = 0, misses = 0;
  uint64_t promotions = 0, demotions = 0, evictions = 0;
  uint64_t values = 0, shortcuts = 0;  // entries now
  uint64_t used_bytes = 0;
};

class AdaptiveCache {
 public:
  explicit AdaptiveCache(CacheOptions options = {});

  enum class Kind { kMiss, kShortcut, kValue };
  struct Found {
    Kind kind = Kind::kMiss;
    PoolPointer pointer;     // kShortcut, kValue
    std::string_view value;  // kValue: valid until the next non-const call
  };
  // Counts an access of `key` and says what the cache has.
  Found Lookup(std::string_view key);
  // After a shortcut hit the caller READ the entry (1 round trip): the key
  // may be promoted to a value. `shared` keys (selectively replicated) are
  // never held as values.
  void ShortcutRead(std::string_view key, std::string_view value, bool shared = false);
  // After a miss the caller found the entry through the index in `rts`
  // round trips: the key is cached.
  void Missed(std::string_view key, PoolPointer pointer, std::string_view value, double rts, bool shared = false);
  // The owner wrote `key`: its entry is now at `pointer`. A cached entry
  // follows (a value takes the new value); an uncached key is cached as on
  // a miss — the writer knows the address, so it costs no round trip.
  void Wrote(std::string_view key, PoolPointer pointer, std::string_view value, bool shared = false);
  void Erase(std::string_view key);
  // Drops everything (the node lost ownership of what it cached).
  void Clear();
  // A smaller capacity demotes LRU values, then evicts LFU shortcuts.
  void SetCapacity(uint64_t bytes);

  CacheStats stats() const;
  double average_miss_rts() const { return miss_rts_; }
  const CacheOptions& options() const { return options_; }

 private:
  struct Entry;
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Map nodes stay where they are across rehashing (iterators do not):
  // the orders below hold node pointers.
  using Node = std::pair<const std::string, Entry>;
  struct Entry {
    PoolPointer pointer;
    uint64_t hits = 0;
    bool is_value = false;
    std::string value;
    std::list<Node*>::iterator lru;                  // values; shortcuts too under kStatic
    std::multimap<uint64_t, Node*>::iterator lfu;   // shortcuts under kAdaptive
  };
  using Map = std::unordered_map<std::string, Entry, Hash, std::equal_to<>>;

  bool adaptive() const { return options_.policy == CacheOptions::Policy::kAdaptive; }
  uint64_t ShortcutBytes(std::string_view key) const { return key.size() + options_.entry_overhead; }
  uint64_t ValueBytes(std::string_view key, size_t value) const { return ShortcutBytes(key) + value; }
  uint64_t free_bytes() const { return used_ >= capacity_ ? 0 : capacity_ - used_; }
  uint64_t value_capacity() const;  // kStatic

  void Insert(std::string_view key, PoolPointer pointer, std::string_view value, bool shared, uint64_t hits);
  // Adds/removes `it` to the structures of its kind.
  void Link(Node* it);
  void Unlink(Node* it);
  void MakeValue(Node* it, std::string_view value);
  void Demote(Node* it);  // value -> shortcut
  void Evict(Node* it);   // gone
  // Frees space until `need` more bytes fit: demotes LRU values, then
  // evicts LFU (adaptive) or LRU (static) shortcuts, never `keep`. False
  // when it cannot.
  bool MakeRoom(uint64_t need, Node* keep);
  // kStatic: keeps each pool within its share.
  void FitValuePool(Node* keep);
  void FitShortcutPool(Node* keep);
  void Age();
  // The frequency sketch: counts every lookup, remembers evicted keys.
  void Count(std::string_view key);
  uint64_t Remembered(std::string_view key) const;

  CacheOptions options_;
  uint64_t capacity_;
  Map map_;
  std::list<Node*> values_lru_;                   // front = most recent
  std::list<Node*> shortcuts_lru_;                // kStatic
  std::multimap<uint64_t, Node*> shortcuts_lfu_;  // kAdaptive: by hits
  uint64_t used_ = 0;
  uint64_t value_pool_ = 0;  // bytes of the value entries (keys included)
  double miss_rts_;
  std::vector<uint32_t> sketch_;  // 4 rows of options_.sketch_counters
  CacheStats stats_;
};

}  // namespace slip::dinomo
