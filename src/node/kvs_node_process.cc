#include "node/kvs_node_process.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <vector>

#include "cluster/config_access.h"
#include "common/hash.h"
#include "common/log.h"
#include "dinomo/kvs_node.h"
#include "fabric/ofi/ofi_fabric.h"
#include "node/membership.h"
#include "node/outcome.h"
#include "proto/kv.h"
#include "proto/pool.h"
#include "rpc/channel.h"
#include "rpc/rpc_peers.h"
#include "runtime/thread_runtime.h"
#include "server/commit_tracker.h"

namespace slip::node {
namespace {

using cluster::ClusterConfig;

// The pool's id among this node's peers (not a node id: those are < 2^31).
constexpr rpc::NodeId kPoolPeer = 0xFFFFFFF0u;
// Versions are (epoch << 32) | n and at most 48 bits (log/entry.h).
constexpr uint64_t kMaxEpoch = (uint64_t{1} << 16) - 1;

class KvsNodeServer final : public NodeProcess {
 public:
  explicit KvsNodeServer(NodeOptions o) : o_(std::move(o)) {}
  ~KvsNodeServer() override {
    Stop();
    rt_.Stop();
    config_store_.reset();  // its watcher thread posts to control_ex_
    // The data endpoint before the node whose buffers its operations use.
    data_ep_.reset();
    node_.reset();
  }

  Status Boot();
  Status Wait() override { return outcome_.Wait(); }
  void Stop() override { Finish(Status::Ok()); }

 private:
  void Finish(Status s) { outcome_.Finish(std::move(s)); }

  // Node executor only from here on.
  void Adopt(const ClusterConfig& c);
  void Consider();  // serve config_ as it is, or reconfigure for it
  void Reconfigure();
  void WaitIdle(int waited_ms);
  void MergeNext(std::vector<uint32_t> left);
  void Retry();
  void Handle(uint16_t method, std::span<const std::byte> payload, rpc::RpcChannel::Reply reply);
  void Refuse(const rpc::RpcChannel::Reply& reply, const Status& s) const {
    reply(s.code(), proto::Encode(proto::KvResponse{config_.term, 0, s.message()}));
  }

  NodeOptions o_;
  std::unique_ptr<cluster::ConfigStore> config_store_;
  std::unique_ptr<fabric::Fabric> fabric_;
  runtime::ThreadRuntime rt_{runtime::ThreadRuntimeOptions{.seed = 1, .spin_turns = 8, .max_park = runtime::kMillisecond}};
  runtime::Executor* node_ex_ = nullptr;
  runtime::Executor* control_ex_ = nullptr;
  std::unique_ptr<rpc::RpcChannel> channel_;
  std::unique_ptr<rpc::RpcPeers> peers_;  // the pool
  std::unique_ptr<fabric::Endpoint> data_ep_;  // the KvsNode's one-sided operations
  std::unique_ptr<Membership> membership_;
  log::Limits limits_;

  ClusterConfig config_;        // the newest adopted
  ClusterConfig target_;        // what the reconfiguration under way is for
  ClusterConfig serving_config_;  // what `node_` serves (its term is node_'s epoch)
  std::set<uint32_t> owned_;    // shards node_ serves
  std::unique_ptr<dinomo::KvsNode> node_;
  bool serving_ = false;
  bool reconfiguring_ = false;
  int64_t retry_ms_ = 50;  // Retry's pause, doubling up to 2 s while the pool does not answer

  Outcome outcome_;
};

std::set<uint32_t> OwnedBy(const ClusterConfig& c, uint32_t id) {
  std::set<uint32_t> owned;
  for (uint32_t s = 0; s < c.num_shards(); ++s) {
    if (c.shards[s].primary == id) owned.insert(s);
  }
  return owned;
}

Status KvsNodeServer::Boot() {
  SLIP_ASSIGN_OR_RETURN(config_store_, cluster::OpenConfigStore(o_.dir, o_.zookeeper));
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc, cluster::LoadWhenPresent(config_store_.get(), 60 * runtime::kSecond));
  if (!vc.config.nodes.contains(o_.id)) {
    return Status::InvalidArgument("node " + std::to_string(o_.id) + " is not a member of the cluster");
  }
  if (o_.provider.empty()) {
    o_.provider = vc.config.provider;
  } else if (o_.provider != vc.config.provider) {
    return Status::InvalidArgument("the cluster runs over provider " + vc.config.provider + ", not " + o_.provider);
  }
  SLIP_ASSIGN_OR_RETURN(fabric_, fabric::OpenOfiFabric(
                                     fabric::FabricOptions{.provider = o_.provider, .node_address = o_.bind_address},
                                     fabric::OfiOptions{.max_multi_recv_message = proto::kMaxMessage}));
  const std::string name = "kn" + std::to_string(o_.id);
  node_ex_ = rt_.CreateExecutor(name);
  control_ex_ = rt_.CreateExecutor(name + "/control");
  SLIP_ASSIGN_OR_RETURN(auto ep, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = name}));
  SLIP_ASSIGN_OR_RETURN(channel_, OpenServingChannel(node_ex_, std::move(ep)));
  SLIP_ASSIGN_OR_RETURN(data_ep_, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = name + "/data"}));
  fabric::Endpoint* data = data_ep_.get();
  if (data->wait_fd() >= 0) node_ex_->AddWaitFd(data->wait_fd(), [data] { return data->CanBlock(); });
  node_ex_->AddPoller([this] { return node_ != nullptr && node_->Poll(); });
  peers_ = std::make_unique<rpc::RpcPeers>(channel_.get(), node_ex_, rpc::RpcChannel::CallOptions{.timeout = o_.lease / 2});
  channel_->SetHandler([this](uint16_t method, std::span<const std::byte> payload, rpc::RpcChannel::Reply reply) {
    Handle(method, payload, std::move(reply));
  });

  // Publish our address in a new term; a node listed down comes back up
  // (with its stranded shards, if ReassignOwners kept any on it). It has no
  // data to wipe: its log is in the pool, merged before anyone serves it.
  membership_ = std::make_unique<Membership>(config_store_.get(), control_ex_, o_.lease);
  const std::string address = rpc::RpcPeers::HexEncode(channel_->address());
  SLIP_RETURN_IF_ERROR(membership_->Update([&](const ClusterConfig& c) -> Result<ClusterConfig> {
    ClusterConfig next = c;
    if (c.nodes.at(o_.id).state == cluster::NodeState::kDown) {
      SLIP_ASSIGN_OR_RETURN(next, OwnedBy(c, o_.id).empty() ? cluster::Rejoin(c, o_.id)
                                                               : cluster::ReturnWithData(c, o_.id));
    } else {
      ++next.term;
    }
    next.nodes[o_.id].address = address;
    return next;
  }));
  SLIP_RETURN_IF_ERROR(
      membership_->Acquire(cluster::NodeLeaseName(o_.id), "node-" + std::to_string(o_.id) + "-pid" + std::to_string(getpid())));
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig now, config_store_->Load());
  if (now.config.nodes.at(o_.id).state == cluster::NodeState::kDown) return Status::Aborted(kReplacedWhileStarting);
  SLIP_RETURN_IF_ERROR(rt_.Start());
  node_ex_->Post([this, c = now.config] { Adopt(c); });
  membership_->KeepAlive([this](Status s) { Finish(std::move(s)); });
  membership_->Watch(now.version, [this](const cluster::VersionedConfig& newer) {
    const auto self = newer.config.nodes.find(o_.id);
    if (self == newer.config.nodes.end() || self->second.state == cluster::NodeState::kDown) {
      logging::Warn("{}", "declared failed in term " + std::to_string(newer.config.term) + ": stopping");
      return Finish(Status::Aborted("declared failed by the manager"));
    }
    node_ex_->Post([this, c = newer.config] { Adopt(c); });
  });
  logging::Info("{}", "KVS node serving at " + address + " (" + o_.provider + "), term " + std::to_string(now.config.term));
  return Status::Ok();
}

void KvsNodeServer::Adopt(const ClusterConfig& c) {
  if (c.term <= config_.term) return;
  config_ = c;
  // A reconfiguration under way looks at config_ again when it ends.
  if (!reconfiguring_) Consider();
}

void KvsNodeServer::Consider() {
  // Ownership and the pool unchanged: keep serving (and caching) as before,
  // under the new term.
  if (serving_ && OwnedBy(config_, o_.id) == owned_ && config_.pool == serving_config_.pool) {
    serving_config_ = config_;
    return;
  }
  Reconfigure();
}

void KvsNodeServer::Reconfigure() {
  reconfiguring_ = true;
  serving_ = false;
  target_ = config_;
  if (target_.term > kMaxEpoch) {
    logging::Error("{}", "term " + std::to_string(target_.term) + " is past the largest epoch versions can hold");
    return Finish(Status::InvalidArgument("configuration term past the largest epoch"));
  }
  if (target_.pool.empty()) {
    // The pool has not published its address yet: the next configuration will.
    reconfiguring_ = false;
    return;
  }
  WaitIdle(0);
}

void KvsNodeServer::WaitIdle(int waited_ms) {
  if (node_ != nullptr && !node_->Idle()) {
    // Operations on the wire complete or fail within the fabric's timeouts;
    // one that never does would leave the next node's completions mixed
    // with this one's.
    if (waited_ms > 10000) return Finish(Status::Aborted("the data path did not drain in 10 s"));
    node_ex_->After(runtime::kMillisecond, [this, waited_ms] { WaitIdle(waited_ms + 1); });
    return;
  }
  node_.reset();
  peers_->SetAddresses({{kPoolPeer, target_.pool}});
  // Merge before serve: this node's own log (fencing what it ran before)
  // and every down node's, whose keys may be among those it now owns.
  std::vector<uint32_t> merge = {o_.id};
  for (const auto& [id, info] : target_.nodes) {
    if (info.state == cluster::NodeState::kDown) merge.push_back(id);
  }
  MergeNext(std::move(merge));
}

void KvsNodeServer::MergeNext(std::vector<uint32_t> left) {
  const ClusterConfig& c = target_;
  if (left.empty()) {
    dinomo::KvsNodeOptions ko;
    ko.node = o_.id;
    ko.epoch = c.term;
    node_ = std::make_unique<dinomo::KvsNode>(node_ex_, data_ep_.get(), peers_.get(), kPoolPeer, ko);
    node_->Start([this, c](Status s) {
      if (!s.ok()) {
        logging::Warn("{}", "the pool refused to start the node in term " + std::to_string(c.term) + ": " + s.ToString());
        node_.reset();
        return Retry();
      }
      reconfiguring_ = false;
      retry_ms_ = 50;
      serving_config_ = c;
      owned_ = OwnedBy(c, o_.id);
      serving_ = true;
      logging::Info("{}", "serving " + std::to_string(owned_.size()) + " shards in term " + std::to_string(c.term));
      if (config_.term != c.term) Consider();  // a newer one came meanwhile
    });
    return;
  }
  const uint32_t node = left.back();
  left.pop_back();
  peers_->Call(kPoolPeer, static_cast<uint16_t>(proto::Method::kPoolMergeAll),
               proto::Encode(proto::PoolNodeRequest{node, c.term}),
               [this, node, left = std::move(left)](Result<rpc::PeerResponse> r) mutable {
                 if (!r.ok() || r->status != Code::kOk) {
                   logging::Warn("{}", "merging node " + std::to_string(node) + "'s log failed (" +
                                           (r.ok() ? Status(r->status, r->payload).ToString() : r.status().ToString()) +
                                           "): trying again");
                   return Retry();
                 }
                 MergeNext(std::move(left));
               });
}

void KvsNodeServer::Retry() {
  // From the start, with the newest configuration: the pool may have moved
  // (a restarted pool publishes a new address), or more nodes gone down.
  node_ex_->After(retry_ms_ * runtime::kMillisecond, [this] { Reconfigure(); });
  retry_ms_ = std::min<int64_t>(2 * retry_ms_, 2000);
}

void KvsNodeServer::Handle(uint16_t method, std::span<const std::byte> payload, rpc::RpcChannel::Reply reply) {
  const auto m = static_cast<proto::Method>(method);
  if (m == proto::Method::kStats) {
    // What the bench reports per role; the data path is all on this thread.
    const dinomo::KvsNodeStats st = node_ ? node_->stats() : dinomo::KvsNodeStats{};
    const nlohmann::json j = {
        {"node", o_.id},
        {"design", config_.design},
        {"cpu_ns", {{"worker", node_ex_->CpuTime()}, {"backup_worker", 0}, {"nic", 0}, {"control", control_ex_->CpuTime()}, {"digest", 0}}},
        {"gets", st.gets},
        {"writes", st.writes},
        {"pool_round_trips_per_op", st.round_trips_per_op()},
    };
    return reply(Code::kOk, j.dump());
  }
  if (m != proto::Method::kPut && m != proto::Method::kGet && m != proto::Method::kDel) {
    return Refuse(reply, Status::InvalidArgument("a KVS node does not serve method " + std::to_string(method)));
  }
  auto req = proto::DecodeKvRequest(payload, limits_);
  if (!req.ok()) return Refuse(reply, req.status());
  if (server::IsReservedKey(req->key)) return Refuse(reply, Status::InvalidArgument("keys beginning with \\0slip: are reserved"));
  const ClusterConfig& c = serving_config_;
  if (!serving_ || req->term != c.term) {
    return Refuse(reply, Status::StaleTerm("request term " + std::to_string(req->term) + ", node term " +
                                           std::to_string(serving_ ? c.term : config_.term) +
                                           (serving_ ? "" : " (reconfiguring)")));
  }
  const uint32_t shard = c.ShardOf(HashKey(req->key));
  if (shard != req->shard || !owned_.contains(shard)) {
    return Refuse(reply, Status::StaleTerm("node " + std::to_string(o_.id) + " does not own shard " +
                                           std::to_string(req->shard) + " in term " + std::to_string(c.term)));
  }
  if (MachineNow() >= membership_->lease_expiry()) {
    return Refuse(reply, Status::Unavailable("node " + std::to_string(o_.id) + " has no valid lease"));
  }
  const uint64_t term = c.term;
  if (m == proto::Method::kGet) {
    return node_->Get(std::string(req->key), [reply, term](Result<std::string> v) {
      if (!v.ok()) return reply(v.status().code(), proto::Encode(proto::KvResponse{term, 0, v.status().message()}));
      reply(Code::kOk, proto::Encode(proto::KvResponse{term, 0, *v}));
    });
  }
  auto done = [reply, term](Status s) {
    reply(s.code(), proto::Encode(proto::KvResponse{term, 0, s.ok() ? std::string_view() : s.message()}));
  };
  if (m == proto::Method::kPut) return node_->Put(std::string(req->key), std::string(req->value), done);
  node_->Delete(std::string(req->key), done);
}

}  // namespace

Result<std::unique_ptr<NodeProcess>> StartKvsNode(const NodeOptions& options) {
  auto n = std::make_unique<KvsNodeServer>(options);
  Status s = n->Boot();
  for (int again = 0; again < 5 && s.Is(Code::kAborted) && s.message() == kReplacedWhileStarting; ++again) {
    logging::Warn("{}", std::string(kReplacedWhileStarting) + "; booting again to rejoin");
    n = std::make_unique<KvsNodeServer>(options);
    s = n->Boot();
  }
  SLIP_RETURN_IF_ERROR(s);
  return std::unique_ptr<NodeProcess>(std::move(n));
}

}  // namespace slip::node
