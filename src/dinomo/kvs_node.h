// KvsNode: one DINOMO KVS node's data path over the pool (docs/papers/
// dinomo.md §5) — what the node does for the keys it owns.
//
//   GET  its own unmerged writes (DRAM, 0 round trips); else DAC: a value
//        (0), or a shortcut — READ the entry it names (1); else the index:
//        READ the key's bucket, then the entry a slot names (2 when the
//        bucket holds the key, one more per chain hop), and DAC caches it.
//   PUT  appended to a batch; a batch is one one-sided WRITE into the
//   DEL  node's open log segment plus a flush READ (1 round trip for the
//        batch), and its writes are acknowledged when both complete — and
//        only after every earlier batch completed (one batch in flight), so
//        the pool may stop merging at the first torn block.
//
// When the open segment is full the node seals it (POOL_SEAL: the pool
// merges it) and takes a new one (POOL_ALLOCATE). Every call carries the
// node's token, its epoch: once the pool fenced the node (its keys went to
// another) the node fails every operation with StaleTerm. A node holds at most
// `max_unmerged` segments the pool has not merged, the open one included
// (back-pressure, the paper's 2): at the limit writes wait for a merge.
//
// Shared keys (selective replication, `shared` below): several nodes own
// such a key at once through its indirect cell in the pool (dinomo/cell.h).
// A write goes into the batch as any other, and once its batch landed the
// node swaps the cell's word to it (one-sided CAS, again with what the
// word held if that changed meanwhile): the write takes effect, and is
// acknowledged, at the swap that succeeds; a node has one swap per key in
// flight, and its writes of the key landing meanwhile go together at the
// next (the older ones take effect just before the newest, unseen). A GET reads the cell, then the
// entry (2 round trips; 3 the first time, through the index). Neither the
// node's unmerged writes nor DAC answer for a shared key (another owner may
// have written since): the node keeps only the cell's address. A segment is
// sealed only once every swap to an entry in it completed, so the pool's
// merge sees the word final for the segment's entries.
//
// Every entry a node writes carries a version above every earlier write of
// its keys: (epoch << 32) | n, the epoch a configuration term in which this
// node owns its keys, so a later owner's writes win in the index.
//
// Single-threaded: every call and every completion on `exec`; the caller
// polls Poll() there (the endpoint's completions). Operations in flight
// read into and write from the node's buffers: destroy the endpoint before
// the node (as a process's death does).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "dinomo/adaptive_cache.h"
#include "dinomo/pool_access.h"
#include "dinomo/pool_index.h"
#include "fabric/fabric.h"
#include "fabric/op_tracker.h"
#include "log/entry.h"
#include "proto/pool.h"
#include "rpc/peer_caller.h"
#include "runtime/runtime.h"

namespace slip::dinomo {

struct KvsNodeOptions {
  uint32_t node = 0;
  uint64_t epoch = 1;  // versions are (epoch << 32) | n
  CacheOptions cache;
  uint32_t batch_entries = 16;                         // a batch leaves when this full...
  runtime::Nanos batch_wait = 5 * runtime::kMicrosecond;  // ...or this long after its first write
  uint32_t max_unmerged = 2;
  log::Limits limits;
  // Keys this node owns together with others through their cells (the pool
  // made them shared before the node serves them).
  std::set<std::string> shared;
};

struct KvsNodeStats {
  uint64_t gets = 0, unmerged_hits = 0, value_hits = 0, shortcut_hits = 0, misses = 0;
  uint64_t stale_shortcuts = 0;   // a shortcut led to another entry: read through the index
  uint64_t torn_buckets = 0;      // a bucket read mid-update: read again
  uint64_t index_moves = 0;       // POOL_INDEX calls after meeting a moved bucket (the pool grew its index)
  uint64_t moved_slots = 0;       // a slot moved on while it was followed: read again
  uint64_t get_round_trips = 0;   // READs of buckets and entries, over all GETs
  uint64_t read_bytes = 0;        // of those READs
  uint64_t writes = 0, batches = 0, written_bytes = 0;
  uint64_t segments = 0, seals = 0, backpressure_waits = 0;
  uint64_t persists = 0;  // POOL_PERSIST calls (a pool on an ordinary file: one per batch and per swap)
  uint64_t fenced = 0;  // 1 once the pool refused this node's token
  // Shared keys: GETs and writes of them, cell swaps (each a round trip)
  // and those that met a word another owner had moved.
  uint64_t shared_gets = 0, shared_writes = 0, swaps = 0, swap_retries = 0;
  // Round trips per operation: GETs' READs, one per batch, the swaps.
  double round_trips_per_op() const {
    const uint64_t ops = gets + writes;
    return ops == 0 ? 0.0 : static_cast<double>(get_round_trips + batches + swaps) / static_cast<double>(ops);
  }
};

class KvsNode {
 public:
  KvsNode(runtime::Executor* exec, fabric::Endpoint* ep, rpc::PeerCaller* calls, rpc::NodeId pool,
          KvsNodeOptions options);
  ~KvsNode();

  // Asks the pool for its layout; `ready` runs once the node can serve.
  void Start(std::function<void(Status)> ready);
  // NotFound when the key has no value.
  void Get(std::string key, std::function<void(Result<std::string>)> done);
  void Put(std::string key, std::string value, std::function<void(Status)> done);
  // Writes a tombstone (OK whether or not the key had a value).
  void Delete(std::string key, std::function<void(Status)> done);
  // The endpoint's completions; true if any.
  bool Poll() { return ops_.Poll(); }

  const KvsNodeStats& stats() const { return stats_; }
  const AdaptiveCache& cache() const { return cache_; }
  // Nothing of this node's is on the wire or waiting to go (its one-sided
  // operations all completed, no write queued): it may be destroyed while
  // its endpoint lives on.
  bool Idle() const {
    return ops_.in_flight() == 0 && pending_.empty() && !in_flight_ && swapping_.empty() && answering_ == 0;
  }
  // Segments not merged by the pool yet, the open one included.
  size_t unmerged_segments() const { return sealing_.size() + (segment_ != 0 ? 1 : 0); }

 private:
  struct Write;
  struct GetOp;
  struct Unmerged {
    IndexPointer pointer;
    bool deleted = false;
    std::string value;
    uint64_t segment = 0;
  };

  void Enqueue(std::string key, std::string value, log::EntryType type, std::function<void(Status)> done);
  void FlushBatch();
  void BatchLanded(Code status);
  void PersistBatch();
  void RollSegment();
  void SendSeal(uint64_t segment, uint64_t end);
  void Sealed(uint64_t segment);
  void FailPending(const Status& s);
  // The pool refused this node's token: it serves nothing from now on.
  void Fenced(const std::string& why);

  void ReadEntry(std::shared_ptr<GetOp> op, IndexPointer p, std::function<void(bool found)> next);
  // Shared keys: read the cell at `cell`, then the entry its word names.
  void ReadCell(std::shared_ptr<GetOp> op, IndexPointer cell, std::function<void(bool is_cell)> not_cell);
  // Swaps the key's cell word to `w`'s entry at `p`, then acknowledges it.
  // One swap per key in flight: writes of the key landing meanwhile wait
  // and go together, at a swap to the newest of them.
  struct PendingSwap {
    std::shared_ptr<Write> w;
    IndexPointer p;
    uint64_t segment = 0;
  };
  void Swap(std::shared_ptr<Write> w, IndexPointer p, uint64_t segment);
  void SwapNext(const std::string& key);
  void SwapGroup(const std::string& key, std::shared_ptr<std::vector<PendingSwap>> group, uint32_t tries);
  void Swapped(uint64_t segment);
  bool IsShared(const std::string& key) const { return options_.shared.contains(key); }
  void ReadBucket(std::shared_ptr<GetOp> op, uint64_t offset, int attempts);
  void RefreshIndex(std::function<void(Status)> then);
  void NextSlot(std::shared_ptr<GetOp> op, size_t slot);
  void Recheck(std::shared_ptr<GetOp> op, size_t slot);
  void Answer(std::shared_ptr<GetOp> op, Result<std::string> r);
  bool MayCache(const GetOp& op) const;

  runtime::Executor* const exec_;
  rpc::PeerCaller* const calls_;
  const rpc::NodeId pool_;
  const KvsNodeOptions options_;
  fabric::OpTracker ops_;
  AdaptiveCache cache_;

  bool started_ = false;
  bool fenced_ = false;
  PoolAccess at_;       // where the pool's region, index and segments are
  PoolCalls pool_calls_;  // POOL_LAYOUT, POOL_INDEX as this node

  uint64_t next_version_ = 0;
  uint64_t segment_ = 0, tail_ = 0;  // the open segment (0: none yet)
  std::deque<uint64_t> sealing_;     // sealed, merge not confirmed
  uint64_t merges_confirmed_ = 0;
  bool rolling_ = false;             // waiting for a segment (or for a merge)
  std::vector<std::unique_ptr<Write>> pending_;  // the next batch
  runtime::TimerId batch_timer_ = 0;
  struct Batch {
    std::vector<std::unique_ptr<Write>> writes;
    std::vector<std::byte> bytes;
    uint64_t segment = 0, at = 0;
    uint64_t flush_word = 0;
    int waiting = 0;
    bool failed = false;
  };
  std::unique_ptr<Batch> in_flight_;
  std::unordered_map<std::string, Unmerged> unmerged_;
  // Shared keys: where each cell is and the word last seen in it.
  struct CellRef {
    IndexPointer cell;
    uint64_t word = 0;
  };
  std::unordered_map<std::string, CellRef> cells_;
  // Per segment: swaps not completed, and the end to seal it at once they are.
  std::unordered_map<uint64_t, uint32_t> swapping_;
  std::unordered_map<uint64_t, uint64_t> seal_after_swaps_;
  struct KeySwaps {
    bool busy = false;  // a swap of the key is in flight (or looking for its cell)
    std::vector<PendingSwap> waiting;
  };
  std::unordered_map<std::string, KeySwaps> key_swaps_;
  KvsNodeStats stats_;
  uint64_t answering_ = 0;  // GET answers posted, not yet run
  // Callbacks that may outlive the node (calls to the pool, timers) hold a
  // weak reference and do nothing once it is gone.
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace slip::dinomo
