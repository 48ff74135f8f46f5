// PoolNode: what a KVS node process (node/kvs_node_process.h) runs for a
// design whose data lives in the pool — DINOMO's owner-partitioned nodes
// (server/dinomo_server.h) or Clover's, where any node serves any key
// (server/clover_server.h). Runtime-agnostic; every call on the node's
// executor.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/cluster_config.h"
#include "common/hot_keys.h"
#include "common/status.h"
#include "proto/kv.h"
#include "runtime/runtime.h"

namespace slip::server {

class PoolNode {
 public:
  using Reply = std::function<void(Code, std::string)>;
  virtual ~PoolNode() = default;

  // A configuration newer than any adopted so far (older ones are ignored).
  virtual void Adopt(const cluster::ClusterConfig& config) = 0;
  // PUT, GET, DEL (and what else the design's nodes ask each other).
  virtual void Handle(uint16_t method, std::span<const std::byte> payload, Reply reply) = 0;
  // The data path's completions; true if any.
  virtual bool Poll() = 0;
  // The term it serves in (0: not serving).
  virtual uint64_t serving_term() const = 0;

  // What STATS reports of it.
  struct Counters {
    uint64_t gets = 0, writes = 0;
    double pool_round_trips_per_op = 0;
    uint64_t shared_gets = 0, shared_writes = 0, swaps = 0,
             swap_retries = 0;  // DINOMO's shared keys
  };
  virtual Counters counters() const = 0;
  // The requests it served in the last complete window and the most
  // requested keys among them: what DINOMO's policy engine replicates by.
  struct HotWindow {
    uint64_t requests = 0;
    std::vector<HotKeys::Key> top;  // at most 16
  };
  virtual HotWindow hot_keys() = 0;
};

// Runs a decoded PUT, GET or DEL (`m`) on `node` (a dinomo::KvsNode or
// CloverNode: Get/Put/Delete with callbacks) and answers it in `term`.
template <typename Node>
void ServeKv(Node& node, proto::Method m, const proto::KvRequest& req, uint64_t term, PoolNode::Reply reply) {
  if (m == proto::Method::kGet) {
    return node.Get(std::string(req.key), [reply, term](Result<std::string> v) {
      if (!v.ok()) return reply(v.status().code(), proto::Encode(proto::KvResponse{term, 0, v.status().message()}));
      reply(Code::kOk, proto::Encode(proto::KvResponse{term, 0, *v}));
    });
  }
  auto done = [reply, term](Status s) {
    reply(s.code(), proto::Encode(proto::KvResponse{term, 0, s.ok() ? std::string_view() : s.message()}));
  };
  if (m == proto::Method::kPut) return node.Put(std::string(req.key), std::string(req.value), done);
  node.Delete(std::string(req.key), done);
}

// Counts requests per key in windows of `window` (a Space-Saving sketch,
// common/hot_keys.h) and keeps the last complete one.
class RequestWindow {
 public:
  explicit RequestWindow(runtime::Nanos window = runtime::kSecond) : window_(window) {}
  void Record(runtime::Nanos now, std::string_view key) {
    Last(now);
    sketch_.Record(key);
  }
  PoolNode::HotWindow Last(runtime::Nanos now) {
    if (now - start_ >= window_) {
      // A window with no request since the last one leaves an empty one.
      last_ =
          now - start_ < 2 * window_ ? PoolNode::HotWindow{sketch_.total(), sketch_.Top(16)} : PoolNode::HotWindow{};
      sketch_.Clear();
      start_ = now;
    }
    return last_;
  }

 private:
  const runtime::Nanos window_;
  HotKeys sketch_{32};
  runtime::Nanos start_ = 0;
  PoolNode::HotWindow last_;
};

}  // namespace slip::server
