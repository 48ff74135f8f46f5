// PartitionedPool: DINOMO-N's pool (docs/papers/dinomo.md §4c) — a
// partition per KVS node, each a region, a Pool and its server side of its
// own, all on one endpoint. Every POOL_* call goes to the caller's partition
// (the node id leads every request); POOL_ADOPT copies the newest entries
// of the shards a node gains from every other partition into its own
// (CopyKeys: versions kept, merged version-conditionally, so a stale copy
// an earlier owner still holds loses to the newest). The copy runs inside
// the call, on the pool's executor: nothing else is served meanwhile — the
// reorganization DINOMO's shared pool saves.
//
// A partition is opened when its node first calls, or by Open() (a
// restarted pool opens every one it finds: a node gone since still holds
// the data of the shards it owned).
//
// Single-threaded: every call on the pool's executor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "dinomo/pool.h"
#include "dinomo/pool_server.h"
#include "fabric/fabric.h"
#include "pm/region.h"

namespace slip::dinomo {

class PartitionedPool {
 public:
  using Reply = PoolServer::Reply;
  // Opens (or creates) the region of `node`'s partition.
  using OpenRegion = std::function<Result<std::unique_ptr<pm::PmRegion>>(uint32_t node)>;
  PartitionedPool(OpenRegion open, const PoolOptions& options, fabric::Endpoint* ep)
      : open_(std::move(open)), options_(options), ep_(ep) {}

  // A POOL_* request (POOL_ADOPT included). Replies once, inside the call.
  void Handle(uint16_t method, std::span<const std::byte> payload, const Reply& reply);
  // Opens `node`'s partition now.
  Status Open(uint32_t node);

  size_t partitions() const { return partitions_.size(); }
  uint64_t adopted_keys() const { return adopted_keys_; }
  uint64_t adopted_bytes() const { return adopted_bytes_; }
  // `node`'s pool (nullptr: no partition open), for tests.
  Pool* pool(uint32_t node);

 private:
  struct Partition {
    std::unique_ptr<pm::PmRegion> region;
    std::unique_ptr<Pool> pool;
    std::unique_ptr<PoolServer> server;
  };
  Result<Partition*> PartitionOf(uint32_t node);
  void Adopt(std::span<const std::byte> payload, const Reply& reply);

  const OpenRegion open_;
  const PoolOptions options_;
  fabric::Endpoint* const ep_;
  std::map<uint32_t, Partition> partitions_;
  uint64_t adopted_keys_ = 0, adopted_bytes_ = 0;
};

}  // namespace slip::dinomo
