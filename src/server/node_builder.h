// BuildNode: the one place a storage node's request side is wired — its
// request workers (a replicator and a NodeCore each), the pool that routes
// requests to them, the promoter and the agent that adopts configurations.
//
// `slip server` (node/node_process.cc) and the whole-cluster simulator
// (sim/) both build nodes here; they differ only in what they pass in: the
// executors, the PeerCaller per worker (rpc/ sessions or the simulator's
// message layer), the sending endpoints (libfabric or the simulated fabric),
// the lease check, the CPU clock and the hooks below. The store, the backup
// log and the transport stay the caller's: their lifetimes follow the
// process, not the wiring.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "fabric/fabric.h"
#include "log/entry.h"
#include "replication/backup_log.h"
#include "replication/registry.h"
#include "rpc/peer_caller.h"
#include "runtime/runtime.h"
#include "server/node_agent.h"
#include "server/node_core.h"
#include "server/promoter.h"
#include "server/worker_pool.h"
#include "store/store.h"

namespace slip::server {

struct NodeEnv {
  NodeId id = 0;
  replication::Protocol design = replication::Protocol::kRpc;
  store::Store* store = nullptr;
  log::Limits limits;  // bound the decoding of requests (the store's)
  // One-sided designs: this node's backup side (null for rpc-kv).
  replication::BackupLog* backup = nullptr;
  ViewHolder* views = nullptr;
  runtime::Executor* agent_exec = nullptr;  // where configurations are adopted
  rpc::PeerCaller* promoter_peers = nullptr;

  // Worker i runs on `exec`, calls peers through `peers` and (one-sided
  // designs) sends through `out`, polled on `exec`; requests arrive at every
  // worker's executor (WorkerPool::Handle). Store writer i is worker i's;
  // the promoter writes as writer `workers.size()`.
  struct Worker {
    runtime::Executor* exec = nullptr;
    rpc::PeerCaller* peers = nullptr;
    fabric::Endpoint* out = nullptr;
  };
  std::vector<Worker> workers;

  // One-sided designs' sender options (self, term, max_message, shared
  // logs); `protocol` is set from `design`.
  replication::OneSidedOptions onesided;
  // Every NodeCore's options; the worker index, count and backup log are set
  // per worker.
  NodeCoreOptions core;
  // Reported to the configuration manager (NodeAgent).
  std::function<void(uint32_t shard, NodeId backup, uint64_t term)> on_seeded;
  std::function<void(uint32_t shard, uint64_t term)> on_migrated;  // NodeAgentHooks
  // False once the process the node belongs to is gone (WorkerPool).
  std::function<bool()> alive;
  // The erda family (replication::Design::clients): the node-wide
  // layout (server/erda_node.h) and each worker's heads' options. Null
  // layout: no direct client access.
  std::shared_ptr<const ErdaLayout> erda_layout;
  ErdaHeadsOptions erda_heads;
  // Test hook (the simulator's injected bugs): wraps worker i's replicator.
  std::function<std::unique_ptr<replication::Replicator>(uint32_t worker, std::unique_ptr<replication::Replicator>)>
      wrap_replicator;
};

// What BuildNode made. Members are destroyed in reverse order: the agent
// and promoter before the cores they use, the cores before their
// replicators.
struct NodeParts {
  struct Worker {
    std::unique_ptr<replication::Replicator> replicator;
    std::unique_ptr<ErdaHeads> erda_heads;  // erda only
    std::unique_ptr<NodeCore> core;
  };
  std::shared_ptr<NodeShared> shared;
  std::vector<Worker> workers;
  std::unique_ptr<WorkerPool> pool;
  std::unique_ptr<Promoter> promoter;
  std::unique_ptr<NodeAgent> agent;
};

// REQUIRES: at least one worker; store, views, agent_exec and the workers'
// executors and peers set; `out` set on every worker for one-sided designs.
std::unique_ptr<NodeParts> BuildNode(NodeEnv env);

}  // namespace slip::server
