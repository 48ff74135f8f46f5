// Key hashing: 64-bit xxh3 of the key bytes. Shards own ranges of this hash
// and the index derives its bucket and tag from it, so it must never change
// for data at rest.
#pragma once

#include <cstdint>
#include <string_view>

namespace slip {

uint64_t HashKey(std::string_view key);

// The shard of `hash` among `num_shards`: shards own contiguous ranges of the
// 64-bit hash space, floor(hash * N / 2^64). The store, the client's routing
// and the cluster configuration all use this one mapping; never change it
// for data at rest. REQUIRES: num_shards > 0.
inline uint32_t ShardOfHash(uint64_t hash, uint32_t num_shards) {
  __extension__ using U128 = unsigned __int128;
  return static_cast<uint32_t>((static_cast<U128>(hash) * num_shards) >> 64);
}

}  // namespace slip
