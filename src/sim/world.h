// The whole-cluster simulation's world (private to sim/): the nodes, their
// processes (incarnations), the configuration manager, the message network
// and the clients, all on one SimRuntime. Split by concern across
// network.cc (messages, partitions, slow nodes), nodes.cc (node processes:
// start, crash, restart, power loss, cold start), manager.cc (leases and
// reconfiguration), clients.cc (client loops and the history), and
// cluster_sim.cc (a run: the fault schedule, the checks, the result).
#pragma once

#include <algorithm>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/client_core.h"
#include "client/erda_path.h"
#include "cluster/cluster_config.h"
#include "cluster/config_store.h"
#include "cluster/manager.h"
#include "cluster/rebalance.h"
#include "common/hash.h"
#include "fabric/sim/sim_fabric.h"
#include "pm/region.h"
#include "replication/backup_log.h"
#include "replication/registry.h"
#include "runtime/sim_runtime.h"
#include "server/config_view.h"
#include "server/erda_node.h"
#include "server/node_builder.h"
#include "sim/cluster_sim.h"
#include "store/store.h"

namespace slip::sim::detail {

using replication::NodeId;
using runtime::Nanos;
using runtime::kMicrosecond;
using runtime::kMillisecond;

constexpr uint16_t kEventNet = runtime::kFirstDeviceKind + 40;
constexpr uint16_t kEventControl = runtime::kFirstDeviceKind + 41;
constexpr uint16_t kEventFault = runtime::kFirstDeviceKind + 42;

class World;

// One node process. A crash replaces the whole incarnation; the old objects
// stay alive (callbacks may still point at them) but never run again.
// Members are destroyed in reverse order: the replicator before the endpoint
// it polls, the backup log before the endpoint it drives.
struct Incarnation {
  std::unique_ptr<pm::PmRegion> region;
  std::unique_ptr<store::Store> store;
  // One-sided designs: the endpoint peers write into (driven by the node's
  // NIC executor) and the backup log.
  std::unique_ptr<fabric::Endpoint> in;
  std::unique_ptr<replication::BackupLog> backup;
  // erda: the index mirror and the table clients read (server/erda_node.h).
  std::unique_ptr<server::ErdaNode> erda;
  // Per request worker (server/worker_pool.h): its calls to peers and its
  // sending endpoint (one-sided designs).
  struct Worker {
    std::unique_ptr<rpc::PeerCaller> caller;
    std::unique_ptr<fabric::Endpoint> out;
  };
  std::vector<Worker> workers;
  // What server::BuildNode made of them, as a real node's.
  std::unique_ptr<server::NodeParts> parts;
};

struct Node {
  NodeId id = 0;
  runtime::Executor* exec = nullptr;    // worker 0: requests about no shard, the agent
  std::vector<runtime::Executor*> workers;  // [0] = exec, then the other workers
  runtime::Executor* nic = nullptr;     // one-sided: polls the backup log's endpoint
  std::vector<runtime::Executor*> digests;  // one-sided: digest what peers wrote
  server::ViewHolder views;
  std::unique_ptr<Incarnation> live;
  std::vector<std::unique_ptr<Incarnation>> dead;
  uint64_t incarnation = 0;
  bool up = true;
  Nanos lease_expiry = 0;  // serves clients only before this
};

// The test-only bug: acknowledge at once, replicate 2 ms later.
class AckFirstReplicator final : public replication::Replicator {
 public:
  AckFirstReplicator(std::unique_ptr<replication::Replicator> inner, runtime::Executor* exec)
      : inner_(std::move(inner)), exec_(exec) {}
  void Replicate(std::span<const NodeId> backups, const proto::ReplicateRequest& entry,
                 std::function<void(Status)> done) override {
    std::vector<NodeId> b(backups.begin(), backups.end());
    auto key = std::make_shared<std::string>(entry.key);
    auto value = std::make_shared<std::string>(entry.value);
    proto::ReplicateRequest copy = entry;
    exec_->After(2 * kMillisecond, [this, b, key, value, copy]() mutable {
      copy.key = *key;
      copy.value = *value;
      inner_->Replicate(b, copy, [](Status) {});
    });
    exec_->Post([done = std::move(done)] { done(Status::Ok()); });
  }

 private:
  std::unique_ptr<replication::Replicator> inner_;
  runtime::Executor* exec_;
};

class World {
 public:
  explicit World(const ClusterSimOptions& o)
      : o_(PerfAdjusted(o)), rt_(runtime::SimRuntimeOptions{o.seed, false, 64}) {
    if (o_.trace) {
      rt_.SetTraceSink([](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    }
    if (o_.perf) rt_.SetCostModel(o_.perf->costs);
    if (OneSided()) {
      // The replication network has the message network's latency, jitter
      // and loss (a lost packet is retransmitted: reliable connections).
      fabric::SimFabricOptions fo;
      fo.latency = static_cast<Nanos>(o_.latency_min_us) * kMicrosecond;
      fo.dma_persist_delay = o_.persist_delay_ns;
      if (o_.perf) {
        fo.latency = o_.perf->one_way;
        fo.bandwidth = o_.perf->bandwidth;
        fo.nic_service = o_.perf->nic_service;
        fo.software_target = o_.perf->software_nic;
      }
      fabric_ = std::make_unique<fabric::SimFabric>(rt_, fo);
      fabric_->SetDefaultFaults(NetworkFaults());
    }
  }

  ClusterSimResult Run();
  // A performance run (o_.perf): load, warm up, measure (perf.cc).
  void RunPerf(ClusterSimResult& res);
  // Adds the erda-family clients' direct-access counters to res.direct.
  void CountDirect(ClusterSimResult& res) const;

  // --- network ---
  // A request arrives at the worker entry a real node's caller would pick
  // (rpc::EntryOf; `turn` is the caller's counter for any-worker reads).
  void Call(runtime::Executor* from, NodeId from_node, uint64_t from_inc, rpc::Target to,
            uint16_t method, std::string payload,
            std::function<void(Result<rpc::PeerResponse>)> done, uint64_t* turn);

 private:
  class Caller final : public rpc::PeerCaller {
   public:
    Caller(World* w, runtime::Executor* from, NodeId from_node, uint64_t inc)
        : w_(w), from_(from), from_node_(from_node), inc_(inc) {}
    void Call(rpc::Target to, uint16_t method, std::string payload,
              std::function<void(Result<rpc::PeerResponse>)> done) override {
      w_->Call(from_, from_node_, inc_, to, method, std::move(payload), std::move(done),
               to.any_worker ? &turns_[to.node] : nullptr);
    }

   private:
    World* w_;
    runtime::Executor* from_;
    NodeId from_node_;
    uint64_t inc_;
    std::map<NodeId, uint64_t> turns_;  // per node, any-worker calls' next entry
  };

  class RoutingFromCm final : public client::RoutingSource {
   public:
    RoutingFromCm(World* w, runtime::Executor* exec) : w_(w), exec_(exec) {}
    void Fetch(uint64_t, std::function<void(Result<client::RoutingTable>)> done) override {
      // A round trip to the configuration manager.
      const Nanos rtt = 2 * w_->Latency();
      exec_->After(rtt, [w = w_, done = std::move(done)] { done(w->Routing()); });
    }

   private:
    World* w_;
    runtime::Executor* exec_;
  };

  Nanos Latency() {
    if (o_.perf) return o_.perf->one_way;
    return static_cast<Nanos>(rt_.Rng().Range(o_.latency_min_us, o_.latency_max_us)) * kMicrosecond;
  }
  // A message's time on the wire: propagation plus serialisation (perf).
  Nanos Wire(size_t bytes) {
    if (!o_.perf || o_.perf->bandwidth <= 0) return Latency();
    return Latency() + static_cast<Nanos>(static_cast<double>(bytes) / o_.perf->bandwidth);
  }
  // Performance runs: no faults, timeouts and leases far above any queueing.
  static ClusterSimOptions PerfAdjusted(ClusterSimOptions o) {
    if (!o.perf) return o;
    o.crashes = o.partitions = o.slow_nodes = o.migrations = o.failover_crashes = 0;
    o.cold_start = o.crash_in_cold_start = o.migration_faults = false;
    o.drop_probability = 0;
    o.latency_min_us = o.latency_max_us = 1;
    o.call_timeout_us = 2'000'000;
    o.lease_us = 1'000'000;
    o.persist_delay_ns = 0;
    o.conditional_puts = false;
    o.commit_record_step = 64;
    return o;
  }
  // Performance runs: puts executors on the machines of o_.perf.
  void PlaceExecutors();
  // One closed-loop chain of operations: on `app` (a synchronous
  // application thread) or, null, on the client's executor. `issued`: when
  // the application thread made the call.
  // `app`: the application thread (null: an asynchronous application on
  // the client's executor); `issued`: when the application thread made the
  // call, and `chosen` the operation it chose (on the executor's side of a
  // hand-over).
  void PerfLoop(uint32_t c, runtime::Executor* app, Nanos issued = -1, std::optional<ycsb::Op> chosen = std::nullopt);
  // Sends a message from `from` to `to`, run as `fn` there `flight` after
  // the send is done (network.cc: its CPU, and frames in performance runs).
  void Send(runtime::Executor* from, runtime::Executor* to, size_t bytes, Nanos flight, const char* label,
            uint64_t tag, std::function<void()> fn);
  struct Frame {
    uint64_t turn = 0;  // the sending loop turn (SimRuntime::turn())
    bool sent = false;
    struct Message {
      size_t bytes;
      std::function<void()> fn;
    };
    std::vector<Message> messages;
  };
  std::map<std::pair<uint32_t, uint32_t>, std::shared_ptr<Frame>> frames_;
  void LoadLoop(uint32_t c);
  client::RoutingTable Routing() const {
    client::RoutingTable t;
    t = cluster::RoutingFromConfig(config_);
    return t;
  }
  bool IsClient(NodeId n) const { return n >= kClientBase; }
  bool OneSided() const { return replication::IsOneSided(o_.protocol); }
  // The erda family's client access (replication::Design::clients).
  const replication::Design::ClientAccess& Clients() const { return replication::DesignOf(o_.protocol).clients; }
  bool DirectClients() const { return Clients().reads_one_sided || Clients().writes_one_sided; }
  // The fabric's loss and jitter: the message layer's.
  fabric::LinkFaults NetworkFaults() const {
    fabric::LinkFaults f;
    f.drop_probability = o_.drop_probability;
    f.jitter = static_cast<Nanos>(o_.latency_max_us - o_.latency_min_us) * kMicrosecond;
    return f;
  }
  // A partition cuts a node off from the CM and the other nodes, but the
  // clients still reach it: the case where an old primary could serve stale
  // reads unless its lease stops it.
  // A slow node (overloaded, swapping) takes `slow_factor` times longer to
  // receive and answer.
  Nanos Slowness(NodeId n) const { return slow_.count(n) ? o_.slow_factor : 1; }
  bool Cut(NodeId a, NodeId b) const {
    if (IsClient(a) || IsClient(b)) return false;
    return (a < nodes_.size() && isolated_.count(a)) || (b < nodes_.size() && isolated_.count(b));
  }
  static constexpr NodeId kClientBase = 1000;

  void StartNode(Node& n, bool fresh);
  Status StartReplication(Node& n, Incarnation& inc);
  void StartNodeRoles(Node& n);
  void Isolate(NodeId id, bool cut);
  void SetSlow(NodeId id, bool slow);
  void Crash(NodeId id);
  void Restart(NodeId id);
  void PowerLoss();
  void ColdStart();
  void RenewLoop(NodeId id, uint64_t inc);
  void CommitLoop(NodeId id, uint64_t inc, uint32_t worker);
  void OnRenew(NodeId id, uint64_t inc, Nanos sent);
  void StartManager();
  // CM side of a renewal sent at `sent`: the node's lease in the CM's store
  // runs from then (a late, reordered renewal never shortens it). False if
  // the store refused it.
  bool RecordLease(NodeId id, Nanos sent);
  void OnReassigned(const cluster::Manager::Reassigned& r);
  void OnSeeded(uint32_t shard, NodeId backup, uint64_t term);
  // Shard moves: the CM starts one; the target of a primary's move reports
  // it holds everything; the CM's process restarts.
  void StartRandomMigration();
  void OnMigrated(uint32_t shard, NodeId to, uint64_t term);
  void RestartManager();
  // Counts the moves `next` no longer lists: finished or ended by a failure.
  void CountEndedMoves(const cluster::ClusterConfig& before, const cluster::ClusterConfig& after, bool failure);
  bool SafeToFail(NodeId victim) const;
  std::string Describe() const;
  void Publish(std::shared_ptr<server::NodeView> v);
  void SendConfig(Node* np, std::shared_ptr<const server::NodeView> v);
  // A crash `within` from now (if safe then), and the restart 4 leases later.
  void CrashSoon(NodeId victim, Nanos within, const char* what);
  void ClientLoop(uint32_t c);
  void Record(uint32_t c, const client::OpRecord& r);
  std::string CheckVersionsMonotonic() const;

  ClusterSimOptions o_;
  // Self-rescheduling tasks (ticks, digest loops); destroyed after the
  // runtime whose queued events point at them.
  std::vector<std::unique_ptr<std::function<void()>>> periodic_;
  // The configuration manager (cluster::Manager, as `slip manager` runs
  // it) over an in-memory store on virtual time; one per CM incarnation
  // (a power loss takes the CM down too), kept for their pending timers.
  std::vector<std::unique_ptr<cluster::Manager>> managers_;
  runtime::SimRuntime rt_;
  std::unique_ptr<fabric::SimFabric> fabric_;  // one-sided designs only
  runtime::Executor* cm_ = nullptr;
  std::vector<std::unique_ptr<Node>> nodes_;
  // The CM's store: the stored configuration (config_ is its latest
  // version, cm_version_ its store version) and the nodes' leases, which
  // the CM side of a renewal takes on the node's behalf.
  std::unique_ptr<cluster::ConfigStore> cm_store_ = cluster::OpenMemoryStore(cluster::NewMemoryStoreState());
  cluster::ClusterConfig config_;
  uint64_t cm_version_ = cluster::kNoVersion;
  std::shared_ptr<const server::NodeView> view_;
  // Writes `next` to the CM's store and publishes it.
  Status SetConfig(Result<cluster::ClusterConfig> next);
  void Adopt(const cluster::VersionedConfig& stored);
  std::set<NodeId> down_;  // declared failed by the manager, not back yet

  struct Client {
    runtime::Executor* exec;
    std::unique_ptr<Caller> caller;
    std::unique_ptr<RoutingFromCm> routing;
    std::unique_ptr<client::ClientCore> core;
    // erda: the client's one-sided endpoint and path.
    std::unique_ptr<fabric::Endpoint> ep;
    std::unique_ptr<client::ErdaPath> erda;
    uint32_t done = 0, next_value = 0;
    // Performance runs: the client's workload and its measured operations.
    std::unique_ptr<ycsb::OpGenerator> gen;
    uint64_t updates = 0;
  };
  std::vector<Client> clients_;
  std::vector<Operation> history_;
  struct AckedWrite {
    uint32_t shard;
    Nanos invoke, ret;
    uint64_t version;
  };
  std::vector<AckedWrite> writes_;
  uint64_t unknown_ = 0, faults_ = 0, failovers_ = 0;
  uint32_t failover_crashes_left_ = 0;
  bool final_phase_ = false;
  bool cold_ = false;  // between a power loss and the cold start
  std::set<NodeId> isolated_;                 // partitioned off from everyone
  std::set<NodeId> slow_;
  std::map<NodeId, Nanos> last_grant_;        // CM: lease granted (CM time)
  std::map<NodeId, Nanos> lease_sent_;        // CM: newest renewal recorded in the store (node time)
  std::map<NodeId, uint64_t> member_inc_;     // CM: incarnation it knows per member
  // CM: the term since which a backup has been a replica of a shard (a seed
  // report from an earlier membership does not count).
  std::map<std::pair<uint32_t, NodeId>, uint64_t> seeded_since_;
  // CM: the term each move under way started in (a report from an earlier
  // move of the shard does not count).
  std::map<uint32_t, uint64_t> move_since_;
  uint64_t migrations_started_ = 0, migrations_done_ = 0, migrations_failed_ = 0;
  std::string failure_;
  // Performance runs.
  std::unique_ptr<ycsb::InsertCounter> inserts_;
  uint64_t loaded_ = 0;       // records the load phase has written
  uint64_t load_failed_ = 0;
  std::string first_load_error_;
  Nanos window_start_ = -1, window_end_ = -1;
  // Operations that ended in the window: GETs; PUTs and read-modify-writes.
  std::vector<Nanos> read_latencies_, write_latencies_;
  // Performance runs with sync_clients: each client's application threads,
  // client-major (none otherwise).
  std::vector<runtime::Executor*> apps_;
  uint64_t window_errors_ = 0;
  bool stop_ = false;  // clients stop issuing
};

}  // namespace slip::sim::detail
