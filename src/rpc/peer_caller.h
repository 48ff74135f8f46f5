// PeerCaller: one request/response exchange with another node — what the
// rpc replication protocol and promotion need from the RPC layer, and all
// they need, so they run unchanged over rpc/ sessions and in-process tests.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

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
struct Target {
  Target(NodeId n) : node(n) {}  // NOLINT(google-explicit-constructor)
  Target(NodeId n, uint32_t s) : node(n), shard(s) {}
  NodeId node;
  std::optional<uint32_t> shard;
};

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
