#include "server/promoter.h"

#include <algorithm>
#include <optional>

#include "proto/kv.h"
#include "server/commit_tracker.h"

namespace slip::server {

struct Promoter::Job {
  uint64_t term;
  uint32_t shard;
  std::vector<NodeId> pull_from;
  std::vector<NodeId> push_to;
  // Entries at or below `floor` are on every in-sync replica already
  // (CommitVer); replicas in `full` (still being seeded) get everything.
  uint64_t floor = 0;
  std::vector<NodeId> full;
  bool copy_only = false;  // a move's copy: pull, push nothing
  // A move's copy asks the source to write its pages into this node's PM
  // one-sidedly (MIGRATE_PUSH) until it says its design cannot.
  bool pushed = false;
  std::function<void(uint64_t)> progress;
  std::function<void(Status, PromoteStats)> done;
  PromoteStats stats;
  bool finished = false;
  // Push state: the entries still to send, one walk of the shard. The
  // shard's CommitVer record, if any, is last and goes only once every other
  // entry was acknowledged (a target that has it has all at or below it).
  std::vector<store::Store::ShardEntry> to_send;
  bool commit_last = false;
  size_t next = 0;
  size_t in_flight = 0;
  // Pull state: the newest CommitVer record pulled, applied only once the
  // whole pull is in: a pull cut short (a newer term) must not leave a
  // record claiming entries this node never got, or the next promotion's
  // floor would skip them.
  std::optional<store::Store::ShardEntry> commit_record;

  void Finish(Status s) {
    if (finished) return;
    finished = true;
    done(std::move(s), stats);
  }
};

void Promoter::Promote(uint64_t term, uint32_t shard, std::vector<NodeId> replicas,
                       std::vector<NodeId> syncing, std::function<void(Status, PromoteStats)> done) {
  auto job = std::make_shared<Job>();
  job->term = term;
  job->shard = shard;
  job->pull_from = replicas;
  job->push_to = std::move(replicas);
  job->full = std::move(syncing);
  job->done = std::move(done);
  if (commit_floor_) {
    // The floor recorded here is only as new as what this node has indexed.
    if (catch_up_) {
      Status s = catch_up_();
      if (!s.ok()) return job->Finish(s);
    }
    job->floor = commit_floor_(shard);
    job->stats.floor = job->floor;
  }
  if (job->pull_from.empty()) return Push(job);
  Pull(job, 0, 0);
}

void Promoter::Seed(uint64_t term, uint32_t shard, NodeId backup,
                    std::function<void(Status, PromoteStats)> done) {
  auto job = std::make_shared<Job>();
  job->term = term;
  job->shard = shard;
  job->push_to = {backup};
  job->done = std::move(done);
  Push(job);
}

void Promoter::HandOver(uint64_t term, uint32_t shard, NodeId source,
                        std::function<void(Status, uint64_t, uint64_t)> done) {
  std::string req = proto::Encode(proto::ShardTailRequest{term, shard, 0, 0});
  peers_->Call(source, static_cast<uint16_t>(proto::Method::kMigrateBegin), std::move(req),
               [this, shard, source, done = std::move(done)](Result<rpc::PeerResponse> r) {
                 if (!r.ok()) return done(r.status(), 0, 0);
                 if (r->status != Code::kOk) {
                   return done(Status(r->status, "node " + std::to_string(source) + " did not hand shard " +
                                                     std::to_string(shard) + " over"),
                               0, 0);
                 }
                 auto resp = proto::DecodeKvResponse(proto::AsBytes(r->payload), store_->options().limits);
                 if (!resp.ok()) return done(resp.status(), 0, 0);
                 auto commit = DecodeCommitVersion(resp->value);
                 if (!commit) return done(Status::Corruption("a hand-over without a commit version"), 0, 0);
                 store_->RaiseShardVersion(shard, resp->version);
                 done(Status::Ok(), resp->version, *commit);
               });
}

void Promoter::Copy(uint64_t term, uint32_t shard, NodeId source, std::function<void(Status, PromoteStats)> done,
                    std::function<void(uint64_t)> progress) {
  auto job = std::make_shared<Job>();
  job->progress = std::move(progress);
  job->term = term;
  job->shard = shard;
  job->pull_from = {source};
  job->copy_only = true;
  job->pushed = true;
  job->done = std::move(done);
  Pull(job, 0, 0);
}

void Promoter::Pull(std::shared_ptr<Job> job, size_t replica, uint64_t skip) {
  const NodeId from = job->pull_from[replica];
  std::string req = proto::Encode(proto::ShardTailRequest{job->term, job->shard, job->floor, skip});
  const proto::Method method = job->pushed ? proto::Method::kMigratePush : proto::Method::kShardTail;
  peers_->Call(
      from, static_cast<uint16_t>(method), std::move(req),
      [this, job, replica, from, skip](Result<rpc::PeerResponse> r) {
        if (!r.ok()) {
          return job->Finish(Status(r.status().code(), "pulling shard " + std::to_string(job->shard) +
                                                           " from node " + std::to_string(from) +
                                                           ": " + r.status().message()));
        }
        if (job->pushed && r->status == Code::kNotSupported) {
          job->pushed = false;  // a design that replicates by RPC: pull
          return Pull(job, replica, skip);
        }
        if (r->status != Code::kOk) {
          return job->Finish(Status(r->status, "node " + std::to_string(from) +
                                                   " refused to send shard " +
                                                   std::to_string(job->shard)));
        }
        auto page = proto::DecodeShardTailResponse(proto::AsBytes(r->payload),
                                                   store_->options().limits);
        if (!page.ok()) return job->Finish(page.status());
        ++job->stats.pages;
        if (job->pushed) job->stats.pulled_entries += page->walked - skip;
        for (const auto& e : page->entries) {
          if (e.meta.shard != job->shard) {
            return job->Finish(Status::Corruption("node " + std::to_string(from) +
                                                  " sent an entry of shard " +
                                                  std::to_string(e.meta.shard)));
          }
          if (e.key == commit_keys_[job->shard]) {
            if (!job->commit_record || e.meta.version > job->commit_record->meta.version) {
              job->commit_record = store::Store::ShardEntry{e.meta, std::string(e.key), std::string(e.value)};
            }
            ++job->stats.pulled_entries;
            continue;
          }
          // One persist per page (Flush below), not one per entry.
          Status s = store_->Apply(writer_, e.meta, e.key, e.value, store::Store::Persist::kDeferred);
          if (!s.ok()) {
            store_->Flush(writer_);
            return job->Finish(s);
          }
          ++job->stats.pulled_entries;
        }
        store_->Flush(writer_);
        if (job->progress) job->progress(job->stats.pulled_entries);
        // Versions above every entry any replica holds, even ones we did
        // not receive (its counter may be ahead of its entries).
        store_->RaiseShardVersion(job->shard, page->max_version);
        if (page->more) return Pull(job, replica, page->walked);
        if (replica + 1 < job->pull_from.size()) return Pull(job, replica + 1, 0);
        if (job->commit_record) {
          const auto& c = *job->commit_record;
          if (Status s = store_->Apply(writer_, c.meta, c.key, c.value); !s.ok()) return job->Finish(s);
        }
        if (job->copy_only) {
          // Pushed entries landed in this node's PM; indexed once digested.
          if (job->pushed && catch_up_) {
            Status s = catch_up_();
            if (!s.ok()) return job->Finish(s);
          }
          return job->Finish(Status::Ok());
        }
        Push(job);
      });
}

void Promoter::Push(std::shared_ptr<Job> job) {
  if (catch_up_) {
    Status s = catch_up_();
    if (!s.ok()) return job->Finish(s);
  }
  job->stats.shard_version = store_->shard_version(job->shard);
  const uint64_t min_version = job->full.empty() ? job->floor : 0;
  auto walked = store_->ForEachInShard(job->shard, min_version, 0, [&](const store::Store::ShardEntry& e) {
    job->to_send.push_back(e);
    return true;
  });
  if (!walked.ok()) return job->Finish(walked.status());
  auto commit = std::find_if(job->to_send.begin(), job->to_send.end(),
                             [&](const store::Store::ShardEntry& e) { return e.key == commit_keys_[job->shard]; });
  if (commit != job->to_send.end()) {
    std::rotate(commit, commit + 1, job->to_send.end());
    job->commit_last = true;
  }
  if (job->to_send.empty() || job->push_to.empty()) return job->Finish(Status::Ok());
  PushMore(job);
}

void Promoter::PushMore(std::shared_ptr<Job> job) {
  const size_t total = job->to_send.size() * job->push_to.size();
  const size_t barrier = job->commit_last ? total - job->push_to.size() : total;
  while (!job->finished && job->in_flight < kWindow && job->next < total) {
    if (job->next == barrier && job->in_flight > 0) break;  // the CommitVer record waits for the rest
    const size_t i = job->next++;
    const auto& e = job->to_send[i / job->push_to.size()];
    const NodeId to = job->push_to[i % job->push_to.size()];
    if (e.meta.version <= job->floor && std::find(job->full.begin(), job->full.end(), to) == job->full.end()) {
      continue;  // an in-sync replica has it
    }
    ++job->in_flight;
    std::string req = proto::Encode(proto::ReplicateRequest{job->term, e.meta, e.key,
                                                            e.meta.type == log::EntryType::kPut
                                                                ? std::string_view(e.value)
                                                                : std::string_view{}});
    peers_->Call(rpc::Target{to, e.meta.shard}, static_cast<uint16_t>(proto::Method::kReplicate), std::move(req),
                 [this, job, to](Result<rpc::PeerResponse> r) {
                   --job->in_flight;
                   Status s = !r.ok() ? r.status()
                              : r->status != Code::kOk
                                  ? Status(r->status, "node " + std::to_string(to) +
                                                          " refused a pushed entry")
                                  : Status::Ok();
                   if (!s.ok()) return job->Finish(s);
                   ++job->stats.pushed_entries;
                   if (job->next == job->to_send.size() * job->push_to.size() &&
                       job->in_flight == 0) {
                     return job->Finish(Status::Ok());
                   }
                   PushMore(job);
                 });
  }
  // Everything left was skipped.
  if (!job->finished && job->next == total && job->in_flight == 0) job->Finish(Status::Ok());
}

}  // namespace slip::server
