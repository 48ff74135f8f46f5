// PeerCaller: one request/response exchange with another node — what the
// rpc replication protocol and promotion need from the RPC layer, and all
// they need, so they run unchanged over rpc/ sessions and in-process tests.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/hash.h"
#include "common/status.h"

namespace slip::rpc {

using NodeId = uint32_t;

struct PeerResponse {
  Code status = Code::kOk;  // the handler's outcome
  std::string payload;
};

// Where a call goes: a node and, for a request about one shard, the shard.
// A storage node serves each shard on one of its request workers and takes
// a shard's requests at that worker's own entry (server/worker_pool.h), as a
// papers' client picks a server thread's queue pair by key; calls about no
// one shard go to the node's main entry. Implicit from a NodeId, so such
// calls name only the node.
//
// A read any worker may serve (a GET: the store's index is shared, and what
// it shows is replicated) is `any_worker`: the caller sends it to the
// node's workers in turn, so a hot shard's reads spread over all of them as
// the papers' clients, each bound to one worker per server, spread theirs.
struct Target {
  Target(NodeId n) : node(n) {}  // NOLINT(google-explicit-constructor)
  Target(NodeId n, uint32_t s) : node(n), shard(s) {}
  static Target AnyWorker(NodeId n, uint32_t s) {
    Target t(n, s);
    t.any_worker = true;
    return t;
  }
  NodeId node;
  std::optional<uint32_t> shard;
  bool any_worker = false;
};

// Which of a node's `workers` entries takes a call to `to`: the next in
// `*turn` (the caller's own counter for that node, advanced) for an
// any-worker call, its shard's worker (WorkerOfShard over `num_shards`)
// for one about a shard, else the first. REQUIRES: workers >= 1, and
// `turn` set for an any-worker call.
inline uint32_t EntryOf(const Target& to, uint32_t num_shards, uint32_t workers, uint64_t* turn) {
  if (workers <= 1) return 0;
  if (to.any_worker) return static_cast<uint32_t>((*turn)++ % workers);
  return to.shard ? WorkerOfShard(*to.shard, num_shards, workers) : 0;
}

class PeerCaller {
 public:
  virtual ~PeerCaller() = default;
  // Sends `payload` to the handler for `method` of `to.node` (at the entry
  // of the worker serving `to.shard`, where nodes have one per worker).
  // `done` runs exactly once on the calling executor, never inside Call
  // itself: with the response, or with a transport error (Unavailable for a
  // dead or unknown peer, Timeout).
  virtual void Call(Target to, uint16_t method, std::string payload,
                    std::function<void(Result<PeerResponse>)> done) = 0;
};

}  // namespace slip::rpc
