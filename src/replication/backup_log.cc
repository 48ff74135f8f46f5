#include "replication/backup_log.h"

#include <cstring>

#include "replication/registry.h"

namespace slip::replication {

BackupLog::BackupLog(store::Store* store, fabric::Endpoint* ep, BackupLogOptions options)
    : store_(store), ep_(ep), options_(options), design_(DesignOf(options.protocol)) {}

BackupLog::~BackupLog() {
  if (mr_.base != nullptr) (void)ep_->Deregister(mr_);
}

Result<std::unique_ptr<BackupLog>> BackupLog::Create(store::Store* store, fabric::Endpoint* ep,
                                                     const BackupLogOptions& options) {
  const Design& design = DesignOf(options.protocol);
  if (!design.one_sided()) {
    return Status::InvalidArgument(std::string(design.name) + " has no one-sided backup log");
  }
  std::unique_ptr<BackupLog> b(new BackupLog(store, ep, options));
  const log::SegmentTable& t = store->segments();
  b->data_offset_ = t.SegmentOffset(0);
  // Peers write anywhere in the segment area, as RDMA peers of a registered
  // region can; the segments they may use are the ones REPL_OPEN (or the
  // multi-receive queue) handed out.
  SLIP_ASSIGN_OR_RETURN(b->mr_, ep->Register(t.SegmentBase(0), t.num_segments() * t.segment_size(),
                                             fabric::Endpoint::kRemoteWrite | fabric::Endpoint::kRemoteRead));
  b->address_ = ep->address();
  if (design.receive == BackupReceive::kSharedLog) {
    std::lock_guard<std::mutex> lock(b->mu_);
    for (uint32_t i = 0; i < options.posted_segments; ++i) SLIP_RETURN_IF_ERROR(b->PostSegment());
  }
  return b;
}

Status BackupLog::PostSegment() {
  SLIP_ASSIGN_OR_RETURN(uint32_t seg, store_->AllocateReceiveSegment());
  const log::SegmentTable& t = store_->segments();
  // Free segments are all zero, so the first-word rule holds from the start.
  Status s = ep_->PostMultiRecv(t.SegmentBase(seg), t.segment_size(), &mr_, seg);
  if (!s.ok()) {
    (void)store_->ReleaseReceiveSegment(seg);
    return s;
  }
  posted_.push_back(Segment{.id = seg});
  ++stats_.segments_posted;
  return Status::Ok();
}

bool BackupLog::Poll(runtime::Nanos now) {
  fabric::Completion c[32];
  std::lock_guard<std::mutex> lock(mu_);
  // Receive completions go nowhere: the data is already in PM, and the
  // digest finds it by reading PM (Rowan's overwritten CQ ring).
  const size_t n = ep_->Poll(c);
  stats_.completions_drained += n;
  bool work = n > 0;
  if (design_.receive != BackupReceive::kSharedLog) return work;

  const log::SegmentTable& t = store_->segments();
  // First-word rule: once segment i+1 has a non-zero first word, the NIC has
  // moved past every segment before it.
  for (size_t i = 0; i + 1 < posted_.size(); ++i) {
    if (posted_[i].full_at >= 0) continue;
    uint64_t first;
    std::memcpy(&first, t.SegmentBase(posted_[i + 1].id), sizeof(first));
    if (first == 0) break;
    for (size_t j = 0; j <= i; ++j) {
      if (posted_[j].full_at < 0) posted_[j].full_at = now;
    }
  }
  while (!posted_.empty() && posted_.front().full_at >= 0 &&
         now - posted_.front().full_at >= options_.used_grace) {
    Segment used = posted_.front();
    used.limit = t.segment_size();
    to_digest_.push_back(used);
    posted_.pop_front();
    ++stats_.segments_used;
    work = true;
  }
  // Keep `posted_segments` the NIC has not moved past: a filled segment
  // stays posted through its grace period, and the last one is known full
  // only once the next one is written.
  size_t fresh = 0;
  for (const Segment& seg : posted_) fresh += seg.full_at < 0 ? 1 : 0;
  for (; fresh < options_.posted_segments; ++fresh) {
    // Out of segments: senders see receiver-not-ready until the cleaner
    // frees some; try again next turn.
    if (!PostSegment().ok()) break;
    work = true;
  }
  return work;
}

Status BackupLog::DigestSome(uint32_t id, uint64_t limit, store::Store::ReceiveWalk walk) {
  uint64_t& cursor = cursor_[id];
  if (design_.valid_prefix != nullptr) {
    const log::SegmentTable& t = store_->segments();
    // Only the prefix the design vouches for (tailwind: its running checksum).
    limit = design_.valid_prefix({t.SegmentBase(id), limit}, store_->options().limits);
  }
  if (limit <= cursor) return Status::Ok();
  SLIP_ASSIGN_OR_RETURN(uint64_t end, store_->DigestReceived(id, cursor, limit, walk));
  cursor = end;
  return Status::Ok();
}

Status BackupLog::DigestAndSeal(const Segment& seg) {
  // A segment leaves every list PersistLanded covers only persistent.
  if (options_.persist_by_request) PersistSegment(seg.id);
  SLIP_RETURN_IF_ERROR(DigestSome(seg.id, seg.limit, store::Store::ReceiveWalk::kFinal));
  cursor_.erase(seg.id);
  SLIP_RETURN_IF_ERROR(store_->SealReceiveSegment(seg.id));
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.segments_digested;
  return Status::Ok();
}

Result<bool> BackupLog::DigestNext() {
  Segment seg;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (to_digest_.empty()) return false;
    seg = to_digest_.front();
    to_digest_.pop_front();
    digesting_ = seg.id;  // still covered by PersistLanded until sealed
  }
  Status s = DigestAndSeal(seg);
  {
    std::lock_guard<std::mutex> lock(mu_);
    digesting_ = kNoSegment;
  }
  SLIP_RETURN_IF_ERROR(s);
  return true;
}

Result<bool> BackupLog::DigestStep() {
  std::lock_guard<std::mutex> digest(digest_mu_);
  return DigestNext();
}

Status BackupLog::CatchUp() {
  std::lock_guard<std::mutex> digest(digest_mu_);
  for (;;) {
    SLIP_ASSIGN_OR_RETURN(bool more, DigestNext());
    if (!more) break;
  }
  std::vector<uint32_t> open;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Segment& s : posted_) open.push_back(s.id);
    for (const auto& [id, s] : open_) open.push_back(id);
  }
  // Still being written: index what is whole so far, also behind holes (a
  // torn Send of one sender before another's acknowledged entry); the
  // cursor stays at the first hole, for the next digest.
  const uint64_t size = store_->segments().segment_size();
  for (uint32_t id : open) SLIP_RETURN_IF_ERROR(DigestSome(id, size, store::Store::ReceiveWalk::kPastHoles));
  return Status::Ok();
}

Status BackupLog::PersistLanded(uint64_t incarnation) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.persist_requests;
  }
  if (incarnation != options_.incarnation) {
    return Status::Aborted("this backup restarted since the sender wrote to it: what it wrote is gone");
  }
  if (!options_.persist_by_request) return Status::Ok();
  // Every segment peers may have written into and that is not yet known
  // persistent: posted, open, waiting for the digest or being digested (a
  // digested segment was persisted before it left the lists).
  std::vector<uint32_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Segment& s : posted_) ids.push_back(s.id);
    for (const auto& [id, s] : open_) ids.push_back(id);
    for (const Segment& s : to_digest_) ids.push_back(s.id);
    if (digesting_ != kNoSegment) ids.push_back(digesting_);
  }
  for (uint32_t id : ids) PersistSegment(id);
  return Status::Ok();
}

void BackupLog::PersistSegment(uint32_t id) {
  const log::SegmentTable& t = store_->segments();
  t.region()->Persist(t.SegmentBase(id), t.segment_size());
}

Result<proto::ReplOpenResponse> BackupLog::Open(const proto::ReplOpenRequest& req) {
  proto::ReplOpenResponse r;
  r.persist_by_request = options_.persist_by_request;
  r.incarnation = options_.incarnation;
  r.mem_addr = mr_.remote.addr;
  r.mem_key = mr_.remote.key;
  r.mem_len = mr_.remote.len;
  r.flush_offset = 0;
  r.address = address_;
  if (req.buffer == proto::ReplBuffer::kNone) {
    if (design_.receive != BackupReceive::kSharedLog) {
      return Status::InvalidArgument(std::string(design_.name) + " writes into private buffers");
    }
    return r;
  }
  if (design_.receive == BackupReceive::kSharedLog) {
    return Status::InvalidArgument(std::string(design_.name) + " backups take Sends into their shared log, not private buffers");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (open_.size() >= options_.max_open_buffers) {
    ++stats_.opens_refused;
    return Status::Busy("backup has " + std::to_string(open_.size()) + " buffers open (the admission limit)");
  }
  auto seg = store_->AllocateReceiveSegment();
  if (!seg.ok()) {
    ++stats_.opens_refused;
    return Status::Busy("backup out of PM segments: " + seg.status().message());
  }
  const log::SegmentTable& t = store_->segments();
  open_[*seg] = Segment{.id = *seg, .sender = req.sender};
  ++stats_.buffers_opened;
  r.buffer_id = *seg;
  r.buffer_offset = t.SegmentOffset(*seg) - data_offset_;
  r.buffer_len = t.segment_size();
  return r;
}

Status BackupLog::Close(const proto::ReplCloseRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(req.buffer_id);
  if (it == open_.end() || it->second.sender != req.sender) {
    return Status::InvalidArgument("node " + std::to_string(req.sender) + " has no open buffer " +
                                   std::to_string(req.buffer_id));
  }
  if (req.used > store_->segments().segment_size()) {
    return Status::InvalidArgument("close reports more bytes than the buffer holds");
  }
  Segment seg = it->second;
  seg.limit = req.used;
  open_.erase(it);
  to_digest_.push_back(seg);
  ++stats_.buffers_closed;
  return Status::Ok();
}

BackupLog::Stats BackupLog::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace slip::replication
