#include "replication/onesided/replicator.h"

#include <cstring>

#include "log/entry.h"

namespace slip::replication {
namespace onesided {

void Pending::Ack() {
  if (finished || --remaining > 0) return;
  finished = true;
  done(Status::Ok());
}

void Pending::Fail(const Status& s) {
  if (finished) return;
  finished = true;
  exec->Post([done = std::move(done), s] { done(s); });
}

Status Placement::Adopt(OneSidedReplicator& /*r*/, Link& l, const proto::ReplOpenResponse& resp) {
  l.mem = fabric::RemoteMemory{resp.mem_addr, resp.mem_key, resp.mem_len};
  l.flush_offset = resp.flush_offset;
  l.persist_by_request = resp.persist_by_request;
  l.incarnation = resp.incarnation;
  l.send_token = resp.send_token;
  l.buffer = resp.buffer_id;
  l.buffer_offset = resp.buffer_offset;
  l.buffer_len = resp.buffer_len;
  return Status::Ok();
}

}  // namespace onesided

using onesided::Pending;

namespace {
constexpr char kDelValue[8] = {};  // a DEL entry's 8 reserved bytes (store/)
}  // namespace

OneSidedReplicator::OneSidedReplicator(runtime::Executor* exec, fabric::Endpoint* ep, rpc::PeerCaller* peers,
                                       OneSidedOptions options, std::unique_ptr<onesided::Placement> placement)
    : exec_(exec), ep_(ep), peers_(peers), o_(std::move(options)), placement_(std::move(placement)) {
  poller_ = exec_->AddPoller([this] { return PollOnce(); });
}

OneSidedReplicator::~OneSidedReplicator() {
  *alive_ = false;
  exec_->RemovePoller(poller_);
  placement_->Stop(*this);
}

uint64_t OneSidedReplicator::Track(Op op) {
  const uint64_t ctx = next_context_++;
  if (op.buffer != UINT32_MAX) ++inflight_[{op.node, op.buffer}];
  for (auto& w : op.writes) ++w->remaining;
  ops_.emplace(ctx, std::move(op));
  return ctx;
}

void OneSidedReplicator::Untrack(const Op& op) {
  if (op.buffer == UINT32_MAX) return;
  auto in = inflight_.find({op.node, op.buffer});
  if (in != inflight_.end() && in->second > 0) --in->second;
}

void OneSidedReplicator::Replicate(std::span<const NodeId> backups, const proto::ReplicateRequest& entry,
                                   std::function<void(Status)> done) {
  // The entry exactly as the backup's store keeps it.
  const std::string_view value =
      entry.meta.type == log::EntryType::kDel ? std::string_view(kDelValue, 8) : entry.value;
  auto layout = log::PlanEntry(entry.key.size(), value.size(), o_.max_message);
  if (!layout.ok()) {
    return exec_->Post([done = std::move(done), s = layout.status()] { done(s); });
  }
  auto bytes = std::make_shared<std::vector<std::byte>>(log::EncodeEntry(entry.meta, entry.key, value, *layout));
  if (backups.empty()) return exec_->Post([done = std::move(done)] { done(Status::Ok()); });
  if (o_.test_bug_ack_early && backups.size() > 1) return ReplicateAckingEarly(backups, bytes, std::move(done));
  const std::vector<Bytes> pieces = Pieces(bytes);
  auto w = std::make_shared<Pending>();
  w->exec = exec_;
  // One hold per piece per backup, each released when that piece's flush
  // Read is posted.
  w->remaining = static_cast<uint32_t>(backups.size() * pieces.size());
  w->done = std::move(done);
  for (NodeId b : backups) {
    Link& l = links_[b];
    l.node = b;
    for (const Bytes& piece : pieces) Submit(l, w, piece);
  }
}

// An entry larger than max_piece goes as several pieces of whole blocks,
// each placed like an entry of its own and so free to land in a different
// replication buffer: no entry is too large for a buffer. The backup joins
// an entry's blocks wherever they lie and indexes it only once all of them
// are there (Store::DigestReceived); the write is acknowledged only once
// every piece is persistent on every backup.
std::vector<onesided::Bytes> OneSidedReplicator::Pieces(const Bytes& bytes) const {
  if (bytes->size() <= o_.max_piece) return {bytes};
  std::vector<Bytes> pieces;
  size_t start = 0, pos = 0;
  while (pos < bytes->size()) {
    const uint32_t block = log::PeekHeader(bytes->data() + pos).BlockBytes();
    if (pos > start && pos + block - start > o_.max_piece) {
      pieces.push_back(std::make_shared<std::vector<std::byte>>(bytes->begin() + start, bytes->begin() + pos));
      start = pos;
    }
    pos += block;
  }
  pieces.push_back(std::make_shared<std::vector<std::byte>>(bytes->begin() + start, bytes->end()));
  return pieces;
}

// The injected bug: one Pending per backup, and OK as soon as all but one
// of them completed — the last backup's copy may not be persistent yet.
void OneSidedReplicator::ReplicateAckingEarly(std::span<const NodeId> backups, const Bytes& bytes,
                                              std::function<void(Status)> done) {
  struct Early {
    size_t left;
    bool fired = false;
    std::function<void(Status)> done;
  };
  auto e = std::make_shared<Early>(Early{backups.size() - 1, false, std::move(done)});
  for (NodeId b : backups) {
    auto w = std::make_shared<Pending>();
    w->exec = exec_;
    w->remaining = 1;
    w->done = [e](Status s) {
      if (e->fired) return;
      if (s.ok() && --e->left > 0) return;
      e->fired = true;
      e->done(s);
    };
    Link& l = links_[b];
    l.node = b;
    Submit(l, w, bytes);
  }
}

void OneSidedReplicator::Submit(Link& l, const PendingPtr& w, const Bytes& bytes) {
  if (w->finished) return;
  if (l.state != Link::State::kReady) {
    l.queue.push_back({w, bytes});
    if (l.state == Link::State::kIdle) Open(l, 0);
    return;
  }
  placement_->Submit(*this, l, w, bytes);
}

Status OneSidedReplicator::PostSend(Link& l, const Bytes& keep, const std::byte* data, size_t len,
                                    const PendingPtr& w) {
  Op op;
  op.node = l.node;
  op.epoch = l.epoch;
  op.keep = keep;
  op.writes = {w};
  const uint64_t ctx = Track(std::move(op));
  // Chained with the flush Read that follows, which reports for it (as
  // Rowan posts SEND + READ in one ibv_post_send, the SEND unsignalled).
  Status s = ep_->Send(l.peer, data, len, nullptr, ctx, fabric::kMore | fabric::kSilent);
  if (!s.ok()) {
    ops_.erase(ctx);
    return s;
  }
  l.silent.push_back(ctx);
  ++stats_.sends;
  stats_.bytes += len;
  return Status::Ok();
}

void OneSidedReplicator::WriteAndFlush(Link& l, Op data, std::vector<PendingPtr> writes,
                                       std::optional<uint64_t> reserved) {
  const std::vector<std::byte>& src = data.keep ? *data.keep : data.own;
  const size_t size = src.size();
  const std::byte* ptr = src.data();
  const uint64_t at = l.buffer_offset + (reserved ? *reserved : l.tail);
  data.node = l.node;
  data.epoch = l.epoch;
  data.buffer = reserved ? UINT32_MAX : l.buffer;  // shared buffers count their own writes
  data.writes = writes;
  const uint64_t ctx = Track(std::move(data));
  Status s = ep_->Write(l.peer, ptr, size, nullptr, l.mem, at, ctx, fabric::kMore | fabric::kSilent);
  if (!s.ok()) {
    Op& op = ops_.at(ctx);
    if (auto release = std::move(op.release)) release();
    Untrack(op);
    ops_.erase(ctx);
    for (auto& w : writes) w->Fail(s);
    return Fail(l, s);
  }
  l.silent.push_back(ctx);
  if (!reserved) l.tail += size;
  ++stats_.writes;
  stats_.bytes += size;
  PostRead(l, std::move(writes));
}

void OneSidedReplicator::PostRead(Link& l, std::vector<PendingPtr> writes) {
  Op op;
  op.node = l.node;
  op.epoch = l.epoch;
  op.flush = true;
  op.persist = l.persist_by_request;
  op.incarnation = l.incarnation;
  op.writes = std::move(writes);
  op.covers = std::exchange(l.silent, {});
  if (placement_->flush_holds_buffer()) op.buffer = l.buffer;
  const uint64_t ctx = Track(std::move(op));
  Op& placed = ops_.at(ctx);
  Status s = ep_->Read(l.peer, &placed.read_byte, 1, nullptr, l.mem, l.flush_offset, ctx);
  if (!s.ok()) {
    for (auto& w : placed.writes) w->Fail(s);
    Untrack(placed);
    l.silent = std::move(placed.covers);  // nothing will report for them: Fail drops them
    ops_.erase(ctx);
    return Fail(l, s);
  }
  ++stats_.flush_reads;
  for (auto& w : placed.writes) w->Ack();  // this backup's hold: its operations are all posted
}

void OneSidedReplicator::Roll(Link& l, const PendingPtr& w, const Bytes& bytes) {
  if (bytes->size() + placement_->framing_bytes() > l.buffer_len) {
    return w->Fail(Status::TooLarge("entry of " + std::to_string(bytes->size()) + " bytes exceeds a " +
                                    std::to_string(l.buffer_len) + "-byte replication buffer"));
  }
  closing_[{l.node, l.buffer}] = l.tail;
  MaybeClose(l.node, l.buffer);
  l.state = Link::State::kIdle;
  l.queue.push_back({w, bytes});
  Open(l, 0);
}

void OneSidedReplicator::Reopen(Link& l, const PendingPtr& w, const Bytes& bytes) {
  l.state = Link::State::kIdle;
  l.queue.push_back({w, bytes});
  Open(l, 0);
}

Result<fabric::PeerId> OneSidedReplicator::PeerAt(const std::string& address) {
  auto known = peer_ids_.find(address);
  if (known == peer_ids_.end()) {
    SLIP_ASSIGN_OR_RETURN(fabric::PeerId peer, ep_->AddPeer(address));
    known = peer_ids_.emplace(address, peer).first;
  }
  return known->second;
}

void OneSidedReplicator::MaybeClose(NodeId node, uint32_t buffer) {
  auto c = closing_.find({node, buffer});
  if (c == closing_.end()) return;
  auto in = inflight_.find({node, buffer});
  if (in != inflight_.end() && in->second > 0) return;
  if (in != inflight_.end()) inflight_.erase(in);
  const uint64_t used = c->second;
  closing_.erase(c);
  SendClose(node, buffer, used);
}

void OneSidedReplicator::SendClose(NodeId node, uint32_t buffer, uint64_t used) {
  ++stats_.closes;
  proto::ReplCloseRequest req{o_.term ? o_.term() : 0, o_.self, buffer, used};
  // Best effort: a backup that misses a close keeps the buffer open, and its
  // CatchUp still digests it.
  peers_->Call(node, static_cast<uint16_t>(proto::Method::kReplClose), proto::Encode(req),
               [](Result<rpc::PeerResponse>) {});
}

void OneSidedReplicator::Open(Link& l, int attempt) {
  l.state = Link::State::kOpening;
  ++stats_.opens;
  proto::ReplOpenRequest req{o_.term ? o_.term() : 0, o_.self,
                             placement_->buffer_kind()};
  peers_->Call(l.node, static_cast<uint16_t>(proto::Method::kReplOpen), proto::Encode(req),
               [this, alive = alive_, node = l.node, epoch = l.epoch, attempt](Result<rpc::PeerResponse> r) {
                 if (*alive) Opened(node, epoch, std::move(r), attempt);
               });
}

void OneSidedReplicator::Opened(NodeId node, uint64_t epoch, Result<rpc::PeerResponse> r, int attempt) {
  Link& l = links_[node];
  if (l.epoch != epoch || l.state != Link::State::kOpening) return;
  Status s = !r.ok() ? r.status()
             : r->status != Code::kOk ? Status(r->status, "node " + std::to_string(node) + " refused REPL_OPEN: " + r->payload)
                                      : Status::Ok();
  if (s.Is(Code::kBusy) && attempt + 1 < o_.open_attempts) {
    // Admission limit (Tailwind: no free buffer): try again shortly.
    exec_->After(o_.open_retry, [this, alive = alive_, node, epoch, attempt] {
      if (!*alive) return;
      Link& lk = links_[node];
      if (lk.epoch == epoch && lk.state == Link::State::kOpening) Open(lk, attempt + 1);
    });
    return;
  }
  proto::ReplOpenResponse resp;
  if (s.ok()) {
    auto d = proto::DecodeReplOpenResponse(proto::AsBytes(r->payload));
    if (!d.ok()) s = d.status();
    if (s.ok()) resp = *d;
  }
  if (s.ok()) {
    auto peer = PeerAt(std::string(resp.address));
    if (peer.ok()) {
      l.peer = *peer;
    } else {
      s = peer.status();
    }
  }
  if (!s.ok()) {
    // Nothing was sent: every queued write fails (its outcome is then
    // "unknown" to the client, which retries) and the next write reopens.
    auto queue = std::move(l.queue);
    l.queue.clear();
    l.state = Link::State::kIdle;
    ++l.epoch;
    ++stats_.failures;
    for (auto& q : queue) q.w->Fail(s);
    return;
  }
  if (Status adopted = placement_->Adopt(*this, l, resp); !adopted.ok()) {
    l.state = Link::State::kIdle;
    ++l.epoch;
    ++stats_.failures;
    for (auto& q : std::exchange(l.queue, {})) q.w->Fail(adopted);
    return;
  }
  l.tail = 0;
  placement_->Ready(l);
  l.state = Link::State::kReady;
  auto queue = std::move(l.queue);
  l.queue.clear();
  while (!queue.empty()) {
    Link::Queued q = std::move(queue.front());
    queue.pop_front();
    Submit(l, q.w, q.bytes);
    if (l.state != Link::State::kReady) {
      // Rolled or failed meanwhile: the rest waits for the next open.
      l.queue.insert(l.queue.end(), std::make_move_iterator(queue.begin()), std::make_move_iterator(queue.end()));
      break;
    }
  }
}

void OneSidedReplicator::DropSilent(Link& l, const Status& s) {
  const runtime::Nanos now = exec_->Now();
  for (uint64_t ctx : std::exchange(l.silent, {})) {
    auto it = ops_.find(ctx);
    if (it == ops_.end()) continue;  // its failure was reported already
    OpNode node = ops_.extract(it);
    Op& op = node.mapped();
    for (auto& w : op.writes) w->Fail(s);
    op.writes.clear();
    op.orphan = true;
    failed_ops_.emplace_back(now, std::move(node));
  }
}

void OneSidedReplicator::Forget(Op& op) {
  if (!op.orphan) return;
  Untrack(op);
  if (op.release) op.release();
  if (op.buffer != UINT32_MAX) MaybeClose(op.node, op.buffer);
}

void OneSidedReplicator::Fail(Link& l, const Status& s) {
  ++stats_.failures;
  DropSilent(l, s);
  auto held = placement_->Reset(*this, l);
  // The buffer may hold a torn transfer: never write there again (a backup
  // digests its whole prefix and stops at the tear).
  ++l.epoch;
  l.state = Link::State::kIdle;
  auto queue = std::exchange(l.queue, {});
  for (auto& w : held) w->Fail(s);
  for (auto& q : queue) q.w->Fail(s);
}

bool OneSidedReplicator::PollOnce() {
  fabric::Completion c[32];
  const size_t n = ep_->Poll(c);
  // Writes whose flush Read completed at a backup that persists on request:
  // one REPL_PERSIST per backup for all of them, acknowledged on its answer.
  std::map<std::pair<NodeId, uint64_t>, std::vector<PendingPtr>> to_persist;
  const runtime::Nanos now = exec_->Now();
  while (!failed_ops_.empty() && now - failed_ops_.front().first > kFailedOpsKept) {
    Forget(failed_ops_.front().second.mapped());
    failed_ops_.pop_front();
  }
  for (size_t i = 0; i < n; ++i) {
    auto it = ops_.find(c[i].context);
    if (it == ops_.end()) continue;
    OpNode node = ops_.extract(it);
    // A Read's completion is its silent operations' too (fabric::kSilent:
    // had one failed, that would have been reported first).
    for (uint64_t covered : node.mapped().covers) {
      auto ci = ops_.find(covered);
      if (ci != ops_.end()) Finish(ops_.extract(ci), c[i].status, now, to_persist);
    }
    Finish(std::move(node), c[i].status, now, to_persist);
  }
  for (auto& [to, writes] : to_persist) RequestPersist(to.first, to.second, std::move(writes));
  return n > 0;
}

void OneSidedReplicator::Finish(OpNode node, Code status, runtime::Nanos now,
                                std::map<std::pair<NodeId, uint64_t>, std::vector<PendingPtr>>& to_persist) {
  Op& op = node.mapped();
  Untrack(op);
  if (status != Code::kOk) {
    const Status s(status, "replicating to node " + std::to_string(op.node) + " failed");
    for (auto& w : op.writes) w->Fail(s);
    Link& l = links_[op.node];
    if (l.epoch == op.epoch) Fail(l, s);
  } else if (op.persist) {
    auto& held = to_persist[{op.node, op.incarnation}];
    held.insert(held.end(), op.writes.begin(), op.writes.end());
  } else {
    for (auto& w : op.writes) w->Ack();
  }
  if (op.buffer != UINT32_MAX) MaybeClose(op.node, op.buffer);
  if (op.release) op.release();
  // A failed operation's memory, which the provider may still touch.
  if (status != Code::kOk) failed_ops_.emplace_back(now, std::move(node));
}

void OneSidedReplicator::RequestPersist(NodeId node, uint64_t incarnation, std::vector<PendingPtr> writes) {
  ++stats_.persist_requests;
  peers_->Call(node, static_cast<uint16_t>(proto::Method::kReplPersist),
               proto::Encode(proto::ReplPersistRequest{incarnation}),
               [this, alive = alive_, node, writes = std::move(writes)](Result<rpc::PeerResponse> r) {
                 const Status s = !r.ok()                   ? r.status()
                                  : r->status != Code::kOk ? Status(r->status, "node " + std::to_string(node) +
                                                                                   " refused REPL_PERSIST: " + r->payload)
                                                           : Status::Ok();
                 for (auto& w : writes) {
                   if (s.ok()) {
                     w->Ack();
                   } else {
                     w->Fail(s);
                   }
                 }
                 if (!s.ok() && *alive) ++stats_.failures;
               });
}

}  // namespace slip::replication
