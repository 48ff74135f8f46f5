#include "replication/testing/world.h"

#include <cstdio>
#include <cstdlib>

#include "common/log.h"

namespace slip::replication::testing {
namespace {
// The world is a test fixture: a node that cannot start is a broken test.
[[noreturn]] void Die(const std::string& what, const Status& s) {
  logging::Error("ReplicationWorld: {}: {}", what, s.ToString());
  logging::Flush();
  std::abort();
}
}  // namespace

// The control path between nodes: a request reaches the target's BackupLog
// after control_latency, the answer comes back as long again, on the
// caller's executor (PeerCaller's contract).
class ReplicationWorld::Caller final : public rpc::PeerCaller {
 public:
  Caller(ReplicationWorld* w, runtime::Executor* exec) : w_(w), exec_(exec) {}
  void Call(rpc::Target to, uint16_t method, std::string payload,
            std::function<void(Result<rpc::PeerResponse>)> done) override {
    const NodeId node = to.node;
    const runtime::Nanos lat = w_->o_.control_latency + (node < w_->slow_.size() ? w_->slow_[node] : 0);
    // A call reaches the process it was sent to or none: a node restarted
    // meanwhile never saw the session it was sent on (as an rpc/ server
    // refuses a request of a session it does not know).
    const uint64_t gen = node < w_->nodes_.size() ? w_->nodes_[node]->generation : 0;
    exec_->After(lat, [w = w_, exec = exec_, lat, node, gen, method, payload = std::move(payload),
                       done = std::move(done)]() mutable {
      Result<rpc::PeerResponse> r = Status::Unavailable("node " + std::to_string(node) + " is down");
      if (node < w->nodes_.size() && w->nodes_[node]->up && w->nodes_[node]->store &&
          w->nodes_[node]->generation == gen) {
        r = Serve(w, *w->nodes_[node], method, proto::AsBytes(payload));
      }
      exec->After(lat, [done = std::move(done), r = std::move(r)]() mutable { done(std::move(r)); });
    });
  }

 private:
  static rpc::PeerResponse Serve(ReplicationWorld* w, Node& n, uint16_t method, std::span<const std::byte> bytes) {
    ++n.control_calls;
    rpc::PeerResponse resp;
    if (method == static_cast<uint16_t>(proto::Method::kReplicate)) {
      // rpc-kv's backup worker: apply and reply (NodeCore::HandleReplicate).
      auto req = proto::DecodeReplicateRequest(bytes, n.store->options().limits);
      Status s = req.ok() ? n.store->Apply(static_cast<uint32_t>(w->o_.senders), req->meta, req->key, req->value)
                          : req.status();
      resp.status = s.code();
      resp.payload = s.ok() ? proto::Encode(proto::KvResponse{req->term, req->meta.version, {}}) : s.message();
    } else if (!n.backup) {
      resp.status = Code::kInvalidArgument;
      resp.payload = "no backup log (rpc)";
    } else if (method == static_cast<uint16_t>(proto::Method::kReplOpen)) {
      auto req = proto::DecodeReplOpenRequest(bytes);
      auto o = req.ok() ? n.backup->Open(*req) : Result<proto::ReplOpenResponse>(req.status());
      resp.status = o.ok() ? Code::kOk : o.status().code();
      resp.payload = o.ok() ? proto::Encode(*o) : o.status().message();
    } else if (method == static_cast<uint16_t>(proto::Method::kReplPersist)) {
      auto req = proto::DecodeReplPersistRequest(bytes);
      Status s = !req.ok() ? req.status() : w->o_.bug_skip_persist ? Status::Ok() : n.backup->PersistLanded(req->incarnation);
      resp.status = s.code();
      resp.payload = s.message();
    } else if (method == static_cast<uint16_t>(proto::Method::kReplClose)) {
      auto req = proto::DecodeReplCloseRequest(bytes);
      Status s = req.ok() ? n.backup->Close(*req) : req.status();
      resp.status = s.code();
      resp.payload = s.message();
    } else {
      resp.status = Code::kInvalidArgument;
    }
    return resp;
  }

  ReplicationWorld* w_;
  runtime::Executor* exec_;
};

ReplicationWorld::ReplicationWorld(WorldOptions options)
    : o_(std::move(options)), rt_(runtime::SimRuntimeOptions{.seed = o_.seed}), fabric_(rt_, o_.fabric) {
  slow_.assign(o_.nodes, 0);
  for (int i = 0; i < o_.nodes; ++i) {
    auto fresh = std::make_unique<Node>();
    pm::RegionOptions ro;
    ro.crash_model = o_.crash_model;
    fresh->region = std::move(pm::PmRegion::Anonymous(o_.pm_bytes, ro)).value();
    nodes_.push_back(std::move(fresh));
    nic_execs_.push_back(rt_.CreateExecutor("node" + std::to_string(i) + "/nic"));
    digest_execs_.push_back(rt_.CreateExecutor("node" + std::to_string(i) + "/digest"));
    for (int s = 0; s < o_.senders; ++s) {
      sender_execs_.push_back(rt_.CreateExecutor("node" + std::to_string(i) + "/worker" + std::to_string(s)));
    }
    pm::PmRegion* region = nodes_[i]->region.get();
    fabric_.SetPersistHook(static_cast<NodeId>(i), [this, i, region](const std::byte* p, size_t len) {
      // The file class: what peers place stays in the page cache until the
      // backup msyncs it (REPL_PERSIST); a power loss drops it.
      if (o_.file_class) return;
      region->Persist(p, len);
      if (nodes_[i]->media) nodes_[i]->media->Write(region->offset_of(p), len);
    });
    fabric_.SetCrashHook(static_cast<NodeId>(i), [] {});
    nic_execs_[i]->AddPoller([this, i] {
      Node& n = *nodes_[i];
      return n.up && n.backup && n.backup->Poll(rt_.Now());
    });
    // Periodic tasks are owned by the world (a task holding itself would
    // never be freed) and reschedule themselves through a plain pointer.
    auto* loop = periodic_.emplace_back(std::make_unique<std::function<void()>>()).get();
    *loop = [this, i, loop] {
      Node& n = *nodes_[i];
      if (n.up && n.backup) {
        auto r = n.backup->DigestStep();
        (void)r;
      }
      digest_execs_[i]->After(100 * runtime::kMicrosecond, [loop] { (*loop)(); });
    };
    if (o_.digest) digest_execs_[i]->After(100 * runtime::kMicrosecond, [loop] { (*loop)(); });
    // The NIC role also runs on time alone (the used-segment grace period
    // passes with no traffic): a tick makes its poller run.
    auto* tick = periodic_.emplace_back(std::make_unique<std::function<void()>>()).get();
    *tick = [this, i, tick] { nic_execs_[i]->After(runtime::kMillisecond, [tick] { (*tick)(); }); };
    nic_execs_[i]->After(runtime::kMillisecond, [tick] { (*tick)(); });
  }
  for (int i = 0; i < o_.nodes; ++i) {
    Status s = StartNode(i);
    if (!s.ok()) Die("starting node " + std::to_string(i), s);
  }
}

ReplicationWorld::~ReplicationWorld() {
  for (int i = 0; i < o_.nodes; ++i) StopNode(i);
}

Status ReplicationWorld::StartNode(int i) {
  Node& n = *nodes_[i];
  store::StoreOptions so;
  so.geometry.segment_size = o_.segment_size;
  so.geometry.num_shards = o_.num_shards;
  so.num_writers = static_cast<uint32_t>(o_.senders) + 1;
  so.limits.max_key = 1024;
  so.limits.max_value = 1 << 20;
  so.max_block_bytes = static_cast<uint32_t>(std::min<uint64_t>(o_.segment_size / 4, 64 << 10));
  SLIP_ASSIGN_OR_RETURN(n.store, store::Store::Open(n.region.get(), so));
  // Crashes tear, they never damage (torn transfers included).
  if (n.store->recovery_stats().damaged != 0) {
    return Status::Corruption("node " + std::to_string(i) + " took a crash's tear for damage: " +
                              n.store->recovery_stats().DescribeDamage());
  }
  const NodeId id = static_cast<NodeId>(i);
  SLIP_ASSIGN_OR_RETURN(n.in, fabric_.CreateEndpoint(id, nic_execs_[i], {.name = "node" + std::to_string(i) + "/in"}));
  if (IsOneSided(o_.protocol)) {
    BackupLogOptions bo;
    bo.protocol = o_.protocol;
    bo.posted_segments = o_.posted_segments;
    bo.max_open_buffers = o_.max_open_buffers;
    bo.persist_by_request = o_.file_class;
    bo.incarnation = (static_cast<uint64_t>(i) << 32) | (n.generation + 1);
    bo.random = [this] { return rt_.Rng().Next(); };  // seeded: runs replay
    SLIP_ASSIGN_OR_RETURN(n.backup, BackupLog::Create(n.store.get(), n.in.get(), bo));
  }
  n.senders.clear();
  // share-kv: the node's senders are its workers, sharing one log per backup.
  auto shared_logs = std::make_shared<SharedRemoteLogs>();
  for (int s = 0; s < o_.senders; ++s) {
    Sender snd;
    snd.exec = sender_execs_[i * o_.senders + s];
    SLIP_ASSIGN_OR_RETURN(snd.ep, fabric_.CreateEndpoint(id, snd.exec, {.name = "node" + std::to_string(i) + "/out"}));
    callers_.push_back(std::make_unique<Caller>(this, snd.exec));
    ReplicatorContext rc;
    rc.exec = snd.exec;
    rc.ep = snd.ep.get();
    rc.peers = callers_.back().get();
    rc.onesided.protocol = o_.protocol;
    rc.onesided.self = id;
    rc.onesided.max_message = o_.max_message;
    rc.onesided.test_bug_ack_early = o_.bug_ack_early;
    rc.onesided.shared_logs = shared_logs;
    snd.replicator = MakeReplicator(o_.protocol, rc);
    snd.onesided = dynamic_cast<OneSidedReplicator*>(snd.replicator.get());
    n.senders.push_back(std::move(snd));
  }
  n.up = true;
  return Status::Ok();
}

void ReplicationWorld::StopNode(int i) {
  Node& n = *nodes_[i];
  n.up = false;
  ++n.generation;
  n.senders.clear();  // replicators first: they poll their endpoints
  n.backup.reset();
  n.in.reset();
  n.store.reset();
}

void ReplicationWorld::Write(int node, int sender, log::EntryType type, const std::string& key,
                             const std::string& value, std::vector<NodeId> backups,
                             std::function<void(Status, uint64_t)> done) {
  Node& n = *nodes_[node];
  auto at = [this, node, key](WritePoint p) { return !write_hook || write_hook(node, key, p); };
  if (!at(WritePoint::kBeforePersist)) return;
  auto prepared = n.store->Prepare(static_cast<uint32_t>(sender), type, key, value);
  if (!prepared.ok()) return done(prepared.status(), 0);
  if (!at(WritePoint::kPersisted)) return;
  auto pending = std::make_shared<store::Store::PendingWrite>(std::move(*prepared));
  proto::ReplicateRequest entry{1, pending->meta(), key,
                                type == log::EntryType::kPut ? std::string_view(value) : std::string_view()};
  store::Store* st = n.store.get();
  // rpc-kv's replicator has no guard of its own: an answer to a REPLICATE
  // may arrive after the test crashed this node (freeing `st`).
  n.senders[sender].replicator->Replicate(backups, entry, [this, node, gen = n.generation, st, pending, at,
                                                           done = std::move(done)](Status s) {
    if (nodes_[node]->generation != gen) return;
    if (s.ok()) {
      if (!at(WritePoint::kReplicated)) return;
      st->Commit(*pending);
      if (!at(WritePoint::kCommitted)) return;
    } else {
      st->Abandon(*pending);
    }
    done(s, pending->meta().version);
  });
}

void ReplicationWorld::CrashAndRestart(int node, uint64_t seed) {
  fabric_.CrashNode(static_cast<NodeId>(node));
  StopNode(node);
  if (o_.crash_model) nodes_[node]->region->SimulateCrash(seed);
  fabric_.RestartNode(static_cast<NodeId>(node));
  Status s = StartNode(node);
  if (!s.ok()) Die("restarting node " + std::to_string(node), s);
}

void ReplicationWorld::SlowNode(int node, runtime::Nanos extra) {
  slow_[node] = extra;
  fabric::LinkFaults f;
  f.extra_delay = extra;
  fabric_.SetNodeFaults(static_cast<NodeId>(node), f);
}

Status ReplicationWorld::Settle(int node) {
  Node& n = *nodes_[node];
  return n.backup ? n.backup->CatchUp() : Status::Ok();
}

bool ReplicationWorld::RunUntil(const std::function<bool()>& pred, runtime::Nanos limit) {
  return rt_.RunUntil(pred, rt_.Now() + limit);
}

}  // namespace slip::replication::testing
