#include "sim/cluster_sim.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <set>

#include "client/client_core.h"
#include "common/hash.h"
#include "fabric/sim/sim_fabric.h"
#include "pm/region.h"
#include "replication/backup_log.h"
#include "replication/registry.h"
#include "runtime/sim_runtime.h"
#include "cluster/cluster_config.h"
#include "server/config_view.h"
#include "server/node_builder.h"
#include "store/store.h"

namespace slip::sim {
namespace {

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
  runtime::Executor* exec = nullptr;    // worker 0: requests, replication, agent
  std::vector<runtime::Executor*> workers;  // [0] = exec, then the other workers
  runtime::Executor* nic = nullptr;     // one-sided: polls the backup log's endpoint
  runtime::Executor* digest = nullptr;  // one-sided: digests what peers wrote
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
      : o_(o), rt_(runtime::SimRuntimeOptions{o.seed, false, 64}) {
    if (o_.trace) {
      rt_.SetTraceSink([](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
    }
    if (OneSided()) {
      // The replication network has the message network's latency, jitter
      // and loss (a lost packet is retransmitted: reliable connections).
      fabric::SimFabricOptions fo;
      fo.latency = static_cast<Nanos>(o_.latency_min_us) * kMicrosecond;
      fo.dma_persist_delay = o_.persist_delay_ns;
      fabric_ = std::make_unique<fabric::SimFabric>(rt_, fo);
      fabric_->SetDefaultFaults(NetworkFaults());
    }
  }

  ClusterSimResult Run();

  // --- network ---
  void Call(runtime::Executor* from, NodeId from_node, uint64_t from_inc, NodeId to,
            uint16_t method, std::string payload,
            std::function<void(Result<rpc::PeerResponse>)> done);

 private:
  class Caller final : public rpc::PeerCaller {
   public:
    Caller(World* w, runtime::Executor* from, NodeId from_node, uint64_t inc)
        : w_(w), from_(from), from_node_(from_node), inc_(inc) {}
    void Call(NodeId node, uint16_t method, std::string payload,
              std::function<void(Result<rpc::PeerResponse>)> done) override {
      w_->Call(from_, from_node_, inc_, node, method, std::move(payload), std::move(done));
    }

   private:
    World* w_;
    runtime::Executor* from_;
    NodeId from_node_;
    uint64_t inc_;
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
    return static_cast<Nanos>(rt_.Rng().Range(o_.latency_min_us, o_.latency_max_us)) * kMicrosecond;
  }
  client::RoutingTable Routing() const {
    client::RoutingTable t;
    t = cluster::RoutingFromConfig(config_);
    return t;
  }
  bool IsClient(NodeId n) const { return n >= kClientBase; }
  bool OneSided() const { return replication::IsOneSided(o_.protocol); }
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
  void CheckLeases();
  void OnSeeded(uint32_t shard, NodeId backup, uint64_t term);
  bool SafeToFail(NodeId victim) const;
  std::string Describe() const;
  void Publish(std::shared_ptr<server::NodeView> v);
  void SendConfig(Node* np, std::shared_ptr<const server::NodeView> v);
  void Reconfigure();          // CM: react to the live set
  // A crash `within` from now (if safe then), and the restart 4 leases later.
  void CrashSoon(NodeId victim, Nanos within, const char* what);
  void ClientLoop(uint32_t c);
  void Record(uint32_t c, const client::OpRecord& r);
  std::string CheckVersionsMonotonic() const;

  ClusterSimOptions o_;
  runtime::SimRuntime rt_;
  std::unique_ptr<fabric::SimFabric> fabric_;  // one-sided designs only
  runtime::Executor* cm_ = nullptr;
  std::vector<std::unique_ptr<Node>> nodes_;
  // The manager's configuration (cluster/: the same functions a real manager
  // uses) and the node view derived from it.
  cluster::ClusterConfig config_;
  std::shared_ptr<const server::NodeView> view_;
  Status SetConfig(Result<cluster::ClusterConfig> next);
  std::set<NodeId> down_;

  struct Client {
    runtime::Executor* exec;
    std::unique_ptr<Caller> caller;
    std::unique_ptr<RoutingFromCm> routing;
    std::unique_ptr<client::ClientCore> core;
    uint32_t done = 0, next_value = 0;
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
  std::map<NodeId, uint64_t> member_inc_;     // CM: incarnation it knows per member
  // CM: the term since which a backup has been a replica of a shard (a seed
  // report from an earlier membership does not count).
  std::map<std::pair<uint32_t, NodeId>, uint64_t> seeded_since_;
  std::string failure_;
};

void World::Call(runtime::Executor* from, NodeId from_node, uint64_t from_inc, NodeId to,
                 uint16_t method, std::string payload,
                 std::function<void(Result<rpc::PeerResponse>)> done) {
  struct State {
    bool finished = false;
    runtime::TimerId timer = 0;
    std::function<void(Result<rpc::PeerResponse>)> done;
  };
  auto st = std::make_shared<State>();
  st->done = std::move(done);
  // The caller must still be the same process when an answer comes back.
  auto caller_alive = [this, from_node, from_inc] {
    return IsClient(from_node) || (nodes_[from_node]->up && nodes_[from_node]->incarnation == from_inc);
  };
  st->timer = from->After(static_cast<Nanos>(o_.call_timeout_us) * kMicrosecond,
                          [st, caller_alive, to] {
                            if (st->finished || !caller_alive()) return;
                            st->finished = true;
                            st->done(Status::Timeout("no answer from node " + std::to_string(to)));
                          });
  // A dead process sends nothing (its executor's timers still fire here).
  if (!caller_alive()) return;
  if (to >= nodes_.size() || Cut(from_node, to) || rt_.Rng().Bernoulli(o_.drop_probability)) return;
  Node* dst = nodes_[to].get();
  const uint64_t dst_inc = dst->incarnation;
  auto body = std::make_shared<std::string>(std::move(payload));
  rt_.Schedule(rt_.Now() + Latency() * Slowness(to), dst->exec, kEventNet, "deliver", method,
               [this, dst, dst_inc, method, body, from, from_node, st, caller_alive] {
                 if (!dst->up || dst->incarnation != dst_inc) return;  // lost with the node
                 dst->live->parts->pool->Handle(
                     method, proto::AsBytes(*body),
                     [this, dst, dst_inc, from, from_node, st, caller_alive](Code c, std::string p) {
                       if (!dst->up || dst->incarnation != dst_inc) return;
                       if (Cut(dst->id, from_node) || rt_.Rng().Bernoulli(o_.drop_probability)) return;
                       auto resp = std::make_shared<rpc::PeerResponse>(
                           rpc::PeerResponse{c, std::move(p)});
                       rt_.Schedule(rt_.Now() + Latency() * Slowness(dst->id), from, kEventNet, "reply",
                                    static_cast<uint64_t>(c), [st, resp, from, caller_alive] {
                                      if (st->finished || !caller_alive()) return;
                                      st->finished = true;
                                      from->Cancel(st->timer);
                                      st->done(std::move(*resp));
                                    });
                     });
               });
}

void World::StartNode(Node& n, bool fresh) {
  if (fabric_ && n.live) {
    // The previous process is gone: its endpoints die with it (already so
    // if it crashed), and this one may make new ones.
    fabric_->CrashNode(n.id);
    fabric_->RestartNode(n.id);
  }
  auto inc = std::make_unique<Incarnation>();
  if (fresh || !n.live) {
    pm::RegionOptions ro;
    ro.crash_model = true;
    // One-sided designs also keep posted / per-peer segments for peers.
    inc->region = std::move(pm::PmRegion::Anonymous(OneSided() ? 16 << 20 : 8 << 20, ro)).value();
  } else {
    inc->region = std::move(n.live->region);
  }
  store::StoreOptions so;
  so.geometry.segment_size = 256 << 10;
  so.geometry.num_shards = o_.shards;
  so.limits.max_key = 256;
  so.limits.max_value = 4096;
  so.max_block_bytes = 8192;
  so.num_writers = o_.workers + 1;  // the workers, then the promoter
  auto store = store::Store::Open(inc->region.get(), so);
  if (!store.ok()) {
    failure_ = "node " + std::to_string(n.id) + " failed to open its store: " + store.status().ToString();
    return;
  }
  inc->store = std::move(*store);
  ++n.incarnation;
  inc->workers.resize(o_.workers);
  for (uint32_t w = 0; w < o_.workers; ++w) {
    inc->workers[w].caller = std::make_unique<Caller>(this, n.workers[w], n.id, n.incarnation);
  }
  if (OneSided()) {
    if (Status s = StartReplication(n, *inc); !s.ok()) {
      failure_ = "node " + std::to_string(n.id) + " failed to start replication: " + s.ToString();
      return;
    }
  }
  Node* np = &n;
  server::NodeEnv env;
  env.id = n.id;
  env.design = o_.protocol;
  env.store = inc->store.get();
  env.limits = so.limits;
  env.backup = inc->backup.get();
  env.views = &n.views;
  env.agent_exec = n.exec;
  env.promoter_peers = inc->workers[0].caller.get();
  for (uint32_t i = 0; i < o_.workers; ++i) {
    env.workers.push_back({.exec = n.workers[i], .peers = inc->workers[i].caller.get(), .out = inc->workers[i].out.get()});
  }
  env.onesided.self = n.id;
  env.onesided.max_message = 4096;
  env.onesided.term = [np] { return np->views.Get()->term; };
  env.onesided.shared_logs = std::make_shared<replication::SharedRemoteLogs>();  // share-kv: one per process
  env.core.commit_record_step = o_.commit_record_step;
  if (!o_.bug_no_lease) env.core.lease = [np] { return np->exec->Now() < np->lease_expiry; };
  env.alive = [np, my_inc = n.incarnation] { return np->up && np->incarnation == my_inc; };
  {
    const NodeId id = n.id;
    const uint64_t my_inc = n.incarnation;
    env.on_seeded = [this, id, my_inc](uint32_t shard, NodeId backup, uint64_t term) {
      // A message to the CM (lost if this node is cut off or dead).
      if (!nodes_[id]->up || nodes_[id]->incarnation != my_inc || isolated_.count(id)) return;
      rt_.Schedule(rt_.Now() + Latency(), cm_, kEventControl, "seeded", shard,
                   [this, shard, backup, term] { OnSeeded(shard, backup, term); });
    };
  }
  if (o_.bug_ack_before_replication) {
    env.wrap_replicator = [np](uint32_t i, std::unique_ptr<replication::Replicator> r) {
      return std::unique_ptr<replication::Replicator>(std::make_unique<AckFirstReplicator>(std::move(r), np->workers[i]));
    };
  }
  inc->parts = server::BuildNode(std::move(env));
  if (n.live) n.dead.push_back(std::move(n.live));
  n.live = std::move(inc);
  n.up = true;
  n.lease_expiry = 0;
  const uint64_t this_inc = n.incarnation;
  n.exec->Post([this, id = n.id, this_inc] { RenewLoop(id, this_inc); });
  if (o_.commit_interval_us > 0) {
    for (uint32_t w = 0; w < o_.workers; ++w) {
      n.workers[w]->After(static_cast<Nanos>(o_.commit_interval_us) * kMicrosecond,
                          [this, id = n.id, this_inc, w] { CommitLoop(id, this_inc, w); });
    }
  }
}

// CommitVer records on each worker, as a real node writes them.
void World::CommitLoop(NodeId id, uint64_t inc, uint32_t worker) {
  Node& n = *nodes_[id];
  if (!n.up || n.incarnation != inc) return;
  n.live->parts->workers[worker].core->WriteCommitRecords();
  n.workers[worker]->After(static_cast<Nanos>(o_.commit_interval_us) * kMicrosecond,
                           [this, id, inc, worker] { CommitLoop(id, inc, worker); });
}

// A one-sided design's replication side of one process, as
// node/node_process.cc builds it: the backup log on an endpoint of its own
// (peers write there; the NIC executor polls it), and the replicator on a
// sending endpoint polled by the worker.
Status World::StartReplication(Node& n, Incarnation& inc) {
  const std::string name = "node" + std::to_string(n.id);
  // A peer that stops answering fails the write in about a call timeout,
  // as a REPLICATE call would.
  const fabric::EndpointOptions in_opts{.name = name + "/in"};
  fabric::EndpointOptions out_opts{.name = name + "/out"};
  out_opts.op_timeout = std::chrono::microseconds(o_.call_timeout_us);
  SLIP_ASSIGN_OR_RETURN(inc.in, fabric_->CreateEndpoint(n.id, n.nic, in_opts));
  replication::BackupLogOptions bo;
  bo.protocol = o_.protocol;
  SLIP_ASSIGN_OR_RETURN(inc.backup, replication::BackupLog::Create(inc.store.get(), inc.in.get(), bo));
  for (uint32_t i = 0; i < o_.workers; ++i) {
    SLIP_ASSIGN_OR_RETURN(inc.workers[i].out, fabric_->CreateEndpoint(n.id, n.workers[i], out_opts));
  }
  return Status::Ok();
}

// The NIC and digest roles of a one-sided node; they act on whichever
// incarnation is live.
void World::StartNodeRoles(Node& n) {
  n.nic = rt_.CreateExecutor("node" + std::to_string(n.id) + "/nic");
  n.digest = rt_.CreateExecutor("node" + std::to_string(n.id) + "/digest");
  Node* np = &n;
  n.nic->AddPoller([this, np] { return np->up && np->live && np->live->backup && np->live->backup->Poll(rt_.Now()); });
  // The used-segment rule runs on time alone (no traffic): a tick polls.
  auto tick = std::make_shared<std::function<void()>>();
  *tick = [np, tick] { np->nic->After(kMillisecond, *tick); };
  n.nic->After(kMillisecond, *tick);
  auto digest = std::make_shared<std::function<void()>>();
  *digest = [this, np, digest] {
    if (np->up && np->live && np->live->backup) {
      auto r = np->live->backup->DigestStep();
      if (!r.ok() && failure_.empty()) {
        failure_ = "node " + std::to_string(np->id) + " digest: " + r.status().ToString();
      }
    }
    np->digest->After(100 * kMicrosecond, *digest);
  };
  n.digest->After(100 * kMicrosecond, *digest);
  // Placed bytes become durable in the live process's region (placements
  // into an earlier process's memory died with its endpoints).
  fabric_->SetPersistHook(n.id, [np](const std::byte* p, size_t len) {
    if (np->live && np->live->region && np->live->region->contains(p, len)) np->live->region->Persist(p, len);
  });
}

// A partition cuts `id` off from the CM and the other nodes: messages
// (Cut) and the replication fabric alike.
void World::Isolate(NodeId id, bool cut) {
  if (cut) {
    isolated_.insert(id);
  } else {
    isolated_.erase(id);
  }
  if (!fabric_) return;
  for (NodeId other = 0; other < nodes_.size(); ++other) {
    if (other == id) continue;
    if (cut) {
      fabric_->Partition(id, other);
    } else if (!isolated_.count(other)) {
      fabric_->Heal(id, other);
    }
  }
}

// A slow node answers slow_factor times later, on the fabric too.
void World::SetSlow(NodeId id, bool slow) {
  if (slow) {
    slow_.insert(id);
  } else {
    slow_.erase(id);
  }
  if (!fabric_) return;
  fabric::LinkFaults f = NetworkFaults();
  if (slow) f.extra_delay = (o_.slow_factor - 1) * static_cast<Nanos>(o_.latency_max_us) * kMicrosecond;
  fabric_->SetNodeFaults(id, f);
}

// Node side: ask the CM for a lease every lease/4. The lease runs from when
// the request was SENT, so the node's idea of it never outlasts the CM's.
void World::RenewLoop(NodeId id, uint64_t inc) {
  Node& n = *nodes_[id];
  if (!n.up || n.incarnation != inc) return;
  const Nanos sent = rt_.Now();
  if (!isolated_.count(id) && !rt_.Rng().Bernoulli(o_.drop_probability)) {
    rt_.Schedule(rt_.Now() + Latency(), cm_, kEventControl, "renew", id,
                 [this, id, inc, sent] { OnRenew(id, inc, sent); });
  }
  n.exec->After(static_cast<Nanos>(o_.lease_us) * kMicrosecond / 4, [this, id, inc] { RenewLoop(id, inc); });
}

// CM side of a renewal.
void World::OnRenew(NodeId id, uint64_t inc, Nanos sent) {
  if (cold_) return;
  auto known = member_inc_.find(id);
  const bool evicted = down_.count(id) > 0;
  if (known != member_inc_.end() && known->second != inc && !evicted) {
    // A new incarnation of a member: the old one is dead. Wait for its lease.
    return;
  }
  if (evicted && known != member_inc_.end() && known->second == inc) {
    // An evicted member that was only cut off: it must rejoin empty.
    rt_.Schedule(rt_.Now() + Latency(), nodes_[id]->exec, kEventControl, "evicted", id, [this, id, inc] {
      Node& n = *nodes_[id];
      if (!n.up || n.incarnation != inc) return;
      ++faults_;
      n.up = false;
      StartNode(n, /*fresh=*/true);
      n.live->parts->agent->Adopt(view_);
    });
    return;
  }
  if (evicted) {
    // Back, empty: a member again, topping up under-replicated shards.
    if (config_.nodes.count(id) && config_.nodes[id].state == cluster::NodeState::kDown) {
      Status st = SetConfig(cluster::Rejoin(config_, id));
      if (!st.ok()) {
        failure_ = "rejoin of node " + std::to_string(id) + ": " + st.ToString();
        return;
      }
    }
    down_.erase(id);
    member_inc_[id] = inc;
  }
  last_grant_[id] = rt_.Now();
  if (isolated_.count(id) || rt_.Rng().Bernoulli(o_.drop_probability)) return;
  Node* np = nodes_[id].get();
  rt_.Schedule(rt_.Now() + Latency(), np->exec, kEventControl, "lease", id, [this, np, inc, sent] {
    if (!np->up || np->incarnation != inc) return;
    np->lease_expiry = std::max(np->lease_expiry, sent + static_cast<Nanos>(o_.lease_us) * kMicrosecond);
  });
}

// CM: a member whose last grant is older than a lease (plus slack for the
// grant's flight) has lost its lease and no longer serves: replace it.
void World::CheckLeases() {
  if (!cold_) {
    const Nanos lease = static_cast<Nanos>(o_.lease_us) * kMicrosecond;
    bool any = false;
    for (auto& [id, granted] : last_grant_) {
      if (down_.count(id)) continue;
      if (rt_.Now() > granted + lease + 2 * static_cast<Nanos>(o_.latency_max_us) * kMicrosecond) {
        down_.insert(id);
        any = true;
      }
    }
    if (any) Reconfigure();
  }
  cm_->After(kMillisecond, [this] { CheckLeases(); });
}

void World::Crash(NodeId id) {
  Node& n = *nodes_[id];
  if (!n.up || cold_) return;
  ++faults_;
  n.up = false;
  // Its NIC stops at once: DMAs not yet persistent are lost with it.
  if (fabric_) fabric_->CrashNode(id);
  // Power fails: unpersisted lines are kept, dropped or torn.
  n.live->region->SimulateCrash(rt_.Rng().Next());
  // The CM notices when the node stops renewing its lease.
}

void World::Restart(NodeId id) {
  Node& n = *nodes_[id];
  // Recovery must work on the crashed image (it is checked), but a node that
  // rejoins a running cluster comes back empty: its old entries may predate
  // deletes whose tombstones are gone elsewhere.
  StartNode(n, /*fresh=*/false);
  if (!failure_.empty()) return;
  StartNode(n, /*fresh=*/true);
  n.live->parts->agent->Adopt(view_);
  // It announces itself by renewing a lease (a new incarnation: a spare).
}

// Whole-cluster power loss: every node crashes at once. Nothing can be
// reconfigured while they are down; they restart from their PM.
void World::PowerLoss() {
  cold_ = true;
  ++faults_;
  for (auto& n : nodes_) {
    if (!n->up) continue;
    n->up = false;
    if (fabric_) fabric_->CrashNode(n->id);
    n->live->region->SimulateCrash(rt_.Rng().Next());
  }
}

// Cold start: every node recovers its store from PM; the shard map stays,
// but each shard is blocked until its primary has gathered every replica's
// entries and scattered the union (replicas may differ in writes that were
// never acknowledged), exactly as a promotion.
void World::ColdStart() {
  for (auto& n : nodes_) {
    if (n->live && !n->up) {
      StartNode(*n, /*fresh=*/false);
      if (!failure_.empty()) return;
    } else if (!n->live) {
      StartNode(*n, /*fresh=*/true);
    }
  }
  down_.clear();
  cold_ = false;
  // Everyone boots at once and takes a fresh lease.
  for (auto& n : nodes_) {
    member_inc_[n->id] = n->incarnation;
    last_grant_[n->id] = rt_.Now();
    n->lease_expiry = rt_.Now() + static_cast<Nanos>(o_.lease_us) * kMicrosecond;
  }
  cluster::ClusterConfig next = config_;
  ++next.term;
  config_ = next;
  auto v = server::ViewFromConfig(config_);
  view_ = v;
  // Each node reads the configuration at boot and reconciles the shards it
  // serves before serving them (NodeAgent::ColdStart).
  for (auto& n : nodes_) n->live->parts->agent->ColdStart(v);
  if (o_.crash_in_cold_start) CrashSoon(static_cast<NodeId>(rt_.Rng().Uniform(o_.nodes)), 2 * kMillisecond, "crash-in-cold-start");
}

void World::Publish(std::shared_ptr<server::NodeView> v) {
  view_ = v;
  // Configuration messages are reliable here (the CM retries until acked);
  // their delay differs per node, so nodes disagree for a while.
  for (auto& n : nodes_) SendConfig(n.get(), v);
}

void World::SendConfig(Node* np, std::shared_ptr<const server::NodeView> v) {
  rt_.Schedule(rt_.Now() + Latency(), np->exec, kEventControl, "config", v->term, [this, np, v] {
    if (isolated_.count(np->id)) {
      // Cut off: the CM retries until the node answers.
      cm_->After(kMillisecond, [this, np, v] { SendConfig(np, v); });
      return;
    }
    if (np->up) np->live->parts->agent->Adopt(v);
  });
}

// The configuration manager: one change at a time, each a new term.
void World::Reconfigure() {
  if (cold_) return;
  // Every node the manager has declared failed that the configuration still
  // lists as up: one Reassign each (a new term each).
  for (NodeId n : down_) {
    auto it = config_.nodes.find(n);
    if (it == config_.nodes.end() || it->second.state != cluster::NodeState::kUp) continue;
    const uint64_t before = failovers_;
    std::vector<uint32_t> moved;
    for (uint32_t sh = 0; sh < config_.num_shards(); ++sh) {
      if (config_.shards[sh].primary == n) moved.push_back(sh);
    }
    failovers_ += moved.size();
    Status st = SetConfig(cluster::Reassign(config_, n));
    if (!st.ok()) {
      failovers_ = before;
      failure_ = "reassign after node " + std::to_string(n) + " failed: " + st.ToString();
      return;
    }
    if (failover_crashes_left_ > 0 && !moved.empty()) {
      --failover_crashes_left_;
      const uint32_t sh = moved[rt_.Rng().Uniform(moved.size())];
      CrashSoon(config_.shards[sh].primary, 2 * kMillisecond, "crash-in-failover");
    }
  }
  for (uint32_t sh = 0; sh < config_.num_shards(); ++sh) {
    if (config_.nodes[config_.shards[sh].primary].state != cluster::NodeState::kUp) {
      failure_ = "shard " + std::to_string(sh) + " lost every in-sync replica";
      return;
    }
  }
}

void World::CrashSoon(NodeId victim, Nanos within, const char* what) {
  const Nanos at = rt_.Now() + static_cast<Nanos>(rt_.Rng().Uniform(static_cast<uint64_t>(within)));
  rt_.Schedule(at, nullptr, kEventFault, what, victim, [this, victim] {
    if (!nodes_[victim]->up || !SafeToFail(victim)) return;
    Crash(victim);
    const uint64_t inc = nodes_[victim]->incarnation;
    rt_.Schedule(rt_.Now() + 4 * static_cast<Nanos>(o_.lease_us) * kMicrosecond, nullptr, kEventFault, "restart",
                 victim, [this, victim, inc] {
                   if (!nodes_[victim]->up && nodes_[victim]->incarnation == inc) Restart(victim);
                 });
  });
}

// Adopts `next` as the manager's configuration and publishes it.
Status World::SetConfig(Result<cluster::ClusterConfig> next) {
  if (!next.ok()) return next.status();
  for (uint32_t sh = 0; sh < next->num_shards(); ++sh) {
    for (NodeId b : next->shards[sh].syncing) {
      const auto& old = config_.shards[sh].syncing;
      if (std::find(old.begin(), old.end(), b) == old.end()) seeded_since_[{sh, b}] = next->term;
    }
  }
  config_ = std::move(*next);
  auto v = server::ViewFromConfig(config_);
  Publish(std::const_pointer_cast<server::NodeView>(v));
  return Status::Ok();
}

// CM: a primary reports that a new backup holds the whole shard.
void World::OnSeeded(uint32_t shard, NodeId backup, uint64_t term) {
  if (cold_) return;
  auto& sync = config_.shards[shard].syncing;
  if (std::find(sync.begin(), sync.end(), backup) == sync.end()) return;
  // Only if the report is about the replica set as it still is: the backup
  // must have been a replica without interruption since `term`.
  if (term < seeded_since_[{shard, backup}]) return;
  Status st = SetConfig(cluster::MarkSynced(config_, shard, backup));
  if (!st.ok()) failure_ = "mark synced: " + st.ToString();
}

// Whether taking `victim` away (crash or partition) leaves every shard a
// live, in-sync replica: the harness injects only faults the design is
// meant to survive (RF - 1 failures of in-sync replicas).
bool World::SafeToFail(NodeId victim) const {
  for (const auto& rep : view_->shards) {
    std::vector<NodeId> all = rep.backups;
    all.push_back(rep.primary);
    bool ok = false;
    for (NodeId n : all) {
      const bool syncing = std::find(rep.syncing.begin(), rep.syncing.end(), n) != rep.syncing.end();
      // A node that has not renewed its lease lately may be about to be
      // evicted (e.g. just healed from a partition): it does not count.
      auto g = last_grant_.find(n);
      const bool fresh = g != last_grant_.end() &&
                         rt_.Now() - g->second < static_cast<Nanos>(o_.lease_us) * kMicrosecond / 2;
      if (n != victim && !syncing && fresh && nodes_[n]->up && !down_.count(n) && !isolated_.count(n)) {
        ok = true;
      }
    }
    if (!ok) return false;
  }
  return true;
}

void World::Record(uint32_t c, const client::OpRecord& r) {
  Operation op;
  op.kind = r.kind == client::OpRecord::Kind::kPut   ? Operation::Kind::kPut
            : r.kind == client::OpRecord::Kind::kGet ? Operation::Kind::kGet
                                                     : Operation::Kind::kDel;
  op.key = r.key;
  op.value = r.value;
  op.found = r.kind == client::OpRecord::Kind::kDel && r.result == Code::kOk;
  op.unknown = r.unknown;
  op.invoke = r.invoke;
  op.ret = r.ret;
  op.client = c;
  unknown_ += r.unknown;
  history_.push_back(std::move(op));
  if (r.version != 0) writes_.push_back({ShardOfHash(HashKey(r.key), o_.shards), r.invoke, r.ret, r.version});
}

// I4: within a shard, a write acknowledged before another write was invoked
// has the smaller version — across failovers and cold starts.
std::string World::CheckVersionsMonotonic() const {
  std::vector<const AckedWrite*> by_ret, by_invoke;
  for (const auto& w : writes_) {
    by_ret.push_back(&w);
    by_invoke.push_back(&w);
  }
  std::sort(by_ret.begin(), by_ret.end(), [](auto* a, auto* b) { return a->ret < b->ret; });
  std::sort(by_invoke.begin(), by_invoke.end(), [](auto* a, auto* b) { return a->invoke < b->invoke; });
  std::vector<uint64_t> max_done(o_.shards, 0);
  size_t i = 0;
  for (const AckedWrite* w : by_invoke) {
    for (; i < by_ret.size() && by_ret[i]->ret < w->invoke; ++i) {
      max_done[by_ret[i]->shard] = std::max(max_done[by_ret[i]->shard], by_ret[i]->version);
    }
    if (w->version <= max_done[w->shard]) {
      return "shard " + std::to_string(w->shard) + ": a write invoked at " + std::to_string(w->invoke) +
             " got version " + std::to_string(w->version) + ", not above " +
             std::to_string(max_done[w->shard]) + " acknowledged before it";
    }
  }
  return "";
}

void World::ClientLoop(uint32_t c) {
  Client& cl = clients_[c];
  if (cl.done >= o_.ops_per_client) return;
  ++cl.done;
  Random& rng = cl.exec->Rng();
  // The last client only polls one key: it talks to one primary only, so it
  // learns of a new term only from that node, like a client watching a key.
  // It is the one that would see a stale value if a cut-off old primary kept
  // serving after its replacement took writes.
  const bool reader = o_.clients >= 2 && c == o_.clients - 1;
  std::string key = "k" + std::to_string(reader ? 0 : rng.Uniform(o_.keys));
  const uint64_t dice = reader ? 9 : rng.Uniform(10);
  auto next = [this, c] {
    clients_[c].exec->After(static_cast<Nanos>(clients_[c].exec->Rng().Uniform(200)) * kMicrosecond,
                            [this, c] { ClientLoop(c); });
  };
  if (dice < 4) {
    std::string value = "c" + std::to_string(c) + "v" + std::to_string(cl.next_value++);
    cl.core->Put(std::move(key), std::move(value), [next](Result<uint64_t>) { next(); });
  } else if (dice < 5) {
    cl.core->Delete(std::move(key), [next](Status) { next(); });
  } else {
    cl.core->Get(std::move(key), [next](Result<std::string>) { next(); });
  }
}

// The cluster's state in one line, for a stuck run's report.
std::string World::Describe() const {
  std::string d = "term " + std::to_string(view_->term) + "; down {";
  for (NodeId n : down_) d += " " + std::to_string(n);
  d += " }; isolated {";
  for (NodeId n : isolated_) d += " " + std::to_string(n);
  d += " }; blocked shards {";
  for (const auto& n : nodes_) {
    if (!n->up) continue;
    auto v = n->views.Get();
    for (uint32_t sh = 0; sh < v->blocked.size(); ++sh) {
      if (v->blocked[sh]) d += " " + std::to_string(sh) + "@node" + std::to_string(n->id);
    }
  }
  d += " }; clients done";
  for (const auto& c : clients_) d += " " + std::to_string(c.done);
  d += "; nodes up";
  for (const auto& n : nodes_) d += n->up ? " 1" : " 0";
  return d;
}

ClusterSimResult World::Run() {
  ClusterSimResult res;
  cm_ = rt_.CreateExecutor("cm");
  for (NodeId i = 0; i < o_.nodes; ++i) {
    auto n = std::make_unique<Node>();
    n->id = i;
    n->exec = rt_.CreateExecutor("node" + std::to_string(i));
    n->workers.push_back(n->exec);
    for (uint32_t w = 1; w < o_.workers; ++w) {
      n->workers.push_back(rt_.CreateExecutor("node" + std::to_string(i) + "/worker" + std::to_string(w)));
    }
    if (fabric_) StartNodeRoles(*n);
    nodes_.push_back(std::move(n));
  }
  // Term 1: shard s on nodes s, s+1, ..., primary first.
  // Term 1: cluster::Place, as a real manager bootstraps a cluster.
  std::map<NodeId, std::string> members;
  for (NodeId i = 0; i < o_.nodes; ++i) members[i] = "sim:node" + std::to_string(i);
  auto placed = cluster::Place(members, o_.shards, o_.replication);
  if (!placed.ok()) {
    res.ok = false;
    res.failure = "placement: " + placed.status().ToString();
    return res;
  }
  config_ = std::move(*placed);
  auto v = server::ViewFromConfig(config_);
  view_ = v;
  for (auto& n : nodes_) {
    StartNode(*n, true);
    n->live->parts->agent->Start(v);
    member_inc_[n->id] = n->incarnation;
    last_grant_[n->id] = 0;
    n->lease_expiry = static_cast<Nanos>(o_.lease_us) * kMicrosecond;  // the first grant
  }
  cm_->After(kMillisecond, [this] { CheckLeases(); });
  failover_crashes_left_ = o_.failover_crashes;
  if (!failure_.empty()) {
    res.ok = false;
    res.failure = failure_;
    return res;
  }

  for (uint32_t c = 0; c < o_.clients; ++c) {
    Client cl;
    cl.exec = rt_.CreateExecutor("client" + std::to_string(c));
    cl.caller = std::make_unique<Caller>(this, cl.exec, kClientBase + c, 0);
    cl.routing = std::make_unique<RoutingFromCm>(this, cl.exec);
    client::CoreOptions co;
    co.limits.max_key = 256;
    co.limits.max_value = 4096;
    cl.core = std::make_unique<client::ClientCore>(cl.caller.get(), cl.routing.get(), cl.exec, co);
    cl.core->set_recorder([this, c](const client::OpRecord& r) { Record(c, r); });
    clients_.push_back(std::move(cl));
  }
  for (uint32_t c = 0; c < o_.clients; ++c) {
    clients_[c].exec->Post([this, c] { ClientLoop(c); });
  }

  // Faults: crash a random up node at a random time, restart it later; never
  // more than replication - 1 down at once (one at a time here).
  Random& rng = rt_.Rng();
  Nanos t = 2 * kMillisecond;
  for (uint32_t i = 0; i < o_.crashes; ++i) {
    t += static_cast<Nanos>(rng.Uniform(20'000)) * kMicrosecond;
    const NodeId victim = static_cast<NodeId>(rng.Uniform(o_.nodes));
    rt_.Schedule(t, nullptr, kEventFault, "crash", victim, [this, victim] {
      if (SafeToFail(victim)) Crash(victim);
    });
    const Nanos back = t + 4 * static_cast<Nanos>(o_.lease_us) * kMicrosecond +
                       static_cast<Nanos>(rng.Uniform(10'000)) * kMicrosecond;
    rt_.Schedule(back, nullptr, kEventFault, "restart", victim, [this, victim] {
      if (!nodes_[victim]->up) Restart(victim);
    });
    t = back;
  }

  for (uint32_t i = 0; i < o_.partitions; ++i) {
    const Nanos at = 2 * kMillisecond + static_cast<Nanos>(rng.Uniform(40'000)) * kMicrosecond;
    const NodeId victim = static_cast<NodeId>(rng.Uniform(o_.nodes));
    const Nanos length = static_cast<Nanos>(o_.lease_us) * kMicrosecond * static_cast<Nanos>(1 + rng.Uniform(4));
    rt_.Schedule(at, nullptr, kEventFault, "partition", victim, [this, victim] {
      // One fault at a time keeps a majority of every shard's replicas up.
      if (!SafeToFail(victim) || isolated_.count(victim)) return;
      ++faults_;
      Isolate(victim, true);
    });
    rt_.Schedule(at + length, nullptr, kEventFault, "heal", victim, [this, victim] {
      if (isolated_.count(victim)) Isolate(victim, false);
    });
    t = std::max(t, at + length);
  }

  for (uint32_t i = 0; i < o_.slow_nodes; ++i) {
    const Nanos at = static_cast<Nanos>(rng.Uniform(40'000)) * kMicrosecond;
    const NodeId victim = static_cast<NodeId>(rng.Uniform(o_.nodes));
    const Nanos length = static_cast<Nanos>(rng.Uniform(30'000)) * kMicrosecond;
    rt_.Schedule(at, nullptr, kEventFault, "slow", victim, [this, victim] {
      ++faults_;
      SetSlow(victim, true);
    });
    rt_.Schedule(at + length, nullptr, kEventFault, "fast", victim, [this, victim] { SetSlow(victim, false); });
    t = std::max(t, at + length);
  }

  if (o_.cold_start) {
    t += static_cast<Nanos>(rng.Uniform(20'000)) * kMicrosecond;
    rt_.Schedule(t, nullptr, kEventFault, "power-loss", 0, [this] { PowerLoss(); });
    t += 5 * kMillisecond;
    rt_.Schedule(t, cm_, kEventFault, "cold-start", 0, [this] { ColdStart(); });
  }

  auto clients_done = [this] {
    for (auto& c : clients_) {
      if (c.done < o_.ops_per_client) return false;
    }
    return true;
  };
  const Nanos limit = 60 * runtime::kSecond;
  // Let the workload finish and every fault play out, then let the cluster
  // settle (restarts, promotions, re-replication).
  rt_.RunUntil([&] { return !failure_.empty() || (clients_done() && rt_.Now() > t); }, limit);
  rt_.RunUntil(rt_.Now() + 200 * kMillisecond);
  if (failure_.empty() && !clients_done()) {
    failure_ = "clients did not finish within the virtual time limit (" + Describe() + ")";
  }

  // Final reads of every key, recorded like any other operation.
  if (failure_.empty()) {
    final_phase_ = true;
    uint32_t pending = o_.keys;
    for (uint32_t k = 0; k < o_.keys; ++k) {
      clients_[0].core->Get("k" + std::to_string(k), [&pending](Result<std::string>) { --pending; });
    }
    rt_.RunUntil([&] { return pending == 0; }, rt_.Now() + 20 * runtime::kSecond);
    if (pending != 0) failure_ = "final reads did not finish";
  }

  res.operations = history_.size();
  res.unknown_outcomes = unknown_;
  res.faults = faults_;
  res.failovers = failovers_;
  for (const auto& n : nodes_) {
    auto count = [&res](const Incarnation& i) {
      if (!i.parts) return;
      for (const auto& w : i.parts->workers) {
        if (!w.core) continue;
        res.replicate_served += w.core->counters().replicated_in;
        res.commit_records += w.core->counters().commit_records;
      }
      const auto& a = i.parts->agent->counters();
      res.promotions += a.promotions;
      res.promotion_entries += a.pulled_entries + a.pushed_entries;
      res.promotions_with_floor += a.promotions_with_floor;
    };
    if (n->live) count(*n->live);
    for (const auto& d : n->dead) count(*d);
  }
  if (fabric_) {
    res.fabric_ops = fabric_->stats().ops;
    res.fabric_timeouts = fabric_->stats().timeouts;
  }
  res.trace_hash = rt_.TraceHash();
  res.virtual_ns = rt_.Now();
  if (!failure_.empty()) {
    res.ok = false;
    res.failure = failure_;
    return res;
  }
  res.check = CheckLinearizable(history_);
  if (!res.check.linearizable) {
    res.ok = false;
    res.failure = res.check.violation;
  } else if (std::string mono = CheckVersionsMonotonic(); !mono.empty()) {
    res.ok = false;
    res.failure = "versions not monotonic: " + mono;
  }
  return res;
}

}  // namespace

ClusterSimResult RunClusterSim(const ClusterSimOptions& options) {
  World w(options);
  return w.Run();
}

}  // namespace slip::sim
