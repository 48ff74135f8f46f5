// Node processes: start (through server::BuildNode, as a real node), the
// roles of one-sided designs, crash, restart, whole-cluster power loss and
// cold start.
#include "sim/world.h"

namespace slip::sim::detail {

void World::StartNode(Node& n, bool fresh) {
  if (fabric_ && n.live) {
    // The previous process is gone: its endpoints die with it (already so
    // if it crashed), and this one may make new ones.
    fabric_->CrashNode(n.id);
    fabric_->RestartNode(n.id);
  }
  auto inc = std::make_unique<Incarnation>();
  if (fresh || !n.live) {
    pm::RegionOptions ro;
    ro.crash_model = true;
    // One-sided designs also keep posted / per-peer segments for peers.
    size_t bytes = OneSided() ? 16 << 20 : 8 << 20;
    if (o_.perf) {
      // Room for this node's share of the records, four times over (the
      // cleaner's headroom), and two segments for every worker of every
      // node: its own open one, and the buffer each primary worker holds at
      // this backup (the per-sender designs: rwrite-kv, batch-kv).
      const auto& w = o_.perf->workload;
      const uint64_t share = w.records * (w.sizes.value_bytes + 96) * o_.replication / o_.nodes;
      const size_t open = size_t{2} * o_.nodes * o_.workers * (256 << 10);
      bytes = std::max<size_t>(bytes, static_cast<size_t>(4 * share + open + (16 << 20)));
    }
    inc->region = std::move(pm::PmRegion::Anonymous(bytes, ro)).value();
  } else {
    inc->region = std::move(n.live->region);
  }
  store::StoreOptions so;
  so.geometry.segment_size = 256 << 10;
  so.geometry.num_shards = o_.shards;
  so.limits.max_key = 256;
  so.limits.max_value = 4096;
  so.max_block_bytes = 8192;
  so.num_writers = o_.workers + 1;  // the workers, then the promoter
  so.hold_freed_segments = Clients().reads_one_sided;
  auto store = store::Store::Open(inc->region.get(), so);
  if (!store.ok()) {
    failure_ = "node " + std::to_string(n.id) + " failed to open its store: " + store.status().ToString();
    return;
  }
  // Crashes tear, they never damage: a tear taken for damage would make a
  // node throw its data away after every power loss.
  if ((*store)->recovery_stats().damaged != 0) {
    failure_ = "node " + std::to_string(n.id) + " took a crash's tear for damage: " +
               (*store)->recovery_stats().DescribeDamage();
    return;
  }
  inc->store = std::move(*store);
  ++n.incarnation;
  inc->workers.resize(o_.workers);
  for (uint32_t w = 0; w < o_.workers; ++w) {
    inc->workers[w].caller = std::make_unique<Caller>(this, n.workers[w], n.id, n.incarnation);
  }
  if (OneSided()) {
    if (Status s = StartReplication(n, *inc); !s.ok()) {
      failure_ = "node " + std::to_string(n.id) + " failed to start replication: " + s.ToString();
      return;
    }
  }
  Node* np = &n;
  server::NodeEnv env;
  env.id = n.id;
  env.design = o_.protocol;
  env.store = inc->store.get();
  env.limits = so.limits;
  env.backup = inc->backup.get();
  env.views = &n.views;
  env.agent_exec = n.exec;
  env.promoter_peers = inc->workers[0].caller.get();
  for (uint32_t i = 0; i < o_.workers; ++i) {
    env.workers.push_back({.exec = n.workers[i], .peers = inc->workers[i].caller.get(), .out = inc->workers[i].out.get()});
  }
  env.onesided.self = n.id;
  env.onesided.max_message = 4096;
  env.onesided.term = [np] { return np->views.Get()->term; };
  env.onesided.shared_logs = std::make_shared<replication::SharedRemoteLogs>();  // share-kv: one per process
  env.core.commit_record_step = o_.commit_record_step;
  // Small pages: promotions and moves' copies take several round trips, so
  // requests meet them half done (a real node's page is a frame).
  env.core.tail_page_bytes = 160;
  if (Clients().any()) {
    // Fault runs scale the deadlines to the simulation's clock (10 ms
    // leases, microsecond hops), so cleaner races and late writes happen.
    // Performance runs keep a real server's: grants of at most 100 ms
    // (their lease is 1 s), a 50 ms max_read (which also holds freed
    // segments that long before reuse) and write_within. A 500 us max_read
    // sent every GET of a loaded host to the two-sided fallback.
    server::ErdaNodeOptions eo;
    eo.readable_table = Clients().reads_one_sided;
    eo.copy_puts = Clients().copies_puts;
    eo.max_grant = std::min(eo.max_grant, static_cast<Nanos>(o_.lease_us) * kMicrosecond / 2);
    if (!o_.perf) eo.max_read = 500 * kMicrosecond;
    auto erda = server::ErdaNode::Create(inc->store.get(), inc->in.get(), *inc->backup, eo);
    if (!erda.ok()) {
      failure_ = "node " + std::to_string(n.id) + " failed to start erda: " + erda.status().ToString();
      return;
    }
    inc->erda = std::move(*erda);
    env.erda_layout = inc->erda->layout();
    if (!o_.perf) {
      env.erda_heads.write_within = 500 * kMicrosecond;
      env.erda_heads.reservation_ttl = 5 * kMillisecond;
      env.erda_heads.landing_grace = static_cast<Nanos>(o_.call_timeout_us) * kMicrosecond;
    }
  }
  if (!o_.bug_no_lease) env.core.lease_left = [np] { return np->lease_expiry - np->exec->Now(); };
  env.alive = [np, my_inc = n.incarnation] { return np->up && np->incarnation == my_inc; };
  {
    const NodeId id = n.id;
    const uint64_t my_inc = n.incarnation;
    env.on_seeded = [this, id, my_inc](uint32_t shard, NodeId backup, uint64_t term) {
      // A message to the CM (lost if this node is cut off or dead).
      if (!nodes_[id]->up || nodes_[id]->incarnation != my_inc || isolated_.count(id)) return;
      rt_.Schedule(rt_.Now() + Latency(), cm_, kEventControl, "seeded", shard,
                   [this, shard, backup, term] { OnSeeded(shard, backup, term); });
    };
    env.on_migrated = [this, id, my_inc](uint32_t shard, uint64_t term) {
      if (!nodes_[id]->up || nodes_[id]->incarnation != my_inc || isolated_.count(id)) return;
      rt_.Schedule(rt_.Now() + Latency(), cm_, kEventControl, "migrated", shard,
                   [this, shard, id, term] { OnMigrated(shard, id, term); });
    };
  }
  if (o_.bug_ack_before_replication) {
    env.wrap_replicator = [np](uint32_t i, std::unique_ptr<replication::Replicator> r) {
      return std::unique_ptr<replication::Replicator>(std::make_unique<AckFirstReplicator>(std::move(r), np->workers[i]));
    };
  }
  inc->parts = server::BuildNode(std::move(env));
  if (n.live) n.dead.push_back(std::move(n.live));
  n.live = std::move(inc);
  n.up = true;
  n.lease_expiry = 0;
  const uint64_t this_inc = n.incarnation;
  n.exec->Post([this, id = n.id, this_inc] { RenewLoop(id, this_inc); });
  if (o_.commit_interval_us > 0) {
    for (uint32_t w = 0; w < o_.workers; ++w) {
      n.workers[w]->After(static_cast<Nanos>(o_.commit_interval_us) * kMicrosecond,
                          [this, id = n.id, this_inc, w] { CommitLoop(id, this_inc, w); });
    }
  }
}

// CommitVer records on each worker, as a real node writes them.
void World::CommitLoop(NodeId id, uint64_t inc, uint32_t worker) {
  Node& n = *nodes_[id];
  if (!n.up || n.incarnation != inc) return;
  n.live->parts->workers[worker].core->WriteCommitRecords();
  n.workers[worker]->After(static_cast<Nanos>(o_.commit_interval_us) * kMicrosecond,
                           [this, id, inc, worker] { CommitLoop(id, inc, worker); });
}

// A one-sided design's replication side of one process, as
// node/node_process.cc builds it: the backup log on an endpoint of its own
// (peers write there; the NIC executor polls it), and the replicator on a
// sending endpoint polled by the worker.
Status World::StartReplication(Node& n, Incarnation& inc) {
  const std::string name = "node" + std::to_string(n.id);
  // A peer that stops answering fails the write in about a call timeout,
  // as a REPLICATE call would.
  const fabric::EndpointOptions in_opts{.name = name + "/in"};
  fabric::EndpointOptions out_opts{.name = name + "/out"};
  out_opts.op_timeout = std::chrono::microseconds(o_.call_timeout_us);
  SLIP_ASSIGN_OR_RETURN(inc.in, fabric_->CreateEndpoint(n.id, n.nic, in_opts));
  replication::BackupLogOptions bo;
  bo.protocol = o_.protocol;
  bo.random = [this] { return rt_.Rng().Next(); };  // seeded: runs replay
  SLIP_ASSIGN_OR_RETURN(inc.backup, replication::BackupLog::Create(inc.store.get(), inc.in.get(), bo));
  for (uint32_t i = 0; i < o_.workers; ++i) {
    SLIP_ASSIGN_OR_RETURN(inc.workers[i].out, fabric_->CreateEndpoint(n.id, n.workers[i], out_opts));
  }
  return Status::Ok();
}

// The NIC and digest roles of a one-sided node; they act on whichever
// incarnation is live.
void World::StartNodeRoles(Node& n) {
  n.nic = rt_.CreateExecutor("node" + std::to_string(n.id) + "/nic");
  Node* np = &n;
  n.nic->AddPoller([this, np] { return np->up && np->live && np->live->backup && np->live->backup->Poll(rt_.Now()); });
  // The used-segment rule runs on time alone (no traffic): a tick polls.
  // Periodic tasks are owned by the world (a task holding itself would never
  // be freed) and reschedule themselves through a plain pointer.
  auto* tick = periodic_.emplace_back(std::make_unique<std::function<void()>>()).get();
  *tick = [np, tick] { np->nic->After(kMillisecond, [tick] { (*tick)(); }); };
  n.nic->After(kMillisecond, [tick] { (*tick)(); });
  // Fault campaigns digest every 100 us (short runs, many segments);
  // performance runs keep slip server's cadence — every millisecond while
  // there is work, backing off to 16 ms when there is none
  // (node_process.cc, DigestLoop) — since each turn costs a wake-up there.
  // Several digest executors each take the next used segment, one per
  // turn: a turn runs whole on virtual time, so one that took sixteen
  // would leave the others nothing while it worked through them.
  const uint32_t executors = std::max<uint32_t>(o_.digest_executors, 1);
  const int per_turn = !o_.perf ? 1 : executors == 1 ? 16 : 1;
  for (uint32_t d = 0; d < executors; ++d) {
    runtime::Executor* ex =
        rt_.CreateExecutor("node" + std::to_string(n.id) + "/digest" + (d == 0 ? "" : std::to_string(d)));
    n.digests.push_back(ex);
    auto* digest = periodic_.emplace_back(std::make_unique<std::function<void()>>()).get();
    auto idle = std::make_shared<int>(0);
    *digest = [this, np, ex, digest, idle, per_turn, executors] {
      bool worked = false;
      for (int i = 0; i < per_turn && np->up && np->live && np->live->backup; ++i) {
        auto r = np->live->backup->DigestStep();
        if (!r.ok() && failure_.empty()) {
          failure_ = "node " + std::to_string(np->id) + " digest: " + r.status().ToString();
        }
        if (!r.ok() || !*r) break;
        worked = true;
      }
      *idle = worked ? 0 : std::min(*idle + 1, 4);
      if (o_.perf && worked && executors > 1) return ex->Post([digest] { (*digest)(); });
      const Nanos next = o_.perf ? kMillisecond << *idle : 100 * kMicrosecond;
      ex->After(next, [digest] { (*digest)(); });
    };
    // Staggered, so several executors do not all look at the same instant.
    ex->After((o_.perf ? kMillisecond : 100 * kMicrosecond) + d * 10 * kMicrosecond, [digest] { (*digest)(); });
  }
  // Placed bytes become durable in the live process's region (placements
  // into an earlier process's memory died with its endpoints).
  fabric_->SetPersistHook(n.id, [np](const std::byte* p, size_t len) {
    if (np->live && np->live->region && np->live->region->contains(p, len)) np->live->region->Persist(p, len);
  });
}

void World::Crash(NodeId id) {
  Node& n = *nodes_[id];
  if (!n.up || cold_) return;
  ++faults_;
  n.up = false;
  // Its NIC stops at once: DMAs not yet persistent are lost with it.
  if (fabric_) fabric_->CrashNode(id);
  // Power fails: unpersisted lines are kept, dropped or torn.
  n.live->region->SimulateCrash(rt_.Rng().Next());
  // The CM notices when the node stops renewing its lease.
}

void World::Restart(NodeId id) {
  Node& n = *nodes_[id];
  // Recovery must work on the crashed image (it is checked), but a node that
  // rejoins a running cluster comes back empty: its old entries may predate
  // deletes whose tombstones are gone elsewhere.
  StartNode(n, /*fresh=*/false);
  if (!failure_.empty()) return;
  StartNode(n, /*fresh=*/true);
  n.live->parts->agent->Adopt(view_);
  // It announces itself by renewing a lease (a new incarnation: a spare).
}

// Whole-cluster power loss: every node crashes at once. Nothing can be
// reconfigured while they are down; they restart from their PM.
void World::PowerLoss() {
  cold_ = true;
  ++faults_;
  cm_->Post([m = managers_.back().get()] { m->Stop(); });  // the CM's machine too
  for (auto& n : nodes_) {
    if (!n->up) continue;
    n->up = false;
    if (fabric_) fabric_->CrashNode(n->id);
    n->live->region->SimulateCrash(rt_.Rng().Next());
  }
}

// Cold start: every node recovers its store from PM; the shard map stays,
// but each shard is blocked until its primary has gathered every replica's
// entries and scattered the union (replicas may differ in writes that were
// never acknowledged), exactly as a promotion.
void World::ColdStart() {
  for (auto& n : nodes_) {
    if (n->live && !n->up) {
      StartNode(*n, /*fresh=*/false);
      if (!failure_.empty()) return;
    } else if (!n->live) {
      StartNode(*n, /*fresh=*/true);
    }
  }
  down_.clear();
  cold_ = false;
  // Everyone boots at once and takes a fresh lease.
  for (auto& n : nodes_) {
    member_inc_[n->id] = n->incarnation;
    last_grant_[n->id] = rt_.Now();
    n->lease_expiry = rt_.Now() + static_cast<Nanos>(o_.lease_us) * kMicrosecond;
    RecordLease(n->id, rt_.Now());
  }
  cluster::ClusterConfig next = config_;
  ++next.term;
  auto stored = cm_store_->CompareAndSwap(cm_version_, next);
  if (!stored.ok()) {
    failure_ = "cold start: " + stored.status().ToString();
    return;
  }
  config_ = next;
  cm_version_ = *stored;
  auto v = server::ViewFromConfig(config_);
  view_ = v;
  // Each node reads the configuration at boot and reconciles the shards it
  // serves before serving them (NodeAgent::ColdStart).
  for (auto& n : nodes_) n->live->parts->agent->ColdStart(v);
  StartManager();  // a new CM incarnation: the boot grace starts again
  if (o_.crash_in_cold_start) CrashSoon(static_cast<NodeId>(rt_.Rng().Uniform(o_.nodes)), 2 * kMillisecond, "crash-in-cold-start");
}

void World::CrashSoon(NodeId victim, Nanos within, const char* what) {
  const Nanos at = rt_.Now() + static_cast<Nanos>(rt_.Rng().Uniform(static_cast<uint64_t>(within)));
  rt_.Schedule(at, nullptr, kEventFault, what, victim, [this, victim] {
    if (!nodes_[victim]->up || !SafeToFail(victim)) return;
    Crash(victim);
    const uint64_t inc = nodes_[victim]->incarnation;
    rt_.Schedule(rt_.Now() + 4 * static_cast<Nanos>(o_.lease_us) * kMicrosecond, nullptr, kEventFault, "restart",
                 victim, [this, victim, inc] {
                   if (!nodes_[victim]->up && nodes_[victim]->incarnation == inc) Restart(victim);
                 });
  });
}

}  // namespace slip::sim::detail
