#include "replication/backup_log.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "auth/keyring.h"
#include "replication/registry.h"
#include "replication/seal.h"

namespace slip::replication {

BackupLog::BackupLog(store::Store* store, fabric::Endpoint* ep, BackupLogOptions options)
    : store_(store), ep_(ep), options_(options), design_(DesignOf(options.protocol)) {}

BackupLog::~BackupLog() {
  for (auto& [id, seg] : open_) {
    if (seg.mr.base != nullptr) (void)ep_->Deregister(seg.mr);
  }
  for (auto& [token, g] : grants_) (void)ep_->Deregister(g.flush);
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
  // Senders reach only what REPL_OPEN grants them (see "Fencing"): the area
  // as a whole is remotely accessible only to the erda family's clients.
  const uint32_t access = design.clients.any()
                              ? fabric::Endpoint::kRemoteWrite | fabric::Endpoint::kRemoteRead
                              : fabric::Endpoint::kLocal;
  SLIP_ASSIGN_OR_RETURN(b->mr_, ep->Register(t.SegmentBase(0), t.num_segments() * t.segment_size(), access));
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
  posted_.push_back(Segment{.id = seg, .mr = {}});
  ++stats_.segments_posted;
  return Status::Ok();
}

size_t BackupLog::DrainCompletions() {
  fabric::Completion c[32];
  size_t total = 0, n;
  // Until the queue is empty: a message whose completion waits behind
  // others may already have been flushed (its sender's Read served), so
  // Fence must see it screened under the grants of its time.
  do {
    n = ep_->Poll(c);
    for (size_t i = 0; i < n; ++i) Screen(c[i]);
    total += n;
  } while (n == std::size(c));
  stats_.completions_drained += total;
  return total;
}

// Receive completions carry no data the backup needs — it is already in PM,
// and the digest finds it by reading PM (Rowan's CQ ring that nobody reads)
// — but they say where each message landed, so the NIC role checks its seal
// before the digest may look at it.
void BackupLog::Screen(const fabric::Completion& c) {
  if (c.op != fabric::Op::kRecv || c.data == nullptr || c.len == 0) return;
  const log::SegmentTable& t = store_->segments();
  const std::byte* base = t.SegmentBase(0);
  if (c.data < base || c.data >= base + uint64_t{t.num_segments()} * t.segment_size()) return;  // not ours
  const uint64_t at = static_cast<uint64_t>(c.data - base);
  const auto seg = static_cast<uint32_t>(at / t.segment_size());
  const auto token = c.status == Code::kOk ? ReadSeal({c.data, c.len}) : std::nullopt;
  if (!token || !grants_.contains(*token)) {
    // Not granted, revoked, or unparseable: erase it, durably, so neither
    // the digest nor a recovery scan ever reads it as entries.
    std::memset(c.data, 0, c.len);
    t.region()->Persist(c.data, c.len);
    ++stats_.messages_rejected;
  }
  uint64_t& end = screened_[seg];
  end = std::max(end, at - uint64_t{seg} * t.segment_size() + c.len);
}

bool BackupLog::CanBlock() {
  std::lock_guard<std::mutex> lock(mu_);
  return ep_->CanBlock();
}

bool BackupLog::Poll(runtime::Nanos now) {
  std::lock_guard<std::mutex> lock(mu_);
  bool work = DrainCompletions() > 0;
  if (design_.receive != BackupReceive::kSharedLog) return work;

  const log::SegmentTable& t = store_->segments();
  // First-word rule: once segment i+1 has a non-zero first word, the NIC has
  // moved past every segment before it.
  for (size_t i = 0; i + 1 < posted_.size(); ++i) {
    if (posted_[i].full_at >= 0) continue;
    uint64_t first;
    std::memcpy(&first, t.SegmentBase(posted_[i + 1].id), sizeof(first));
    // (A screened message is proof too: an erased one leaves a zero word.)
    if (first == 0 && !screened_.contains(posted_[i + 1].id)) break;
    for (size_t j = 0; j <= i; ++j) {
      if (posted_[j].full_at < 0) posted_[j].full_at = now;
    }
  }
  while (!posted_.empty() && posted_.front().full_at >= 0 &&
         now - posted_.front().full_at >= options_.used_grace) {
    Segment used = posted_.front();
    used.limit = t.segment_size();
    screened_.erase(used.id);
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
  uint64_t cursor;
  {
    std::lock_guard<std::mutex> lock(mu_);  // the map; the segment is ours
    cursor = cursor_[id];
  }
  if (design_.valid_prefix != nullptr) {
    const log::SegmentTable& t = store_->segments();
    // Only the prefix the design vouches for (tailwind: its running checksum).
    limit = design_.valid_prefix({t.SegmentBase(id), limit}, store_->options().limits);
  }
  if (limit <= cursor) return Status::Ok();
  SLIP_ASSIGN_OR_RETURN(uint64_t end, store_->DigestReceived(id, cursor, limit, walk));
  std::lock_guard<std::mutex> lock(mu_);
  cursor_[id] = end;
  return Status::Ok();
}

Status BackupLog::DigestAndSeal(const Segment& seg) {
  // A segment leaves every list PersistLanded covers only persistent.
  if (options_.persist_by_request) PersistSegment(seg.id);
  SLIP_RETURN_IF_ERROR(DigestSome(seg.id, seg.limit, store::Store::ReceiveWalk::kFinal));
  {
    std::lock_guard<std::mutex> lock(mu_);
    cursor_.erase(seg.id);
  }
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
    digesting_.insert(seg.id);  // still covered by PersistLanded until sealed
  }
  Status s = DigestAndSeal(seg);
  {
    std::lock_guard<std::mutex> lock(mu_);
    digesting_.erase(seg.id);
  }
  SLIP_RETURN_IF_ERROR(s);
  return true;
}

Result<bool> BackupLog::DigestStep() {
  std::shared_lock<std::shared_mutex> digest(digest_mu_);
  return DigestNext();
}

Status BackupLog::CatchUp() {
  std::unique_lock<std::shared_mutex> digest(digest_mu_);
  for (;;) {
    SLIP_ASSIGN_OR_RETURN(bool more, DigestNext());
    if (!more) break;
  }
  std::vector<std::pair<uint32_t, uint64_t>> open;  // segment, how far
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Every message landed so far screened first: the shared log is
    // digested only as far as the NIC role vouched for it.
    DrainCompletions();
    for (const Segment& s : posted_) {
      auto it = screened_.find(s.id);
      if (it != screened_.end()) open.emplace_back(s.id, it->second);
    }
    for (const auto& [id, s] : open_) open.emplace_back(id, store_->segments().segment_size());
  }
  // Still being written: index what is whole so far, also behind holes (a
  // torn Send of one sender before another's acknowledged entry); the
  // cursor stays at the first hole, for the next digest.
  for (auto [id, limit] : open) SLIP_RETURN_IF_ERROR(DigestSome(id, limit, store::Store::ReceiveWalk::kPastHoles));
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
    ids.insert(ids.end(), digesting_.begin(), digesting_.end());
  }
  for (uint32_t id : ids) PersistSegment(id);
  return Status::Ok();
}

void BackupLog::PersistSegment(uint32_t id) {
  const log::SegmentTable& t = store_->segments();
  t.region()->Persist(t.SegmentBase(id), t.segment_size());
}

Status BackupLog::CheckSender(const proto::ReplOpenRequest& req) const {
  if (!senders_) return Status::Ok();
  auto it = senders_->shards.find(req.sender);
  if (it != senders_->shards.end() && !it->second.empty()) return Status::Ok();
  if (req.term > senders_->term) {
    return Status::Busy("backup is at term " + std::to_string(senders_->term) + ", behind the sender's " +
                        std::to_string(req.term));
  }
  return Status::StaleTerm("node " + std::to_string(req.sender) +
                           " is the primary of no shard this node backs up in term " +
                           std::to_string(senders_->term));
}

uint64_t BackupLog::NewToken() {
  for (;;) {
    uint64_t t = 0;
    if (options_.random) {
      t = options_.random();
    } else {
      auth::RandomBytes(&t, sizeof(t));
    }
    if (t != 0 && !grants_.contains(t)) return t;
  }
}

Result<proto::ReplOpenResponse> BackupLog::Open(const proto::ReplOpenRequest& req) {
  proto::ReplOpenResponse r;
  r.persist_by_request = options_.persist_by_request;
  r.incarnation = options_.incarnation;
  r.flush_offset = 0;
  r.address = address_;
  const bool shared = design_.receive == BackupReceive::kSharedLog;
  if (shared != (req.buffer == proto::ReplBuffer::kNone)) {
    return Status::InvalidArgument(std::string(design_.name) +
                                   (shared ? " backups take Sends into their shared log, not private buffers"
                                           : " writes into private buffers"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (Status s = CheckSender(req); !s.ok()) {
    ++stats_.opens_refused;
    return s;
  }
  if (shared) {
    SendGrant g{.sender = req.sender, .flush = {}, .seq = 0};
    SLIP_ASSIGN_OR_RETURN(g.flush, ep_->Register(flush_word_, sizeof(flush_word_), fabric::Endpoint::kRemoteRead));
    r.send_token = NewToken();
    r.mem_addr = g.flush.remote.addr;
    r.mem_key = g.flush.remote.key;
    r.mem_len = g.flush.remote.len;
    g.seq = ++grant_seq_;
    grants_.emplace(r.send_token, g);
    DropOldestGrants(req.sender);
    return r;
  }
  const auto held = static_cast<size_t>(
      std::count_if(open_.begin(), open_.end(), [&](const auto& kv) { return kv.second.sender == req.sender; }));
  if (held >= options_.max_open_buffers) {
    ++stats_.opens_refused;
    return Status::Busy("node " + std::to_string(req.sender) + " has " + std::to_string(held) +
                        " buffers open here (the admission limit per sender)");
  }
  auto seg = store_->AllocateReceiveSegment();
  if (!seg.ok()) {
    ++stats_.opens_refused;
    return Status::Busy("backup out of PM segments: " + seg.status().message());
  }
  const log::SegmentTable& t = store_->segments();
  // The buffer is a registration of its own: its key reaches this segment
  // and nothing else, and dies with the grant.
  auto mr = ep_->Register(t.SegmentBase(*seg), t.segment_size(),
                          fabric::Endpoint::kRemoteWrite | fabric::Endpoint::kRemoteRead);
  if (!mr.ok()) {
    (void)store_->ReleaseReceiveSegment(*seg);
    return mr.status();
  }
  open_[*seg] = Segment{.id = *seg, .sender = req.sender, .mr = *mr};
  ++stats_.buffers_opened;
  r.mem_addr = mr->remote.addr;
  r.mem_key = mr->remote.key;
  r.mem_len = mr->remote.len;
  r.buffer_id = *seg;
  r.buffer_offset = 0;
  r.buffer_len = t.segment_size();
  return r;
}

// A sender opens again after every failure, and its other workers may
// still use its earlier grants: they stay valid up to the admission limit,
// the oldest dropped first (a worker still on it fails its next flush Read
// and reopens), revoked as Fence revokes.
void BackupLog::DropOldestGrants(uint32_t sender) {
  size_t held = 0;
  auto oldest = grants_.end();
  for (auto it = grants_.begin(); it != grants_.end(); ++it) {
    if (it->second.sender != sender) continue;
    ++held;
    if (oldest == grants_.end() || it->second.seq < oldest->second.seq) oldest = it;
  }
  if (held <= options_.max_open_buffers) return;
  (void)ep_->Deregister(oldest->second.flush);
  DrainCompletions();
  grants_.erase(oldest);
}

void BackupLog::Fence(const Senders& senders) {
  std::lock_guard<std::mutex> lock(mu_);
  if (senders_ && senders_->term == senders.term && senders_->shards == senders.shards) return;
  // A sender keeps its grants while it keeps every shard it had; before the
  // first configuration nothing is known of what it had.
  auto revoked = [&](uint32_t node) {
    auto now = senders.shards.find(node);
    if (!senders_) return now == senders.shards.end();
    auto was = senders_->shards.find(node);
    if (was == senders_->shards.end()) return now == senders.shards.end();
    return now == senders.shards.end() ||
           !std::includes(now->second.begin(), now->second.end(), was->second.begin(), was->second.end());
  };
  std::set<uint32_t> fenced;
  // Keys first: from here no Read or Write of a revoked sender succeeds at
  // this NIC, so nothing it sends from now on can be acknowledged ...
  for (auto& [token, g] : grants_) {
    if (revoked(g.sender)) {
      (void)ep_->Deregister(g.flush);
      fenced.insert(g.sender);
    }
  }
  for (auto it = open_.begin(); it != open_.end();) {
    if (!revoked(it->second.sender)) {
      ++it;
      continue;
    }
    (void)ep_->Deregister(it->second.mr);
    fenced.insert(it->second.sender);
    Segment seg = it->second;
    seg.limit = store_->segments().segment_size();  // whatever landed before the revocation
    to_digest_.push_back(seg);
    it = open_.erase(it);
  }
  // ... then what it Sent before is screened under its token (it may have
  // been acknowledged), and the token goes: later messages are erased.
  DrainCompletions();
  std::erase_if(grants_, [&](const auto& kv) { return revoked(kv.second.sender); });
  stats_.senders_fenced += fenced.size();
  senders_ = senders;
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
  (void)ep_->Deregister(seg.mr);
  open_.erase(it);
  to_digest_.push_back(seg);
  ++stats_.buffers_closed;
  return Status::Ok();
}

Status BackupLog::SealForStop() {
  std::unique_lock<std::shared_mutex> digest(digest_mu_);
  std::vector<Segment> segs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    DrainCompletions();
    const log::SegmentTable& t = store_->segments();
    for (Segment seg : posted_) {
      auto it = screened_.find(seg.id);
      seg.limit = it == screened_.end() ? 0 : it->second;
      std::byte* base = t.SegmentBase(seg.id);
      // From the line after the last screened message (a forged one may
      // end mid-line; what it left there was erased when it was screened).
      for (uint64_t line = (seg.limit + log::kAlign - 1) / log::kAlign * log::kAlign; line < t.segment_size();
           line += log::kAlign) {
        std::byte* p = base + line;
        if (std::any_of(p, p + log::kAlign, [](std::byte b) { return b != std::byte{0}; })) {
          std::memset(p, 0, log::kAlign);
          t.region()->Persist(p, log::kAlign);
        }
      }
      segs.push_back(seg);
    }
    posted_.clear();
    screened_.clear();
    for (auto& [id, seg] : open_) {
      (void)ep_->Deregister(seg.mr);
      Segment closed = seg;
      closed.mr = {};
      closed.limit = t.segment_size();  // as far as whole blocks (tailwind: its checksum) go
      segs.push_back(closed);
    }
    open_.clear();
    segs.insert(segs.end(), to_digest_.begin(), to_digest_.end());
    to_digest_.clear();
  }
  for (const Segment& seg : segs) SLIP_RETURN_IF_ERROR(DigestAndSeal(seg));
  return Status::Ok();
}

BackupLog::Stats BackupLog::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace slip::replication
