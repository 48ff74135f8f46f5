// WorkerPool: a node's request workers, one NodeCore per worker executor.
//
// Every shard belongs to one worker (shard % size). That worker runs every
// PUT, DEL and GET of the shard and every REPLICATE into it, so
//   - a shard's versions are assigned, and registered with the
//     CommitTracker, on one thread: no version can be assigned but not yet
//     registered when another thread reads the shard's CommitVer;
//   - the per-shard work of different workers never contends (the store's
//     per-writer logs and per-shard index locks do the rest).
// What is not about one shard — SHARD_TAIL (promotion walks, after a
// CatchUp of the backup log), REPL_OPEN/REPL_CLOSE (the backup log's
// buffers), malformed requests — runs on worker 0, which is also the
// executor requests arrive on (the RPC channel's): with one worker nothing
// hops between threads.
//
// This is partitioning by shard, as in eRPC/MICA's exclusive-ownership
// mode; the papers' workers take any key (Rowan-KV's per-thread logs make
// that cheap). We chose affinity because the CommitVer invariant then holds
// without a lock around version assignment, and a client already names the
// shard in every request.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

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
  // workers[0].exec is where Handle is called from (the RPC channel's
  // executor); replies are sent back there. `limits` bound the decoding of
  // a request's shard (the store's).
  // A request or reply that hops between executors runs only while
  // `alive()` (the simulator: while the same process lives; a crashed one's
  // objects stay around but must never act again). Empty: always.
  WorkerPool(std::vector<Worker> workers, log::Limits limits, std::function<bool()> alive = nullptr);

  size_t size() const { return workers_.size(); }
  const Worker& worker(size_t i) const { return workers_[i]; }
  // The worker that owns `shard`.
  size_t WorkerOf(uint32_t shard) const { return shard % workers_.size(); }

  // Runs the request on the worker that owns its shard; `reply` runs on
  // worker 0's executor. Call on worker 0's executor; `payload` need only
  // live during the call.
  void Handle(uint16_t method, std::span<const std::byte> payload, NodeCore::Reply reply);

  // Runs `fn(i)` on every worker's executor, then `done` on worker 0's
  // (e.g. reading counters a worker writes without a lock). Call on worker
  // 0's executor.
  void ForEach(std::function<void(size_t)> fn, std::function<void()> done);

  // The shard a request names, if it is one routed by shard and decodes.
  std::optional<uint32_t> ShardOf(uint16_t method, std::span<const std::byte> payload) const;

 private:
  std::vector<Worker> workers_;
  log::Limits limits_;
  std::function<bool()> alive_;
};

}  // namespace slip::server
