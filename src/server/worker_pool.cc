#include "server/worker_pool.h"

#include <string>

#include "proto/kv.h"
#include "runtime/cost.h"

namespace slip::server {

WorkerPool::WorkerPool(std::vector<Worker> workers, log::Limits limits, uint32_t num_shards,
                       std::function<bool()> alive)
    : workers_(std::move(workers)), limits_(limits), num_shards_(num_shards), alive_(std::move(alive)) {}

namespace {

// The shard a decoded request names; none if it did not decode.
template <typename Request>
std::optional<uint32_t> NamedShard(const Result<Request>& r) {
  if (!r.ok()) return std::nullopt;
  if constexpr (requires { r->kv.shard; }) {
    return r->kv.shard;  // PUT_IF
  } else if constexpr (requires { r->meta.shard; }) {
    return r->meta.shard;  // REPLICATE
  } else {
    return r->shard;
  }
}

}  // namespace

std::optional<uint32_t> WorkerPool::ShardOf(uint16_t method, std::span<const std::byte> payload) const {
  switch (static_cast<proto::Method>(method)) {
    case proto::Method::kPut:
    case proto::Method::kDel:
    case proto::Method::kGet:
      return NamedShard(proto::DecodeKvRequest(payload, limits_));
    case proto::Method::kPutIf:
      return NamedShard(proto::DecodePutIfRequest(payload, limits_));
    case proto::Method::kErdaGrant:
      return NamedShard(proto::DecodeErdaGrantRequest(payload));
    case proto::Method::kErdaReserve:
      return NamedShard(proto::DecodeErdaReserveRequest(payload, limits_));
    case proto::Method::kErdaCommit:
      return NamedShard(proto::DecodeErdaCommitRequest(payload, limits_));
    case proto::Method::kReplicate:
      return NamedShard(proto::DecodeReplicateRequest(payload, limits_));
    default:
      return std::nullopt;
  }
}

void WorkerPool::Handle(size_t arrived, uint16_t method, std::span<const std::byte> payload, NodeCore::Reply reply) {
  runtime::Charge(runtime::Cost::kRequest, payload.size());
  if (static_cast<proto::Method>(method) == proto::Method::kGet) {
    return workers_[arrived].core->Handle(method, payload, std::move(reply));
  }
  const std::optional<uint32_t> shard = workers_.size() > 1 ? ShardOf(method, payload) : std::nullopt;
  const size_t w = shard ? WorkerOf(*shard) : 0;
  if (w == arrived) return workers_[w].core->Handle(method, payload, std::move(reply));
  hopped_.fetch_add(1, std::memory_order_relaxed);
  // The payload dies with this call; the reply must leave from the
  // executor of the entry it came in at.
  runtime::Executor* home = workers_[arrived].exec;
  workers_[w].exec->Post([core = workers_[w].core, home, method, alive = alive_,
                          body = std::string(reinterpret_cast<const char*>(payload.data()), payload.size()),
                          reply = std::move(reply)]() mutable {
    if (alive && !alive()) return;
    core->Handle(method, proto::AsBytes(body),
                 [home, alive, reply = std::move(reply)](Code c, std::string p) mutable {
                   home->Post([alive, reply = std::move(reply), c, p = std::move(p)]() mutable {
                     if (alive && !alive()) return;
                     reply(c, std::move(p));
                   });
                 });
  });
}

void WorkerPool::ForEach(std::function<void(size_t)> fn, std::function<void()> done) {
  auto left = std::make_shared<size_t>(workers_.size());
  auto f = std::make_shared<std::function<void(size_t)>>(std::move(fn));
  auto d = std::make_shared<std::function<void()>>(std::move(done));
  runtime::Executor* home = workers_[0].exec;
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i].exec->Post([i, f, d, left, home] {
      (*f)(i);
      // `left` is only touched on home.
      home->Post([d, left] {
        if (--*left == 0) (*d)();
      });
    });
  }
}

}  // namespace slip::server
