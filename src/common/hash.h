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

// Which of a node's `workers` request workers serves `shard`
// (server/worker_pool.h): contiguous ranges of shards, floor(shard * workers
// / num_shards). Placement gives node p of n the shards p, p+n, p+2n, ...
// (cluster::Place), so ranges spread each node's shards over all of its
// workers whatever n is; shard % workers would give them only to the workers
// congruent to p modulo gcd(n, workers) — one worker per node with 3 nodes of
// 3 workers. Nodes, clients and the simulator all route with this; a shard
// past num_shards (a malformed request) goes to worker 0. REQUIRES: workers > 0.
inline uint32_t WorkerOfShard(uint32_t shard, uint32_t num_shards, uint32_t workers) {
  if (shard >= num_shards) return 0;
  return static_cast<uint32_t>(uint64_t{shard} * workers / num_shards);
}

}  // namespace slip
