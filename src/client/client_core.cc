#include "client/client_core.h"

#include <algorithm>

#include "common/hash.h"
#include "proto/kv.h"
#include "runtime/cost.h"

namespace slip::client {

struct ClientCore::Op {
  OpRecord::Kind kind;
  std::string key, value;
  uint64_t hash = 0;
  runtime::Nanos invoke = 0, deadline = 0, backoff = 0, attempt_sent = 0;
  uint32_t attempts = 0;
  bool unknown = false;
  std::optional<proto::PutCondition> condition;  // PUT_IF
  Status last = Status::Unavailable("no attempt made");
  std::function<void(Status, std::string value, uint64_t version)> done;
};

ClientCore::ClientCore(rpc::PeerCaller* peers, RoutingSource* routing,
                       runtime::Executor* exec, CoreOptions options)
    : peers_(peers), source_(routing), exec_(exec), options_(options) {}

void ClientCore::Put(std::string key, std::string value, std::function<void(Result<uint64_t>)> done) {
  auto op = std::make_shared<Op>();
  op->kind = OpRecord::Kind::kPut;
  op->key = std::move(key);
  op->value = std::move(value);
  op->done = [done = std::move(done)](Status s, std::string, uint64_t version) {
    if (s.ok()) return done(version);
    done(std::move(s));
  };
  Start(std::move(op));
}

void ClientCore::PutIf(std::string key, std::string value, proto::PutCondition condition,
                       std::function<void(Result<uint64_t>)> done) {
  auto op = std::make_shared<Op>();
  op->kind = OpRecord::Kind::kPut;
  op->key = std::move(key);
  op->value = std::move(value);
  op->condition = condition;
  op->done = [done = std::move(done)](Status s, std::string, uint64_t version) {
    if (s.ok()) return done(version);
    done(std::move(s));
  };
  Start(std::move(op));
}

void ClientCore::Get(std::string key, std::function<void(Result<std::string>)> done) {
  auto op = std::make_shared<Op>();
  op->kind = OpRecord::Kind::kGet;
  op->key = std::move(key);
  op->done = [done = std::move(done)](Status s, std::string value, uint64_t) {
    if (s.ok()) return done(std::move(value));
    done(std::move(s));
  };
  Start(std::move(op));
}

void ClientCore::Delete(std::string key, std::function<void(Status)> done) {
  auto op = std::make_shared<Op>();
  op->kind = OpRecord::Kind::kDel;
  op->key = std::move(key);
  op->done = [done = std::move(done)](Status s, std::string, uint64_t) { done(std::move(s)); };
  Start(std::move(op));
}

void ClientCore::Start(std::shared_ptr<Op> op) {
  runtime::Charge(runtime::Cost::kClientOp, op->key.size() + op->value.size());
  ++counters_.ops;
  op->invoke = exec_->Now();
  op->deadline = op->invoke + options_.op_deadline;
  op->backoff = options_.backoff_min;
  op->hash = HashKey(op->key);
  if (op->key.empty()) return Finish(op, Status::InvalidArgument("empty key"), {}, 0);
  if (op->key.size() > options_.limits.max_key) {
    return Finish(op, Status::TooLarge("key of " + std::to_string(op->key.size()) +
                                       " bytes exceeds the limit of " +
                                       std::to_string(options_.limits.max_key)), {}, 0);
  }
  if (op->value.size() > options_.limits.max_value) {
    return Finish(op, Status::TooLarge("value of " + std::to_string(op->value.size()) +
                                       " bytes exceeds the limit of " +
                                       std::to_string(options_.limits.max_value)), {}, 0);
  }
  // Never complete inside the caller's call: post the first attempt.
  exec_->Post([this, op] { Attempt(op); });
}

void ClientCore::Attempt(std::shared_ptr<Op> op) {
  if (!have_routing_ || routing_.primaries.empty()) {
    return Retry(op, Status::Unavailable("no routing table yet"), /*refresh=*/true, 0);
  }
  ++op->attempts;
  ++counters_.attempts;
  op->attempt_sent = exec_->Now();
  const uint32_t shard = routing_.ShardOf(op->hash);
  NodeId node = routing_.primaries[shard];
  if (!routing_.any_node.empty()) node = routing_.any_node[exec_->Rng().Uniform(routing_.any_node.size())];
  if (op->kind == OpRecord::Kind::kGet && !routing_.readers.empty()) node = routing_.readers[shard];
  if (!routing_.shared.empty()) {
    // A shared key: any of its owners serves it.
    if (auto it = routing_.shared.find(op->key); it != routing_.shared.end()) {
      node = it->second[exec_->Rng().Uniform(it->second.size())];
    }
  }
  if (direct_ != nullptr && routing_.direct.any()) {
    auto answer = [this, op](Result<rpc::PeerResponse> r) { OnResponse(op, std::move(r)); };
    if (op->kind == OpRecord::Kind::kGet && routing_.direct.gets) {
      ++counters_.direct_attempts;
      return direct_->Get(node, routing_.term, shard, op->key, std::move(answer));
    }
    if (op->kind == OpRecord::Kind::kPut && !op->condition && routing_.direct.puts &&
        direct_->TakesPut(op->key.size(), op->value.size())) {
      ++counters_.direct_attempts;
      return direct_->Put(node, routing_.term, shard, op->key, op->value, std::move(answer));
    }
  }
  const auto method = op->kind == OpRecord::Kind::kPut   ? proto::Method::kPut
                      : op->kind == OpRecord::Kind::kGet ? proto::Method::kGet
                                                         : proto::Method::kDel;
  const proto::KvRequest kv{routing_.term, shard, op->key, op->value};
  std::string req = op->condition ? proto::Encode(proto::PutIfRequest{*op->condition, kv}) : proto::Encode(kv);
  // A GET may be served by any of the node's workers (server/worker_pool.h).
  const rpc::Target to = method == proto::Method::kGet ? rpc::Target::AnyWorker(node, shard) : rpc::Target{node, shard};
  peers_->Call(to, static_cast<uint16_t>(op->condition ? proto::Method::kPutIf : method), std::move(req),
               [this, op](Result<rpc::PeerResponse> r) { OnResponse(op, std::move(r)); });
}

void ClientCore::OnResponse(std::shared_ptr<Op> op, Result<rpc::PeerResponse> r) {
  const bool write = op->kind != OpRecord::Kind::kGet;
  if (!r.ok()) {
    // Refused before it left (a payload over the frame limit, an address in
    // another provider's format) or at the door (no cluster secret): no
    // retry can fix that, and nothing was applied. Say so now instead of after a deadline of retries.
    const Code c = r.status().code();
    if (c == Code::kTooLarge || c == Code::kInvalidArgument || c == Code::kNotSupported ||
        c == Code::kUnauthenticated) {
      return Finish(op, r.status(), {}, 0);
    }
    // No answer: the node may have applied a write before dying.
    ++counters_.unreachable;
    if (write) RecordUnknownAttempt(*op);
    return Retry(op, r.status(), /*refresh=*/true, routing_.term);
  }
  auto resp = proto::DecodeKvResponse(proto::AsBytes(r->payload), log::Limits{});
  if (!resp.ok()) {
    return Finish(op, Status::Corruption("malformed response: " + resp.status().message()), {}, 0);
  }
  switch (r->status) {
    case Code::kOk:
      // A PUT_IF that wrote nothing (version 0) after an attempt whose
      // answer was lost: that attempt may be what made the condition fail.
      if (op->condition && resp->version == 0 && op->unknown) {
        return Finish(op, Status::Unavailable("the condition did not hold on a retry: an earlier attempt, whose answer "
                                              "was lost in a failover, may have written the value"),
                      {}, 0);
      }
      return Finish(op, Status::Ok(), std::string(resp->value), resp->version);
    case Code::kNotFound:
      // A DEL whose earlier attempt may have applied (its answer was lost
      // in a failover) finds nothing now perhaps because that attempt
      // deleted the value: NotFound would tell the caller the key had
      // none, which may be false. The key has no value — OK; the history
      // still records this attempt as it was (NotFound).
      if (op->kind == OpRecord::Kind::kDel && op->unknown) return Finish(op, Status::Ok(), {}, 0, Code::kNotFound);
      return Finish(op, Status::NotFound(), {}, 0);
    case Code::kStaleTerm:
      ++counters_.stale;
      // At least the node's term; if the node is behind us, the newest we can get.
      return Retry(op, Status::StaleTerm(std::string(resp->value)), /*refresh=*/true,
                   std::max(resp->term, routing_.term));
    case Code::kBusy:
      ++counters_.busy;
      return Retry(op, Status::Busy(std::string(resp->value)), /*refresh=*/false, 0);
    case Code::kUnavailable:
      // The primary could not replicate: outcome unknown, the shard is
      // probably failing over.
      ++counters_.unreachable;
      if (write) RecordUnknownAttempt(*op);
      return Retry(op, Status::Unavailable(std::string(resp->value)), /*refresh=*/true,
                   routing_.term);
    default:
      return Finish(op, Status(r->status, std::string(resp->value)), {}, 0);
  }
}

void ClientCore::Retry(std::shared_ptr<Op> op, Status why, bool refresh, uint64_t min_term) {
  op->last = std::move(why);
  // Jittered exponential backoff, so clients that failed together do not
  // come back together.
  const runtime::Nanos wait =
      op->backoff / 2 + static_cast<runtime::Nanos>(exec_->Rng().Uniform(
                            static_cast<uint64_t>(std::max<runtime::Nanos>(op->backoff / 2, 1))));
  op->backoff = std::min(op->backoff * 2, options_.backoff_max);
  if (exec_->Now() + wait > op->deadline) {
    Status s = op->last;
    return Finish(op, Status(s.code(), "gave up after " + std::to_string(op->attempts) +
                                           " attempts: " + s.message()),
                  {}, 0);
  }
  exec_->After(wait, [this, op, refresh, min_term] {
    if (!refresh) return Attempt(op);
    Refresh(min_term, [this, op] { Attempt(op); });
  });
}

void ClientCore::Refresh(uint64_t min_term, std::function<void()> then) {
  ++counters_.refreshes;
  source_->Fetch(min_term, [this, then = std::move(then)](Result<RoutingTable> t) {
    if (t.ok() && (!have_routing_ || t->term >= routing_.term)) {
      routing_ = std::move(*t);
      have_routing_ = true;
    }
    then();
  });
}

OpRecord::Kind ClientCore::RecordKind(const Op& op) {
  if (!op.condition) return op.kind;
  return *op.condition == proto::PutCondition::kIfAbsent ? OpRecord::Kind::kPutIfAbsent : OpRecord::Kind::kPutIfPresent;
}

void ClientCore::RecordUnknownAttempt(Op& op) {
  op.unknown = true;
  if (!recorder_) return;
  // This attempt may apply at any time from its sending on, or never: a
  // separate operation for the checker, so a retry that applies the same
  // write again is explained too.
  OpRecord rec;
  rec.kind = RecordKind(op);
  rec.key = op.key;
  if (op.kind == OpRecord::Kind::kPut) rec.value = op.value;
  rec.result = Code::kUnavailable;
  rec.unknown = true;
  rec.invoke = op.attempt_sent;
  rec.ret = exec_->Now();
  rec.attempts = op.attempts;
  recorder_(rec);
}

void ClientCore::Finish(std::shared_ptr<Op> op, Status s, std::string value, uint64_t version,
                        std::optional<Code> attempt) {
  // Only answers that say what happened constrain the history: OK, or
  // NotFound (a GET that found nothing, a DEL that deleted nothing). Other
  // errors wrote nothing in their last attempt; earlier attempts with an
  // unknown outcome were recorded when they happened. The history records
  // the last attempt's own answer (`attempt`, when it differs from what the
  // caller is told).
  Code recorded = attempt.value_or(s.code());
  if (op->condition && recorded == Code::kOk && version == 0) recorded = Code::kNotFound;  // not written
  if (recorder_ && (recorded == Code::kOk || recorded == Code::kNotFound)) {
    OpRecord rec;
    rec.kind = RecordKind(*op);
    rec.key = op->key;
    if (op->kind == OpRecord::Kind::kPut) rec.value = op->value;
    if (op->kind == OpRecord::Kind::kGet && s.ok()) rec.value = value;
    rec.result = recorded;
    rec.invoke = op->invoke;
    rec.ret = exec_->Now();
    rec.attempts = op->attempts;
    if (op->kind != OpRecord::Kind::kGet && recorded == Code::kOk) rec.version = version;
    recorder_(rec);
  }
  op->done(std::move(s), std::move(value), version);
}

}  // namespace slip::client
