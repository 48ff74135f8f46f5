#include "node/kvs_node_process.h"

#include <unistd.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>

#include "cluster/config_access.h"
#include "common/log.h"
#include "fabric/ofi/ofi_fabric.h"
#include "node/membership.h"
#include "node/outcome.h"
#include "proto/kv.h"
#include "rpc/channel.h"
#include "rpc/rpc_peers.h"
#include "runtime/thread_runtime.h"
#include "server/clover_server.h"
#include "server/dinomo_server.h"

namespace slip::node {
namespace {

using cluster::ClusterConfig;

// The pool's id among this node's peers (not a node id: those are < 2^31).
constexpr rpc::NodeId kPoolPeer = 0xFFFFFFF0u;

class KvsNodeServer final : public NodeProcess {
 public:
  explicit KvsNodeServer(NodeOptions o) : o_(std::move(o)) {}
  ~KvsNodeServer() override {
    Stop();
    rt_.Stop();
    config_store_.reset();  // its watcher thread posts to control_ex_
    // The data endpoint before the node whose buffers its operations use.
    data_ep_.reset();
    server_.reset();
  }

  Status Boot();
  Status Wait() override { return outcome_.Wait(); }
  void Stop() override { Finish(Status::Ok()); }

 private:
  void Finish(Status s) { outcome_.Finish(std::move(s)); }
  void Stats(rpc::RpcChannel::Reply reply);
  void StatsAsync(std::function<void(std::string)> done) override {
    node_ex_->Post([this, done = std::move(done)]() mutable {
      Stats([done = std::move(done)](Code, std::string json) { done(std::move(json)); });
    });
  }
  void Settled(const ClusterConfig& c);
  std::atomic<bool> leaving_{false};  // it asked to be dropped from the membership

  NodeOptions o_;
  std::unique_ptr<cluster::ConfigStore> config_store_;
  std::unique_ptr<fabric::Fabric> fabric_;
  runtime::ThreadRuntime rt_{
      runtime::ThreadRuntimeOptions{.seed = 1, .spin_turns = 8, .max_park = runtime::kMillisecond}};
  runtime::Executor* node_ex_ = nullptr;
  runtime::Executor* control_ex_ = nullptr;
  std::shared_ptr<auth::KeySource> keys_;  // null: no cluster secret
  std::unique_ptr<rpc::RpcChannel> channel_;
  std::unique_ptr<rpc::RpcPeers> peers_;       // the pool
  std::unique_ptr<fabric::Endpoint> data_ep_;  // the KvsNode's one-sided operations
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<server::PoolNode> server_;  // node executor only
  std::string design_;

  Outcome outcome_;
};

Status KvsNodeServer::Boot() {
  SLIP_ASSIGN_OR_RETURN(config_store_, cluster::OpenConfigStore(o_.dir, o_.zookeeper));
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc,
                        cluster::LoadWhenPresent(config_store_.get(), 60 * runtime::kSecond));
  // A node that is not a member joins (docs/papers/dinomo.md §5b): the
  // manager gives it its share of the shards once it holds its lease.
  const bool joining = !vc.config.nodes.contains(o_.id);
  SLIP_RETURN_IF_ERROR(TakeProvider(vc.config.provider, &o_.provider));
  SLIP_ASSIGN_OR_RETURN(
      fabric_, fabric::OpenOfiFabric(fabric::FabricOptions{.provider = o_.provider, .node_address = o_.bind_address},
                                     fabric::OfiOptions{.max_multi_recv_message = proto::kMaxMessage}));
  const std::string name = "kn" + std::to_string(o_.id);
  node_ex_ = rt_.CreateExecutor(name);
  control_ex_ = rt_.CreateExecutor(name + "/control");
  SLIP_ASSIGN_OR_RETURN(auto ep, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = name}));
  SLIP_ASSIGN_OR_RETURN(keys_, OpenProcessKeys(o_.dir, o_.secret_file, control_ex_));
  SLIP_ASSIGN_OR_RETURN(channel_, OpenServingChannel(node_ex_, std::move(ep), keys_));
  SLIP_ASSIGN_OR_RETURN(data_ep_, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = name + "/data"}));
  fabric::Endpoint* data = data_ep_.get();
  if (data->wait_fd() >= 0) {
    node_ex_->AddWaitFd(data->wait_fd(), [data] { return data->CanBlock(); }, data->wait_fd_sees_all());
  }
  peers_ =
      std::make_unique<rpc::RpcPeers>(channel_.get(), node_ex_, rpc::RpcChannel::CallOptions{.timeout = o_.lease / 2});
  design_ = vc.config.design;
  auto set_peers = [this](const ClusterConfig& c) {
    std::map<rpc::NodeId, std::string> hex = {{kPoolPeer, c.pool}};
    for (const auto& [id, info] : c.nodes) hex[id] = info.address;
    peers_->SetAddresses(hex);
  };
  dinomo::KvsNodeOptions node_options;
  if (design_ == "dinomo-s") {
    // The paper's DINOMO-S: the same nodes with shortcut-only caches.
    node_options.cache.policy = dinomo::CacheOptions::Policy::kStatic;
    node_options.cache.value_share = 0;
  }
  if (design_ == "clover") {
    server_ = std::make_unique<server::CloverServer>(server::CloverServerEnv{
        .self = o_.id,
        .exec = node_ex_,
        .data = data,
        .calls = peers_.get(),
        .pool_peer = kPoolPeer,
        .set_peers = set_peers,
        .settled = [this](const ClusterConfig& c) { Settled(c); },
        .fatal = [this](Status s) { Finish(std::move(s)); },
        .node = {},
    });
  } else {
    server_ = std::make_unique<server::DinomoServer>(server::DinomoServerEnv{
        .self = o_.id,
        .exec = node_ex_,
        .data = data,
        .calls = peers_.get(),
        .pool_peer = kPoolPeer,
        .set_peers = set_peers,
        .settled = [this](const ClusterConfig& c) { Settled(c); },
        .lease_left = [this] { return membership_->lease_expiry() - MachineNow(); },
        .fatal = [this](Status s) { Finish(std::move(s)); },
        .node = node_options,
        .copy_on_handover = design_ == "dinomo-n",
        .joined = joining,
    });
  }
  node_ex_->AddPoller([this] { return server_->Poll(); });
  channel_->SetHandler([this](uint16_t method, std::span<const std::byte> payload, rpc::RpcChannel::Reply reply) {
    if (method == static_cast<uint16_t>(proto::Method::kStats)) return Stats(std::move(reply));
    server_->Handle(method, payload, std::move(reply));
  });

  // Publish our address in a new term; a node listed down comes back up
  // (with its stranded shards, if ReassignOwners kept any on it). It has no
  // data to wipe: its log is in the pool, merged before anyone serves it.
  membership_ = std::make_unique<Membership>(config_store_.get(), control_ex_, o_.lease);
  const std::string address = rpc::RpcPeers::HexEncode(channel_->address());
  const std::string holder = "node-" + std::to_string(o_.id) + "-pid" + std::to_string(getpid());
  // A node that lists itself up (joining, or back after it was declared
  // failed) holds its lease first: the manager, which probes the lease of
  // every node listed up, then never finds it dead in between.
  const bool lease_first = joining || vc.config.nodes.at(o_.id).state == cluster::NodeState::kDown;
  SLIP_RETURN_IF_ERROR(membership_->UpdateHoldingLease(cluster::NodeLeaseName(o_.id), holder, lease_first,
                                                       [&](const ClusterConfig& c) -> Result<ClusterConfig> {
    if (!c.nodes.contains(o_.id)) {
      if (!joining) return Status::InvalidArgument("node " + std::to_string(o_.id) + " was removed while starting");
      return cluster::JoinOwner(c, o_.id, address);
    }
    if (c.nodes.at(o_.id).state == cluster::NodeState::kLeaving) {
      return Status::InvalidArgument("node " + std::to_string(o_.id) + " is leaving the cluster");
    }
    ClusterConfig next = c;
    if (c.nodes.at(o_.id).state == cluster::NodeState::kDown) {
      SLIP_ASSIGN_OR_RETURN(
          next, server::OwnedBy(c, o_.id).empty() ? cluster::Rejoin(c, o_.id) : cluster::ReturnWithData(c, o_.id));
    } else {
      ++next.term;
    }
    next.nodes[o_.id].address = address;
    next.nodes[o_.id].workers.clear();  // one entry: the address (cluster::NodeInfo::workers)
    return next;
  }));
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig now, config_store_->Load());
  if (!now.config.nodes.contains(o_.id)) return Status::Aborted("removed from the cluster while starting");
  if (now.config.nodes.at(o_.id).state == cluster::NodeState::kDown) return Status::Aborted(kReplacedWhileStarting);
  SLIP_RETURN_IF_ERROR(rt_.Start());
  node_ex_->Post([this, c = now.config] { server_->Adopt(c); });
  membership_->KeepAlive([this](Status) { Finish(Status::Aborted(kLostLease)); });
  membership_->Watch(now.version, [this](const cluster::VersionedConfig& newer) {
    const auto self = newer.config.nodes.find(o_.id);
    if (self == newer.config.nodes.end()) {
      if (leaving_) return;  // Settled stops it
      logging::Info("{}", "removed from the cluster in term " + std::to_string(newer.config.term) + ": stopping");
      return Finish(Status::Ok());
    }
    if (self->second.state == cluster::NodeState::kDown) {
      logging::Warn("{}", "declared failed in term " + std::to_string(newer.config.term) + ": stopping");
      return Finish(Status::Aborted(kDeclaredFailed));
    }
    node_ex_->Post([this, c = newer.config] { server_->Adopt(c); });
  });
  logging::Info("{}",
                "KVS node serving at " + address + " (" + o_.provider + "), term " + std::to_string(now.config.term));
  return Status::Ok();
}

void KvsNodeServer::Settled(const ClusterConfig& c) {
  // A leaving node that has let go of everything (it owns nothing and is
  // settled, so the nodes taking its shards may serve them) leaves.
  const auto self = c.nodes.find(o_.id);
  if (self == c.nodes.end() || self->second.state != cluster::NodeState::kLeaving || leaving_.exchange(true)) return;
  control_ex_->Post([this] {
    Status s = membership_->Update([&](const ClusterConfig& now) { return cluster::DropLeaving(now, o_.id); });
    if (!s.ok()) return Finish(Status(s.code(), "leaving the cluster: " + s.message()));
    // Linger a moment: nodes that took our shards and have not asked yet
    // whether we let go get their answer instead of a timeout.
    logging::Info("{}", "left the cluster");
    control_ex_->After(o_.lease / 4, [this] { Finish(Status::Ok()); });
  });
}

void KvsNodeServer::Stats(rpc::RpcChannel::Reply reply) {
  // What the bench reports per role; the data path is all on this thread.
  const server::PoolNode::Counters st = server_->counters();
  const server::PoolNode::HotWindow hot = server_->hot_keys();
  nlohmann::json top = nlohmann::json::array();
  for (const HotKeys::Key& k : hot.top)
    top.push_back({{"key_hex", rpc::RpcPeers::HexEncode(k.key)}, {"count", k.count}});
  const nlohmann::json j = {
      {"node", o_.id},
      {"design", design_},
      {"auth", AuthJson(keys_)},
      {"rpc", RpcJson({channel_->counters()})},
      {"cpu_ns",
       {{"worker", node_ex_->CpuTime()},
        {"backup_worker", 0},
        {"nic", 0},
        {"control", control_ex_->CpuTime()},
        {"digest", 0}}},
      {"gets", st.gets},
      {"writes", st.writes},
      {"pool_round_trips_per_op", st.pool_round_trips_per_op},
      {"serving_term", server_->serving_term()},
      {"shared_gets", st.shared_gets},
      {"shared_writes", st.shared_writes},
      {"swaps", st.swaps},
      {"swap_retries", st.swap_retries},
      // The last complete second's requests and its most requested keys.
      {"window_requests", hot.requests},
      {"hot_keys", std::move(top)},
  };
  reply(Code::kOk, j.dump());
}

}  // namespace

Result<std::unique_ptr<NodeProcess>> StartKvsNode(const NodeOptions& options) {
  return BootUntilNotReplaced<KvsNodeServer>(options);
}

}  // namespace slip::node
