#include "node/node_process.h"

#include <time.h>
#include <unistd.h>

#include <chrono>

#include <nlohmann/json.hpp>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include "cluster/cluster_config.h"
#include "fabric/fabric.h"
#include "fabric/ofi/ofi_fabric.h"
#include "node/config_access.h"
#include "node/rpc_peers.h"
#include "pm/region.h"
#include "replication/backup_log.h"
#include "replication/design.h"
#include "replication/onesided_replicator.h"
#include "replication/rpc_replicator.h"
#include "rpc/channel.h"
#include "runtime/thread_runtime.h"
#include "server/config_view.h"
#include "server/node_agent.h"
#include "server/node_core.h"
#include "server/promoter.h"
#include "store/store.h"

namespace slip::node {

runtime::Nanos MachineNow() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

namespace fs = std::filesystem;
using cluster::ClusterConfig;

void Log(uint32_t id, const std::string& msg) {
  std::fprintf(stderr, "slip server %u: %s\n", id, msg.c_str());
  std::fflush(stderr);
}

class Node final : public NodeProcess {
 public:
  explicit Node(NodeOptions o) : o_(std::move(o)) {}
  ~Node() override {
    Stop();
    rt_.Stop();
  }

  Status Boot();
  Status Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stopped_; });
    return result_;
  }
  void Stop() override { Finish(Status::Ok()); }

 private:
  void Finish(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    result_ = std::move(s);
    cv_.notify_all();
  }
  // Writes `next` over the stored configuration, recomputing from the newest
  // one on a conflict. `change` maps the current configuration to the next.
  Status Update(const std::function<Result<ClusterConfig>(const ClusterConfig&)>& change);
  void RenewLoop();
  void WatchLoop(uint64_t known_version);
  void AdoptOnNode(const ClusterConfig& c);
  Status StartOneSided();
  void DigestLoop();
  void CommitLoop();
  std::string StatsJson() const;

  NodeOptions o_;
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
  std::unique_ptr<rpc::RpcChannel> channel_;
  std::unique_ptr<RpcPeers> peers_;
  // One-sided designs: the replication endpoints (peers write into `repl_in_`
  // with no worker involved; `repl_out_` is this primary's sending side),
  // the backup log on them, and the NIC and digest roles that drive it.
  replication::Protocol protocol_ = replication::Protocol::kRpc;
  runtime::Executor* nic_ex_ = nullptr;
  runtime::Executor* digest_ex_ = nullptr;
  std::unique_ptr<fabric::Endpoint> repl_in_;
  std::unique_ptr<fabric::Endpoint> repl_out_;
  std::unique_ptr<replication::BackupLog> backup_;
  std::unique_ptr<replication::Replicator> replicator_;
  server::ViewHolder views_;
  std::shared_ptr<server::NodeShared> shared_ = std::make_shared<server::NodeShared>();
  std::unique_ptr<server::NodeCore> core_;
  std::unique_ptr<server::Promoter> promoter_;
  std::unique_ptr<server::NodeAgent> agent_;
  cluster::Lease lease_;
  std::atomic<runtime::Nanos> lease_expiry_{0};
  uint64_t adopted_term_ = 0;  // node executor only

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  Status result_;
};

Status Node::Update(const std::function<Result<ClusterConfig>(const ClusterConfig&)>& change) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig cur, config_store_->Load());
    SLIP_ASSIGN_OR_RETURN(ClusterConfig next, change(cur.config));
    auto w = config_store_->CompareAndSwap(cur.version, next);
    if (w.ok()) return Status::Ok();
    if (!w.status().Is(Code::kAborted)) return w.status();
  }
  return Status::Aborted("configuration kept changing under us");
}

Status Node::Boot() {
  SLIP_ASSIGN_OR_RETURN(config_store_, OpenConfigStore(o_.dir, o_.zookeeper));
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc, LoadWhenPresent(config_store_.get(), 60 * runtime::kSecond));
  auto me = vc.config.nodes.find(o_.id);
  if (me == vc.config.nodes.end()) {
    return Status::InvalidArgument("node " + std::to_string(o_.id) + " is not a member of the cluster");
  }
  SLIP_ASSIGN_OR_RETURN(protocol_, replication::ParseDesign(vc.config.design));
  // Listed as down: the manager replaced this node while it was away —
  // unless it still holds a shard's only copy (Reassign keeps a stranded
  // shard on its last replica), then it comes back with its data.
  bool sole_copy = false;
  for (const auto& s : vc.config.shards) sole_copy |= s.primary == o_.id;
  const bool replaced = me->second.state == cluster::NodeState::kDown && !sole_copy;

  // The store: DIR/node-<id>/pm. A replaced node starts empty.
  const std::string data = o_.dir.empty() ? ("node-" + std::to_string(o_.id)) : o_.dir + "/node-" + std::to_string(o_.id);
  std::error_code ec;
  fs::create_directories(data, ec);
  if (ec) return Status::IoError("cannot create " + data + ": " + ec.message());
  const std::string pm_path = data + "/pm";
  if (replaced && fs::exists(pm_path)) {
    Log(o_.id, "was replaced while away: rejoining empty");
    fs::remove(pm_path, ec);
  }
  const bool exists = fs::exists(pm_path);
  SLIP_ASSIGN_OR_RETURN(region_, pm::PmRegion::OpenFile(pm_path, exists ? 0 : o_.pm_mb << 20, {}));
  store::StoreOptions so;
  so.geometry.num_shards = vc.config.num_shards();
  so.num_writers = 2;  // 0: requests, 1: promotion
  SLIP_ASSIGN_OR_RETURN(store_, store::Store::Open(region_.get(), so));
  if (store_->segments().geometry().num_shards != vc.config.num_shards()) {
    return Status::InvalidArgument("store has " + std::to_string(store_->segments().geometry().num_shards) +
                                   " shards, the cluster " + std::to_string(vc.config.num_shards()));
  }
  Log(o_.id, "store recovered: " + std::to_string(store_->recovery_stats().entries) + " entries in " +
                 std::to_string(store_->recovery_stats().segments_scanned) + " segments");

  // Transport.
  SLIP_ASSIGN_OR_RETURN(fabric_, fabric::OpenOfiFabric(
                                     fabric::FabricOptions{.provider = o_.provider, .node_address = o_.bind_address},
                                     fabric::OfiOptions{.max_multi_recv_message = kMaxMessage}));
  node_ex_ = rt_.CreateExecutor("node" + std::to_string(o_.id));
  control_ex_ = rt_.CreateExecutor("node" + std::to_string(o_.id) + "/control");
  // The digest role also runs the cleaner, for every design.
  digest_ex_ = rt_.CreateExecutor("node" + std::to_string(o_.id) + "/digest");
  SLIP_ASSIGN_OR_RETURN(auto ep, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = "node" + std::to_string(o_.id)}));
  fabric::Endpoint* raw = ep.get();
  rpc::ChannelOptions co;
  co.max_payload = kMaxMessage - 64;
  co.recv_buffer_bytes = 1 << 20;
  SLIP_ASSIGN_OR_RETURN(channel_, rpc::RpcChannel::Open(node_ex_, std::move(ep), co));
  // Park on the provider's wait object when idle instead of sleeping (tcp).
  if (raw->wait_fd() >= 0) node_ex_->AddWaitFd(raw->wait_fd(), [raw] { return raw->CanBlock(); });
  const std::string address = channel_->address();

  peers_ = std::make_unique<RpcPeers>(channel_.get(), node_ex_, rpc::RpcChannel::CallOptions{.timeout = o_.lease / 2});
  if (replication::IsOneSided(protocol_)) {
    SLIP_RETURN_IF_ERROR(StartOneSided());
  } else {
    replicator_ = std::make_unique<replication::RpcReplicator>(peers_.get());
  }
  core_ = std::make_unique<server::NodeCore>(o_.id, store_.get(), 0, replicator_.get(), &views_, shared_);
  core_->set_backup_log(backup_.get());
  core_->set_cpu_clock([] {
    timespec ts;
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
  });
  core_->set_tail_page_bytes(kMaxMessage * 3 / 4);  // a promotion page fits one frame
  core_->set_lease([this] { return MachineNow() < lease_expiry_.load(); });
  promoter_ = std::make_unique<server::Promoter>(store_.get(), 1, peers_.get());
  if (backup_) promoter_->set_catch_up([this] { return backup_->CatchUp(); });
  promoter_->set_commit_floor([this](uint32_t shard) { return core_->RecordedCommitVersion(shard); });
  agent_ = std::make_unique<server::NodeAgent>(o_.id, &views_, promoter_.get(), node_ex_, shared_);
  agent_->set_on_seeded([this](uint32_t shard, uint32_t backup, uint64_t term) {
    control_ex_->Post([this, shard, backup, term] {
      Status s = Update([&](const ClusterConfig& c) -> Result<ClusterConfig> {
        const auto& sync = c.shards[shard].syncing;
        if (c.term < term || std::find(sync.begin(), sync.end(), backup) == sync.end()) {
          return Status::Aborted("already synced or replica set changed");
        }
        return cluster::MarkSynced(c, shard, backup);
      });
      if (!s.ok() && !s.Is(Code::kAborted)) Log(o_.id, "reporting a seeded backup: " + s.ToString());
    });
  });
  channel_->SetHandler([this](uint16_t method, std::span<const std::byte> payload, rpc::RpcChannel::Reply reply) {
    if (method == static_cast<uint16_t>(proto::Method::kStats)) return reply(Code::kOk, StatsJson());
    core_->Handle(method, payload, std::move(reply));
  });

  // Publish our address (and come back, if we were replaced) in a new term.
  SLIP_RETURN_IF_ERROR(Update([&](const ClusterConfig& c) -> Result<ClusterConfig> {
    ClusterConfig next = c;
    if (next.nodes[o_.id].state == cluster::NodeState::kDown && replaced) {
      SLIP_ASSIGN_OR_RETURN(next, cluster::Rejoin(c, o_.id));
    } else {
      // Back with its data (a stranded shard's last copy), or just a new address.
      next.nodes[o_.id].state = cluster::NodeState::kUp;
      ++next.term;
    }
    next.nodes[o_.id].address = RpcPeers::HexEncode(address);
    return next;
  }));

  // The lease: nobody else may think we are alive without it.
  const std::string holder = "node-" + std::to_string(o_.id) + "-pid" + std::to_string(getpid());
  for (int i = 0;; ++i) {
    auto l = config_store_->AcquireLease("node-" + std::to_string(o_.id), holder, o_.lease, MachineNow());
    if (l.ok()) {
      lease_ = *l;
      lease_expiry_ = l->expiry;
      break;
    }
    // An earlier incarnation's lease runs out, or the manager is probing it.
    if (!l.status().Is(Code::kBusy) || i > 200) return l.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig now, config_store_->Load());
  SLIP_RETURN_IF_ERROR(rt_.Start());
  node_ex_->Post([this, c = now.config] {
    std::map<uint32_t, std::string> addrs;
    for (const auto& [id, info] : c.nodes) addrs[id] = info.address;
    peers_->SetAddresses(addrs);
    adopted_term_ = c.term;
    agent_->ColdStart(server::ViewFromConfig(c));
  });
  control_ex_->Post([this] { RenewLoop(); });
  digest_ex_->Post([this] { DigestLoop(); });
  if (o_.commit_interval > 0) node_ex_->After(o_.commit_interval, [this] { CommitLoop(); });
  control_ex_->Post([this, v = now.version] { WatchLoop(v); });
  Log(o_.id, "serving at " + RpcPeers::HexEncode(address) + " (" + o_.provider + "), term " + std::to_string(now.config.term));
  return Status::Ok();
}

void Node::RenewLoop() {
  const runtime::Nanos t0 = MachineNow();
  auto l = config_store_->RenewLease(lease_, o_.lease, t0);
  const runtime::Nanos took = MachineNow() - t0;
  if (took > o_.lease / 4) Log(o_.id, "slow lease renewal: " + std::to_string(took / 1000000) + " ms");
  if (!l.ok() && !l.status().Is(Code::kAborted)) Log(o_.id, "lease renewal failed: " + l.status().ToString());
  if (!l.ok()) {
    if (l.status().Is(Code::kAborted) || MachineNow() >= lease_expiry_.load()) {
      lease_expiry_ = 0;
      Log(o_.id, "lost the node lease: stopping (" + l.status().ToString() + ")");
      return Finish(Status::Aborted("lost the node lease"));
    }
    // A transient store error: keep trying while the lease lasts.
  } else {
    lease_ = *l;
    lease_expiry_ = l->expiry;
  }
  control_ex_->After(o_.lease / 4, [this] { RenewLoop(); });
}

void Node::WatchLoop(uint64_t known_version) {
  Status s = config_store_->Watch(known_version, [this] {
    control_ex_->Post([this] {
      auto c = config_store_->Load();
      if (!c.ok()) {
        control_ex_->After(100 * runtime::kMillisecond, [this] { WatchLoop(0); });
        return;
      }
      node_ex_->Post([this, cfg = c->config] { AdoptOnNode(cfg); });
      WatchLoop(c->version);
    });
  });
  if (!s.ok()) control_ex_->After(100 * runtime::kMillisecond, [this, known_version] { WatchLoop(known_version); });
}

void Node::AdoptOnNode(const ClusterConfig& c) {
  if (c.term <= adopted_term_) return;
  adopted_term_ = c.term;
  std::map<uint32_t, std::string> addrs;
  for (const auto& [id, info] : c.nodes) addrs[id] = info.address;
  peers_->SetAddresses(addrs);
  agent_->Adopt(server::ViewFromConfig(c));
}

Status Node::StartOneSided() {
  const std::string name = "node" + std::to_string(o_.id);
  nic_ex_ = rt_.CreateExecutor(name + "/nic");
  SLIP_ASSIGN_OR_RETURN(repl_in_, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = name + "/in"}));
  SLIP_ASSIGN_OR_RETURN(repl_out_, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = name + "/out"}));
  replication::BackupLogOptions bo;
  bo.protocol = protocol_;
  SLIP_ASSIGN_OR_RETURN(backup_, replication::BackupLog::Create(store_.get(), repl_in_.get(), bo));
  // The NIC role: on software providers peers' Sends and Writes land only
  // while this endpoint is polled. It parks on the endpoint's wait object
  // (tcp) and wakes at least every max_park for the used-segment rule.
  fabric::Endpoint* in = repl_in_.get();
  nic_ex_->AddPoller([this] { return backup_->Poll(nic_ex_->Now()); });
  if (in->wait_fd() >= 0) nic_ex_->AddWaitFd(in->wait_fd(), [in] { return in->CanBlock(); });
  fabric::Endpoint* out = repl_out_.get();
  if (out->wait_fd() >= 0) node_ex_->AddWaitFd(out->wait_fd(), [out] { return out->CanBlock(); });
  replication::OneSidedOptions oo;
  oo.protocol = protocol_;
  oo.self = o_.id;
  oo.max_message = kMaxMessage / 2;  // well inside the multi-receive limit
  oo.term = [this] { return adopted_term_; };
  // Runs on the node executor: it polls `out` there and calls back there.
  replicator_ = std::make_unique<replication::OneSidedReplicator>(node_ex_, out, peers_.get(), oo);
  Log(o_.id, std::string("design ") + replication::DesignName(protocol_) + ": replication endpoint " +
                 RpcPeers::HexEncode(backup_->address()));
  return Status::Ok();
}

// CommitVer records (server/commit_tracker.h), on the worker's executor:
// they are writes like any other.
void Node::CommitLoop() {
  core_->WriteCommitRecords();
  node_ex_->After(o_.commit_interval, [this] { CommitLoop(); });
}

void Node::DigestLoop() {
  // Digest what the NIC role found used or senders closed, then keep the
  // store's free space up (both are background work, off the request path).
  for (int i = 0; i < 16 && backup_; ++i) {
    auto r = backup_->DigestStep();
    if (!r.ok()) Log(o_.id, "digest: " + r.status().ToString());
    if (!r.ok() || !*r) break;
  }
  for (int i = 0; i < 4 && store_->NeedsCleaning(); ++i) {
    auto r = store_->CleanStep();
    if (!r.ok()) Log(o_.id, "cleaner: " + r.status().ToString());
    if (!r.ok() || !*r) break;
  }
  digest_ex_->After(runtime::kMillisecond, [this] { DigestLoop(); });
}

std::string Node::StatsJson() const {
  // Per-role CPU from each executor's thread clock, plus the counters the
  // benchmark divides by operations. Backup work done by the worker is
  // counted by NodeCore around the backup-role handlers.
  const auto& c = core_->counters();
  auto cpu = [](runtime::Executor* e) { return e ? e->CpuTime() : 0; };
  const nlohmann::json j = {
      {"node", o_.id},
      {"design", replication::DesignName(protocol_)},
      {"cpu_ns",
       {{"worker", cpu(node_ex_) - c.backup_cpu_ns},
        {"backup_worker", c.backup_cpu_ns},
        {"nic", cpu(nic_ex_)},
        {"control", cpu(control_ex_)},
        {"digest", cpu(digest_ex_)}}},
      {"puts", c.puts},
      {"dels", c.dels},
      {"gets", c.gets},
      {"backup_requests", c.backup_requests},
      {"commit_records", c.commit_records},
      {"received_bytes", store_->received_bytes()},
  };
  return j.dump();
}

}  // namespace

Result<std::unique_ptr<NodeProcess>> NodeProcess::Start(const NodeOptions& options) {
  auto n = std::make_unique<Node>(options);
  SLIP_RETURN_IF_ERROR(n->Boot());
  return std::unique_ptr<NodeProcess>(std::move(n));
}

}  // namespace slip::node
