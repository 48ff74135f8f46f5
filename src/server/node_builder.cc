#include "server/node_builder.h"

#include <algorithm>
#include <utility>

namespace slip::server {
namespace {

// Who may replicate into `self` in `v`: the primaries of the shards it backs
// up, and the source of a primary's move to it (MIGRATE_PUSH writes the
// shard's pages into the target as entries go to a backup).
replication::Senders SendersIn(const NodeView& v, NodeId self) {
  replication::Senders out{.term = v.term, .shards = {}};
  for (uint32_t s = 0; s < v.shards.size(); ++s) {
    const ShardReplicas& r = v.shards[s];
    if (std::find(r.backups.begin(), r.backups.end(), self) != r.backups.end()) out.shards[r.primary].push_back(s);
  }
  for (const PrimaryMove& m : v.moves) {
    if (m.to == self) out.shards[m.from].push_back(m.shard);
  }
  for (auto& [node, shards] : out.shards) {
    std::sort(shards.begin(), shards.end());
    shards.erase(std::unique(shards.begin(), shards.end()), shards.end());
  }
  return out;
}

}  // namespace

std::unique_ptr<NodeParts> BuildNode(NodeEnv env) {
  auto parts = std::make_unique<NodeParts>();
  parts->shared = std::make_shared<NodeShared>();
  const auto count = static_cast<uint32_t>(env.workers.size());
  env.onesided.protocol = env.design;

  // Replicators first, then cores: a core holds its worker's replicator.
  parts->workers.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    const NodeEnv::Worker& w = env.workers[i];
    auto r = replication::MakeReplicator(
        env.design, {.exec = w.exec, .ep = w.out, .peers = w.peers, .onesided = env.onesided});
    if (env.wrap_replicator) r = env.wrap_replicator(i, std::move(r));
    parts->workers[i].replicator = std::move(r);
  }
  std::vector<WorkerPool::Worker> pool;
  for (uint32_t i = 0; i < count; ++i) {
    NodeCoreOptions co = env.core;
    co.worker_index = i;
    co.worker_count = count;
    co.backup = env.backup;
    // Group commit where a persist is a syscall (msync), and in the
    // simulator's crash model, which checks it. On dram a persist does
    // nothing and on dax it is a few cache-line flushes: waiting a turn for
    // the batch would only add latency.
    const pm::PmRegion& region = env.store->region();
    if (region.mode() == pm::PersistMode::kMsync || region.crash_model()) co.defer = [exec = env.workers[i].exec, alive = env.alive](std::function<void()> fn) {
      // Posted from a handler, so it runs after the rest of this turn's work.
      exec->Post([alive, fn = std::move(fn)] {
        if (alive && !alive()) return;  // the node (incarnation) is gone
        fn();
      });
    };
    if (env.erda_layout) {
      parts->workers[i].erda_heads = std::make_unique<ErdaHeads>(env.store, env.erda_heads);
      co.erda_heads = parts->workers[i].erda_heads.get();
      co.erda_exec = env.workers[i].exec;
      co.erda_layout = env.erda_layout;
    }
    co.peers = env.workers[i].peers;
    parts->workers[i].core = std::make_unique<NodeCore>(env.id, env.store, i, parts->workers[i].replicator.get(),
                                                        env.views, parts->shared, std::move(co));
    pool.push_back({env.workers[i].exec, parts->workers[i].core.get()});
  }
  parts->pool = std::make_unique<WorkerPool>(std::move(pool), env.limits, env.store->segments().geometry().num_shards,
                                             std::move(env.alive));

  PromoterOptions po;
  if (env.backup) po.catch_up = [b = env.backup] { return b->CatchUp(); };
  // A store read: any worker's core will do.
  po.commit_floor = [c = parts->workers[0].core.get()](uint32_t shard) { return c->RecordedCommitVersion(shard); };
  parts->promoter = std::make_unique<Promoter>(env.store, count, env.promoter_peers, std::move(po));
  NodeAgentHooks hooks{.on_seeded = std::move(env.on_seeded),
                       .on_migrated = std::move(env.on_migrated),
                       .drop_shard = [store = env.store](uint32_t shard) { store->DropShard(shard); },
                       .on_view = nullptr};
  if (env.backup) {
    hooks.on_view = [b = env.backup, self = env.id](const NodeView& v) { b->Fence(SendersIn(v, self)); };
  }
  parts->agent = std::make_unique<NodeAgent>(env.id, env.views, parts->promoter.get(), env.agent_exec, parts->shared,
                                             std::move(hooks));
  return parts;
}

}  // namespace slip::server
