// Promoter: the data side of failover, for every design (docs/papers/rowan.md
// §3.6 steps 2 and 3), run by the node that is to serve a shard.
//
//   Promote: gather — pull every surviving replica's entries of the shard
//     (SHARD_TAIL pages) and apply them here; the shard's version counter
//     rises above every version seen. Then scatter — push this node's
//     entries to every replica (REPLICATE), so all replicas hold the same
//     set. Only then may the shard serve requests again.
//   Seed: push the whole shard to a new backup (re-replication).
//   HandOver, Copy: a primary's move, below.
//
// With a commit floor (set_commit_floor: the CommitVer this node last
// received, commit_tracker.h) both directions carry only entries above it,
// as in Rowan: every in-sync replica holds everything at or below it. A
// replica still being seeded gets the whole shard. Without one (floor 0)
// the whole shard is exchanged, which is correct for any state.
//
// The shard must be blocked on every replica (no client writes) while
// Promote runs; Seed may run while the shard serves, because the new backup
// is in the replica set already and applies concurrent writes by version.
//
// Runs on one executor; `writer` is a store writer id no one else uses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/status.h"
#include "rpc/peer_caller.h"
#include "server/commit_tracker.h"
#include "store/store.h"

namespace slip::server {

using rpc::NodeId;

struct PromoteStats {
  uint64_t pulled_entries = 0;
  uint64_t pushed_entries = 0;
  uint64_t pages = 0;
  uint64_t floor = 0;  // the commit floor used
  // The shard's version counter once the gather was done: every version up
  // to it is on every replica when the promotion succeeds.
  uint64_t shard_version = 0;
};

struct PromoterOptions {
  // One-sided designs: peers' writes into this node's PM are indexed lazily;
  // a promotion (or seed) first indexes everything landed so far, or its
  // walk of the local shard would miss acknowledged entries.
  std::function<Status()> catch_up;
  // The CommitVer this node holds for a shard (NodeCore::RecordedCommitVersion).
  std::function<uint64_t(uint32_t shard)> commit_floor;
};

class Promoter {
 public:
  Promoter(store::Store* store, uint32_t writer, rpc::PeerCaller* peers, PromoterOptions options = {})
      : store_(store),
        writer_(writer),
        peers_(peers),
        catch_up_(std::move(options.catch_up)),
        commit_floor_(std::move(options.commit_floor)),
        commit_keys_(CommitKeys(store->options().geometry.num_shards)) {}

  // `syncing`: the replicas among `replicas` still being seeded.
  void Promote(uint64_t term, uint32_t shard, std::vector<NodeId> replicas, std::vector<NodeId> syncing,
               std::function<void(Status, PromoteStats)> done);
  void Seed(uint64_t term, uint32_t shard, NodeId backup,
            std::function<void(Status, PromoteStats)> done);

  // A primary's move, at the target (docs/papers/rowan.md §3.7). HandOver
  // asks `source` for the shard (MIGRATE_BEGIN): it answers once it serves
  // nothing of it any more; the shard's version counter here then rises to
  // the source's, so this node's writes win over everything copied.
  // `done` gets the source's version counter and CommitVersion. Copy then
  // brings every entry of the shard from `source`, applied by version: a
  // one-sided design's source writes them into this node's PM as into a
  // backup's (MIGRATE_PUSH, a page per request; indexed by the digest,
  // caught up at the end), another's are pulled (SHARD_TAIL pages).
  void HandOver(uint64_t term, uint32_t shard, NodeId source,
                std::function<void(Status, uint64_t version, uint64_t commit_version)> done);
  // `progress` (optional) gets the entries pulled so far after each page.
  void Copy(uint64_t term, uint32_t shard, NodeId source, std::function<void(Status, PromoteStats)> done,
            std::function<void(uint64_t pulled)> progress = nullptr);

  // Outstanding REPLICATE requests per push.
  static constexpr size_t kWindow = 32;


 private:
  struct Job;
  void Pull(std::shared_ptr<Job> job, size_t replica, uint64_t skip);
  void Push(std::shared_ptr<Job> job);
  void PushMore(std::shared_ptr<Job> job);

  store::Store* store_;
  uint32_t writer_;
  rpc::PeerCaller* peers_;
  std::function<Status()> catch_up_;
  std::function<uint64_t(uint32_t)> commit_floor_;
  const std::vector<std::string> commit_keys_;  // CommitKeys(): held back and sent last
};

}  // namespace slip::server
