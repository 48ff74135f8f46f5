// The peers Slipstream is compared with, as KvTargets (bench/driver):
//
//   rocksdb     embedded RocksDB, WAL fsync'ed on every write (sync=true):
//               a durable single-node reference on an ordinary disk, in the
//               shape of Slipstream's LSM engine (lsm::DbOptions)
//   lsm         that engine (src/lsm), the same way
//   redis       Debian redis-server, 1 primary + 2 replicas (replicaof) on
//               loopback, no persistence; acks before replicating
//   redis-wait  the same, each write followed by WAIT 2 0: acked only once
//               both replicas have it (in memory) — durability-on-ack
//               comparable to a replicated design
//   memcached   one memcached, text protocol over TCP; unreplicated, volatile
//
// Servers are started on free loopback ports in a temp directory and stopped
// (and the directory removed) when the target is destroyed. A missing server
// binary is a NotFound error naming the Debian package.
#pragma once

#include <memory>
#include <string>

#include "bench/driver/kv_target.h"

namespace slip::bench {

struct RocksDbTargetOptions {
  std::string dir;  // empty: a temp directory under $TMPDIR (removed afterwards)
};
Result<std::unique_ptr<KvTarget>> MakeRocksDbTarget(const RocksDbTargetOptions& options);

// Slipstream's LSM engine (src/lsm) in this process, shaped as the rocksdb
// target is.
struct LsmTargetOptions {
  std::string dir;  // empty: a temp directory under $TMPDIR (removed afterwards)
};
Result<std::unique_ptr<KvTarget>> MakeLsmTarget(const LsmTargetOptions& options);

struct RedisTargetOptions {
  int replicas = 2;
  bool wait = false;  // WAIT <replicas> 0 after every write
  // Every server appends to its AOF and fsyncs it before it answers
  // (appendonly yes, appendfsync always): the power-loss durable peer.
  bool aof = false;
};
Result<std::unique_ptr<KvTarget>> MakeRedisTarget(const RedisTargetOptions& options);

struct MemcachedTargetOptions {
  uint32_t memory_mb = 1024;  // -m: large enough that the run evicts nothing
  uint32_t threads = 4;       // -t (memcached's default)
};
Result<std::unique_ptr<KvTarget>> MakeMemcachedTarget(const MemcachedTargetOptions& options);

}  // namespace slip::bench
