// PoolAccess: what a node working over the pool (a DINOMO KVS node, a Clover
// node) knows of it — where its region, index and segments are — and the
// two-sided calls that tell it: POOL_LAYOUT when the node starts,
// POOL_INDEX when the node met a moved bucket (the pool grew its index).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "common/status.h"
#include "dinomo/pool_index.h"
#include "fabric/fabric.h"
#include "rpc/peer_caller.h"

namespace slip::dinomo {

struct PoolAccess {
  fabric::PeerId peer = 0;       // the pool, as a peer of the node's endpoint
  fabric::RemoteMemory region;   // its region, registered for this node
  uint64_t table_offset = 0, overflow_offset = 0;  // the index's buckets
  uint32_t num_buckets = 0;
  uint64_t segment_bytes = 0;
  bool persist_by_request = false;  // a batch is durable only after POOL_PERSIST

  // Region offsets of the home bucket of `slot_hash` and of overflow bucket
  // `next` - 1 (a bucket's chain link).
  uint64_t HomeBucket(uint64_t slot_hash) const {
    return table_offset + uint64_t{dinomo::HomeBucket(slot_hash, num_buckets)} * kBucketBytes;
  }
  uint64_t OverflowBucket(uint32_t next) const { return overflow_offset + uint64_t{next - 1} * kBucketBytes; }
};

// The calls as `node` working under token `epoch`. `done` runs on the
// calling executor, and not at all once `alive` has expired.
struct PoolCalls {
  rpc::PeerCaller* calls = nullptr;
  rpc::NodeId pool = 0;
  uint32_t node = 0;
  uint64_t epoch = 0;

  // POOL_LAYOUT: the pool admits the node, and `ep` gets the pool as a peer.
  void Layout(fabric::Endpoint* ep, std::weak_ptr<int> alive, std::function<void(Result<PoolAccess>)> done) const;
  // POOL_INDEX: where the index is now, into `*access`.
  void Index(PoolAccess* access, std::weak_ptr<int> alive, std::function<void(Status)> done) const;
};

}  // namespace slip::dinomo
