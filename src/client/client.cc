// slip::Client (include/slip/client.h): ClientCore over an RpcChannel, on
// one executor thread; routing tables come from the configuration store.
#include "slip/client.h"

#include <future>

#include "client/client_core.h"
#include "auth/key_source.h"
#include "client/erda_path.h"
#include "fabric/fabric.h"
#include "fabric/ofi/ofi_fabric.h"
#include "cluster/config_access.h"
#include "rpc/rpc_peers.h"
#include "proto/kv.h"
#include "rpc/channel.h"
#include "runtime/thread_runtime.h"

namespace slip {
namespace {

class StoreRouting final : public client::RoutingSource {
 public:
  StoreRouting(cluster::ConfigStore* store, runtime::Executor* exec, rpc::RpcPeers* peers)
      : store_(store), exec_(exec), peers_(peers) {}
  void Fetch(uint64_t, std::function<void(Result<client::RoutingTable>)> done) override {
    // A file read or a ZooKeeper round trip; short enough to do here, but
    // the answer must come later than the call.
    auto c = store_->Load();
    exec_->Post([this, c = std::move(c), done = std::move(done)]() mutable {
      if (!c.ok()) return done(c.status());
      std::map<uint32_t, std::vector<std::string>> entries;
      for (const auto& [id, info] : c->config.nodes) entries[id] = info.Entries();
      peers_->SetEntries(entries, c->config.num_shards());
      done(cluster::RoutingFromConfig(c->config));
    });
  }

 private:
  cluster::ConfigStore* store_;
  runtime::Executor* exec_;
  rpc::RpcPeers* peers_;
};

class ClientImpl final : public Client {
 public:
  ~ClientImpl() override {
    rt_.Stop();
  }

  Status Init(const ClientOptions& o) {
    SLIP_ASSIGN_OR_RETURN(store_, cluster::OpenConfigStore(o.dir, o.zookeeper));
    std::string provider = o.provider;
    bool direct = false;
    {
      auto c = store_->Load();
      if (!c.ok() && !c.status().Is(Code::kNotFound)) return c.status();
      if (provider.empty()) provider = c.ok() ? c->config.provider : "tcp";
      direct = c.ok() && cluster::DirectAccessOf(c->config.design).any();
    }
    SLIP_ASSIGN_OR_RETURN(fabric_, fabric::OpenOfiFabric(fabric::FabricOptions{.provider = provider, .node_address = o.bind_address},
                                                         fabric::OfiOptions{.max_multi_recv_message = proto::kMaxMessage}));
    exec_ = rt_.CreateExecutor("client");
    SLIP_ASSIGN_OR_RETURN(keys_, auth::OpenClusterKeys(o.dir, o.secret_file));
    auth::KeySource::Watch(keys_, exec_);
    SLIP_ASSIGN_OR_RETURN(auto ep, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = "client"}));
    fabric::Endpoint* raw = ep.get();
    rpc::ChannelOptions chan;
    chan.max_payload = proto::kMaxMessage - 64;
    chan.max_call_payload = proto::kMaxCallPayload;
    chan.recv_buffer_bytes = 1 << 20;
    chan.keys = keys_;
    SLIP_ASSIGN_OR_RETURN(channel_, rpc::RpcChannel::Open(exec_, std::move(ep), chan));
    if (raw->wait_fd() >= 0) exec_->AddWaitFd(raw->wait_fd(), [raw] { return raw->CanBlock(); }, raw->wait_fd_sees_all());
    peers_ = std::make_unique<rpc::RpcPeers>(channel_.get(), exec_,
                                              rpc::RpcChannel::CallOptions{.timeout = runtime::kSecond});
    routing_ = std::make_unique<StoreRouting>(store_.get(), exec_, peers_.get());
    client::CoreOptions co;
    co.op_deadline = std::chrono::duration_cast<std::chrono::nanoseconds>(o.deadline).count();
    core_ = std::make_unique<client::ClientCore>(peers_.get(), routing_.get(), exec_, co);
    if (direct) {
      // The erda design: one-sided READs and WRITEs at the primaries, on an
      // endpoint of their own polled by the same executor.
      SLIP_ASSIGN_OR_RETURN(direct_ep_, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = "client/direct"}));
      fabric::Endpoint* d = direct_ep_.get();
      erda_ = std::make_unique<client::ErdaPath>(peers_.get(), d, exec_, client::ErdaPathOptions{.limits = co.limits});
      core_->set_direct_path(erda_.get());
      exec_->AddPoller([p = erda_.get()] { return p->Poll(); });
      if (d->wait_fd() >= 0) exec_->AddWaitFd(d->wait_fd(), [d] { return d->CanBlock(); }, d->wait_fd_sees_all());
    }
    return rt_.Start();
  }

  Status Put(std::string_view key, std::string_view value) override {
    std::promise<Status> p;
    PutAsync(std::string(key), std::string(value), [&](Status s) { p.set_value(std::move(s)); });
    return p.get_future().get();
  }
  Result<std::string> Get(std::string_view key) override {
    std::promise<Result<std::string>> p;
    GetAsync(std::string(key), [&](Result<std::string> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }
  Status Delete(std::string_view key) override {
    std::promise<Status> p;
    DeleteAsync(std::string(key), [&](Status s) { p.set_value(std::move(s)); });
    return p.get_future().get();
  }
  void PutAsync(std::string key, std::string value, std::function<void(Status)> done) override {
    exec_->Post([this, key = std::move(key), value = std::move(value), done = std::move(done)]() mutable {
      core_->Put(std::move(key), std::move(value), [done = std::move(done)](Result<uint64_t> r) {
        done(r.ok() ? Status::Ok() : r.status());
      });
    });
  }
  Result<bool> PutIf(std::string_view key, std::string_view value, Condition condition) override {
    std::promise<Result<bool>> p;
    PutIfAsync(std::string(key), std::string(value), condition, [&](Result<bool> r) { p.set_value(std::move(r)); });
    return p.get_future().get();
  }
  void PutIfAsync(std::string key, std::string value, Condition condition,
                  std::function<void(Result<bool>)> done) override {
    const auto c = condition == Condition::kIfAbsent ? proto::PutCondition::kIfAbsent : proto::PutCondition::kIfPresent;
    exec_->Post([this, key = std::move(key), value = std::move(value), c, done = std::move(done)]() mutable {
      core_->PutIf(std::move(key), std::move(value), c, [done = std::move(done)](Result<uint64_t> r) {
        if (!r.ok()) return done(r.status());
        done(*r != 0);
      });
    });
  }
  void GetAsync(std::string key, std::function<void(Result<std::string>)> done) override {
    exec_->Post([this, key = std::move(key), done = std::move(done)]() mutable {
      core_->Get(std::move(key), std::move(done));
    });
  }
  Result<std::vector<std::string>> NodeStats() override {
    SLIP_ASSIGN_OR_RETURN(auto answers, AskStats(/*up_only=*/true));
    std::vector<std::string> out;
    for (auto& a : answers) {
      if (!a.stats.ok()) return a.stats.status();
      out.push_back(std::move(*a.stats));
    }
    return out;
  }
  Result<std::vector<NodeAnswer>> NodeStatsEach() override { return AskStats(/*up_only=*/false); }
  uint64_t RoundTrips() override {
    std::promise<uint64_t> p;
    exec_->Post([&] {
      const auto& c = core_->counters();
      p.set_value(c.attempts - c.direct_attempts + (erda_ ? erda_->stats().round_trips : 0));
    });
    return p.get_future().get();
  }
  Sent RpcSent() override {
    std::promise<Sent> p;
    exec_->Post([&] { p.set_value(Sent{channel_->counters().frames_sent, channel_->counters().messages_sent}); });
    return p.get_future().get();
  }
  void DeleteAsync(std::string key, std::function<void(Status)> done) override {
    exec_->Post([this, key = std::move(key), done = std::move(done)]() mutable {
      core_->Delete(std::move(key), std::move(done));
    });
  }

 private:
  // STATS of the nodes (those up, or every configured one) and a pool
  // design's pool (as a peer id no node has: node ids of pool designs stop
  // at cluster::kMaxPoolNodeId), one after another.
  Result<std::vector<NodeAnswer>> AskStats(bool up_only) {
    SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig c, store_->Load());
    std::map<uint32_t, std::vector<std::string>> addrs;
    for (const auto& [n, i] : c.config.nodes) addrs[n] = i.Entries();
    std::vector<uint32_t> ask;
    for (const auto& [id, info] : c.config.nodes) {
      if (!up_only || info.state == cluster::NodeState::kUp) ask.push_back(id);
    }
    if (!c.config.pool.empty()) {
      addrs[kPoolStatsId] = {c.config.pool};
      ask.push_back(kPoolStatsId);
    }
    std::vector<NodeAnswer> out;
    for (const uint32_t id : ask) {
      std::promise<Result<rpc::PeerResponse>> p;
      exec_->Post([&, id, addrs] {
        peers_->SetEntries(addrs, c.config.num_shards());
        peers_->Call(id, static_cast<uint16_t>(proto::Method::kStats), {},
                     [&](Result<rpc::PeerResponse> r) { p.set_value(std::move(r)); });
      });
      auto r = p.get_future().get();
      const std::string who = id == kPoolStatsId ? std::string("the pool") : "node " + std::to_string(id);
      NodeAnswer a{.node = id};
      if (!r.ok()) {
        a.stats = Status(r.status().code(), who + ": " + r.status().message());
      } else if (r->status != Code::kOk) {
        a.stats = Status(r->status, who + " refused STATS");
      } else {
        a.stats = std::move(r->payload);
      }
      out.push_back(std::move(a));
    }
    return out;
  }

  std::unique_ptr<cluster::ConfigStore> store_;
  std::unique_ptr<fabric::Fabric> fabric_;
  // Few spin turns: several node processes share a few cores here, and a
  // spinning idle executor steals the CPU its peers need; idle ones park on
  // the fabric's wait fd.
  runtime::ThreadRuntime rt_{runtime::ThreadRuntimeOptions{.seed = 1, .spin_turns = 8, .max_park = runtime::kMillisecond}};
  runtime::Executor* exec_ = nullptr;
  std::shared_ptr<auth::KeySource> keys_;  // null: the cluster has no secret
  std::unique_ptr<rpc::RpcChannel> channel_;
  std::unique_ptr<rpc::RpcPeers> peers_;
  std::unique_ptr<StoreRouting> routing_;
  std::unique_ptr<client::ClientCore> core_;
  std::unique_ptr<fabric::Endpoint> direct_ep_;
  std::unique_ptr<client::ErdaPath> erda_;
};

}  // namespace

Result<std::unique_ptr<Client>> Client::Open(const ClientOptions& options) {
  auto c = std::make_unique<ClientImpl>();
  SLIP_RETURN_IF_ERROR(c->Init(options));
  return std::unique_ptr<Client>(std::move(c));
}

}  // namespace slip
