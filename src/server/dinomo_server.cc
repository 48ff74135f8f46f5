#include "server/dinomo_server.h"

#include <algorithm>

#include "common/hash.h"
#include "common/log.h"
#include "proto/kv.h"
#include "proto/pool.h"
#include "server/commit_tracker.h"

namespace slip::server {

std::set<uint32_t> OwnedBy(const cluster::ClusterConfig& config, uint32_t node) {
  std::set<uint32_t> owned;
  for (uint32_t s = 0; s < config.num_shards(); ++s) {
    if (config.shards[s].primary == node) owned.insert(s);
  }
  return owned;
}

DinomoServer::DinomoServer(DinomoServerEnv env) : env_(std::move(env)), fresh_(env_.joined) {}

DinomoServer::~DinomoServer() = default;

void DinomoServer::Adopt(const cluster::ClusterConfig& config) {
  if (config.term <= config_.term) return;
  config_ = config;
  if (fresh_) Settle(config_);  // nothing written, nothing served
  // A reconfiguration under way looks at config_ again when it ends; if
  // it is past its own merge and runs no node, it serves nothing and has
  // nothing unmerged, so it is settled at the newer term already.
  if (!reconfiguring_) return Consider();
  SettleEarly();
}

void DinomoServer::SettleEarly() {
  // Nodes waiting on this one (a new member, say, still starting for the
  // term before) need not wait for it to start and stop again.
  if (node_ == nullptr && settled_term_ >= target_.term && config_.term > settled_term_) Settle(config_);
}

void DinomoServer::Consider() {
  // In place only for the very next term: a node that skipped terms cannot
  // tell whether its shards were someone else's in between (taken and given
  // back), and settling at the new term would then release a node that
  // served them meanwhile while this one still serves its old cache.
  if (serving_ && config_.term == serving_config_.term + 1 && OwnedBy(config_, env_.self) == owned_ &&
      config_.pool == serving_config_.pool && config_.shared == serving_config_.shared) {
    serving_config_ = config_;
    return Settle(config_);
  }
  Reconfigure();
}

void DinomoServer::Reconfigure() {
  if (!reconfiguring_) stopped_at_ = env_.exec->Now();
  reconfiguring_ = true;
  serving_ = false;
  target_ = config_;
  if (target_.term > kMaxEpoch) {
    logging::Error("{}", "term " + std::to_string(target_.term) + " is past the largest epoch versions can hold");
    return env_.fatal(Status::InvalidArgument("configuration term past the largest epoch"));
  }
  if (target_.pool.empty()) {
    // The pool has not published its address yet: a later configuration will.
    reconfiguring_ = false;
    return;
  }
  ++reconfigurations_;
  WaitIdle(0);
}

void DinomoServer::WaitIdle(int waited_ms) {
  if (node_ != nullptr && !node_->Idle()) {
    // Operations on the wire complete or fail within the fabric's timeouts;
    // one that never did would mix its completion with the next node's.
    if (waited_ms > 10000) return env_.fatal(Status::Aborted("the data path did not drain in 10 s"));
    env_.exec->After(runtime::kMillisecond, [this, life = std::weak_ptr<int>(life_), waited_ms] {
      if (!life.expired()) WaitIdle(waited_ms + 1);
    });
    return;
  }
  node_.reset();
  env_.set_peers(target_);
  MergeSelf();
}

void DinomoServer::MergeSelf() {
  const cluster::ClusterConfig c = target_;
  env_.calls->Call(env_.pool_peer, static_cast<uint16_t>(proto::Method::kPoolMergeAll),
                   proto::Encode(proto::PoolNodeRequest{env_.self, c.term}),
                   [this, life = std::weak_ptr<int>(life_), c](Result<rpc::PeerResponse> r) {
                     if (life.expired()) return;
                     if (!r.ok() || r->status != Code::kOk) {
                       logging::Warn("{}", "merging its own log failed (" +
                                               (r.ok() ? Status(r->status, r->payload).ToString() : r.status().ToString()) +
                                               "): trying again");
                       return Retry();
                     }
                     Settle(c);
                     SettleEarly();
                     logging::Debug("term {}: own log merged after {:.1f} ms", c.term,
                                    static_cast<double>(env_.exec->Now() - stopped_at_) / 1e6);
                     AwaitOthers();
                   });
}

void DinomoServer::Settle(const cluster::ClusterConfig& c) {
  if (c.term <= settled_term_) return;
  settled_term_ = c.term;
  std::vector<std::pair<uint64_t, Reply>> waiting;
  waiting.swap(releases_);
  for (auto& [term, reply] : waiting) {
    if (term <= settled_term_) {
      reply(Code::kOk, {});
    } else {
      releases_.emplace_back(term, std::move(reply));
    }
  }
  if (env_.settled) env_.settled(c);
}

void DinomoServer::Release(std::span<const std::byte> payload, Reply reply) {
  auto req = proto::DecodePoolNodeRequest(payload);
  if (!req.ok()) return reply(req.status().code(), req.status().message());
  if (req->epoch <= settled_term_) return reply(Code::kOk, {});
  // Bounded: askers retry on a timeout, so a node that never settles (cut
  // off) would otherwise pile their calls up.
  if (releases_.size() >= 256) {
    releases_.front().second(Code::kUnavailable, "too many waiting releases");
    releases_.erase(releases_.begin());
  }
  releases_.emplace_back(req->epoch, std::move(reply));
}

void DinomoServer::AwaitOthers() {
  const cluster::ClusterConfig& c = target_;
  auto waiting = std::make_shared<size_t>(0);
  auto failed = std::make_shared<bool>(false);
  std::vector<uint32_t> ask;
  for (const auto& [id, info] : c.nodes) {
    if (id != env_.self && info.state != cluster::NodeState::kDown) ask.push_back(id);
  }
  *waiting = ask.size();
  auto then = [this, c] {
    logging::Debug("term {}: every member released after {:.1f} ms", c.term,
                   static_cast<double>(env_.exec->Now() - stopped_at_) / 1e6);
    std::vector<uint32_t> merge;
    for (const auto& [id, info] : c.nodes) {
      if (info.state == cluster::NodeState::kDown) merge.push_back(id);
    }
    MergeNext(std::move(merge));
  };
  if (ask.empty()) return then();
  for (uint32_t id : ask) {
    env_.calls->Call(id, static_cast<uint16_t>(proto::Method::kKnRelease),
                     proto::Encode(proto::PoolNodeRequest{env_.self, c.term}),
                     [this, life = std::weak_ptr<int>(life_), id, waiting, failed, then](Result<rpc::PeerResponse> r) {
                       if (life.expired() || *failed) return;
                       if (!r.ok() || r->status != Code::kOk) {
                         // Dead, cut off or slow: its lease will run out and
                         // a newer configuration list it down (then merged).
                         *failed = true;
                         logging::Warn("{}", "node " + std::to_string(id) + " did not release term " +
                                                 std::to_string(target_.term) + " (" +
                                                 (r.ok() ? Status(r->status, r->payload).ToString()
                                                         : r.status().ToString()) +
                                                 "): trying again");
                         return Retry();
                       }
                       if (--*waiting == 0) then();
                     });
  }
}

void DinomoServer::MergeNext(std::vector<uint32_t> left) {
  const cluster::ClusterConfig& c = target_;
  if (left.empty()) return env_.copy_on_handover ? AdoptShards() : StartNode();
  const uint32_t node = left.back();
  left.pop_back();
  env_.calls->Call(env_.pool_peer, static_cast<uint16_t>(proto::Method::kPoolMergeAll),
                   proto::Encode(proto::PoolNodeRequest{node, c.term}),
                   [this, life = std::weak_ptr<int>(life_), node, left = std::move(left)](Result<rpc::PeerResponse> r) mutable {
                     if (life.expired()) return;
                     if (!r.ok() || r->status != Code::kOk) {
                       logging::Warn("{}", "merging node " + std::to_string(node) + "'s log failed (" +
                                               (r.ok() ? Status(r->status, r->payload).ToString() : r.status().ToString()) +
                                               "): trying again");
                       return Retry();
                     }
                     MergeNext(std::move(left));
                   });
}

void DinomoServer::AdoptShards() {
  const cluster::ClusterConfig c = target_;
  // What it gains since the term it served — all it owns if that was not
  // the one before: its shards may have been another's in between.
  std::set<uint32_t> gain = OwnedBy(c, env_.self);
  if (serving_config_.term != 0 && c.term == serving_config_.term + 1) {
    for (uint32_t s : OwnedBy(serving_config_, env_.self)) gain.erase(s);
  }
  if (gain.empty()) return StartNode();
  env_.calls->Call(env_.pool_peer, static_cast<uint16_t>(proto::Method::kPoolAdopt),
                   proto::Encode(proto::PoolAdoptRequest{env_.self, c.term, c.num_shards(),
                                                         std::vector<uint32_t>(gain.begin(), gain.end())}),
                   [this, life = std::weak_ptr<int>(life_), c, n = gain.size()](Result<rpc::PeerResponse> r) {
                     if (life.expired()) return;
                     auto copied = r.ok() && r->status == Code::kOk
                                       ? proto::DecodePoolAdoptResponse(proto::AsBytes(r->payload))
                                   : r.ok() ? Result<proto::PoolAdoptResponse>(Status(r->status, r->payload))
                                            : Result<proto::PoolAdoptResponse>(r.status());
                     if (!copied.ok()) {
                       logging::Warn("{}", "copying the shards it gains failed (" + copied.status().ToString() +
                                               "): trying again");
                       return Retry();
                     }
                     logging::Info("term {}: {} shards gained, {} keys ({} bytes) copied into its partition", c.term,
                                   n, copied->keys, copied->bytes);
                     StartNode();
                   });
}

void DinomoServer::StartNode() {
  const cluster::ClusterConfig c = target_;
  dinomo::KvsNodeOptions ko = env_.node;
  ko.node = env_.self;
  ko.epoch = c.term;
  for (const auto& [key, secondaries] : c.shared) ko.shared.insert(key);
  node_ = std::make_unique<dinomo::KvsNode>(env_.exec, env_.data, env_.calls, env_.pool_peer, ko);
  node_->Start([this, life = std::weak_ptr<int>(life_), c](Status s) {
    if (life.expired()) return;
    if (!s.ok()) {
      logging::Warn("{}", "the pool refused to start the node in term " + std::to_string(c.term) + ": " + s.ToString());
      node_.reset();
      return Retry();
    }
    // Settled past this term meanwhile (SettleEarly): serving it now would
    // break that promise. Start over for the newest one.
    if (settled_term_ > c.term) return Reconfigure();
    SyncShared(c);
  });
}

void DinomoServer::SyncShared(const cluster::ClusterConfig& c) {
  // The pool's cells follow the configuration for the keys this node owns:
  // every member settled at c's term, so no earlier owner writes them.
  env_.calls->Call(
      env_.pool_peer, static_cast<uint16_t>(proto::Method::kPoolShared),
      proto::Encode(proto::PoolNodeRequest{env_.self, c.term}),
      [this, life = std::weak_ptr<int>(life_), c](Result<rpc::PeerResponse> r) {
        if (life.expired()) return;
        auto keys = r.ok() && r->status == Code::kOk ? proto::DecodePoolKeysResponse(proto::AsBytes(r->payload))
                    : r.ok() ? Result<proto::PoolKeysResponse>(Status(r->status, r->payload))
                             : Result<proto::PoolKeysResponse>(r.status());
        if (!keys.ok()) {
          logging::Warn("{}", "asking the pool for its shared keys failed: " + keys.status().ToString());
          node_.reset();
          return Retry();
        }
        const std::set<uint32_t> owned = OwnedBy(c, env_.self);
        auto mine = [&](const std::string& k) { return owned.contains(c.ShardOf(HashKey(k))); };
        std::vector<std::pair<proto::Method, std::string>> changes;
        for (const auto& [key, secondaries] : c.shared) {
          if (mine(key)) changes.emplace_back(proto::Method::kPoolShare, key);
        }
        for (const std::string& key : keys->keys) {
          if (!c.shared.contains(key) && mine(key)) changes.emplace_back(proto::Method::kPoolUnshare, key);
        }
        ChangeShared(c, std::move(changes));
      });
}

void DinomoServer::ChangeShared(const cluster::ClusterConfig& c,
                                std::vector<std::pair<proto::Method, std::string>> changes) {
  if (changes.empty()) return Serve(c);
  auto [method, key] = std::move(changes.back());
  changes.pop_back();
  env_.calls->Call(env_.pool_peer, static_cast<uint16_t>(method),
                   proto::Encode(proto::PoolKeyRequest{env_.self, c.term, key}),
                   [this, life = std::weak_ptr<int>(life_), c, method, changes = std::move(changes)](
                       Result<rpc::PeerResponse> r) mutable {
                     if (life.expired()) return;
                     if (r.ok() && (r->status == Code::kNoSpace || r->status == Code::kInvalidArgument)) {
                       // The pool cannot share it (full, or a key it refuses):
                       // serve the rest. Its GETs follow the index; its writes
                       // find no cell and fail, until a later configuration.
                       logging::Error("{} refused: {}; serving without it", proto::MethodName(static_cast<uint16_t>(method)),
                                      Status(r->status, r->payload).ToString());
                     } else if (!r.ok() || r->status != Code::kOk) {
                       logging::Warn("{} failed ({}): trying again", proto::MethodName(static_cast<uint16_t>(method)),
                                     r.ok() ? Status(r->status, r->payload).ToString() : r.status().ToString());
                       node_.reset();
                       return Retry();
                     }
                     ChangeShared(c, std::move(changes));
                   });
}

void DinomoServer::Serve(const cluster::ClusterConfig& c) {
  reconfiguring_ = false;
  retry_ms_ = 50;
  serving_config_ = c;
  owned_ = OwnedBy(c, env_.self);
  serving_ = true;
  bool shares = false;
  for (const auto& [key, secondaries] : c.shared) shares |= cluster::SharesKey(c, key, env_.self);
  if (!owned_.empty() || shares) fresh_ = false;  // it may write from now on
  const double paused_ms = static_cast<double>(env_.exec->Now() - stopped_at_) / 1e6;
  logging::Info("serving {} shards in term {} (reconfigured in {:.1f} ms)", owned_.size(), c.term, paused_ms);
  if (config_.term != c.term) Consider();  // a newer one came meanwhile
}

void DinomoServer::Retry() {
  // From the start, with the newest configuration: the pool may have moved
  // (a restarted pool publishes a new address), or more nodes gone down.
  env_.exec->After(retry_ms_ * runtime::kMillisecond, [this, life = std::weak_ptr<int>(life_)] {
    if (!life.expired()) Reconfigure();
  });
  retry_ms_ = std::min<int64_t>(2 * retry_ms_, 2000);
}

PoolNode::Counters DinomoServer::counters() const {
  const dinomo::KvsNodeStats st = stats();
  return Counters{st.gets,        st.writes, st.round_trips_per_op(), st.shared_gets, st.shared_writes,
                  st.swaps,       st.swap_retries};
}

void DinomoServer::Refuse(const Reply& reply, const Status& s) const {
  reply(s.code(), proto::Encode(proto::KvResponse{config_.term, 0, s.message()}));
}

void DinomoServer::Handle(uint16_t method, std::span<const std::byte> payload, Reply reply) {
  const auto m = static_cast<proto::Method>(method);
  if (m == proto::Method::kKnRelease) return Release(payload, std::move(reply));
  if (m == proto::Method::kPutIf) {
    return Refuse(reply, Status::NotSupported("conditional writes (SET NX/XX) are not supported by a DINOMO KVS node"));
  }
  if (m != proto::Method::kPut && m != proto::Method::kGet && m != proto::Method::kDel) {
    return Refuse(reply, Status::InvalidArgument("a KVS node does not serve method " + std::to_string(method)));
  }
  auto req = proto::DecodeKvRequest(payload, env_.node.limits);
  if (!req.ok()) return Refuse(reply, req.status());
  if (IsReservedKey(req->key)) return Refuse(reply, Status::InvalidArgument("keys beginning with \\0slip: are reserved"));
  const cluster::ClusterConfig& c = serving_config_;
  if (!serving_ || req->term != c.term) {
    return Refuse(reply, Status::StaleTerm("request term " + std::to_string(req->term) + ", node term " +
                                           std::to_string(serving_ ? c.term : config_.term) +
                                           (serving_ ? "" : " (reconfiguring)")));
  }
  const uint32_t shard = c.ShardOf(HashKey(req->key));
  if (shard != req->shard ||
      (!owned_.contains(shard) && (c.shared.empty() || !cluster::SharesKey(c, std::string(req->key), env_.self)))) {
    return Refuse(reply, Status::StaleTerm("node " + std::to_string(env_.self) + " does not own shard " +
                                           std::to_string(req->shard) + " in term " + std::to_string(c.term)));
  }
  if (env_.lease_left() <= 0) {
    return Refuse(reply, Status::Unavailable("node " + std::to_string(env_.self) + " has no valid lease"));
  }
  window_.Record(env_.exec->Now(), req->key);
  ServeKv(*node_, m, *req, c.term, std::move(reply));
}

}  // namespace slip::server
