#include "server/node_agent.h"

#include <algorithm>

#include "common/log.h"

namespace slip::server {
namespace {

constexpr runtime::Nanos kRetry = runtime::kMillisecond;

bool Contains(const std::vector<NodeId>& v, NodeId n) {
  return std::find(v.begin(), v.end(), n) != v.end();
}

}  // namespace

void NodeAgent::Publish() {
  auto v = std::make_shared<NodeView>(*config_);
  v->blocked.assign(v->shards.size(), false);
  for (uint32_t s : blocked_) {
    if (s < v->blocked.size()) v->blocked[s] = true;
  }
  if (hooks_.on_view) hooks_.on_view(*v);
  views_->Set(std::move(v));
}

void NodeAgent::Start(std::shared_ptr<const NodeView> v) {
  config_ = std::move(v);
  Publish();
}

void NodeAgent::Adopt(std::shared_ptr<const NodeView> v) {
  if (config_ && v->term <= config_->term) return;
  std::shared_ptr<const NodeView> old = config_;
  config_ = std::move(v);
  std::vector<uint32_t> promote, move_in, drop;
  std::vector<std::pair<uint32_t, NodeId>> seed;
  // Moves to here that were rolled back or are over.
  for (auto it = moving_in_.begin(); it != moving_in_.end();) {
    const uint32_t s = it->first;
    ++it;
    if (!MovingHere(s, moving_in_[s])) EndMoveIn(s);
  }
  std::erase_if(copied_, [&](uint32_t s) { return !MovingHere(s); });
  for (uint32_t s = 0; s < config_->shards.size(); ++s) {
    const ShardReplicas& now = config_->shards[s];
    if (old && s < old->shards.size() && Holds(*old, s) && !Holds(*config_, s)) drop.push_back(s);
    if (now.primary != self_) {
      blocked_.erase(s);
      continue;
    }
    const bool was_primary = old && s < old->shards.size() && old->shards[s].primary == self_;
    if (!was_primary) {
      blocked_.insert(s);
      (MovingHere(s) ? move_in : promote).push_back(s);
      continue;
    }
    // Seed a backup that is new, or still listed as syncing (the manager
    // may not have heard that an earlier seeding finished).
    for (NodeId b : now.backups) {
      if (!Contains(old->shards[s].backups, b) || Contains(now.syncing, b)) seed.emplace_back(s, b);
    }
  }
  // Block first, in the same configuration change, so no client request of
  // the new term is served before the promotion.
  Publish();
  for (uint32_t s : drop) Drop(s);
  for (uint32_t s : promote) StartPromotion(s);
  for (uint32_t s : move_in) StartMoveIn(s);
  for (auto [s, b] : seed) StartSeed(s, b);
  // A finished copy whose report did not make it: report again.
  for (uint32_t s : copied_) {
    if (hooks_.on_migrated) hooks_.on_migrated(s, config_->term);
  }
}

void NodeAgent::ColdStart(std::shared_ptr<const NodeView> v) {
  config_ = std::move(v);
  std::vector<uint32_t> promote, drop;
  for (uint32_t s = 0; s < config_->shards.size(); ++s) {
    if (config_->shards[s].primary == self_) {
      // A move's target is promoted too (its backups may hold writes it
      // lacks); the hand-over and the copy follow (StartPromotion).
      blocked_.insert(s);
      promote.push_back(s);
    }
    // The recovery scan indexed whatever the log still held of shards this
    // node let go of before it stopped.
    if (!Holds(*config_, s)) drop.push_back(s);
  }
  Publish();
  for (uint32_t s : drop) Drop(s);
  for (uint32_t s : promote) StartPromotion(s);
}

bool NodeAgent::Holds(const NodeView& view, uint32_t shard) const {
  const ShardReplicas& r = view.shards[shard];
  if (r.primary == self_ || Contains(r.backups, self_)) return true;
  const PrimaryMove* m = view.MoveOf(shard);
  return m != nullptr && m->from == self_;
}

void NodeAgent::Drop(uint32_t shard) {
  ++counters_.shards_dropped;
  if (hooks_.drop_shard) hooks_.drop_shard(shard);
}

bool NodeAgent::MovingHere(uint32_t shard, std::optional<NodeId> source) const {
  if (shard >= config_->shards.size() || config_->shards[shard].primary != self_) return false;
  const PrimaryMove* m = config_->MoveOf(shard);
  return m != nullptr && m->to == self_ && (!source || m->from == *source);
}

void NodeAgent::StartMoveIn(uint32_t shard) {
  if (!MovingHere(shard) || move_busy_.count(shard)) return;
  const NodeId source = config_->MoveOf(shard)->from;
  const uint64_t term = config_->term;
  moving_in_[shard] = source;
  move_busy_.insert(shard);
  if (!move_started_.count(shard)) move_started_[shard] = exec_->Now();
  promoter_->HandOver(term, shard, source, [this, shard, source](Status s, uint64_t version, uint64_t commit) {
    move_busy_.erase(shard);
    if (!MovingHere(shard, source)) return RestartMoveIn(shard);
    if (!s.ok()) {
      // The source is not at this term yet, or has writes in flight; if it
      // died, the manager rolls the move back (Adopt ends it here).
      ++counters_.handover_retries;
      exec_->After(kRetry, [this, shard] { StartMoveIn(shard); });
      return;
    }
    if (!blocked_.count(shard)) return StartCopy(shard);  // a hand-over again, serving meanwhile
    if (shared_) {
      // This node numbers its writes above the source's. Its CommitVer may
      // not claim what the source could not: versions the source abandoned
      // may be on some backups only, until a promotion reconciles them.
      shared_->commits.Promoted(shard, version);
      if (commit < version) shared_->commits.Abandoned(shard, commit + 1);
      shared_->migrations_in.Copying(shard, source);
    }
    blocked_.erase(shard);
    Publish();
    logging::Info("shard {}: node {} handed it over after {} us; serving it, copying", shard, source,
                  (exec_->Now() - move_started_[shard]) / runtime::kMicrosecond);
    StartCopy(shard);
  });
}

void NodeAgent::StartCopy(uint32_t shard) {
  auto it = moving_in_.find(shard);
  if (it == moving_in_.end() || move_busy_.count(shard)) return;
  const NodeId source = it->second;
  const uint64_t term = config_->term;
  move_busy_.insert(shard);
  copy_progress_[shard] = 0;
  promoter_->Copy(term, shard, source, [this, shard, source, term](Status s, PromoteStats st) {
    move_busy_.erase(shard);
    counters_.copied_entries += st.pulled_entries;
    if (!moving_in_.count(shard) || !MovingHere(shard, source)) return RestartMoveIn(shard);
    if (!s.ok()) {
      // A term changed under the copy, the source is unreachable, or it is a
      // new incarnation that did not hand the shard over: get the hand-over
      // again, then start over (applying an entry twice changes nothing).
      ++counters_.copy_failures;
      exec_->After(kRetry, [this, shard] { StartMoveIn(shard); });
      return;
    }
    logging::Info("shard {}: {} entries copied from node {}, {} us after the move began", shard, st.pulled_entries,
                  source, (exec_->Now() - move_started_[shard]) / runtime::kMicrosecond);
    EndMoveIn(shard);
    ++counters_.migrations_in;
    copied_.insert(shard);
    if (hooks_.on_migrated) hooks_.on_migrated(shard, term);
  }, [this, shard](uint64_t pulled) { copy_progress_[shard] = pulled; });
}

void NodeAgent::RestartMoveIn(uint32_t shard) {
  // The move this request served is over (rolled back, or replaced by a
  // move of the shard from another source, which waited for this request).
  EndMoveIn(shard);
  if (MovingHere(shard)) {
    blocked_.insert(shard);
    Publish();
    StartMoveIn(shard);
  }
}

void NodeAgent::EndMoveIn(uint32_t shard) {
  moving_in_.erase(shard);
  move_started_.erase(shard);
  copy_progress_.erase(shard);
  if (shared_) shared_->migrations_in.Done(shard);
}

void NodeAgent::StartPromotion(uint32_t shard) {
  if (!promoting_.insert(shard).second) return;  // one at a time per shard
  const uint64_t term = config_->term;
  promoter_->Promote(term, shard, config_->shards[shard].backups, config_->shards[shard].syncing,
                     [this, shard, term](Status s, PromoteStats st) {
                       promoting_.erase(shard);
                       counters_.pulled_entries += st.pulled_entries;
                       counters_.pushed_entries += st.pushed_entries;
                       const bool still_mine = config_->shards[shard].primary == self_;
                       if (!still_mine) {
                         blocked_.erase(shard);
                         return;
                       }
                       if (s.ok() && term == config_->term && MovingHere(shard)) {
                         // A move's target after a cold start: reconciled
                         // with its backups; now the source's entries.
                         ++counters_.promotions;
                         return StartMoveIn(shard);
                       }
                       if (s.ok() && term == config_->term) {
                         ++counters_.promotions;
                         counters_.promotions_with_floor += st.floor > 0;
                         // Every replica now holds every version this node has.
                         if (shared_) shared_->commits.Promoted(shard, st.shard_version);
                         blocked_.erase(shard);
                         Publish();
                         // The scatter gave every backup the whole shard.
                         if (hooks_.on_seeded) {
                           for (NodeId b : config_->shards[shard].syncing) hooks_.on_seeded(shard, b, term);
                         }
                         return;
                       }
                       // Failed, or the configuration moved on meanwhile (a
                       // replica may have changed): promote again against
                       // the newest one.
                       if (!s.ok()) ++counters_.promotion_failures;
                       exec_->After(kRetry, [this, shard] {
                         if (config_->shards[shard].primary == self_ && blocked_.count(shard)) {
                           StartPromotion(shard);
                         }
                       });
                     });
}

void NodeAgent::StartSeed(uint32_t shard, NodeId backup) {
  if (seeding_.count({shard, backup})) return;
  // Still promoting: this node may not hold the shard yet. The promotion's
  // scatter gives every syncing backup the whole shard, and reports it.
  if (blocked_.count(shard)) return;
  // A move's target seeds no one before it holds the whole shard itself.
  if (moving_in_.count(shard) || (MovingHere(shard) && !copied_.count(shard))) {
    exec_->After(kRetry * 10, [this, shard, backup] {
      if (config_->shards[shard].primary == self_ && Contains(config_->shards[shard].backups, backup)) {
        StartSeed(shard, backup);
      }
    });
    return;
  }
  const uint64_t term = config_->term;
  // Writes that began before this configuration replicate to the old
  // backup list; the walk sees only committed entries. Let them finish.
  if (shared_ && shared_->writes.AnyBefore(shard, term)) {
    exec_->After(runtime::kMicrosecond * 100, [this, shard, backup] {
      if (config_->shards[shard].primary == self_ && Contains(config_->shards[shard].backups, backup)) {
        StartSeed(shard, backup);
      }
    });
    return;
  }
  seeding_.insert({shard, backup});
  promoter_->Seed(term, shard, backup, [this, shard, backup, term](Status s, PromoteStats st) {
    seeding_.erase({shard, backup});
    counters_.pushed_entries += st.pushed_entries;
    if (s.ok()) {
      ++counters_.seeds;
      if (hooks_.on_seeded) hooks_.on_seeded(shard, backup, term);
      return;
    }
    ++counters_.seed_failures;
    exec_->After(kRetry, [this, shard, backup] {
      if (config_->shards[shard].primary == self_ && Contains(config_->shards[shard].backups, backup)) {
        StartSeed(shard, backup);
      }
    });
  });
}

}  // namespace slip::server
