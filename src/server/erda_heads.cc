#include "server/erda_heads.h"

#include "log/entry.h"

namespace slip::server {

ErdaHeads::ErdaHeads(store::Store* store, ErdaHeadsOptions options) : store_(store), options_(options) {}

Result<const ErdaHeads::Reservation*> ErdaHeads::Reserve(runtime::Nanos now, uint64_t term, uint32_t shard,
                                                         uint64_t version, std::string_view key, uint32_t bytes) {
  const log::SegmentTable& t = store_->segments();
  if (bytes == 0 || bytes % log::kAlign != 0 || bytes > t.segment_size()) {
    return Status::InvalidArgument("an entry of " + std::to_string(bytes) + " bytes cannot be placed");
  }
  if (!current_ || current_->tail + bytes > t.segment_size()) {
    SLIP_ASSIGN_OR_RETURN(uint32_t seg, store_->AllocateReceiveSegment());
    if (current_) retired_.push_back(std::move(*current_));
    current_.emplace();
    current_->segment = seg;
    ++stats_.heads;
  }
  Head& h = *current_;
  Reservation r;
  r.id = next_id_++;
  r.term = term;
  r.shard = shard;
  r.version = version;
  r.key.assign(key);
  r.offset = t.SegmentOffset(h.segment) + h.tail;
  r.bytes = bytes;
  r.segment = h.segment;
  r.made_at = now;
  h.tail += bytes;
  ++h.open;
  h.last_reserved = now;
  ++stats_.reserved;
  auto [it, inserted] = open_.emplace(r.id, std::move(r));
  return &it->second;
}

std::optional<ErdaHeads::Reservation> ErdaHeads::Take(uint64_t id, std::string_view key) {
  auto it = open_.find(id);
  if (it == open_.end() || it->second.key != key) return std::nullopt;
  Reservation r = std::move(it->second);
  open_.erase(it);
  return r;
}

ErdaHeads::Head* ErdaHeads::HeadOf(uint32_t segment) {
  if (current_ && current_->segment == segment) return &*current_;
  for (Head& h : retired_) {
    if (h.segment == segment) return &h;
  }
  return nullptr;
}

void ErdaHeads::Committed(const Reservation& r) {
  ++stats_.committed;
  if (Head* h = HeadOf(r.segment)) --h->open;
}

void ErdaHeads::Failed(const Reservation& r) {
  ++stats_.failed;
  Dead(r);
}

void ErdaHeads::Copied(const Reservation& r) {
  ++stats_.copied;
  Dead(r);
}

void ErdaHeads::Dead(const Reservation& r) {
  // The client's bytes may still land here: count them as an abandoned
  // entry of the key until the head is sealed and the place zeroed.
  store_->AbandonReceived(r.offset, r.key);
  if (Head* h = HeadOf(r.segment)) {
    --h->open;
    h->dead.emplace_back(r.offset, r.bytes);
  }
}

std::vector<std::pair<uint32_t, uint64_t>> ErdaHeads::Tick(runtime::Nanos now) {
  std::vector<std::pair<uint32_t, uint64_t>> expired;
  for (auto it = open_.begin(); it != open_.end();) {
    if (now - it->second.made_at < options_.reservation_ttl) {
      ++it;
      continue;
    }
    ++stats_.expired;
    expired.emplace_back(it->second.shard, it->second.version);
    Dead(it->second);
    it = open_.erase(it);
  }
  // An idle head retires too, so its segment reaches the cleaner.
  if (current_ && current_->open == 0 && current_->tail > 0 &&
      now - current_->last_reserved >= options_.write_within + options_.landing_grace) {
    retired_.push_back(std::move(*current_));
    current_.reset();
  }
  while (!retired_.empty()) {
    Status s = SealIfDone(retired_.front(), now);
    if (!s.ok()) break;  // not yet (or the store refused: try again next tick)
    retired_.pop_front();
  }
  return expired;
}

Status ErdaHeads::SealIfDone(Head& h, runtime::Nanos now) {
  if (h.open > 0) return Status::Busy("reservations still open");
  if (now - h.last_reserved < options_.write_within + options_.landing_grace) {
    return Status::Busy("a client may still write here");
  }
  for (const auto& [offset, bytes] : h.dead) {
    SLIP_RETURN_IF_ERROR(store_->KillReceived(offset, bytes));
    ++stats_.places_killed;
  }
  h.dead.clear();
  SLIP_RETURN_IF_ERROR(store_->SealReceiveSegment(h.segment));
  ++stats_.heads_sealed;
  return Status::Ok();
}

}  // namespace slip::server
