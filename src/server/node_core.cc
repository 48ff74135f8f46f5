#include "server/node_core.h"

#include <algorithm>

#include "common/hash.h"

namespace slip::server {

NodeCore::NodeCore(NodeId self, store::Store* store, uint32_t writer,
                   replication::Replicator* replicator, const ViewHolder* views,
                   std::shared_ptr<NodeShared> shared, NodeCoreOptions options)
    : self_(self),
      store_(store),
      writer_(writer),
      replicator_(replicator),
      views_(views),
      shared_(shared ? std::move(shared) : std::make_shared<NodeShared>()),
      lease_left_(std::move(options.lease_left)),
      backup_(options.backup),
      cpu_clock_(std::move(options.cpu_clock)),
      clock_(std::move(options.clock)),
      tail_page_bytes_(options.tail_page_bytes),
      commit_keys_(CommitKeys(store->options().geometry.num_shards)),
      commit_record_step_(options.commit_record_step),
      worker_index_(options.worker_index),
      worker_count_(options.worker_count == 0 ? 1 : options.worker_count),
      defer_(std::move(options.defer)),
      erda_heads_(options.erda_heads),
      erda_exec_(options.erda_exec),
      erda_layout_(std::move(options.erda_layout)),
      peers_(options.peers) {
  // Worker 0 releases held segments even before any client writes.
  if (worker_index_ == 0 && erda_layout_) StartErdaTicks();
}

NodeCore::~NodeCore() {
  if (erda_tick_ != 0) erda_exec_->Cancel(erda_tick_);
}

void NodeCore::AfterFlush(std::function<void()> after) {
  if (!defer_) return after();
  after_flush_.push_back(std::move(after));
  ScheduleFlush();
}

void NodeCore::ScheduleFlush() {
  if (!defer_ || flush_scheduled_) return;
  flush_scheduled_ = true;
  defer_([this] { FlushGroup(); });
}

void NodeCore::FlushGroup() {
  flush_scheduled_ = false;
  store_->Flush(writer_);
  if (after_flush_.empty()) return;
  ++counters_.group_commits;
  counters_.group_committed += after_flush_.size();
  // Swapped out first: a reply may start new work that defers again.
  std::vector<std::function<void()>> ready;
  ready.swap(after_flush_);
  for (auto& fn : ready) fn();
}

void NodeCore::Fail(const Reply& reply, const Status& s, uint64_t term) {
  if (s.Is(Code::kStaleTerm)) ++counters_.stale;
  if (s.Is(Code::kBusy)) ++counters_.busy;
  if (s.Is(Code::kCorruption) || s.Is(Code::kInvalidArgument) || s.Is(Code::kTooLarge)) {
    ++counters_.malformed;
  }
  reply(s.code(), proto::Encode(proto::KvResponse{term, 0, s.message()}));
}

NodeCore::Reply NodeCore::Timed(Counters::Op op, Reply reply) {
  if (!clock_) return reply;
  // Replies run on this core's executor: counters_ is this thread's.
  return [this, op, t0 = clock_(), reply = std::move(reply)](Code status, std::string payload) {
    counters_.latency_ns[op].Record(static_cast<uint64_t>(std::max<runtime::Nanos>(clock_() - t0, 0)));
    reply(status, std::move(payload));
  };
}

void NodeCore::Handle(uint16_t method, std::span<const std::byte> payload, Reply reply) {
  switch (static_cast<proto::Method>(method)) {
    case proto::Method::kPut:
      return HandleWrite(proto::Method::kPut, payload, Timed(Counters::kPutOp, std::move(reply)));
    case proto::Method::kDel:
      return HandleWrite(proto::Method::kDel, payload, Timed(Counters::kDelOp, std::move(reply)));
    case proto::Method::kPutIf:
      return HandleWrite(proto::Method::kPutIf, payload, Timed(Counters::kPutOp, std::move(reply)));
    case proto::Method::kGet:
      return HandleGet(payload, Timed(Counters::kGetOp, std::move(reply)));
    case proto::Method::kReplicate:
    case proto::Method::kReplOpen:
    case proto::Method::kReplClose:
    case proto::Method::kReplPersist: {
      // Backup work: what the one-sided designs take off the backup's CPU.
      // A thread's CPU clock is a system call (~1 us on a VM) where a
      // REPLICATE takes a few: REPLICATEs, one per write on every backup,
      // are timed one in kReplicateSample and that one counted for all of
      // them; the rarer control calls (a REPL_PERSIST's msync) every time.
      const bool replicate = method == static_cast<uint16_t>(proto::Method::kReplicate);
      int64_t weight = 1;
      if (replicate) weight = ++replicates_ % kReplicateSample == 0 ? kReplicateSample : 0;
      const int64_t t0 = cpu_clock_ && weight > 0 ? cpu_clock_() : 0;
      if (replicate) {
        HandleReplicate(payload, std::move(reply));
      } else {
        HandleReplControl(static_cast<proto::Method>(method), payload, std::move(reply));
      }
      ++counters_.backup_requests;
      if (cpu_clock_ && weight > 0) counters_.backup_cpu_ns += weight * (cpu_clock_() - t0);
      return;
    }
    case proto::Method::kShardTail:
      return HandleShardTail(payload, std::move(reply));
    case proto::Method::kMigrateBegin:
      return HandleMigrateBegin(payload, std::move(reply));
    case proto::Method::kMigrateFetch:
      return HandleMigrateFetch(payload, std::move(reply));
    case proto::Method::kMigratePush:
      return HandleMigratePush(payload, std::move(reply));
    case proto::Method::kErdaGrant:
      return HandleErdaGrant(payload, std::move(reply));
    case proto::Method::kErdaReserve:
      return HandleErdaReserve(payload, std::move(reply));
    case proto::Method::kErdaCommit:
      return HandleErdaCommit(payload, std::move(reply));
    default:
      break;
  }
  Fail(reply, Status::InvalidArgument("unknown method " + std::to_string(method)),
       views_->Get()->term);
}

bool NodeCore::CheckPrimary(const NodeView& v, const proto::KvRequest& req, const Reply& reply) {
  if (req.term != v.term) {
    Fail(reply,
         Status::StaleTerm("request term " + std::to_string(req.term) + ", node term " +
                           std::to_string(v.term)),
         v.term);
    return false;
  }
  if (IsReservedKey(req.key)) {
    Fail(reply, Status::InvalidArgument("keys beginning with \\0slip: are reserved"), v.term);
    return false;
  }
  const uint32_t shard = store_->ShardOf(HashKey(req.key));
  if (shard != req.shard) {
    Fail(reply,
         Status::StaleTerm("the key is of shard " + std::to_string(shard) + ", not " + std::to_string(req.shard)),
         v.term);
    return false;
  }
  return CheckServing(v, req.term, shard, reply);
}

bool NodeCore::CheckServing(const NodeView& v, uint64_t term, uint32_t shard, const Reply& reply) {
  if (term != v.term) {
    Fail(reply,
         Status::StaleTerm("request term " + std::to_string(term) + ", node term " + std::to_string(v.term)),
         v.term);
    return false;
  }
  if (shard >= v.shards.size() || v.shards[shard].primary != self_) {
    Fail(reply,
         Status::StaleTerm("node " + std::to_string(self_) + " is not the primary of shard " +
                           std::to_string(shard) + " in term " + std::to_string(v.term)),
         v.term);
    return false;
  }
  if (!lease_ok()) {
    Fail(reply, Status::Unavailable("node " + std::to_string(self_) + " has no valid lease"), v.term);
    return false;
  }
  if (shard < v.blocked.size() && v.blocked[shard]) {
    Fail(reply, Status::Busy("shard " + std::to_string(shard) + " is being reconfigured"), v.term);
    return false;
  }
  return true;
}

void NodeCore::HandleWrite(proto::Method m, std::span<const std::byte> payload, Reply reply, bool fetched) {
  auto view = views_->Get();
  std::optional<proto::PutCondition> condition;
  Result<proto::KvRequest> req = Status::Corruption("no request");
  if (m == proto::Method::kPutIf) {
    // The erda family's clients write entries one-sidedly: this primary
    // does not see their writes in flight, so it cannot order a condition
    // against them.
    if (erda_layout_) {
      return Fail(reply, Status::NotSupported("conditional writes: erda clients write one-sidedly"), view->term);
    }
    auto put_if = proto::DecodePutIfRequest(payload, store_->options().limits);
    if (!put_if.ok()) return Fail(reply, put_if.status(), view->term);
    condition = put_if->condition;
    req = put_if->kv;
  } else {
    req = proto::DecodeKvRequest(payload, store_->options().limits);
  }
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  if (!CheckPrimary(*view, *req, reply)) return;
  // A DEL answers whether the key was there, a conditional PUT asks: a key
  // still only at a move's source is fetched first. (A PUT needs nothing:
  // its version is above every one the source assigned, so it wins over
  // the copy.)
  if ((m == proto::Method::kDel || condition) && !fetched) {
    if (auto source = MayBeAtSource(req->shard, req->key)) {
      return FetchFromSource(view->term, req->shard, *source, std::string(req->key),
                             [this, m, body = std::string(reinterpret_cast<const char*>(payload.data()), payload.size()),
                              reply = std::move(reply)](Status s) mutable {
                               if (!s.ok()) return Fail(reply, s, views_->Get()->term);
                               HandleWrite(m, proto::AsBytes(body), std::move(reply), true);
                             });
    }
  }
  if (condition) {
    if (shared_->writing.Has(std::string(req->key))) {
      return Fail(reply, Status::Busy("a write of this key is in flight"), view->term);
    }
    auto current = store_->Get(req->key);
    if (!current.ok() && !current.status().Is(Code::kNotFound)) return Fail(reply, current.status(), view->term);
    if (current.ok() != (*condition == proto::PutCondition::kIfPresent)) {
      ++counters_.conditional_unmet;
      return reply(Code::kOk, proto::Encode(proto::KvResponse{view->term, 0, {}}));
    }
  }
  if (m == proto::Method::kDel) {
    ++counters_.dels;
  } else {
    ++counters_.puts;
  }
  CountLoad(req->shard, 1 + view->shards[req->shard].backups.size());

  const auto type = m == proto::Method::kDel ? log::EntryType::kDel : log::EntryType::kPut;
  // Held from the existence check in Prepare until the DEL commits or fails.
  std::shared_ptr<std::string> guarded;
  if (type == log::EntryType::kDel) {
    if (!shared_->deletes.TryAcquire(std::string(req->key))) {
      return Fail(reply, Status::Busy("a delete of this key is in flight"), view->term);
    }
    guarded = std::shared_ptr<std::string>(new std::string(req->key), [g = shared_](std::string* k) {
      g->deletes.Release(*k);
      delete k;
    });
  }
  if (type == log::EntryType::kPut && erda_layout_ && erda_layout_->copy_puts && erda_heads_) {
    return WriteStaged(*view, *req, std::move(reply));
  }
  Write(*view, req->shard, type, req->key, req->value, std::move(guarded), std::move(reply));
}

void NodeCore::Write(const NodeView& view, uint32_t shard, log::EntryType type, std::string_view key,
                     std::string_view value, std::shared_ptr<std::string> guarded, Reply reply) {
  // In flight (KeysInFlight) until it is committed or abandoned: the reply
  // runs after either, and whatever path drops it ends the entry too.
  std::shared_ptr<std::string> writing(new std::string(key), [g = shared_](std::string* k) {
    g->writing.End(*k);
    delete k;
  });
  shared_->writing.Begin(*writing);
  reply = [writing = std::move(writing), reply = std::move(reply)](Code status, std::string payload) mutable {
    writing.reset();
    reply(status, std::move(payload));
  };
  // Registered before anything is written, then the view read again: the
  // agent publishes a new view and then asks InFlightWrites whether a write
  // of an older term is running (before seeding a new backup). Either it
  // sees this one, or this worker sees the new view and gives up here. With
  // one executor the two never interleave; with several they may.
  shared_->writes.Begin(shard, view.term);
  if (const uint64_t now = views_->Get()->term; now != view.term) {
    shared_->writes.End(shard, view.term);
    return Fail(reply, Status::StaleTerm("the configuration changed to term " + std::to_string(now)), now);
  }
  auto prepared = store_->Prepare(writer_, type, key, value, persist_mode());
  if (!prepared.ok()) {
    shared_->writes.End(shard, view.term);
    Status s = prepared.status();
    // Out of segments is transient: the cleaner frees space; the client retries.
    if (s.Is(Code::kNoSpace)) s = Status::Busy("node out of log space: " + s.message());
    return Fail(reply, s, view.term);
  }
  auto pending = std::make_shared<store::Store::PendingWrite>(std::move(*prepared));
  // In the same task as Prepare, on the shard's only worker (WorkerPool): no
  // version is assigned and untracked.
  shared_->commits.Begin(shard, pending->meta().version);
  ReplicateAndCommit(view, shard, std::move(pending), type == log::EntryType::kPut ? value : std::string_view{},
                     std::move(guarded), std::move(reply));
}

void NodeCore::ReplicateAndCommit(const NodeView& view, uint32_t shard,
                                  std::shared_ptr<store::Store::PendingWrite> pending, std::string_view value,
                                  std::shared_ptr<std::string> guarded, Reply reply,
                                  std::function<void(Status)> on_done) {
  const std::vector<NodeId>& backups = view.shards[shard].backups;
  auto finish = [this, pending, guarded, reply = std::move(reply), term = view.term, shard,
                 on_done = std::move(on_done)](Status s) mutable {
    guarded.reset();  // commit or abandon comes next, in this handler
    if (on_done) on_done(s);
    // The write ends (InFlightWrites) only once it is committed or
    // abandoned: a seed or a move's hand-over that waits for it then walks
    // an index that shows it.
    if (!s.ok()) {
      store_->Abandon(*pending);
      shared_->commits.Abandoned(shard, pending->meta().version);
      shared_->writes.End(shard, term);
      ++counters_.replication_failures;
      return Fail(reply,
                  Status::Unavailable("replication failed, outcome unknown: " + s.ToString()),
                  term);
    }
    shared_->commits.Acked(shard, pending->meta().version);
    store_->Commit(*pending);  // flushes first if the group's flush has not run yet
    shared_->writes.End(shard, term);
    reply(Code::kOk, proto::Encode(proto::KvResponse{term, pending->meta().version, {}}));
  };
  if (backups.empty()) {
    return AfterFlush([finish = std::move(finish)]() mutable { finish(Status::Ok()); });
  }
  // The local persist overlaps the replication round trip: the group's
  // flush runs on the next turn, before the backups' answers can arrive.
  ScheduleFlush();
  proto::ReplicateRequest entry{view.term, pending->meta(), pending->key(), value};
  replicator_->Replicate(backups, entry, std::move(finish));
}

void NodeCore::WriteCommitRecords() {
  auto view = views_->Get();
  if (!lease_ok()) return;
  for (uint32_t s = 0; s < commit_keys_.size() && s < view->shards.size(); ++s) {
    if (WorkerOfShard(s, static_cast<uint32_t>(view->shards.size()), worker_count_) != worker_index_) continue;  // another worker's shard
    if (view->shards[s].primary != self_ || (s < view->blocked.size() && view->blocked[s])) continue;
    auto c = shared_->commits.TakeNewCommitVersion(s, commit_record_step_);
    if (!c) continue;
    ++counters_.commit_records;
    Write(*view, s, log::EntryType::kPut, commit_keys_[s], EncodeCommitVersion(*c), nullptr,
          [this, s](Code status, std::string) {
            if (status != Code::kOk) shared_->commits.Unpublish(s);
          });
  }
}

uint64_t NodeCore::RecordedCommitVersion(uint32_t shard) const {
  if (shard >= commit_keys_.size()) return 0;
  auto v = store_->Get(commit_keys_[shard]);
  if (!v.ok()) return 0;
  return DecodeCommitVersion(*v).value_or(0);
}

void NodeCore::HandleGet(std::span<const std::byte> payload, Reply reply, bool fetched) {
  auto view = views_->Get();
  auto req = proto::DecodeKvRequest(payload, store_->options().limits);
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  if (!CheckPrimary(*view, *req, reply)) return;
  if (!fetched) {
    if (auto source = MayBeAtSource(req->shard, req->key)) {
      // Linearizable: the source's entry was the newest when this node
      // missed the key (the source took no write since the hand-over), and
      // applying it here changes nothing a newer write left.
      return FetchFromSource(view->term, req->shard, *source, std::string(req->key),
                             [this, body = std::string(reinterpret_cast<const char*>(payload.data()), payload.size()),
                              reply = std::move(reply)](Status s) mutable {
                               if (!s.ok()) return Fail(reply, s, views_->Get()->term);
                               HandleGet(proto::AsBytes(body), std::move(reply), true);
                             });
    }
  }
  ++counters_.gets;
  if (WorkerOfShard(req->shard, static_cast<uint32_t>(view->shards.size()), worker_count_) != worker_index_) {
    ++counters_.gets_elsewhere;
  }
  CountLoad(req->shard, 1);
  log::EntryMeta meta;
  auto v = store_->Get(req->key, &meta);
  if (!v.ok()) return Fail(reply, v.status(), view->term);
  reply(Code::kOk, proto::Encode(proto::KvResponse{view->term, meta.version, *v}));
}

void NodeCore::HandleReplicate(std::span<const std::byte> payload, Reply reply) {
  auto view = views_->Get();
  auto req = proto::DecodeReplicateRequest(payload, store_->options().limits);
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  const uint32_t shard = req->meta.shard;
  // A primary of another term must not write here: an old one may not know
  // it was replaced, a newer one means this node has not caught up yet.
  if (req->term != view->term) {
    return Fail(reply,
                Status::StaleTerm("replicate term " + std::to_string(req->term) +
                                  ", node term " + std::to_string(view->term)),
                view->term);
  }
  const bool is_backup = shard < view->shards.size() &&
                         std::find(view->shards[shard].backups.begin(),
                                   view->shards[shard].backups.end(),
                                   self_) != view->shards[shard].backups.end();
  if (!is_backup) {
    return Fail(reply,
                Status::StaleTerm("node " + std::to_string(self_) + " is not a backup of shard " +
                                  std::to_string(shard) + " in term " + std::to_string(view->term)),
                view->term);
  }
  Status s = store_->Apply(writer_, req->meta, req->key, req->value, persist_mode());
  if (s.Is(Code::kNoSpace)) s = Status::Busy("backup out of log space: " + s.message());
  if (!s.ok()) return Fail(reply, s, view->term);
  ++counters_.replicated_in;
  // Acknowledged only once persistent (and indexed): after the group's flush.
  AfterFlush([reply = std::move(reply), term = view->term, version = req->meta.version] {
    reply(Code::kOk, proto::Encode(proto::KvResponse{term, version, {}}));
  });
}

std::optional<NodeId> NodeCore::MayBeAtSource(uint32_t shard, std::string_view key) const {
  std::optional<NodeId> source = shared_->migrations_in.SourceOf(shard);
  if (!source) return std::nullopt;
  log::EntryMeta meta{};
  auto v = store_->Get(key, &meta);
  if (v.ok() || meta.version != 0 || !v.status().Is(Code::kNotFound)) return std::nullopt;
  return source;
}

void NodeCore::FetchFromSource(uint64_t term, uint32_t shard, NodeId source, std::string key,
                               std::function<void(Status)> then) {
  if (peers_ == nullptr) {
    return then(Status::Busy("shard " + std::to_string(shard) + " is still being copied to this node"));
  }
  ++counters_.migration_fetches;
  std::string req = proto::Encode(proto::KvRequest{term, shard, key, {}});
  peers_->Call(
      source, static_cast<uint16_t>(proto::Method::kMigrateFetch), std::move(req),
      [this, shard, source, key = std::move(key), then = std::move(then)](Result<rpc::PeerResponse> r) {
        // Busy: the client retries; a source that died is rolled back by the manager.
        if (!r.ok() || r->status != Code::kOk) {
          return then(Status::Busy("shard " + std::to_string(shard) + ": fetching a key from node " +
                                   std::to_string(source) + ", the move's source: " +
                                   (r.ok() ? std::string(CodeName(r->status)) : r.status().ToString())));
        }
        auto page = proto::DecodeShardTailResponse(proto::AsBytes(r->payload), store_->options().limits);
        if (!page.ok()) return then(page.status());
        // The move may have ended while the fetch was out (rolled back: the
        // shard is dropped here, and must not be written any more).
        if (shared_->migrations_in.SourceOf(shard) != source) {
          return then(Status::Busy("shard " + std::to_string(shard) + ": the move from node " +
                                   std::to_string(source) + " ended during a fetch"));
        }
        for (const proto::TailEntry& e : page->entries) {
          if (e.meta.shard != shard || e.key != key) {
            return then(Status::Corruption("node " + std::to_string(source) + " answered a fetch with another key"));
          }
          Status s = store_->Apply(writer_, e.meta, e.key, e.value);
          if (s.Is(Code::kNoSpace)) s = Status::Busy("node out of log space: " + s.message());
          if (!s.ok()) return then(s);
        }
        then(Status::Ok());
      });
}

void NodeCore::HandleMigrateBegin(std::span<const std::byte> payload, Reply reply) {
  auto view = views_->Get();
  auto req = proto::DecodeShardTailRequest(payload);
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  const uint32_t shard = req->shard;
  if (req->term > view->term) {
    return Fail(reply, Status::Busy("node " + std::to_string(self_) + " is at term " + std::to_string(view->term) +
                                    ", behind the move's " + std::to_string(req->term)),
                view->term);
  }
  const PrimaryMove* move = view->MoveOf(shard);
  if (req->term < view->term || move == nullptr || move->from != self_) {
    return Fail(reply, Status::StaleTerm("node " + std::to_string(self_) + " hands over no shard " +
                                         std::to_string(shard) + " in term " + std::to_string(req->term)),
                view->term);
  }
  // Handing over is serving: not without a lease (a new incarnation gets
  // none while the manager still counts on the old one).
  if (!lease_ok()) {
    return Fail(reply, Status::Busy("node " + std::to_string(self_) + " has no valid lease"), view->term);
  }
  // Writes this node began as the shard's primary end first (committed or
  // abandoned): then its index holds every acknowledged one, and its
  // version counter every version it ever assigned.
  if (shared_->writes.AnyBefore(shard, view->term)) {
    return Fail(reply, Status::Busy("writes of shard " + std::to_string(shard) + " are still in flight"),
                view->term);
  }
  // erda: clients may still read this node's table under grants it gave.
  if (erda_exec_ != nullptr && erda_exec_->Now() < shared_->grants_out.Until(shard)) {
    return Fail(reply, Status::Busy("grants to read shard " + std::to_string(shard) + " one-sidedly still run"),
                view->term);
  }
  // A source that was a backup until lately (promoted, then the shard moved
  // on before its promotion ended) holds writes its digest has not indexed
  // yet: index everything landed, once, so the copy and the fetches see it.
  if (backup_ != nullptr) {
    Status s = backup_->CatchUp();
    if (!s.ok()) return Fail(reply, s, view->term);
  }
  shared_->handed_over.Add(shard);
  const std::string commit = EncodeCommitVersion(shared_->commits.CommitVersion(shard));
  reply(Code::kOk, proto::Encode(proto::KvResponse{view->term, store_->shard_version(shard), commit}));
}

const PrimaryMove* NodeCore::HandingOver(const NodeView& view, uint64_t term, uint32_t shard, const Reply& reply) {
  if (term > view.term) {
    Fail(reply, Status::Busy("node " + std::to_string(self_) + " is behind term " + std::to_string(term)), view.term);
    return nullptr;
  }
  const PrimaryMove* move = view.MoveOf(shard);
  if (term < view.term || move == nullptr || move->from != self_) {
    Fail(reply, Status::StaleTerm("node " + std::to_string(self_) + " hands over no shard " + std::to_string(shard) +
                                  " in term " + std::to_string(term)),
         view.term);
    return nullptr;
  }
  if (!shared_->handed_over.Contains(shard)) {
    Fail(reply, Status::Busy("shard " + std::to_string(shard) + " was not handed over by this process"), view.term);
    return nullptr;
  }
  return move;
}

void NodeCore::HandleMigratePush(std::span<const std::byte> payload, Reply reply) {
  auto view = views_->Get();
  auto req = proto::DecodeShardTailRequest(payload);
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  if (backup_ == nullptr) {
    return Fail(reply, Status::NotSupported("this design replicates by RPC: pull the shard (SHARD_TAIL)"), view->term);
  }
  const PrimaryMove* move = HandingOver(*view, req->term, req->shard, reply);
  if (move == nullptr) return;
  // A page, as SHARD_TAIL's, written into the target's PM by this worker's
  // replicator exactly as entries go to a backup; the target's digest
  // indexes them where they land.
  auto page = ReadShardPage(req->shard, 0, req->skip);
  if (!page.ok()) return Fail(reply, page.status(), view->term);
  proto::ShardTailResponse r;
  r.term = view->term;
  r.max_version = store_->shard_version(req->shard);
  r.walked = page->walked;
  r.more = page->more;
  if (page->entries.empty()) return reply(Code::kOk, proto::Encode(r));
  struct Pending {
    size_t left;
    Status first_error;
    Reply reply;
    std::string answer;
  };
  auto pending = std::make_shared<Pending>(Pending{page->entries.size(), Status::Ok(), std::move(reply), proto::Encode(r)});
  const NodeId to = move->to;
  const uint64_t term = view->term;
  for (const auto& e : page->entries) {
    const std::string_view value = e.meta.type == log::EntryType::kPut ? std::string_view(e.value) : std::string_view{};
    replicator_->Replicate(std::span<const NodeId>(&to, 1), proto::ReplicateRequest{term, e.meta, e.key, value},
                           [this, pending, term](Status s) {
                             if (!s.ok() && pending->first_error.ok()) pending->first_error = s;
                             if (--pending->left > 0) return;
                             if (!pending->first_error.ok()) {
                               return Fail(pending->reply, Status::Busy("pushing to the target: " + pending->first_error.ToString()),
                                           term);
                             }
                             pending->reply(Code::kOk, std::move(pending->answer));
                           });
  }
}

void NodeCore::HandleMigrateFetch(std::span<const std::byte> payload, Reply reply) {
  auto view = views_->Get();
  auto req = proto::DecodeKvRequest(payload, store_->options().limits);
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  if (HandingOver(*view, req->term, req->shard, reply) == nullptr) return;
  if (store_->ShardOf(HashKey(req->key)) != req->shard) {
    return Fail(reply, Status::InvalidArgument("the key is not of shard " + std::to_string(req->shard)), view->term);
  }
  log::EntryMeta meta{};
  auto v = store_->Get(req->key, &meta);
  if (!v.ok() && !v.status().Is(Code::kNotFound)) return Fail(reply, v.status(), view->term);
  proto::ShardTailResponse r;
  r.term = view->term;
  r.max_version = store_->shard_version(req->shard);
  if (v.ok() || meta.version != 0) {
    r.entries.push_back(proto::TailEntry{meta, req->key, v.ok() ? std::string_view(*v) : std::string_view{}});
  }
  reply(Code::kOk, proto::Encode(r));
}

void NodeCore::HandleShardTail(std::span<const std::byte> payload, Reply reply) {
  auto view = views_->Get();
  auto req = proto::DecodeShardTailRequest(payload);
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  if (req->term != view->term) {
    return Fail(reply,
                Status::StaleTerm("shard tail term " + std::to_string(req->term) +
                                  ", node term " + std::to_string(view->term)),
                view->term);
  }
  if (req->shard >= view->shards.size()) {
    return Fail(reply, Status::InvalidArgument("no shard " + std::to_string(req->shard)), view->term);
  }
  // A move's copy: only from the process that handed the shard over.
  const PrimaryMove* move = view->MoveOf(req->shard);
  const bool handing_over = move != nullptr && move->from == self_;
  if (handing_over && !shared_->handed_over.Contains(req->shard)) {
    return Fail(reply, Status::Busy("shard " + std::to_string(req->shard) + " was not handed over by this process"),
                view->term);
  }
  // (A move's source caught up when it handed the shard over.)
  if (backup_ != nullptr && !handing_over) {
    // Entries peers wrote one-sidedly are indexed lazily; every one that
    // landed (so every acknowledged one) must be in the walk.
    Status s = backup_->CatchUp();
    if (!s.ok()) return Fail(reply, s, view->term);
  }
  // The response holds views into the page's strings until it is encoded.
  auto page = ReadShardPage(req->shard, req->min_version, req->skip);
  if (!page.ok()) return Fail(reply, page.status(), view->term);
  proto::ShardTailResponse r;
  r.term = view->term;
  r.max_version = store_->shard_version(req->shard);
  r.walked = page->walked;
  r.more = page->more;
  for (const auto& e : page->entries) r.entries.push_back({e.meta, e.key, e.value});
  reply(Code::kOk, proto::Encode(r));
}

Result<NodeCore::ShardPage> NodeCore::ReadShardPage(uint32_t shard, uint64_t min_version, uint64_t skip) const {
  ShardPage page;
  size_t bytes = 0;
  auto walked = store_->ForEachInShard(shard, min_version, skip, [&](const store::Store::ShardEntry& e) {
    const size_t size = 24 + e.key.size() + e.value.size();
    if (!page.entries.empty() && bytes + size > tail_page_bytes_) {
      page.more = true;
      return false;
    }
    bytes += size;
    page.entries.push_back(e);
    return true;
  });
  if (!walked.ok()) return walked.status();
  // The entry that did not fit was walked but not taken: it starts the next page.
  page.walked = page.more ? *walked - 1 : *walked;
  return page;
}

void NodeCore::HandleReplControl(proto::Method m, std::span<const std::byte> payload, Reply reply) {
  auto view = views_->Get();
  if (backup_ == nullptr) {
    return Fail(reply, Status::NotSupported("this node replicates by RPC (no one-sided backup log)"), view->term);
  }
  // No term check here: a primary keeps its buffers across terms in which it
  // keeps its shards, and BackupLog::Open judges the sender by the roles of
  // this node's configuration (BackupLog::Fence).
  if (m == proto::Method::kReplOpen) {
    auto req = proto::DecodeReplOpenRequest(payload);
    if (!req.ok()) return Fail(reply, req.status(), view->term);
    auto r = backup_->Open(*req);
    if (!r.ok()) return Fail(reply, r.status(), view->term);
    r->term = view->term;
    return reply(Code::kOk, proto::Encode(*r));
  }
  if (m == proto::Method::kReplPersist) {
    auto req = proto::DecodeReplPersistRequest(payload);
    if (!req.ok()) return Fail(reply, req.status(), view->term);
    Status s = backup_->PersistLanded(req->incarnation);
    if (!s.ok()) return Fail(reply, s, view->term);
    return reply(Code::kOk, proto::Encode(proto::KvResponse{view->term, 0, {}}));
  }
  auto req = proto::DecodeReplCloseRequest(payload);
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  Status s = backup_->Close(*req);
  if (!s.ok()) return Fail(reply, s, view->term);
  reply(Code::kOk, proto::Encode(proto::KvResponse{view->term, 0, {}}));
}

}  // namespace slip::server
