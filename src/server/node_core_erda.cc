// NodeCore: the erda design's direct client access (docs/papers/erda.md §6).
//
//   ERDA_GRANT    a client may read a shard one-sidedly for as long as this
//                 node's lease still runs (capped): after that another node
//                 may have been promoted, and this one's words go stale.
//   ERDA_RESERVE  a version of the shard and a place in this worker's head
//                 for one entry; the client writes the entry there itself.
//   ERDA_COMMIT   the entry landed: adopt it from the head (its CRC, key and
//                 header checked, then persisted), replicate it as any
//                 write, commit it — which publishes it in the bucket table
//                 through the store's index mirror — and answer the version.
//
// A write therefore becomes visible to one-sided readers only once it is
// persistent on every replica ("flip at commit"), never at reservation.
#include <algorithm>

#include "common/hash.h"
#include "log/entry.h"
#include "server/node_core.h"

namespace slip::server {

namespace {
constexpr runtime::Nanos kErdaTick = 10 * runtime::kMillisecond;
}

void NodeCore::HandleErdaGrant(std::span<const std::byte> payload, Reply reply) {
  auto view = views_->Get();
  if (!erda_layout_) {
    return Fail(reply, Status::NotSupported("this cluster's design has no direct client access"), view->term);
  }
  auto req = proto::DecodeErdaGrantRequest(payload);
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  if (!CheckServing(*view, req->term, req->shard, reply)) return;
  // A shard still being copied here: its table lacks what the copy has
  // not brought yet, and a one-sided reader cannot fetch it from the
  // source. Two-sided requests (which do) until the copy is done.
  if (shared_->migrations_in.SourceOf(req->shard)) {
    return Fail(reply, Status::Busy("shard " + std::to_string(req->shard) + " is being copied to this node"), view->term);
  }
  proto::ErdaGrantResponse g = erda_layout_->grant;
  g.term = view->term;
  g.address = erda_layout_->address;
  const runtime::Nanos left = lease_left_ ? lease_left_() : erda_layout_->max_grant;
  g.grant_ns = static_cast<uint64_t>(std::max<runtime::Nanos>(0, std::min(left, erda_layout_->max_grant)));
  if (erda_exec_ != nullptr) shared_->grants_out.Extend(req->shard, erda_exec_->Now() + static_cast<runtime::Nanos>(g.grant_ns));
  reply(Code::kOk, proto::Encode(g));
}

void NodeCore::HandleErdaReserve(std::span<const std::byte> payload, Reply reply) {
  auto view = views_->Get();
  if (!erda_heads_ || !erda_layout_) {
    return Fail(reply, Status::NotSupported("this cluster's design has no direct client access"), view->term);
  }
  auto req = proto::DecodeErdaReserveRequest(payload, store_->options().limits);
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  if (!CheckPrimary(*view, proto::KvRequest{req->term, req->shard, req->key, {}}, reply)) return;
  const uint64_t bytes = (log::kHeaderSize + req->key.size() + req->value_len + log::kAlign - 1) / log::kAlign * log::kAlign;
  if (bytes > erda_layout_->grant.max_entry_bytes) {
    return Fail(reply,
                Status::TooLarge("an entry of " + std::to_string(bytes) + " bytes exceeds the " +
                                 std::to_string(erda_layout_->grant.max_entry_bytes) +
                                 " a client may write one-sidedly; use PUT"),
                view->term);
  }
  auto version = store_->ReserveVersion(req->shard);
  if (!version.ok()) return Fail(reply, version.status(), view->term);
  // From here the version is assigned: the tracker hears how it ends.
  shared_->commits.Begin(req->shard, *version);
  auto r = erda_heads_->Reserve(erda_exec_->Now(), view->term, req->shard, *version, req->key,
                                static_cast<uint32_t>(bytes));
  if (!r.ok()) {
    shared_->commits.Abandoned(req->shard, *version);
    Status s = r.status();
    if (s.Is(Code::kNoSpace)) s = Status::Busy("node out of log space: " + s.message());
    return Fail(reply, s, view->term);
  }
  StartErdaTicks();
  const uint64_t area_offset = (*r)->offset - erda_layout_->grant.area_offset;
  reply(Code::kOk, proto::Encode(proto::ErdaReserveResponse{
                       view->term, *version, (*r)->id, area_offset,
                       static_cast<uint64_t>(erda_heads_->options().write_within)}));
}

void NodeCore::HandleErdaCommit(std::span<const std::byte> payload, Reply reply) {
  auto view = views_->Get();
  if (!erda_heads_) {
    return Fail(reply, Status::NotSupported("this cluster's design has no direct client access"), view->term);
  }
  auto req = proto::DecodeErdaCommitRequest(payload, store_->options().limits);
  if (!req.ok()) return Fail(reply, req.status(), view->term);
  if (!CheckPrimary(*view, proto::KvRequest{req->term, req->shard, req->key, {}}, reply)) return;
  std::optional<ErdaHeads::Reservation> r = erda_heads_->Take(req->reservation, req->key);
  if (!r) {
    // Expired (its place was given up) or never made: the entry may have
    // landed, but it is never adopted, so the write did not happen. The
    // client cannot tell a lost answer from this, so: outcome unknown.
    return Fail(reply, Status::Unavailable("no open reservation " + std::to_string(req->reservation) + " of this key"),
                view->term);
  }
  auto give_up = [&](Status s) {
    erda_heads_->Failed(*r);
    shared_->commits.Abandoned(r->shard, r->version);
    Fail(reply, s, view->term);
  };
  if (r->term != view->term) {
    return give_up(Status::StaleTerm("reserved in term " + std::to_string(r->term) + ", node term " +
                                     std::to_string(view->term)));
  }
  // As in Write: registered, then the view read again.
  shared_->writes.Begin(r->shard, view->term);
  if (const uint64_t now = views_->Get()->term; now != view->term) {
    shared_->writes.End(r->shard, view->term);
    return give_up(Status::StaleTerm("the configuration changed to term " + std::to_string(now)));
  }
  if (erda_layout_ && erda_layout_->copy_puts) return CopyIn(*view, *r, std::move(reply));
  std::string_view value;
  auto adopted = store_->AdoptReceived(r->offset, log::EntryMeta{log::EntryType::kPut, static_cast<uint16_t>(r->shard), r->version},
                                       r->key, &value);
  if (!adopted.ok()) {
    shared_->writes.End(r->shard, view->term);
    // Nothing was adopted, so nothing will ever show this entry: the client
    // retries the whole write (Unavailable: its outcome is unknown to it).
    return give_up(Status::Unavailable("the reserved entry did not check out: " + adopted.status().message()));
  }
  erda_heads_->Committed(*r);
  ++counters_.puts;
  ++counters_.erda_commits;
  auto pending = std::make_shared<store::Store::PendingWrite>(std::move(*adopted));
  ReplicateAndCommit(*view, r->shard, std::move(pending), value, nullptr, std::move(reply));
}

void NodeCore::WriteStaged(const NodeView& view, const proto::KvRequest& req, Reply reply) {
  shared_->writes.Begin(req.shard, view.term);
  if (const uint64_t now = views_->Get()->term; now != view.term) {
    shared_->writes.End(req.shard, view.term);
    return Fail(reply, Status::StaleTerm("the configuration changed to term " + std::to_string(now)), now);
  }
  auto fail = [&](Status s) {
    shared_->writes.End(req.shard, view.term);
    if (s.Is(Code::kNoSpace)) s = Status::Busy("node out of log space: " + s.message());
    Fail(reply, s, view.term);
  };
  auto layout = log::PlanEntry(req.key.size(), req.value.size(), store_->options().max_block_bytes);
  if (!layout.ok()) return fail(layout.status());
  if (layout->cnt != 1 || layout->total_bytes > erda_layout_->grant.max_entry_bytes) {
    // Larger than a redo record may be: written into the log directly.
    shared_->writes.End(req.shard, view.term);
    return Write(view, req.shard, log::EntryType::kPut, req.key, req.value, nullptr, std::move(reply));
  }
  auto version = store_->ReserveVersion(req.shard);
  if (!version.ok()) return fail(version.status());
  shared_->commits.Begin(req.shard, *version);
  auto placed = erda_heads_->Reserve(erda_exec_->Now(), view.term, req.shard, *version, req.key,
                                     static_cast<uint32_t>(layout->total_bytes));
  if (!placed.ok()) {
    shared_->commits.Abandoned(req.shard, *version);
    return fail(placed.status());
  }
  StartErdaTicks();
  // The reservation leaves the open set at once: nobody but this task
  // writes or commits it.
  std::optional<ErdaHeads::Reservation> r = erda_heads_->Take((*placed)->id, req.key);
  const log::EntryMeta meta{log::EntryType::kPut, static_cast<uint16_t>(req.shard), *version};
  if (Status s = store_->WriteReceived(r->offset, r->bytes, meta, req.key, req.value); !s.ok()) {
    erda_heads_->Failed(*r);
    shared_->commits.Abandoned(req.shard, *version);
    return fail(s);
  }
  CopyIn(view, *r, std::move(reply));
}

void NodeCore::CopyIn(const NodeView& view, const ErdaHeads::Reservation& r, Reply reply) {
  const log::EntryMeta meta{log::EntryType::kPut, static_cast<uint16_t>(r.shard), r.version};
  auto give_up = [&](Status s) {
    shared_->writes.End(r.shard, view.term);
    erda_heads_->Failed(r);
    shared_->commits.Abandoned(r.shard, r.version);
    if (s.Is(Code::kNoSpace)) s = Status::Busy("node out of log space: " + s.message());
    Fail(reply, s, view.term);
  };
  // The integrity check the baselines' servers do before applying.
  auto staged = store_->ReadReceived(r.offset, meta, r.key);
  if (!staged.ok()) {
    return give_up(Status::Unavailable("the staged entry did not check out: " + staged.status().message()));
  }
  auto copied = store_->PrepareVersioned(writer_, meta, r.key, staged->value(), persist_mode());
  if (!copied.ok()) return give_up(copied.status());
  erda_heads_->Copied(r);
  ++counters_.erda_copies;
  auto pending = std::make_shared<store::Store::PendingWrite>(std::move(*copied));
  // Replicate reads the value during the call only; the staged place is
  // zeroed no earlier than its head's sealing.
  ReplicateAndCommit(view, r.shard, std::move(pending), staged->value(), nullptr, std::move(reply));
}

void NodeCore::StartErdaTicks() {
  if (erda_tick_ != 0 || erda_exec_ == nullptr) return;
  erda_tick_ = erda_exec_->After(kErdaTick, [this] { ErdaTick(); });
}

void NodeCore::ErdaTick() {
  erda_tick_ = 0;
  const runtime::Nanos now = erda_exec_->Now();
  if (erda_heads_) {
    for (const auto& [shard, version] : erda_heads_->Tick(now)) shared_->commits.Abandoned(shard, version);
  }
  // Worker 0 makes the segments the cleaner freed reusable, once no
  // one-sided reader can still be reading them (ErdaGrantResponse::max_read_ns).
  if (worker_index_ == 0 && erda_layout_ &&
      now - last_segment_release_ >= static_cast<runtime::Nanos>(erda_layout_->grant.max_read_ns)) {
    store_->ReleaseHeldSegments();
    last_segment_release_ = now;
  }
  StartErdaTicks();
}

}  // namespace slip::server
