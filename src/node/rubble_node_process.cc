#include "node/rubble_node_process.h"

#include <unistd.h>

#include <filesystem>
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
#include "server/rubble_server.h"

namespace slip::node {
namespace {

namespace fs = std::filesystem;
using cluster::ClusterConfig;

constexpr const char* kNoChange = "no change to make";

class RubbleNode final : public NodeProcess {
 public:
  explicit RubbleNode(NodeOptions o) : o_(std::move(o)) {}
  ~RubbleNode() override {
    Stop();
    rt_.Stop();
    config_store_.reset();  // its watcher thread posts to control_ex_
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
  void MarkSynced(cluster::ShardId shard, uint32_t node);

  NodeOptions o_;
  std::unique_ptr<cluster::ConfigStore> config_store_;
  std::unique_ptr<fabric::Fabric> fabric_;
  runtime::ThreadRuntime rt_{
      runtime::ThreadRuntimeOptions{.seed = 1, .spin_turns = 8, .max_park = runtime::kMillisecond}};
  runtime::Executor* node_ex_ = nullptr;
  runtime::Executor* control_ex_ = nullptr;
  std::shared_ptr<auth::KeySource> keys_;  // null: no cluster secret
  std::unique_ptr<rpc::RpcChannel> channel_;
  std::unique_ptr<rpc::RpcPeers> peers_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<server::RubbleServer> server_;  // node executor only
  std::string design_;
  Outcome outcome_;
};

Status RubbleNode::Boot() {
  SLIP_ASSIGN_OR_RETURN(config_store_, cluster::OpenConfigStore(o_.dir, o_.zookeeper));
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc,
                        cluster::LoadWhenPresent(config_store_.get(), 60 * runtime::kSecond));
  auto me = vc.config.nodes.find(o_.id);
  if (me == vc.config.nodes.end()) {
    return Status::InvalidArgument("node " + std::to_string(o_.id) + " is not a member of the cluster");
  }
  SLIP_RETURN_IF_ERROR(TakeProvider(vc.config.provider, &o_.provider));
  // Listed as down: replaced while away, unless it holds a stranded
  // shard's last copy (then it comes back with its data, as in Node).
  bool sole_copy = false;
  for (const auto& s : vc.config.shards) sole_copy |= s.primary == o_.id;
  const bool replaced = me->second.state == cluster::NodeState::kDown && !sole_copy;
  const std::string data = DataDir(o_.dir, o_.id) + "/rubble";
  std::error_code ec;
  if (replaced && fs::exists(data)) {
    logging::Info("{}", "was replaced while away: rejoining empty");
    fs::remove_all(data, ec);
  }
  fs::create_directories(data, ec);
  if (ec) return Status::IoError("cannot create " + data + ": " + ec.message());
  const bool empty = fs::is_empty(data, ec);

  SLIP_ASSIGN_OR_RETURN(
      fabric_, fabric::OpenOfiFabric(fabric::FabricOptions{.provider = o_.provider, .node_address = o_.bind_address},
                                     fabric::OfiOptions{.max_multi_recv_message = proto::kMaxMessage}));
  const std::string name = "node" + std::to_string(o_.id);
  node_ex_ = rt_.CreateExecutor(name);
  control_ex_ = rt_.CreateExecutor(name + "/control");
  SLIP_ASSIGN_OR_RETURN(auto ep, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = name}));
  SLIP_ASSIGN_OR_RETURN(keys_, OpenProcessKeys(o_.dir, o_.secret_file, control_ex_));
  SLIP_ASSIGN_OR_RETURN(channel_, OpenServingChannel(node_ex_, std::move(ep), keys_));
  peers_ =
      std::make_unique<rpc::RpcPeers>(channel_.get(), node_ex_, rpc::RpcChannel::CallOptions{.timeout = o_.lease / 2});
  membership_ = std::make_unique<Membership>(config_store_.get(), control_ex_, o_.lease);
  server_ = std::make_unique<server::RubbleServer>(server::RubbleServerEnv{
      .self = o_.id,
      .exec = node_ex_,
      .calls = peers_.get(),
      .dir = data,
      .set_peers =
          [this](const ClusterConfig& c) {
            std::map<rpc::NodeId, std::string> hex;
            for (const auto& [id, info] : c.nodes) hex[id] = info.address;
            peers_->SetAddresses(hex);
          },
      .mark_synced = [this](cluster::ShardId shard, uint32_t node) { MarkSynced(shard, node); },
      .lease_left = [this] { return membership_->lease_expiry() - MachineNow(); },
      .fatal = [this](Status s) { Finish(std::move(s)); },
      .all_compact = vc.config.design == "rubble-all-compact",
  });
  design_ = vc.config.design;
  channel_->SetHandler([this](uint16_t method, std::span<const std::byte> payload, rpc::RpcChannel::Reply reply) {
    if (method == static_cast<uint16_t>(proto::Method::kStats)) return Stats(std::move(reply));
    server_->Handle(method, payload, std::move(reply));
  });

  const std::string address = rpc::RpcPeers::HexEncode(channel_->address());
  const std::string holder = "node-" + std::to_string(o_.id) + "-pid" + std::to_string(getpid());
  // Back after it was declared failed, it holds its lease before it lists
  // itself up: the manager, which probes the lease of every node listed
  // up, then never finds it dead in between (as Node does).
  const bool lease_first = me->second.state == cluster::NodeState::kDown;
  SLIP_RETURN_IF_ERROR(membership_->UpdateHoldingLease(cluster::NodeLeaseName(o_.id), holder, lease_first,
                                                       [&](const ClusterConfig& c) -> Result<ClusterConfig> {
    bool sole_copy_now = false;
    for (const auto& s : c.shards) sole_copy_now |= s.primary == o_.id;
    const bool down = c.nodes.at(o_.id).state == cluster::NodeState::kDown;
    // Declared failed while starting, with data: start over empty.
    if (down && !replaced && !sole_copy_now && !empty) return Status::Aborted(kReplacedWhileStarting);
    ClusterConfig next;
    if (down && (replaced || !sole_copy_now)) {
      SLIP_ASSIGN_OR_RETURN(next, cluster::Rejoin(c, o_.id));
    } else {
      ClusterConfig up = c;
      if (down) {
        SLIP_ASSIGN_OR_RETURN(up, cluster::ReturnWithData(c, o_.id));
      }
      SLIP_ASSIGN_OR_RETURN(next, cluster::Resync(up, o_.id));
    }
    next.nodes[o_.id].address = address;
    next.nodes[o_.id].workers.clear();  // one entry: the address (cluster::NodeInfo::workers)
    return next;
  }));
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig now, config_store_->Load());
  const auto listed = now.config.nodes.find(o_.id);
  if (listed == now.config.nodes.end()) {
    return Status::InvalidArgument("node " + std::to_string(o_.id) + " is no longer a member of the cluster");
  }
  if (listed->second.state == cluster::NodeState::kDown) return Status::Aborted(kReplacedWhileStarting);
  SLIP_RETURN_IF_ERROR(rt_.Start());
  node_ex_->Post([this, c = now.config] { server_->Adopt(c); });
  membership_->KeepAlive([this](Status) { Finish(Status::Aborted(kLostLease)); });
  membership_->Watch(now.version, [this](const cluster::VersionedConfig& newer) {
    if (auto end = EndedBy(newer.config, o_.id)) return Finish(*end);
    node_ex_->Post([this, c = newer.config] { server_->Adopt(c); });
  });
  logging::Info("{}", "rubble node serving at " + address + " (" + o_.provider + "), term " +
                          std::to_string(now.config.term));
  return Status::Ok();
}

void RubbleNode::MarkSynced(cluster::ShardId shard, uint32_t node) {
  control_ex_->Post([this, shard, node] {
    Status s = membership_->Update([&](const ClusterConfig& c) -> Result<ClusterConfig> {
      const auto& sync = c.shards.at(shard).syncing;
      // Synced already, or no longer a replica (it failed meanwhile): no change.
      if (std::find(sync.begin(), sync.end(), node) == sync.end()) return Status::Aborted(kNoChange);
      return cluster::MarkSynced(c, shard, node);
    });
    if (!s.ok() && s.message() != kNoChange) {
      logging::Warn("shard {}: recording node {} as synced: {}", shard, node, s.ToString());
    }
  });
}

void RubbleNode::Stats(rpc::RpcChannel::Reply reply) {
  const server::PoolNode::Counters st = server_->counters();
  const server::RubbleServer::Cpu cpu = server_->cpu();
  const nlohmann::json j = {
      {"node", o_.id},
      {"design", design_},
      {"auth", AuthJson(keys_)},
      {"rpc", RpcJson({channel_->counters()})},
      {"cpu_ns",
       {{"worker", node_ex_->CpuTime() + cpu.writers_ns},
        {"backup_worker", cpu.apply_ns},
        {"nic", 0},
        {"control", control_ex_->CpuTime()},
        {"digest", 0},
        // The LSM's background work (as a log store's cleaner): flushes
        // and compactions, the head's shipping included.
        {"clean", cpu.flush_ns + cpu.compaction_ns},
        {"flush", cpu.flush_ns},
        {"compaction", cpu.compaction_ns}}},
      {"gets", st.gets},
      {"writes", st.writes},
      {"serving_term", server_->serving_term()},
  };
  reply(Code::kOk, j.dump());
}

}  // namespace

Result<std::unique_ptr<NodeProcess>> StartRubbleNode(const NodeOptions& options) {
  return BootUntilNotReplaced<RubbleNode>(options);
}

}  // namespace slip::node
