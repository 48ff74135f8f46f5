#include "node/pool_process.h"

#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "cluster/config_access.h"
#include "common/log.h"
#include "dinomo/clover.h"
#include "dinomo/pool.h"
#include "dinomo/pool_server.h"
#include "dinomo/partitioned_pool.h"
#include "fabric/ofi/ofi_fabric.h"
#include "node/membership.h"
#include "node/outcome.h"
#include "node/node_process.h"
#include "pm/region.h"
#include "proto/kv.h"
#include "rpc/channel.h"
#include "rpc/rpc_peers.h"
#include "runtime/thread_runtime.h"

namespace slip::node {
namespace {

namespace fs = std::filesystem;


class Pool final : public PoolProcess {
 public:
  explicit Pool(PoolProcessOptions o) : o_(std::move(o)) {}
  ~Pool() override {
    Stop();
    rt_.Stop();
    config_store_.reset();  // its watcher thread posts to control_ex_
  }

  Status Boot();
  Status Wait() override { return outcome_.Wait(); }
  void Stop() override { Finish(Status::Ok()); }

 private:
  void Finish(Status s) { outcome_.Finish(std::move(s)); }
  // STATS: the pool's CPU (its serving thread: the POOL_* calls and every
  // merge) and its counters, for the benchmarks' per-role report.
  void Stats(const rpc::RpcChannel::Reply& reply) {
    const dinomo::PoolStats st = pool_ ? pool_->stats() : dinomo::PoolStats{};
    const nlohmann::json j = {
        {"node", "pool"},
        {"design", design_},
      {"auth", AuthJson(keys_)},
      {"rpc", RpcJson({channel_->counters()})},
        {"chain_advances", chain_advances_},
        {"partitions", partitions_ ? partitions_->partitions() : 0},
        {"adopted_keys", partitions_ ? partitions_->adopted_keys() : 0},
        {"adopted_bytes", partitions_ ? partitions_->adopted_bytes() : 0},
        {"cpu_ns", {{"pool", pool_ex_->CpuTime()}, {"control", control_ex_->CpuTime()}}},
        {"merged_entries", st.merged_entries},
        {"freed_segments", st.freed_segments},
        {"open_segments", st.open_segments},
        {"index_grows", pool_ ? pool_->index_grows() : 0},
    };
    reply(Code::kOk, j.dump());
  }

  // Clover's metadata server (dinomo/clover.h): its GC pass moves every
  // chain's index pointer to the newest version, every kAdvanceEvery, on
  // the executor CLOVER_INSERT runs on. A pass reads the whole index (32 MB
  // for a 1 GB pool): more often costs the pool's CPU more than the
  // shorter chains save.
  static constexpr runtime::Nanos kAdvanceEvery = 250 * runtime::kMillisecond;
  void AdvanceChains() {
    auto moved = dinomo::AdvanceChains(*pool_, *region_);
    if (moved.ok()) {
      chain_advances_ += *moved;
    } else {
      logging::Warn("{}", "advancing Clover's chains: " + moved.status().ToString());
    }
    pool_ex_->After(kAdvanceEvery, [this] { AdvanceChains(); });
  }

  PoolProcessOptions o_;
  std::string design_;
  std::string pm_class_;

  uint64_t chain_advances_ = 0;  // pool executor only
  std::unique_ptr<cluster::ConfigStore> config_store_;
  std::unique_ptr<pm::PmRegion> region_;
  std::unique_ptr<dinomo::Pool> pool_;
  std::unique_ptr<fabric::Fabric> fabric_;
  runtime::ThreadRuntime rt_{runtime::ThreadRuntimeOptions{.seed = 1, .spin_turns = 8, .max_park = runtime::kMillisecond}};
  runtime::Executor* pool_ex_ = nullptr;
  runtime::Executor* control_ex_ = nullptr;
  std::shared_ptr<auth::KeySource> keys_;  // null: no cluster secret
  std::unique_ptr<rpc::RpcChannel> channel_;
  std::unique_ptr<dinomo::PoolServer> server_;
  // DINOMO-N: a partition per KVS node (dinomo/partitioned_pool.h). After
  // the channel, which owns the endpoint its servers registered on: gone
  // before it.
  std::unique_ptr<dinomo::PartitionedPool> partitions_;  // pool executor only
  std::unique_ptr<Membership> membership_;

  Outcome outcome_;
};

Status Pool::Boot() {
  SLIP_ASSIGN_OR_RETURN(config_store_, cluster::OpenConfigStore(o_.dir, o_.zookeeper));
  SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig vc, cluster::LoadWhenPresent(config_store_.get(), 60 * runtime::kSecond));
  if (!cluster::UsesPool(vc.config.design)) {
    return Status::InvalidArgument("the cluster's design " + vc.config.design + " keeps no data in a pool");
  }
  design_ = vc.config.design;
  if (o_.segment_mb == 0 || o_.pool_mb < 4 * o_.segment_mb) {
    return Status::InvalidArgument("the pool needs room for at least 4 segments: --pool-mb " + std::to_string(o_.pool_mb) +
                                   ", --segment-mb " + std::to_string(o_.segment_mb));
  }
  // The lease first: one pool process at a time may touch the region (a
  // second one opening it would rebuild and free segments under the first).
  control_ex_ = rt_.CreateExecutor("pool/control");
  membership_ = std::make_unique<Membership>(config_store_.get(), control_ex_, o_.lease);
  SLIP_RETURN_IF_ERROR(membership_->Acquire(kPoolLease, "pool-pid" + std::to_string(getpid())));
  SLIP_ASSIGN_OR_RETURN(const PmPlace place, PlacePm(vc.config.pm, o_.dir, std::string("pool")));
  dinomo::PoolOptions po;
  po.segment_bytes = o_.segment_mb << 20;
  // About one home bucket per 2 KB of region: buckets hold 3 keys, so a
  // region full of ~1 KB entries loads the index to two thirds.
  po.num_buckets = 1024;
  while (po.num_buckets < (o_.pool_mb << 20) / 2048 && po.num_buckets < (1u << 30)) po.num_buckets <<= 1;
  pm_class_ = vc.config.pm;
  // DINOMO-N keeps everything in per-node partitions (below): no shared pool.
  if (design_ != "dinomo-n") {
    SLIP_ASSIGN_OR_RETURN(region_, OpenPm(place, o_.pool_mb << 20));
    SLIP_ASSIGN_OR_RETURN(pool_, dinomo::Pool::Open(region_.get(), po));
    const dinomo::PoolStats st = pool_->stats();
    logging::Info("pool: {} class, {} ({} segments of {} MB, {} open)", place.pm_class, place.path, st.segments,
                  pool_->segment_bytes() >> 20, st.open_segments);
  }

  SLIP_ASSIGN_OR_RETURN(fabric_, fabric::OpenOfiFabric(
                                     fabric::FabricOptions{.provider = vc.config.provider, .node_address = o_.bind_address},
                                     fabric::OfiOptions{.max_multi_recv_message = proto::kMaxMessage}));
  pool_ex_ = rt_.CreateExecutor("pool");
  SLIP_ASSIGN_OR_RETURN(auto ep, fabric_->CreateEndpoint(fabric::EndpointOptions{.name = "pool"}));
  fabric::Endpoint* raw = ep.get();
  if (pool_) {
    SLIP_ASSIGN_OR_RETURN(server_, dinomo::PoolServer::Create(pool_.get(), region_.get(), raw));
  }
  if (design_ == "dinomo-n") {
    partitions_ = std::make_unique<dinomo::PartitionedPool>(
        [this](uint32_t node) -> Result<std::unique_ptr<pm::PmRegion>> {
          SLIP_ASSIGN_OR_RETURN(const PmPlace part, PlacePm(pm_class_, o_.dir, "pool-n" + std::to_string(node)));
          logging::Info("partition of node {}: {}", node, part.path);
          return OpenPm(part, o_.pool_mb << 20);
        },
        po, raw);
    // Every partition there is: a source of its shards' data for POOL_ADOPT.
    const fs::path parts = fs::path(place.path).parent_path().parent_path();
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(parts, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("pool-n", 0) != 0 || name.size() == 6) continue;
      const std::string id = name.substr(6);
      if (id.find_first_not_of("0123456789") != std::string::npos || id.size() > 6) continue;
      SLIP_RETURN_IF_ERROR(partitions_->Open(static_cast<uint32_t>(std::stoul(id))));
    }
  }
  SLIP_ASSIGN_OR_RETURN(keys_, OpenProcessKeys(o_.dir, o_.secret_file, control_ex_));
  SLIP_ASSIGN_OR_RETURN(channel_, OpenServingChannel(pool_ex_, std::move(ep), keys_));
  channel_->SetHandler([this](uint16_t method, std::span<const std::byte> payload, rpc::RpcChannel::Reply reply) {
    if (method == static_cast<uint16_t>(proto::Method::kStats)) return Stats(reply);
    if (partitions_) return partitions_->Handle(method, payload, reply);
    server_->Handle(method, payload, reply);
  });

  const std::string address = rpc::RpcPeers::HexEncode(channel_->address());
  SLIP_RETURN_IF_ERROR(membership_->Update([&](const cluster::ClusterConfig& c) -> Result<cluster::ClusterConfig> {
    cluster::ClusterConfig next = c;
    next.pool = address;
    ++next.term;
    return next;
  }));
  // Opening a large region takes a while: renew (same holder) before the
  // renewals start, so they do not find it expired.
  SLIP_RETURN_IF_ERROR(membership_->Acquire(kPoolLease, "pool-pid" + std::to_string(getpid())));
  SLIP_RETURN_IF_ERROR(rt_.Start());
  if (design_ == "clover") pool_ex_->Post([this] { AdvanceChains(); });
  membership_->KeepAlive([this](Status s) { Finish(std::move(s)); });
  logging::Info("{}", "pool serving at " + address + " (" + vc.config.provider + ")");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<PoolProcess>> PoolProcess::Start(const PoolProcessOptions& options) {
  auto p = std::make_unique<Pool>(options);
  SLIP_RETURN_IF_ERROR(p->Boot());
  return std::unique_ptr<PoolProcess>(std::move(p));
}

}  // namespace slip::node
