// SimPool: a DINOMO pool and its KVS nodes over the simulated fabric, all
// on one simulated runtime — the world the node tests, the takeover
// campaign and the round-trip benchmarks share.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>

#include "dinomo/kvs_node.h"
#include "dinomo/partitioned_pool.h"
#include "dinomo/pool.h"
#include "dinomo/pool_server.h"
#include "fabric/sim/sim_fabric.h"
#include "rpc/local_caller.h"
#include "rpc/local_network.h"
#include "runtime/sim_runtime.h"

namespace slip::dinomo::testing {

class SimPool {
 public:
  static constexpr rpc::NodeId kPoolId = 1000;

  // A pool on an anonymous region of `region_bytes` (`region`: its
  // persistence mode and crash model, for durability tests).
  SimPool(runtime::SimRuntime& rt, uint64_t region_bytes, const PoolOptions& options,
          const fabric::SimFabricOptions& fabric = {}, const pm::RegionOptions& region = {});
  // DINOMO-N: from now on a partition per node, each on an anonymous region
  // of `partition_bytes` (dinomo/partitioned_pool.h); POOL_* calls go to the
  // caller's. Call before adding nodes; RestartPool is then not supported.
  void PartitionPerNode(uint64_t partition_bytes);
  PartitionedPool* partitions() { return partitions_.get(); }
  // The pool as a restarted process finds it in the same region (after
  // region().SimulateCrash(), say): nodes must be added again.
  void RestartPool();

  struct Node {
    runtime::Executor* exec = nullptr;
    std::unique_ptr<fabric::Endpoint> ep;
    std::unique_ptr<rpc::LocalCaller> calls;  // to the pool's server
    std::unique_ptr<KvsNode> node;
    runtime::PollerId poller = 0;
  };
  // A KVS node (`options.node` is its id, also its fabric address), started
  // on its own executor; `started` runs there once it can serve.
  Node& AddNode(const KvsNodeOptions& options, std::function<void(Status)> started = nullptr);
  // A caller from `exec` to the pool's server (POOL_* calls), for KVS
  // nodes built outside AddNode.
  std::unique_ptr<rpc::LocalCaller> CallerFor(runtime::Executor* exec);
  // Makes the pool's server reachable on `net` as kPoolId (for nodes that
  // also call each other).
  void AttachTo(rpc::LocalNetwork& net);
  // The node is gone as a process goes: its endpoint first (operations in
  // flight read into and write from its buffers), then its DRAM.
  void Kill(Node& n);
  // What a reconfiguration asks of the pool once `node` no longer owns its
  // keys (POOL_MERGE_ALL): fence it from `epoch` on, revoke its
  // registration, merge its open segments. Call on the pool's executor (or
  // between runs of the runtime).
  Status FenceAndMerge(uint32_t node, uint64_t epoch);

  // The pool's side of a call: the partitions' if any, else the one
  // pool's. Run it on a pool executor (a harness with its own transport
  // delivers calls here).
  void Handle(uint16_t method, std::span<const std::byte> payload, const PoolServer::Reply& reply);

  Pool& pool() { return *pool_; }
  pm::PmRegion& region() { return *region_; }
  fabric::SimFabric& fabric() { return *fabric_; }
  runtime::Executor* pool_exec() const { return pool_exec_; }

 private:
  runtime::SimRuntime& rt_;
  const PoolOptions options_;
  std::unique_ptr<pm::PmRegion> region_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<fabric::SimFabric> fabric_;
  runtime::Executor* pool_exec_ = nullptr;
  std::unique_ptr<fabric::Endpoint> pool_ep_;
  std::unique_ptr<PoolServer> server_;
  std::unique_ptr<PartitionedPool> partitions_;
  std::deque<Node> nodes_;
};

}  // namespace slip::dinomo::testing
