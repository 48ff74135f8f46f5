// WorkerPool: a node's request workers, one NodeCore per worker executor.
//
// Every shard belongs to one worker (WorkerOfShard, common/hash.h: a range
// of shards each). That worker runs every write about the shard — PUT,
// PUT_IF, DEL, the erda family's GRANT, RESERVE and COMMIT — and every
// REPLICATE into it, so
//   - a shard's versions are assigned, and registered with the
//     CommitTracker, on one thread: no version can be assigned but not yet
//     registered when another thread reads the shard's CommitVer;
//   - the per-shard work of different workers never contends (the store's
//     per-writer logs and per-shard index locks do the rest).
// A GET runs on whichever worker it arrives at: it only reads the store,
// whose Get is safe beside the owner's writes, and the index shows an entry
// only once every backup has it (the owner's Store::Commit after its acks), so a
// read on any thread is linearizable. Callers send GETs to each worker in
// turn (rpc::Target::AnyWorker), so a hot shard's reads do not queue behind
// its writes on one core: under zipfian keys the owner of the hottest shard
// otherwise caps the node (docs/architecture.md).
// What is not about one shard — SHARD_TAIL (promotion walks, after a
// CatchUp of the backup log), REPL_OPEN/REPL_CLOSE/REPL_PERSIST (the backup
// log's buffers), a move's MIGRATE_* calls, malformed requests — runs on
// worker 0.
//
// Requests enter at any worker: each has its own RPC entry, advertised in
// the cluster configuration (cluster::NodeInfo::workers), and callers that
// name a shard (rpc::Target) send to its owner's, so a shard's writes
// are taken, run and answered on one thread, as the papers' clients pick a
// server thread's queue pair by key. A write that arrives elsewhere (an
// older configuration, a call naming no shard) hops to its owner and its
// answer hops back to leave where it came in.
//
// This is partitioning by shard for writes, as in eRPC/MICA's
// exclusive-ownership mode (MICA's EREW-to-CREW step: reads from any core);
// the papers' workers take any key for writes too (Rowan-KV's per-thread
// logs make that cheap). We chose affinity because the CommitVer invariant
// then holds without a lock around version assignment, a conditional PUT's
// check and write need no lock of their own, and a client already names the
// shard in every request.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/hash.h"
#include "log/entry.h"
#include "runtime/runtime.h"
#include "server/node_core.h"

namespace slip::server {

class WorkerPool {
 public:
  struct Worker {
    runtime::Executor* exec = nullptr;
    NodeCore* core = nullptr;
  };
  // `limits` bound the decoding of a request's shard (the store's).
  // A request or reply that hops between executors runs only while
  // `alive()` (the simulator: while the same process lives; a crashed one's
  // objects stay around but must never act again). Empty: always.
  WorkerPool(std::vector<Worker> workers, log::Limits limits, uint32_t num_shards,
             std::function<bool()> alive = nullptr);

  size_t size() const { return workers_.size(); }
  const Worker& worker(size_t i) const { return workers_[i]; }
  // The worker that owns `shard`.
  size_t WorkerOf(uint32_t shard) const {
    return WorkerOfShard(shard, num_shards_, static_cast<uint32_t>(workers_.size()));
  }

  // Runs a request that arrived at worker `arrived`'s entry: a GET there,
  // any other on the worker that owns its shard; `reply` runs on
  // `arrived`'s executor. Call on that executor; `payload` need only live
  // during the call. REQUIRES: arrived < size().
  void Handle(size_t arrived, uint16_t method, std::span<const std::byte> payload, NodeCore::Reply reply);

  // Runs `fn(i)` on every worker's executor, then `done` on worker 0's
  // (e.g. reading counters a worker writes without a lock). Call on worker
  // 0's executor.
  void ForEach(std::function<void(size_t)> fn, std::function<void()> done);

  // The shard a request names, if it is one routed by shard and decodes.
  std::optional<uint32_t> ShardOf(uint16_t method, std::span<const std::byte> payload) const;

  // Requests that ran on another worker than the one whose entry they
  // arrived at (any thread): callers routing by an older configuration, or
  // naming no shard for a request about one. GETs never hop.
  uint64_t hopped() const { return hopped_.load(std::memory_order_relaxed); }

 private:
  std::vector<Worker> workers_;
  log::Limits limits_;
  uint32_t num_shards_;
  std::function<bool()> alive_;
  std::atomic<uint64_t> hopped_{0};
};

}  // namespace slip::server
