#include "server/node_agent.h"

#include <algorithm>

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
  std::vector<uint32_t> promote;
  std::vector<std::pair<uint32_t, NodeId>> seed;
  for (uint32_t s = 0; s < config_->shards.size(); ++s) {
    const ShardReplicas& now = config_->shards[s];
    if (now.primary != self_) {
      blocked_.erase(s);
      continue;
    }
    const bool was_primary = old && s < old->shards.size() && old->shards[s].primary == self_;
    if (!was_primary) {
      blocked_.insert(s);
      promote.push_back(s);
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
  for (uint32_t s : promote) StartPromotion(s);
  for (auto [s, b] : seed) StartSeed(s, b);
}

void NodeAgent::ColdStart(std::shared_ptr<const NodeView> v) {
  config_ = std::move(v);
  std::vector<uint32_t> promote;
  for (uint32_t s = 0; s < config_->shards.size(); ++s) {
    if (config_->shards[s].primary == self_) {
      blocked_.insert(s);
      promote.push_back(s);
    }
  }
  Publish();
  for (uint32_t s : promote) StartPromotion(s);
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
                       if (s.ok() && term == config_->term) {
                         ++counters_.promotions;
                         counters_.promotions_with_floor += st.floor > 0;
                         // Every replica now holds every version this node has.
                         if (shared_) shared_->commits.Promoted(shard, st.shard_version);
                         blocked_.erase(shard);
                         Publish();
                         // The scatter gave every backup the whole shard.
                         if (on_seeded_) {
                           for (NodeId b : config_->shards[shard].syncing) on_seeded_(shard, b, term);
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
      if (on_seeded_) on_seeded_(shard, backup, term);
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
