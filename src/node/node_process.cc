#include "node/node_process.h"

#include "metrics/metrics.h"

#include "node/kvs_node_process.h"
#include "node/rubble_node_process.h"
#include "node/membership.h"
#include "node/outcome.h"

#include <time.h>
#include <unistd.h>

#include <chrono>
#include <random>

#include <nlohmann/json.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cluster/cluster_config.h"
#include "cluster/rebalance.h"
#include "common/hash.h"
#include "common/log.h"
#include "fabric/fabric.h"
#include "fabric/ofi/ofi_fabric.h"
#include "cluster/config_access.h"
#include "rpc/rpc_peers.h"
#include "pm/region.h"
#include "replication/backup_log.h"
#include "server/erda_node.h"
#include "replication/registry.h"
#include "replication/share/shared_logs.h"
#include "rpc/channel.h"
#include "runtime/thread_runtime.h"
#include "server/config_view.h"
#include "server/node_builder.h"
#include "store/store.h"

namespace slip::node {

runtime::Nanos MachineNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

namespace fs = std::filesystem;

// A shard of which `node` holds the only complete copy among the up nodes
// (it is a replica, not still syncing, and no other such replica is up).
std::optional<uint32_t> OnlyCopyOf(const cluster::ClusterConfig& c, cluster::NodeId node) {
  auto complete = [&](const cluster::ShardReplicas& s, cluster::NodeId n) {
    return std::find(s.syncing.begin(), s.syncing.end(), n) == s.syncing.end();
  };
  auto up = [&](cluster::NodeId n) {
    auto it = c.nodes.find(n);
    return it != c.nodes.end() && it->second.state == cluster::NodeState::kUp;
  };
  for (uint32_t shard = 0; shard < c.shards.size(); ++shard) {
    const cluster::ShardReplicas& s = c.shards[shard];
    std::vector<cluster::NodeId> replicas{s.primary};
    replicas.insert(replicas.end(), s.backups.begin(), s.backups.end());
    if (std::find(replicas.begin(), replicas.end(), node) == replicas.end() || !complete(s, node)) continue;
    bool other = false;
    for (cluster::NodeId r : replicas) other |= r != node && up(r) && complete(s, r);
    if (!other) return shard;
  }
  return std::nullopt;
}

// The one-sided backup log's fencing (docs/security.md, "Fencing"): where
// peers reach it, and what it refused.
nlohmann::json ReplicationJson(const replication::BackupLog* backup) {
  if (backup == nullptr) return nullptr;
  const replication::BackupLog::Stats st = backup->stats();
  return {{"address", rpc::RpcPeers::HexEncode(backup->address())},
          {"opens_refused", st.opens_refused},
          {"senders_fenced", st.senders_fenced},
          {"messages_rejected", st.messages_rejected},
          // The backup's lag: receive segments peers filled that its digest
          // has not indexed yet.
          {"segments_undigested", st.segments_used - std::min(st.segments_used, st.segments_digested)},
          {"persist_requests", st.persist_requests}};
}

nlohmann::json StoreJson(const store::Store& store) {
  const store::StoreStats st = store.stats();
  return {{"segments", {{"free", st.free_segments}, {"in_use", st.num_segments - st.free_segments}}},
          {"num_segments", st.num_segments},
          {"keys", st.keys},
          {"appended_bytes", st.appended_bytes},
          {"adopted_bytes", st.adopted_bytes},
          {"segments_cleaned", st.segments_cleaned},
          {"entries_relocated", st.entries_relocated},
          {"relocated_bytes", st.relocated_bytes},
          {"tombstones_dropped", st.tombstones_dropped}};
}

nlohmann::json RecoveryJson(const store::RecoveryStats& r) {
  return {{"segments_scanned", r.segments_scanned}, {"bytes_scanned", r.bytes_scanned},
          {"entries", r.entries},                   {"incomplete_entries", r.incomplete_entries},
          {"torn_erased", r.torn_erased},           {"damaged", r.damaged}};
}

using cluster::ClusterConfig;

class Node final : public NodeProcess {
 public:
  explicit Node(NodeOptions o) : o_(std::move(o)) {}
  ~Node() override {
    Stop();
    rt_.Stop();
    SealForStop();
    // The configuration store's watcher thread posts to control_ex_: join it
    // while the (stopped) executors still exist, not after the runtime that
    // owns them is gone (members die in reverse order, rt_ first).
    config_store_.reset();
  }

  Status Boot();
  // With every role stopped: seals the segments open in the store and the
  // backup log, so the next start checks all of them strictly.
  void SealForStop() {
    if (store_ == nullptr) return;
    Status s = backup_ != nullptr ? backup_->SealForStop() : Status::Ok();
    if (s.ok()) s = store_->SealForStop();
    if (!s.ok()) logging::Warn("{}", "sealing the store at the stop: " + s.ToString());
  }
  Status Wait() override { return outcome_.Wait(); }
  void Stop() override { Finish(Status::Ok()); }
  void StatsAsync(std::function<void(std::string)> done) override {
    node_ex_->Post([this, done = std::move(done)]() mutable {
      Stats([done = std::move(done)](Code, std::string json) { done(std::move(json)); });
    });
  }

 private:
  void Finish(Status s) { outcome_.Finish(std::move(s)); }
  void AdoptOnNode(const ClusterConfig& c);
  Status StartOneSided();
  Status StartWorkers(const log::Limits& limits);
  void SetPeerAddresses(const ClusterConfig& c);
  void DigestLoop(size_t i);
  void CommitLoop(size_t worker);
  // Answers a STATS request: the workers' counters are read on their own
  // executors (ForEach), then `reply` runs here.
  void Stats(rpc::RpcChannel::Reply reply);

  NodeOptions o_;
  std::vector<int> digest_idle_;  // per digest executor, rounds without work, capped (its period doubles per round)
  std::string pm_path_;  // this node's PM file
  std::string pm_class_;  // dram | dax | file (PlacePm)
  std::string damage_;    // what the store found damaged at boot (its data was discarded)
  std::unique_ptr<cluster::ConfigStore> config_store_;
  std::unique_ptr<pm::PmRegion> region_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<fabric::Fabric> fabric_;
  // Few spin turns: several node processes share a few cores here, and a
  // spinning idle executor steals the CPU its peers need; idle ones park on
  // the fabric's wait fd.
  runtime::ThreadRuntime rt_{runtime::ThreadRuntimeOptions{.seed = 1, .spin_turns = 8, .max_park = runtime::kMillisecond}};
  runtime::Executor* node_ex_ = nullptr;
  runtime::Executor* control_ex_ = nullptr;
  std::shared_ptr<auth::KeySource> keys_;  // null: no cluster secret
  std::unique_ptr<rpc::RpcChannel> channel_;
  std::unique_ptr<rpc::RpcPeers> peers_;
  // One-sided designs: the endpoint peers write into with no worker
  // involved, the backup log on it, and the NIC and digest roles that drive
  // it.
  replication::Protocol protocol_ = replication::Protocol::kRpc;
  runtime::Executor* nic_ex_ = nullptr;
  std::vector<runtime::Executor*> digest_exs_;
  std::unique_ptr<fabric::Endpoint> repl_in_;
  std::unique_ptr<replication::BackupLog> backup_;
  // erda: the index mirror and the bucket table clients read one-sidedly.
  std::unique_ptr<server::ErdaNode> erda_;
  // The request workers (server/worker_pool.h). Worker 0 runs on node_ex_
  // and uses the node's channel; every other one has an executor, and an
  // RPC channel of its own: its entry (the requests about its shards) and
  // its calls to peers (REPLICATE, REPL_OPEN/CLOSE). One-sided designs: each has its own sending endpoint
  // (its own connections, like a worker's QPs); share-kv's workers share
  // one remote log per backup.
  struct Worker {
    runtime::Executor* ex = nullptr;
    std::unique_ptr<rpc::RpcChannel> channel;
    std::unique_ptr<rpc::RpcPeers> own_peers;
    rpc::RpcPeers* peers = nullptr;
    std::unique_ptr<fabric::Endpoint> out;
  };
  std::vector<Worker> workers_;
  std::shared_ptr<replication::SharedRemoteLogs> shared_logs_ = std::make_shared<replication::SharedRemoteLogs>();
  server::ViewHolder views_;
  // Workers' replicators and cores, the pool, the promoter and the agent.
  std::unique_ptr<server::NodeParts> parts_;
  // The configuration store's side of this process: its lease, its
  // configuration changes and watch (on control_ex_).
  std::unique_ptr<Membership> membership_;
  uint64_t adopted_term_ = 0;                 // node executor only
  std::atomic<uint64_t> replication_term_{0};  // adopted_term_, for the workers' replicators

  Outcome outcome_;
};

Status Node::Boot() {
  SLIP_ASSIGN_OR_RETURN(config_store_, cluster::OpenConfigStore(o_.dir, o_.zookeeper));
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc, cluster::LoadWhenPresent(config_store_.get(), 60 * runtime::kSecond));
  auto me = vc.config.nodes.find(o_.id);
  // Not a member: a new node of a design that moves shards to it joins
  // (cluster::AddMember below), empty.
  const bool joining = me == vc.config.nodes.end();
  if (joining && !cluster::MovesShards(vc.config.design)) {
    return Status::InvalidArgument("node " + std::to_string(o_.id) + " is not a member of the cluster");
  }
  SLIP_ASSIGN_OR_RETURN(protocol_, replication::ParseDesign(vc.config.design));
  SLIP_RETURN_IF_ERROR(TakeProvider(vc.config.provider, &o_.provider));
  if (o_.workers < 1 || o_.workers > 32) {
    return Status::InvalidArgument("workers must be 1..32, not " + std::to_string(o_.workers));
  }
  // Listed as down: the manager replaced this node while it was away —
  // unless it still holds a shard's only copy (Reassign keeps a stranded
  // shard on its last replica), then it comes back with its data.
  bool sole_copy = false;
  for (const auto& s : vc.config.shards) sole_copy |= s.primary == o_.id;
  bool replaced = joining || (me->second.state == cluster::NodeState::kDown && !sole_copy);

  // The store: DIR/node-<id>/pm. A replaced node starts empty.
  const std::string data = DataDir(o_.dir, o_.id);
  std::error_code ec;
  fs::create_directories(data, ec);
  if (ec) return Status::IoError("cannot create " + data + ": " + ec.message());
  SLIP_ASSIGN_OR_RETURN(const PmPlace place, PlacePm(vc.config.pm, o_.dir, o_.id));
  const std::string& pm_path = place.path;
  pm_path_ = pm_path;
  pm_class_ = place.pm_class;
  if (replaced && fs::exists(pm_path)) {
    logging::Info("{}", joining ? "joining: starting empty" : "was replaced while away: rejoining empty");
    fs::remove(pm_path, ec);
  }
  SLIP_ASSIGN_OR_RETURN(region_, OpenPm(place, o_.pm_mb << 20));
  logging::Info("PM: {} class, {} ({})", place.pm_class, pm_path,
                place.pm_class == "dram"  ? "in memory: survives process crashes, not power loss"
                : place.pm_class == "dax" ? std::string("real PM, ") + pm::PmRegion::FlushInstruction() + " + sfence"
                                          : "msync'd before every acknowledgement: survives power loss");
  store::StoreOptions so;
  so.geometry.num_shards = vc.config.num_shards();
  so.num_writers = o_.workers + 1;  // one per worker, then promotion
  // erda: a freed segment waits before reuse (one-sided readers may still
  // be reading what it held).
  so.hold_freed_segments = replication::DesignOf(protocol_).clients.reads_one_sided;
  so.tears_possible = PowerMayHaveFailed(pm_path);
  auto opened = store::Store::Open(region_.get(), so);
  // Damage on the media (docs/design-notes.md "Damage on the media"): the
  // store cannot read some of what it acknowledged, so this node is no
  // complete replica of anything. It starts over empty and is seeded from
  // its peers, as a replaced node is — unless it holds a shard's only copy.
  if (!opened.ok() && opened.status().Is(Code::kCorruption)) {
    damage_ = "the store does not open: " + opened.status().message();
  } else if (opened.ok() && (*opened)->recovery_stats().damaged != 0) {
    damage_ = (*opened)->recovery_stats().DescribeDamage();
  } else if (!opened.ok()) {
    return opened.status();
  }
  if (!damage_.empty()) {
    logging::Error("{}", "store " + pm_path + " is damaged: " + damage_);
    // Give the shards up in the configuration first, while the data is
    // still here: decided on the newest configuration, atomically, so two
    // damaged replicas starting together cannot both count on the other.
    SLIP_RETURN_IF_ERROR(UpdateConfig(config_store_.get(), [&](const ClusterConfig& c) -> Result<ClusterConfig> {
      auto self = c.nodes.find(o_.id);
      if (self == c.nodes.end()) return c;
      std::optional<uint32_t> only;
      if (self->second.state == cluster::NodeState::kDown) {
        // Replaced already — unless a stranded shard was left with us.
        for (uint32_t s = 0; s < c.shards.size() && !only; ++s) {
          if (c.shards[s].primary == o_.id) only = s;
        }
        if (!only) return c;
      } else {
        only = OnlyCopyOf(c, o_.id);
      }
      if (only) {
        return Status::Corruption("store " + pm_path + " is damaged (" + damage_ + ") and node " +
                                  std::to_string(o_.id) + " holds shard " + std::to_string(*only) +
                                  "'s only complete copy: not serving. Restore the file, or move it away to " +
                                  "give the shard's data up (slip fsck --dir DIR --node N shows the damage)");
      }
      return cluster::Reassign(c, o_.id);
    }));
    replaced = true;  // down now: it comes back as a replaced node does
    logging::Warn("{}", "discarding this node's data: it rejoins empty and is seeded from its peers");
    opened = Status::Aborted("discarded");  // drops the damaged store before its region
    region_.reset();
    // Kept aside, not deleted: an operator may still want what it holds.
    const std::string aside = pm_path + ".damaged-" + std::to_string(::time(nullptr));
    fs::rename(pm_path, aside, ec);
    if (ec) return Status::IoError("cannot move " + pm_path + " aside: " + ec.message());
    logging::Warn("{}", "the damaged store is kept at " + aside);
    SLIP_ASSIGN_OR_RETURN(region_, OpenPm(place, o_.pm_mb << 20));
    opened = store::Store::Open(region_.get(), so);
  }
  SLIP_RETURN_IF_ERROR(opened.status());
  store_ = std::move(*opened);
  SLIP_RETURN_IF_ERROR(RecordBoot(pm_path));
  if (store_->segments().geometry().num_shards != vc.config.num_shards()) {
    return Status::InvalidArgument("store has " + std::to_string(store_->segments().geometry().num_shards) +
                                   " shards, the cluster " + std::to_string(vc.config.num_shards()));
  }
  logging::Info("{}", "store recovered: " + std::to_string(store_->recovery_stats().entries) + " entries in " +
                 std::to_string(store_->recovery_stats().segments_scanned) + " segments");

  // Transport.
  SLIP_ASSIGN_OR_RETURN(fabric_, fabric::OpenOfiFabric(
                                     fabric::FabricOptions{.provider = o_.provider, .node_address = o_.bind_address},
                                     fabric::OfiOptions{.max_multi_recv_message = proto::kMaxMessage}));
  node_ex_ = rt_.CreateExecutor("node" + std::to_string(o_.id));
  control_ex_ = rt_.CreateExecutor("node" + std::to_string(o_.id) + "/control");
  membership_ = std::make_unique<Membership>(config_store_.get(), control_ex_, o_.lease);
  // The first digest executor also runs the cleaner, for every design.
  for (uint32_t i = 0; i < std::max<uint32_t>(o_.digest_threads, 1); ++i) {
    digest_exs_.push_back(
        rt_.CreateExecutor("node" + std::to_string(o_.id) + "/digest" + (i == 0 ? "" : std::to_string(i))));
  }
  digest_idle_.assign(digest_exs_.size(), 0);
  SLIP_ASSIGN_OR_RETURN(auto ep, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = "node" + std::to_string(o_.id)}));
  SLIP_ASSIGN_OR_RETURN(keys_, OpenProcessKeys(o_.dir, o_.secret_file, control_ex_));
  SLIP_ASSIGN_OR_RETURN(channel_, OpenServingChannel(node_ex_, std::move(ep), keys_));
  const std::string address = channel_->address();

  peers_ = std::make_unique<rpc::RpcPeers>(channel_.get(), node_ex_, rpc::RpcChannel::CallOptions{.timeout = o_.lease / 2});
  if (replication::IsOneSided(protocol_)) SLIP_RETURN_IF_ERROR(StartOneSided());
  SLIP_RETURN_IF_ERROR(StartWorkers(so.limits));
  channel_->SetHandler([this](uint16_t method, std::span<const std::byte> payload, rpc::RpcChannel::Reply reply) {
    if (method == static_cast<uint16_t>(proto::Method::kStats)) return Stats(std::move(reply));
    parts_->pool->Handle(0, method, payload, std::move(reply));
  });
  // Every worker's entry takes requests too (server/worker_pool.h); STATS,
  // which reads every worker, is answered from worker 0's.
  for (size_t i = 1; i < workers_.size(); ++i) {
    runtime::Executor* ex = workers_[i].ex;
    workers_[i].channel->SetHandler(
        [this, i, ex](uint16_t method, std::span<const std::byte> payload, rpc::RpcChannel::Reply reply) {
          if (method != static_cast<uint16_t>(proto::Method::kStats)) {
            return parts_->pool->Handle(i, method, payload, std::move(reply));
          }
          node_ex_->Post([this, ex, reply = std::move(reply)]() mutable {
            Stats([ex, reply = std::move(reply)](Code c, std::string p) mutable {
              ex->Post([reply = std::move(reply), c, p = std::move(p)]() mutable { reply(c, std::move(p)); });
            });
          });
        });
  }

  // Publish our address (and come back, if we were replaced) in a new term,
  // holding the lease: nobody else may think we are alive without it. A
  // node that lists itself up (joining, or back after it was declared
  // failed) takes it first: listed first, a manager past its boot grace
  // could find it dead in between and declare it failed before it served
  // anything (`cluster add-node` then gave it no shards).
  const std::string holder = "node-" + std::to_string(o_.id) + "-pid" + std::to_string(getpid());
  const bool lease_first = joining || me->second.state == cluster::NodeState::kDown;
  SLIP_RETURN_IF_ERROR(membership_->UpdateHoldingLease(cluster::NodeLeaseName(o_.id), holder, lease_first,
                                                       [&](const ClusterConfig& c) -> Result<ClusterConfig> {
    ClusterConfig next = c;
    bool sole_copy_now = false;
    for (const auto& s : c.shards) sole_copy_now |= s.primary == o_.id;
    const bool down = next.nodes[o_.id].state == cluster::NodeState::kDown;
    // Declared failed while this process was starting (its first lease came
    // later than the manager's grace): its shards went to others. Empty, it
    // rejoins as a new node would; with data (possibly stale by now), it
    // must start over empty, which a fresh boot does (NodeProcess::Start).
    const bool empty = store_->stats().keys == 0 && store_->recovery_stats().entries == 0;
    if (down && !replaced && !sole_copy_now && !empty) {
      return Status::Aborted(kReplacedWhileStarting);
    }
    if (!c.nodes.contains(o_.id)) {
      // A new node (`slip cluster add-node`): a member holding nothing,
      // until moves bring it replicas.
      SLIP_ASSIGN_OR_RETURN(next, cluster::AddMember(c, o_.id, rpc::RpcPeers::HexEncode(address)));
    } else if (down && (replaced || !sole_copy_now)) {
      SLIP_ASSIGN_OR_RETURN(next, cluster::Rejoin(c, o_.id));
    } else if (down) {
      // Back with a stranded shard's last copy: up, and its shards get backups again.
      SLIP_ASSIGN_OR_RETURN(next, cluster::ReturnWithData(c, o_.id));
    } else {
      // Up already: a new address.
      next.nodes[o_.id].state = cluster::NodeState::kUp;
      ++next.term;
    }
    next.nodes[o_.id].address = rpc::RpcPeers::HexEncode(address);
    // Each worker's own entry (server/worker_pool.h); one worker: the address is all.
    next.nodes[o_.id].workers.clear();
    if (workers_.size() > 1) {
      next.nodes[o_.id].workers.push_back(next.nodes[o_.id].address);
      for (size_t i = 1; i < workers_.size(); ++i) {
        next.nodes[o_.id].workers.push_back(rpc::RpcPeers::HexEncode(workers_[i].channel->address()));
      }
    }
    return next;
  }));

  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig now, config_store_->Load());
  // The manager may have declared us failed between publishing the address
  // and taking the lease (it saw a lease, an earlier incarnation's, run
  // out). Holding the lease now, the configuration cannot change that under
  // us any more: if it lists us down, nothing has been served yet, and a
  // fresh boot takes the path of a replaced node.
  const auto listed = now.config.nodes.find(o_.id);
  if (listed == now.config.nodes.end()) {
    return Status::InvalidArgument("node " + std::to_string(o_.id) + " is no longer a member of the cluster");
  }
  if (listed->second.state == cluster::NodeState::kDown) return Status::Aborted(kReplacedWhileStarting);
  SLIP_RETURN_IF_ERROR(rt_.Start());
  node_ex_->Post([this, c = now.config] {
    SetPeerAddresses(c);
    adopted_term_ = c.term;
    replication_term_ = c.term;
    parts_->agent->ColdStart(server::ViewFromConfig(c));
  });
  membership_->KeepAlive([this](Status) { Finish(Status::Aborted(kLostLease)); });
  for (size_t i = 0; i < digest_exs_.size(); ++i) digest_exs_[i]->Post([this, i] { DigestLoop(i); });
  if (o_.commit_interval > 0) {
    for (size_t i = 0; i < workers_.size(); ++i) {
      workers_[i].ex->After(o_.commit_interval, [this, i] { CommitLoop(i); });
    }
  }
  membership_->Watch(now.version, [this](const cluster::VersionedConfig& newer) {
    // Listed down: the manager took our lease and replaced us (renewing
    // would fail next). Stop serving now rather than at the next renewal.
    if (auto end = EndedBy(newer.config, o_.id)) return Finish(*end);
    node_ex_->Post([this, cfg = newer.config] { AdoptOnNode(cfg); });
  });
  logging::Info("{}", "serving at " + rpc::RpcPeers::HexEncode(address) + " (" + o_.provider + "), term " + std::to_string(now.config.term));
  return Status::Ok();
}

void Node::AdoptOnNode(const ClusterConfig& c) {
  if (c.term <= adopted_term_) return;
  adopted_term_ = c.term;
  replication_term_ = c.term;
  SetPeerAddresses(c);
  parts_->agent->Adopt(server::ViewFromConfig(c));
}

// Every worker's rpc::RpcPeers, each on its own executor.
void Node::SetPeerAddresses(const ClusterConfig& c) {
  auto addrs = std::make_shared<std::map<uint32_t, std::vector<std::string>>>();
  for (const auto& [id, info] : c.nodes) (*addrs)[id] = info.Entries();
  const uint32_t shards = c.num_shards();
  peers_->SetEntries(*addrs, shards);
  for (size_t i = 1; i < workers_.size(); ++i) {
    workers_[i].ex->Post([p = workers_[i].peers, addrs, shards] { p->SetEntries(*addrs, shards); });
  }
}

Status Node::StartOneSided() {
  const std::string name = "node" + std::to_string(o_.id);
  nic_ex_ = rt_.CreateExecutor(name + "/nic");
  SLIP_ASSIGN_OR_RETURN(repl_in_, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = name + "/in"}));
  replication::BackupLogOptions bo;
  bo.protocol = protocol_;
  // PM in a file on a real filesystem: what peers place is in the page
  // cache until msync, so senders must ask (REPL_PERSIST) before they
  // acknowledge. In tmpfs (the memory class) placement is all there is.
  bo.persist_by_request = pm_class_ == "file";
  bo.incarnation = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  logging::Info("one-sided backup: {}", bo.persist_by_request
                                            ? "PM file on a real filesystem: senders ask for persistence (REPL_PERSIST)"
                                            : "PM file in memory: placement is persistence for this class");
  SLIP_ASSIGN_OR_RETURN(backup_, replication::BackupLog::Create(store_.get(), repl_in_.get(), bo));
  if (const auto& clients = replication::DesignOf(protocol_).clients; clients.any()) {
    // Before the NIC role polls the endpoint: the table is registered on it.
    server::ErdaNodeOptions eo;
    eo.readable_table = clients.reads_one_sided;
    eo.copy_puts = clients.copies_puts;
    SLIP_ASSIGN_OR_RETURN(erda_, server::ErdaNode::Create(store_.get(), repl_in_.get(), *backup_, eo));
    logging::Info("{}: {} buckets readable one-sidedly; entries up to {} bytes {}", replication::DesignName(protocol_),
                  erda_->mirror() ? erda_->mirror()->num_buckets() : 0, erda_->layout()->grant.max_entry_bytes,
                  !clients.writes_one_sided ? "staged by the node, then copied into its log"
                  : clients.copies_puts     ? "written by clients, then copied into the log"
                                            : "written by clients where they stay");
  }
  // The NIC role: on software providers peers' Sends and Writes land only
  // while this endpoint is polled. It parks on the endpoint's wait object
  // (tcp) and wakes at least every max_park for the used-segment rule.
  fabric::Endpoint* in = repl_in_.get();
  nic_ex_->AddPoller([this] { return backup_->Poll(nic_ex_->Now()); });
  // CanBlock through the backup log: it polls the provider, which the
  // control path's registrations must not meet on another thread.
  if (in->wait_fd() >= 0) {
    nic_ex_->AddWaitFd(in->wait_fd(), [b = backup_.get()] { return b->CanBlock(); }, in->wait_fd_sees_all());
  }
  logging::Info("{}", std::string("design ") + replication::DesignName(protocol_) + ": replication endpoint " +
                 rpc::RpcPeers::HexEncode(backup_->address()));
  return Status::Ok();
}

// The request workers' transport (an executor, RPC channel and peers each;
// one-sided designs: a sending endpoint each), then the node's request side
// through the one builder the simulator uses too (server/node_builder.h).
Status Node::StartWorkers(const log::Limits& limits) {
  const std::string name = "node" + std::to_string(o_.id);
  server::NodeEnv env;
  env.id = o_.id;
  env.design = protocol_;
  env.store = store_.get();
  env.limits = limits;
  env.backup = backup_.get();
  env.views = &views_;
  env.agent_exec = node_ex_;
  env.promoter_peers = peers_.get();
  workers_.reserve(o_.workers);
  for (uint32_t i = 0; i < o_.workers; ++i) {
    Worker& w = workers_.emplace_back();
    const std::string wname = name + "/worker" + std::to_string(i);
    if (i == 0) {
      w.ex = node_ex_;
      w.peers = peers_.get();
    } else {
      w.ex = rt_.CreateExecutor(wname);
      SLIP_ASSIGN_OR_RETURN(auto ep, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = wname}));
      SLIP_ASSIGN_OR_RETURN(w.channel, OpenServingChannel(w.ex, std::move(ep), keys_));
      w.own_peers = std::make_unique<rpc::RpcPeers>(w.channel.get(), w.ex, rpc::RpcChannel::CallOptions{.timeout = o_.lease / 2});
      w.peers = w.own_peers.get();
    }
    if (replication::IsOneSided(protocol_)) {
      SLIP_ASSIGN_OR_RETURN(w.out, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = wname + "/out"}));
      fabric::Endpoint* out = w.out.get();
      if (out->wait_fd() >= 0) w.ex->AddWaitFd(out->wait_fd(), [out] { return out->CanBlock(); }, out->wait_fd_sees_all());
    }
    // The replicator runs on the worker's executor: it polls `out` there and calls back there.
    env.workers.push_back({.exec = w.ex, .peers = w.peers, .out = w.out.get()});
  }
  env.onesided.self = o_.id;
  env.onesided.max_message = proto::kMaxMessage / 2;  // well inside the multi-receive limit
  env.onesided.term = [this] { return replication_term_.load(); };
  env.onesided.shared_logs = shared_logs_;
  env.core.cpu_clock = [] {
    timespec ts;
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  };
  env.core.tail_page_bytes = proto::kMaxMessage * 3 / 4;  // a promotion page fits one frame
  env.core.lease_left = [this] { return membership_->lease_expiry() - MachineNow(); };
  env.core.clock = [] { return MachineNow(); };
  if (erda_) env.erda_layout = erda_->layout();
  env.on_seeded = [this](uint32_t shard, uint32_t backup, uint64_t term) {
    control_ex_->Post([this, shard, backup, term] {
      Status s = membership_->Update([&](const ClusterConfig& c) -> Result<ClusterConfig> {
        const auto& sync = c.shards[shard].syncing;
        if (c.term < term || std::find(sync.begin(), sync.end(), backup) == sync.end()) {
          return Status::Aborted("already synced or replica set changed");
        }
        return cluster::MarkSynced(c, shard, backup);
      });
      if (!s.ok() && !s.Is(Code::kAborted)) logging::Warn("{}", "reporting a seeded backup: " + s.ToString());
    });
  };
  env.on_migrated = [this](uint32_t shard, uint64_t term) {
    control_ex_->Post([this, shard, term] {
      Status s = membership_->Update([&](const ClusterConfig& c) -> Result<ClusterConfig> {
        if (c.term < term) return Status::Aborted("an older configuration");
        return cluster::FinishMigration(c, shard, o_.id);
      });
      if (s.ok()) {
        logging::Info("{}", "shard " + std::to_string(shard) + " moved here: every entry copied");
      } else if (!s.Is(Code::kAborted) && !s.Is(Code::kInvalidArgument)) {
        logging::Warn("{}", "reporting a finished move: " + s.ToString());
      }
    });
  };
  parts_ = server::BuildNode(std::move(env));
  return Status::Ok();
}

// CommitVer records (server/commit_tracker.h), on each worker's executor
// for the shards it owns: they are writes like any other.
void Node::CommitLoop(size_t worker) {
  parts_->workers[worker].core->WriteCommitRecords();
  workers_[worker].ex->After(o_.commit_interval, [this, worker] { CommitLoop(worker); });
}

void Node::DigestLoop(size_t i) {
  // Digest what the NIC role found used or senders closed, then (the first
  // executor) keep the store's free space up: background work, off the
  // request path. Only one-sided designs have more than the first to run.
  if (i > 0 && !backup_) return;
  bool worked = false;
  for (int n = 0; n < 16 && backup_; ++n) {
    auto r = backup_->DigestStep();
    if (!r.ok()) logging::Warn("{}", "digest: " + r.status().ToString());
    if (!r.ok() || !*r) break;
    worked = true;
  }
  for (int n = 0; i == 0 && n < 4 && store_->NeedsCleaning(); ++n) {
    auto r = store_->CleanStep();
    if (!r.ok()) logging::Warn("{}", "cleaner: " + r.status().ToString());
    if (!r.ok() || !*r) break;
    worked = true;
  }
  // Every millisecond while there is work; when there is none, look less
  // and less often (up to every 16 ms), so an idle node does not spin here.
  digest_idle_[i] = worked ? 0 : std::min(digest_idle_[i] + 1, 4);
  digest_exs_[i]->After(runtime::kMillisecond << digest_idle_[i], [this, i] { DigestLoop(i); });
}

// Shards being moved here, with their copy's progress (slip cluster status).
nlohmann::json MovesInJson(const std::vector<server::NodeAgent::MoveIn>& moves) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& m : moves) a.push_back({{"shard", m.shard}, {"from", m.source}, {"copied", m.copied}});
  return a;
}

void Node::Stats(rpc::RpcChannel::Reply reply) {
  // Per-role CPU from each executor's thread clock, plus the counters the
  // benchmark divides by operations. Backup work done by a worker is
  // counted by its NodeCore around the backup-role handlers.
  auto counters = std::make_shared<std::vector<server::NodeCore::Counters>>(workers_.size());
  auto rpc = std::make_shared<std::vector<rpc::RpcChannel::Counters>>(workers_.size());
  parts_->pool->ForEach([this, counters, rpc](size_t i) {
                   (*counters)[i] = parts_->workers[i].core->counters();
                   (*rpc)[i] = (i == 0 ? channel_ : workers_[i].channel)->counters();
                 },
                 [this, counters, rpc, reply = std::move(reply)] {
                   server::NodeCore::Counters sum;
                   int64_t worker_cpu = 0;
                   for (size_t i = 0; i < workers_.size(); ++i) {
                     const auto& c = (*counters)[i];
                     if (sum.shard_load.size() < c.shard_load.size()) sum.shard_load.resize(c.shard_load.size());
                     for (size_t s = 0; s < c.shard_load.size(); ++s) sum.shard_load[s] += c.shard_load[s];
                     sum.migration_fetches += c.migration_fetches;
                     sum.puts += c.puts;
                     sum.dels += c.dels;
                     sum.gets += c.gets;
                     sum.backup_requests += c.backup_requests;
                     sum.commit_records += c.commit_records;
                     sum.backup_cpu_ns += c.backup_cpu_ns;
                     sum.group_commits += c.group_commits;
                     sum.group_committed += c.group_committed;
                     sum.stale += c.stale;
                     sum.busy += c.busy;
                     sum.malformed += c.malformed;
                     sum.replication_failures += c.replication_failures;
                     for (size_t op = 0; op < c.latency_ns.size(); ++op) sum.latency_ns[op].Merge(c.latency_ns[op]);
                     worker_cpu += workers_[i].ex->CpuTime();
                   }
                   auto cpu = [](runtime::Executor* e) { return e ? e->CpuTime() : 0; };
                   runtime::Nanos digest_cpu = 0;
                   for (runtime::Executor* e : digest_exs_) digest_cpu += e->CpuTime();
                   const nlohmann::json j = {
                       {"node", o_.id},
                       {"design", replication::DesignName(protocol_)},
                       {"auth", AuthJson(keys_)},
                       {"damage", damage_},
                       {"workers", workers_.size()},
                       {"cpu_ns",
                        {{"worker", worker_cpu - sum.backup_cpu_ns},
                         {"backup_worker", sum.backup_cpu_ns},
                         {"nic", cpu(nic_ex_)},
                         {"control", cpu(control_ex_)},
                         {"digest", digest_cpu}}},
                       {"puts", sum.puts},
                       {"dels", sum.dels},
                       {"gets", sum.gets},
                       {"backup_requests", sum.backup_requests},
                       {"requests_hopped", parts_->pool->hopped()},
                       {"commit_records", sum.commit_records},
                       {"group_commits", sum.group_commits},
                       {"group_committed", sum.group_committed},
                       {"received_bytes", store_->received_bytes()},
                       // Rowan's hotspot statistics (cluster/rebalance.h): cumulative, by shard.
                       {"shard_load", sum.shard_load},
                       {"migration_fetches", sum.migration_fetches},
                       {"moves_in", parts_->agent->counters().migrations_in},
                       {"moves_in_progress", MovesInJson(parts_->agent->moves_in())},
                       {"copied_entries", parts_->agent->counters().copied_entries},
                       {"replication", ReplicationJson(backup_.get())},
                       {"term", views_.Get()->term},
                       {"lease_ms_left", (membership_->lease_expiry() - MachineNow()) / runtime::kMillisecond},
                       {"in_flight_writes", parts_->shared->writes.Total()},
                       {"rpc", RpcJson(*rpc)},
                       {"errors",
                        {{"stale_term", sum.stale},
                         {"busy", sum.busy},
                         {"malformed", sum.malformed},
                         {"replication_failed", sum.replication_failures}}},
                       {"latency_ns",
                        {{"put", metrics::HistogramJson(sum.latency_ns[server::NodeCore::Counters::kPutOp])},
                         {"get", metrics::HistogramJson(sum.latency_ns[server::NodeCore::Counters::kGetOp])},
                         {"del", metrics::HistogramJson(sum.latency_ns[server::NodeCore::Counters::kDelOp])}}},
                       {"store", StoreJson(*store_)},
                       {"recovery", RecoveryJson(store_->recovery_stats())},
                   };
                   reply(Code::kOk, j.dump());
                 });
}

}  // namespace

Result<std::unique_ptr<NodeProcess>> NodeProcess::Start(const NodeOptions& options) {
  {
    // A cluster whose data lives in a pool runs KVS nodes instead.
    SLIP_ASSIGN_OR_RETURN(auto store, cluster::OpenConfigStore(options.dir, options.zookeeper));
    SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc, cluster::LoadWhenPresent(store.get(), 60 * runtime::kSecond));
    if (cluster::UsesPool(vc.config.design)) return StartKvsNode(options);
    if (cluster::UsesChain(vc.config.design)) return StartRubbleNode(options);
  }
  return BootUntilNotReplaced<Node>(options);
}

namespace {
std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}
}  // namespace

bool PowerMayHaveFailed(const std::string& pm_path) {
  std::ifstream in(pm_path + ".boot");
  std::string recorded;
  std::getline(in, recorded);
  const std::string now = BootId();
  return now.empty() || recorded != now;
}

Status RecordBoot(const std::string& pm_path) {
  const std::string path = pm_path + ".boot", tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << BootId() << "\n";
    if (!out.flush()) return Status::IoError("cannot write " + tmp);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Status::IoError("cannot rename " + tmp + ": " + ec.message());
  return Status::Ok();
}

Result<std::unique_ptr<pm::PmRegion>> OpenPm(const PmPlace& place, uint64_t create_bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(place.path).parent_path(), ec);
  if (ec) return Status::IoError("cannot create the directory of " + place.path + ": " + ec.message());
  pm::RegionOptions ro;
  ro.populate = true;
  ro.mode = place.pm_class == "dram" ? pm::PersistMode::kNone
            : place.pm_class == "dax" ? pm::PersistMode::kFlush
                                      : pm::PersistMode::kMsync;
  SLIP_ASSIGN_OR_RETURN(auto region, pm::PmRegion::OpenFile(place.path, fs::exists(place.path) ? 0 : create_bytes, ro));
  if (place.pm_class == "dax" && !region->is_dax()) {
    return Status::InvalidArgument("the cluster's PM class is dax, but " + place.path +
                                   " is not DAX-mapped (MAP_SYNC refused): it needs a filesystem on real PM "
                                   "mounted with -o dax");
  }
  return region;
}

Result<std::unique_ptr<rpc::RpcChannel>> OpenServingChannel(runtime::Executor* ex,
                                                           std::unique_ptr<fabric::Endpoint> ep,
                                                           std::shared_ptr<auth::KeySource> keys) {
  fabric::Endpoint* raw = ep.get();
  rpc::ChannelOptions co;
  co.keys = std::move(keys);
  co.max_payload = proto::kMaxMessage - 64;
  co.max_call_payload = proto::kMaxCallPayload;
  co.recv_buffer_bytes = 1 << 20;
  SLIP_ASSIGN_OR_RETURN(auto channel, rpc::RpcChannel::Open(ex, std::move(ep), co));
  // Park on the provider's wait object when idle instead of sleeping (tcp).
  if (raw->wait_fd() >= 0) ex->AddWaitFd(raw->wait_fd(), [raw] { return raw->CanBlock(); }, raw->wait_fd_sees_all());
  return channel;
}

Result<std::shared_ptr<auth::KeySource>> OpenProcessKeys(const std::string& cluster_dir,
                                                         const std::string& secret_file, runtime::Executor* ex) {
  SLIP_ASSIGN_OR_RETURN(auto keys, auth::OpenClusterKeys(cluster_dir, secret_file));
  if (keys != nullptr) {
    logging::Info("auth: the cluster secret in {} (current key {})", keys->path(), keys->keys()->current().id);
    auth::KeySource::Watch(keys, ex);
  } else {
    logging::Warn("auth: no cluster secret ({} has none): anyone who reaches this process's port is served",
                  cluster_dir.empty() ? std::string("no cluster directory") : cluster_dir);
  }
  return keys;
}

nlohmann::json AuthJson(const std::shared_ptr<auth::KeySource>& keys) {
  if (keys == nullptr) return {{"on", false}};
  const auto ring = keys->keys();
  nlohmann::json ids = nlohmann::json::array();
  for (const auth::Key& k : ring->keys()) ids.push_back(k.id);
  return {{"on", true}, {"current", ring->current().id}, {"keys", ids}};
}

nlohmann::json RpcJson(const std::vector<rpc::RpcChannel::Counters>& channels) {
  rpc::RpcChannel::Counters sum;
  for (const auto& c : channels) {
    sum.requests += c.requests;
    sum.calls += c.calls;
    sum.frames_sent += c.frames_sent;
    sum.messages_sent += c.messages_sent;
  }
  return {{"requests", sum.requests},
          {"calls", sum.calls},
          {"frames_sent", sum.frames_sent},
          {"messages_sent", sum.messages_sent}};
}

std::optional<Status> EndedBy(const cluster::ClusterConfig& c, uint32_t id) {
  const auto self = c.nodes.find(id);
  if (self == c.nodes.end()) {
    logging::Info("{}", "removed from the cluster in term " + std::to_string(c.term) + ": stopping");
    return Status::Ok();
  }
  if (self->second.state != cluster::NodeState::kDown) return std::nullopt;
  logging::Warn("{}", "declared failed in term " + std::to_string(c.term) + ": stopping");
  return Status::Aborted(kDeclaredFailed);
}

Status TakeProvider(const std::string& cluster_provider, std::string* provider) {
  if (provider->empty()) {
    *provider = cluster_provider;
  } else if (*provider != cluster_provider) {
    return Status::InvalidArgument("the cluster runs over provider " + cluster_provider + ", not " + *provider);
  }
  return Status::Ok();
}

std::string DataDir(const std::string& cluster_dir, uint32_t id) {
  return cluster_dir.empty() ? "node-" + std::to_string(id) : cluster_dir + "/node-" + std::to_string(id);
}

// Where a node's PM file lives, and its durability class. `file` and `dax`
// keep it in the node's data directory (which must then be on a disk, or
// on a DAX mount). `dram` wants it in memory: in the data directory when
// that is tmpfs already, else under /dev/shm, named after the
// cluster directory so that a cold start finds it again (until the
// machine reboots: that is the class). An empty class (older configurations) is
// inferred from the data directory.
Result<PmPlace> PlacePm(const std::string& configured, const std::string& cluster_dir, uint32_t id) {
  return PlacePm(configured, cluster_dir, "node-" + std::to_string(id));
}

Result<PmPlace> PlacePm(const std::string& configured, const std::string& cluster_dir, const std::string& name) {
  const std::string data = cluster_dir.empty() ? name : cluster_dir + "/" + name;
  const bool in_memory = pm::OnMemoryFilesystem(data);
  const std::string pm_class = !configured.empty() ? configured : in_memory ? "dram" : "file";
  if (pm_class != "dram" && pm_class != "dax" && pm_class != "file") {
    return Status::InvalidArgument("PM class " + pm_class + ": the classes are dram, dax and file");
  }
  if (pm_class == "file" && in_memory) {
    return Status::InvalidArgument("PM class file, but " + data +
                                   " is on a memory filesystem (tmpfs): it would not survive power loss; use a "
                                   "directory on a disk, or --pm dram");
  }
  if (pm_class != "dram" || in_memory) return PmPlace{data + "/pm", pm_class};
  const std::string abs = fs::absolute(cluster_dir.empty() ? "." : cluster_dir).lexically_normal().string();
  char tag[17];
  std::snprintf(tag, sizeof(tag), "%016llx", static_cast<unsigned long long>(HashKey(abs)));
  return PmPlace{std::string("/dev/shm/slip-") + tag + "/" + name + "/pm", pm_class};
}

}  // namespace slip::node
