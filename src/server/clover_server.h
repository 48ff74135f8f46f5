// CloverServer: a Clover node in a cluster (design `clover`, docs/papers/
// dinomo.md §4b) — DINOMO's shared-everything baseline as `slip server`
// runs it, on top of a dinomo::CloverNode. Any node serves any key (clients
// pick one at random): nothing is owned, so a configuration change needs no
// handover — a new term is adopted in place, and only a pool at a new
// address (restarted) makes the node drain and start again against it.
//
// No barrier and no lease check: a GET always reads the pool (a shortcut
// only says where to start), and a write takes effect at its one-sided
// link, so a node cut off from the configuration cannot answer stale.
//
// Requests: StaleTerm for another term or a shard the key is not in (the
// client refreshes its map), Unavailable while (re)starting.
//
// Single-threaded: every call on `exec`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "cluster/cluster_config.h"
#include "dinomo/clover.h"
#include "fabric/fabric.h"
#include "rpc/peer_caller.h"
#include "runtime/runtime.h"
#include "server/pool_node.h"

namespace slip::server {

struct CloverServerEnv {
  uint32_t self = 0;
  runtime::Executor* exec = nullptr;
  fabric::Endpoint* data = nullptr;  // the CloverNode's one-sided operations
  rpc::PeerCaller* calls = nullptr;  // reaches the pool as `pool_peer`
  rpc::NodeId pool_peer = 0;
  // Points `calls` at a configuration's pool (as `pool_peer`).
  std::function<void(const cluster::ClusterConfig&)> set_peers;
  // Runs for every configuration adopted (a leaving node then leaves: it
  // hands nothing over); may be empty.
  std::function<void(const cluster::ClusterConfig&)> settled;
  // The node cannot go on (a data path that never drains).
  std::function<void(Status)> fatal;
  dinomo::CloverNodeOptions node;  // cache and limits (node and epoch are its own)
};

class CloverServer final : public PoolNode {
 public:
  explicit CloverServer(CloverServerEnv env) : env_(std::move(env)) {}
  ~CloverServer() override;

  void Adopt(const cluster::ClusterConfig& config) override;
  void Handle(uint16_t method, std::span<const std::byte> payload, Reply reply) override;
  bool Poll() override { return node_ != nullptr && node_->Poll(); }
  uint64_t serving_term() const override { return serving_ ? config_.term : 0; }
  Counters counters() const override;
  HotWindow hot_keys() override { return window_.Last(env_.exec->Now()); }

 private:
  void Restart(int waited_ms);
  void Refuse(const Reply& reply, const Status& s) const;

  CloverServerEnv env_;
  cluster::ClusterConfig config_;  // the newest adopted
  std::string pool_;               // the pool node_ works with
  std::unique_ptr<dinomo::CloverNode> node_;
  bool serving_ = false, restarting_ = false;
  int64_t retry_ms_ = 50;
  RequestWindow window_;
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

}  // namespace slip::server
