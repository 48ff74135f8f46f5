#include "dinomo/testing/sim_pool.h"

#include "proto/kv.h"
#include "proto/pool.h"

namespace slip::dinomo::testing {

SimPool::SimPool(runtime::SimRuntime& rt, uint64_t region_bytes, const PoolOptions& options,
                 const fabric::SimFabricOptions& fabric, const pm::RegionOptions& region)
    : rt_(rt), options_(options) {
  region_ = std::move(pm::PmRegion::Anonymous(static_cast<size_t>(region_bytes), region)).value();
  pool_ = std::move(Pool::Open(region_.get(), options)).value();
  fabric_ = std::make_unique<fabric::SimFabric>(rt_, fabric);
  pool_exec_ = rt_.CreateExecutor("pool");
  pool_ep_ = std::move(fabric_->CreateEndpoint(kPoolId, pool_exec_, {})).value();
  server_ = std::move(PoolServer::Create(pool_.get(), region_.get(), pool_ep_.get())).value();
  // The pool's side of the nodes' one-sided operations.
  pool_exec_->AddPoller([ep = pool_ep_.get()] {
    fabric::Completion c[8];
    return ep->Poll(c) > 0;
  });
}

SimPool::Node& SimPool::AddNode(const KvsNodeOptions& options, std::function<void(Status)> started) {
  Node& n = nodes_.emplace_back();
  n.exec = rt_.CreateExecutor("kn" + std::to_string(options.node));
  n.ep = std::move(fabric_->CreateEndpoint(options.node, n.exec, {})).value();
  n.calls = CallerFor(n.exec);
  n.node = std::make_unique<KvsNode>(n.exec, n.ep.get(), n.calls.get(), kPoolId, options);
  KvsNode* node = n.node.get();
  n.poller = n.exec->AddPoller([node] { return node->Poll(); });
  n.exec->Post([node, started = std::move(started)]() mutable {
    node->Start([started = std::move(started)](Status s) {
      if (started) started(s);
    });
  });
  return n;
}

std::unique_ptr<rpc::LocalCaller> SimPool::CallerFor(runtime::Executor* exec) {
  return std::make_unique<rpc::LocalCaller>(
      exec, pool_exec_, [this](uint16_t method, std::span<const std::byte> payload, rpc::LocalCaller::Reply reply) {
        Handle(method, payload, reply);  // the server of now: RestartPool replaces it
      });
}

void SimPool::PartitionPerNode(uint64_t partition_bytes) {
  partitions_ = std::make_unique<PartitionedPool>(
      [partition_bytes](uint32_t) { return pm::PmRegion::Anonymous(static_cast<size_t>(partition_bytes), {}); },
      options_, pool_ep_.get());
}

void SimPool::Handle(uint16_t method, std::span<const std::byte> payload, const PoolServer::Reply& reply) {
  if (partitions_) return partitions_->Handle(method, payload, reply);
  server_->Handle(method, payload, reply);
}

void SimPool::RestartPool() {
  server_.reset();
  pool_ = std::move(Pool::Open(region_.get(), options_)).value();
  server_ = std::move(PoolServer::Create(pool_.get(), region_.get(), pool_ep_.get())).value();
}

void SimPool::AttachTo(rpc::LocalNetwork& net) {
  net.Attach(kPoolId, pool_exec_,
             [this](uint16_t method, std::span<const std::byte> payload, rpc::LocalNetwork::Reply reply) {
               Handle(method, payload, reply);
             });
}

void SimPool::Kill(Node& n) {
  if (!n.node) return;
  n.exec->RemovePoller(n.poller);
  n.ep.reset();
  n.node.reset();
}

Status SimPool::FenceAndMerge(uint32_t node, uint64_t epoch) {
  Status result = Status::Aborted("no answer");
  Handle(static_cast<uint16_t>(proto::Method::kPoolMergeAll), proto::AsBytes(proto::Encode(
                                                                           proto::PoolNodeRequest{node, epoch})),
                  [&](Code c, std::string p) { result = c == Code::kOk ? Status::Ok() : Status(c, p); });
  return result;
}

}  // namespace slip::dinomo::testing
