// Clover, DINOMO's shared-everything baseline (docs/papers/dinomo.md §4b),
// over the same pool and fabric as DINOMO's KVS nodes: any node serves any
// key, caches only shortcuts (LRU), and writes out of place — every version
// of a key is linked from the one before it.
//
// A version is a 64-byte line whose first word links the next version
// (0: the newest), followed by a log block (docs/formats/log_entry.md). A
// key's chain starts where the pool's index points (the block of a version
// at or before the newest: the metadata server moves it forward).
//
//   GET  READ the version a shortcut names (1 round trip), or the index
//        bucket and then the chain's head (2); then one READ per newer
//        version linked (a hop) until the newest. The shortcut moves to it.
//   PUT  WRITE the new version into the node's segment (1); then
//   DEL  compare-and-swap the link word of the newest version it knows from
//        0 to the new one (1). A swap that finds a link instead follows it
//        (a hop) and tries again at the end of the chain. A key with no
//        chain yet: CLOVER_INSERT to the metadata server (two-sided, 1),
//        which makes the version the head unless another writer's got
//        there first (then the chain is walked from that head).
//
// Linearizable: a version is visible only once linked, and linking is one
// atomic swap at the chain's end. A write acknowledged is linked.
//
// The metadata server is the pool process: CLOVER_INSERT, and AdvanceChains
// — its GC pass moving each index pointer to the chain's newest version, so
// a miss does not walk the whole history. Old versions are not reclaimed
// (Clover's epoch-based GC is not built: the pool fills up).
//
// Single-threaded: every call and completion on `exec`; Poll() there.
// Destroy the endpoint before the node.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "dinomo/adaptive_cache.h"
#include "dinomo/pool.h"
#include "dinomo/pool_access.h"
#include "dinomo/pool_index.h"
#include "fabric/fabric.h"
#include "fabric/op_tracker.h"
#include "log/entry.h"
#include "rpc/peer_caller.h"
#include "runtime/runtime.h"

namespace slip::dinomo {

struct CloverNodeOptions {
  uint32_t node = 0;
  uint64_t epoch = 1;                 // its token with the pool
  uint64_t cache_bytes = 1 << 20;     // shortcuts only, LRU
  log::Limits limits;
};

struct CloverNodeStats {
  uint64_t gets = 0, shortcut_hits = 0, misses = 0;
  uint64_t hops = 0;             // READs of newer versions, GETs and writes
  uint64_t get_round_trips = 0;  // READs of buckets and versions, over all GETs
  uint64_t writes = 0, write_round_trips = 0;  // WRITEs, swaps, hops, index reads and inserts of writes
  uint64_t swap_failures = 0;    // a swap found a newer version linked
  uint64_t inserts = 0;          // CLOVER_INSERT calls (metadata server)
  uint64_t read_bytes = 0, written_bytes = 0;  // by one-sided READs; WRITEs and swaps
  double round_trips_per_op() const {
    const uint64_t ops = gets + writes;
    return ops == 0 ? 0.0 : static_cast<double>(get_round_trips + write_round_trips) / static_cast<double>(ops);
  }
};

class CloverNode {
 public:
  CloverNode(runtime::Executor* exec, fabric::Endpoint* ep, rpc::PeerCaller* calls, rpc::NodeId pool,
             CloverNodeOptions options);
  ~CloverNode();

  // Asks the pool for its layout and a segment; `ready` once it can serve.
  void Start(std::function<void(Status)> ready);
  // NotFound when the key has no value.
  void Get(std::string key, std::function<void(Result<std::string>)> done);
  void Put(std::string key, std::string value, std::function<void(Status)> done);
  // Links a tombstone (OK whether or not the key had a value).
  void Delete(std::string key, std::function<void(Status)> done);
  bool Poll() { return ops_.Poll(); }
  // No operation under way (none answered yet, nothing on the wire): it may
  // be destroyed while its endpoint lives on.
  bool Idle() const { return open_ops_ == 0 && ops_.in_flight() == 0; }

  const CloverNodeStats& stats() const { return stats_; }
  const AdaptiveCache& cache() const { return cache_; }

 private:
  struct Op;
  // A version: its line's offset and its size, line included.
  struct Version {
    uint64_t offset = 0;
    uint32_t bytes = 0;
    IndexPointer block() const { return {offset + log::kAlign, bytes - static_cast<uint32_t>(log::kAlign)}; }
    uint64_t link() const { return IndexPointer{offset, bytes}.Encode(); }
    static Version FromLink(uint64_t w) {
      const IndexPointer p = IndexPointer::Decode(w);
      return {p.offset, p.bytes};
    }
    // A block at offset < 64 has no link line: an offset Walk refuses.
    static Version FromBlock(IndexPointer b) {
      if (b.offset < log::kAlign) return {~uint64_t{0}, 0};
      return {b.offset - log::kAlign, b.bytes + static_cast<uint32_t>(log::kAlign)};
    }
  };

  void Write(std::string key, std::string value, log::EntryType type, std::function<void(Status)> done);
  void Place(std::shared_ptr<Op> op);
  void Allocate(std::function<void(Status)> then);
  void Lookup(std::shared_ptr<Op> op);
  void ReadBucket(std::shared_ptr<Op> op, uint64_t offset, int attempts);
  void RefreshIndex(std::shared_ptr<Op> op);
  void NextSlot(std::shared_ptr<Op> op, size_t slot);
  void Walk(std::shared_ptr<Op> op, Version v, bool from_index, size_t slot);
  void AtNewest(std::shared_ptr<Op> op);
  void Insert(std::shared_ptr<Op> op);
  void Link(std::shared_ptr<Op> op);
  void Finish(std::shared_ptr<Op> op, Status s);
  uint64_t& RoundTrips(const Op& op);

  runtime::Executor* const exec_;
  rpc::PeerCaller* const calls_;
  const rpc::NodeId pool_;
  const CloverNodeOptions options_;
  fabric::OpTracker ops_;
  AdaptiveCache cache_;

  bool started_ = false;
  PoolAccess at_;       // where the pool's region, index and segments are
  PoolCalls pool_calls_;  // POOL_LAYOUT, POOL_INDEX as this node
  uint64_t segment_ = 0, tail_ = 0;  // where the next version goes
  bool allocating_ = false;
  std::vector<std::function<void(Status)>> waiting_for_segment_;
  uint64_t next_version_ = 0;
  uint64_t open_ops_ = 0;  // GETs and writes not finished
  CloverNodeStats stats_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

// The metadata server's GC pass, on the pool's side (no round trips): every
// chain's index pointer moves to its newest version. Returns the pointers
// moved. Run on the pool's executor (CLOVER_INSERT must not run meanwhile).
Result<uint64_t> AdvanceChains(Pool& pool, pm::PmRegion& region);

}  // namespace slip::dinomo
