#include "server/clover_server.h"

#include <algorithm>

#include "common/hash.h"
#include "common/log.h"
#include "proto/kv.h"
#include "server/commit_tracker.h"

namespace slip::server {

CloverServer::~CloverServer() = default;

void CloverServer::Adopt(const cluster::ClusterConfig& config) {
  if (config.term <= config_.term) return;
  config_ = config;
  if (env_.settled) env_.settled(config_);
  if (restarting_) return;  // Restart looks at config_ when it starts the node
  if (node_ == nullptr || config_.pool != pool_) {
    serving_ = false;
    restarting_ = true;
    return Restart(0);
  }
}

void CloverServer::Restart(int waited_ms) {
  if (node_ != nullptr && !node_->Idle()) {
    if (waited_ms > 10000) return env_.fatal(Status::Aborted("the data path did not drain in 10 s"));
    env_.exec->After(runtime::kMillisecond, [this, life = std::weak_ptr<int>(life_), waited_ms] {
      if (!life.expired()) Restart(waited_ms + 1);
    });
    return;
  }
  node_.reset();
  if (config_.pool.empty()) {
    restarting_ = false;  // the pool has not published its address yet: a later
                          // configuration will
    return;
  }
  env_.set_peers(config_);
  pool_ = config_.pool;
  dinomo::CloverNodeOptions o = env_.node;
  o.node = env_.self;
  o.epoch = config_.term;  // its token with the pool: a later start voids an
                           // earlier one's
  node_ = std::make_unique<dinomo::CloverNode>(env_.exec, env_.data, env_.calls, env_.pool_peer, o);
  node_->Start([this, life = std::weak_ptr<int>(life_), term = config_.term](Status s) {
    if (life.expired()) return;
    if (!s.ok()) {
      logging::Warn("{}", "the pool refused to start the node in term " + std::to_string(term) + ": " + s.ToString() +
                              "; trying again");
      env_.exec->After(retry_ms_ * runtime::kMillisecond, [this, life] {
        if (!life.expired()) Restart(0);
      });
      retry_ms_ = std::min<int64_t>(2 * retry_ms_, 2000);
      return;
    }
    retry_ms_ = 50;
    restarting_ = false;
    if (config_.pool != pool_) return Restart(0);  // the pool moved meanwhile
    serving_ = true;
    logging::Info("serving any key in term {}", config_.term);
  });
}

void CloverServer::Refuse(const Reply& reply, const Status& s) const {
  reply(s.code(), proto::Encode(proto::KvResponse{config_.term, 0, s.message()}));
}

PoolNode::Counters CloverServer::counters() const {
  if (node_ == nullptr) return {};
  const dinomo::CloverNodeStats& st = node_->stats();
  return Counters{st.gets, st.writes, st.round_trips_per_op(), 0, 0, 0, 0};
}

void CloverServer::Handle(uint16_t method, std::span<const std::byte> payload, Reply reply) {
  const auto m = static_cast<proto::Method>(method);
  if (m == proto::Method::kPutIf) {
    return Refuse(reply, Status::NotSupported("conditional writes (SET NX/XX) are not supported by a clover node"));
  }
  if (m != proto::Method::kPut && m != proto::Method::kGet && m != proto::Method::kDel) {
    return Refuse(reply, Status::InvalidArgument("a clover node does not serve method " + std::to_string(method)));
  }
  auto req = proto::DecodeKvRequest(payload, env_.node.limits);
  if (!req.ok()) return Refuse(reply, req.status());
  if (IsReservedKey(req->key))
    return Refuse(reply, Status::InvalidArgument("keys beginning with \\0slip: are reserved"));
  if (!serving_) return Refuse(reply, Status::Unavailable("node " + std::to_string(env_.self) + " is starting"));
  if (req->term != config_.term || config_.num_shards() == 0 || req->shard != config_.ShardOf(HashKey(req->key))) {
    return Refuse(reply, Status::StaleTerm("request term " + std::to_string(req->term) + ", node term " +
                                           std::to_string(config_.term)));
  }
  window_.Record(env_.exec->Now(), req->key);
  ServeKv(*node_, m, *req, config_.term, std::move(reply));
}

}  // namespace slip::server
