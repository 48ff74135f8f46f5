#include "replication/onesided_replicator.h"

#include <cstring>

#include "log/entry.h"

namespace slip::replication {

// One Replicate call. `remaining` counts one hold per backup (released once
// that backup's flush Read is posted) plus one per operation posted for it:
// done(OK) only when every Send/Write and every Read completed cleanly (a
// torn Write can complete with an error after the Read behind it), done
// with the error at the first failure.
struct OneSidedReplicator::Pending {
  uint32_t remaining = 0;
  bool finished = false;
  std::function<void(Status)> done;

  void Ack() {
    if (finished || --remaining > 0) return;
    finished = true;
    done(Status::Ok());
  }
  // Deferred: a failure can be found deep inside Replicate or a poll loop,
  // and `done` may start the next write.
  void Fail(const Status& s) {
    if (finished) return;
    finished = true;
    exec->Post([done = std::move(done), s] { done(s); });
  }
  runtime::Executor* exec = nullptr;
};

namespace {
constexpr char kDelValue[8] = {};  // a DEL entry's 8 reserved bytes (store/)
}  // namespace

OneSidedReplicator::OneSidedReplicator(runtime::Executor* exec, fabric::Endpoint* ep, rpc::PeerCaller* peers,
                                       OneSidedOptions options)
    : exec_(exec),
      ep_(ep),
      peers_(peers),
      o_(std::move(options)),
      shared_(o_.shared_logs ? o_.shared_logs : std::make_shared<SharedRemoteLogs>()) {
  poller_ = exec_->AddPoller([this] { return PollOnce(); });
}

OneSidedReplicator::~OneSidedReplicator() {
  *alive_ = false;
  exec_->RemovePoller(poller_);
  for (auto& [node, l] : links_) {
    if (l.batch_timer != 0) exec_->Cancel(l.batch_timer);
  }
}

uint64_t OneSidedReplicator::Track(Op op) {
  const uint64_t ctx = next_context_++;
  if (op.buffer != UINT32_MAX) ++inflight_[{op.node, op.buffer}];
  for (auto& w : op.writes) ++w->remaining;
  ops_.emplace(ctx, std::move(op));
  return ctx;
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
  auto w = std::make_shared<Pending>();
  w->exec = exec_;
  w->remaining = static_cast<uint32_t>(backups.size());
  w->done = std::move(done);
  for (NodeId b : backups) {
    Link& l = links_[b];
    l.node = b;
    Submit(l, w, bytes);
  }
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

void OneSidedReplicator::Submit(Link& l, const std::shared_ptr<Pending>& w, const Bytes& bytes) {
  if (w->finished) return;
  if (l.state != Link::State::kReady) {
    l.queue.push_back({w, bytes});
    if (l.state == Link::State::kIdle) Open(l, 0);
    return;
  }
  const size_t size = bytes->size();
  switch (o_.protocol) {
    case Protocol::kRowan: {
      // One Send per log block (each fits one multi-receive message).
      size_t pos = 0;
      while (pos < size) {
        const uint32_t block = log::PeekHeader(bytes->data() + pos).BlockBytes();
        Op op;
        op.node = l.node;
        op.epoch = l.epoch;
        op.keep = bytes;
        op.writes = {w};
        const uint64_t ctx = Track(std::move(op));
        Status s = ep_->Send(l.peer, bytes->data() + pos, block, nullptr, ctx);
        if (!s.ok()) {
          ops_.erase(ctx);
          w->Fail(s);
          return Fail(l, s);
        }
        ++stats_.sends;
        stats_.bytes += block;
        pos += block;
      }
      return PostRead(l, {w});
    }
    case Protocol::kShare:
      return SubmitShared(l, w, bytes);
    case Protocol::kRWrite: {
      if (l.tail + size > l.buffer_len) return Roll(l, w, bytes);
      Op op;
      op.keep = bytes;
      return WriteAndFlush(l, std::move(op), {w});
    }
    case Protocol::kTailwind: {
      if (l.tail + size + kChecksumBlockBytes > l.buffer_len) return Roll(l, w, bytes);
      // One Write carries the entry and the checksum that vouches for it.
      Op op;
      op.own.resize(size + kChecksumBlockBytes);
      std::memcpy(op.own.data(), bytes->data(), size);
      l.chain.Absorb(*bytes);
      l.chain.EncodeChecksum(op.own.data() + size);
      return WriteAndFlush(l, std::move(op), {w});
    }
    case Protocol::kBatch: {
      if (l.tail + l.batch.size() + size > l.buffer_len) {
        if (!l.batch.empty()) FlushBatch(l, false);
        if (l.tail + size > l.buffer_len) return Roll(l, w, bytes);
      }
      l.batch.insert(l.batch.end(), bytes->begin(), bytes->end());
      l.batch_writes.push_back(w);
      if (l.batch.size() >= o_.batch_bytes) return FlushBatch(l, false);
      if (l.batch_timer == 0) {
        const NodeId node = l.node;
        const uint64_t epoch = l.epoch;
        l.batch_timer = exec_->After(o_.batch_timeout, [this, node, epoch] {
          Link& lk = links_[node];
          lk.batch_timer = 0;
          if (lk.epoch == epoch && lk.state == Link::State::kReady && !lk.batch.empty()) FlushBatch(lk, true);
        });
      }
      return;
    }
    case Protocol::kRpc:
      break;
  }
  w->Fail(Status::InvalidArgument("rpc-kv does not replicate one-sidedly"));
}

void OneSidedReplicator::FlushBatch(Link& l, bool by_timeout) {
  if (l.batch_timer != 0) {
    exec_->Cancel(l.batch_timer);
    l.batch_timer = 0;
  }
  ++stats_.batches;
  if (by_timeout) ++stats_.batch_timeouts;
  Op op;
  op.own = std::move(l.batch);
  l.batch.clear();
  WriteAndFlush(l, std::move(op), std::exchange(l.batch_writes, {}));
}

void OneSidedReplicator::WriteAndFlush(Link& l, Op data, std::vector<std::shared_ptr<Pending>> writes,
                                       std::optional<uint64_t> reserved) {
  const std::vector<std::byte>& src = data.keep ? *data.keep : data.own;
  const size_t size = src.size();
  const std::byte* ptr = src.data();
  const uint64_t at = l.buffer_offset + (reserved ? *reserved : l.tail);
  data.node = l.node;
  data.epoch = l.epoch;
  data.buffer = reserved ? UINT32_MAX : l.buffer;  // shared buffers count their own writes
  if (reserved) data.shared = l.shared;
  data.writes = writes;
  const uint64_t ctx = Track(std::move(data));
  Status s = ep_->Write(l.peer, ptr, size, nullptr, l.mem, at, ctx);
  if (!s.ok()) {
    if (reserved) {
      ReleaseShared(l.node, ops_.at(ctx).shared);
    } else {
      --inflight_[{l.node, l.buffer}];
    }
    ops_.erase(ctx);
    for (auto& w : writes) w->Fail(s);
    return Fail(l, s);
  }
  if (!reserved) l.tail += size;
  ++stats_.writes;
  stats_.bytes += size;
  PostRead(l, std::move(writes));
}

void OneSidedReplicator::PostRead(Link& l, std::vector<std::shared_ptr<Pending>> writes) {
  Op op;
  op.node = l.node;
  op.epoch = l.epoch;
  op.flush = true;
  op.writes = std::move(writes);
  if (o_.protocol != Protocol::kRowan && o_.protocol != Protocol::kShare) op.buffer = l.buffer;
  const uint64_t ctx = Track(std::move(op));
  Op& placed = ops_.at(ctx);
  Status s = ep_->Read(l.peer, &placed.read_byte, 1, nullptr, l.mem, l.flush_offset, ctx);
  if (!s.ok()) {
    for (auto& w : placed.writes) w->Fail(s);
    if (placed.buffer != UINT32_MAX) --inflight_[{l.node, placed.buffer}];
    ops_.erase(ctx);
    return Fail(l, s);
  }
  ++stats_.flush_reads;
  for (auto& w : placed.writes) w->Ack();  // this backup's hold: its operations are all posted
}

void OneSidedReplicator::Roll(Link& l, const std::shared_ptr<Pending>& w, const Bytes& bytes) {
  if (bytes->size() + kChecksumBlockBytes > l.buffer_len) {
    return w->Fail(Status::TooLarge("entry of " + std::to_string(bytes->size()) + " bytes exceeds a " +
                                    std::to_string(l.buffer_len) + "-byte replication buffer"));
  }
  closing_[{l.node, l.buffer}] = l.tail;
  MaybeClose(l.node, l.buffer);
  l.state = Link::State::kIdle;
  l.queue.push_back({w, bytes});
  Open(l, 0);
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

void OneSidedReplicator::SubmitShared(Link& l, const std::shared_ptr<Pending>& w, const Bytes& bytes) {
  const size_t size = bytes->size();
  for (;;) {
    if (l.shared) {
      if (auto at = l.shared->Reserve(size)) {
        Op op;
        op.keep = bytes;
        return WriteAndFlush(l, std::move(op), {w}, *at);
      }
      if (size > l.shared->len) {
        return w->Fail(Status::TooLarge("entry of " + std::to_string(size) + " bytes exceeds a " +
                                        std::to_string(l.shared->len) + "-byte replication buffer"));
      }
    }
    // Full, or this worker has none: another worker may have opened the next.
    auto cur = shared_->Current(l.node);
    if (!cur || cur == l.shared || cur->full()) break;
    Status s = UseShared(l, std::move(cur));
    if (!s.ok()) {
      w->Fail(s);
      return Fail(l, s);
    }
  }
  l.state = Link::State::kIdle;
  l.queue.push_back({w, bytes});
  Open(l, 0);
}

Status OneSidedReplicator::UseShared(Link& l, std::shared_ptr<SharedRemoteLogs::Buffer> b) {
  auto known = peer_ids_.find(b->address);
  if (known == peer_ids_.end()) {
    SLIP_ASSIGN_OR_RETURN(fabric::PeerId peer, ep_->AddPeer(b->address));
    known = peer_ids_.emplace(b->address, peer).first;
  }
  l.peer = known->second;
  l.mem = b->mem;
  l.flush_offset = b->flush_offset;
  l.buffer = b->id;
  l.buffer_offset = b->offset;
  l.buffer_len = b->len;
  l.shared = std::move(b);
  return Status::Ok();
}

void OneSidedReplicator::ReleaseShared(NodeId node, const std::shared_ptr<SharedRemoteLogs::Buffer>& b) {
  // The last write into a full buffer closes it, whichever worker's it was.
  if (b->Release()) SendClose(node, b->id, b->used());
}

void OneSidedReplicator::Open(Link& l, int attempt) {
  l.state = Link::State::kOpening;
  ++stats_.opens;
  proto::ReplOpenRequest req{o_.term ? o_.term() : 0, o_.self,
                             o_.protocol == Protocol::kRowan ? proto::ReplBuffer::kNone : proto::ReplBuffer::kPrivate};
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
    std::string address(resp.address);
    auto known = peer_ids_.find(address);
    if (known == peer_ids_.end()) {
      auto peer = ep_->AddPeer(address);
      if (!peer.ok()) {
        s = peer.status();
      } else {
        known = peer_ids_.emplace(address, *peer).first;
      }
    }
    if (s.ok()) l.peer = known->second;
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
  if (o_.protocol == Protocol::kShare) {
    auto fresh = std::make_shared<SharedRemoteLogs::Buffer>();
    fresh->id = resp.buffer_id;
    fresh->address = std::string(resp.address);
    fresh->mem = fabric::RemoteMemory{resp.mem_addr, resp.mem_key, resp.mem_len};
    fresh->flush_offset = resp.flush_offset;
    fresh->offset = resp.buffer_offset;
    fresh->len = resp.buffer_len;
    auto use = shared_->Install(node, fresh, l.shared.get());
    if (use != fresh) SendClose(node, fresh->id, 0);  // another worker's came first
    Status used = UseShared(l, std::move(use));
    if (!used.ok()) {
      l.state = Link::State::kIdle;
      ++l.epoch;
      ++stats_.failures;
      for (auto& q : std::exchange(l.queue, {})) q.w->Fail(used);
      return;
    }
  } else {
    l.mem = fabric::RemoteMemory{resp.mem_addr, resp.mem_key, resp.mem_len};
    l.flush_offset = resp.flush_offset;
    l.buffer = resp.buffer_id;
    l.buffer_offset = resp.buffer_offset;
    l.buffer_len = resp.buffer_len;
  }
  l.tail = 0;
  l.chain.Reset();
  l.state = Link::State::kReady;
  auto queue = std::move(l.queue);
  l.queue.clear();
  while (!queue.empty()) {
    Queued q = std::move(queue.front());
    queue.pop_front();
    Submit(l, q.w, q.bytes);
    if (l.state != Link::State::kReady) {
      // Rolled or failed meanwhile: the rest waits for the next open.
      l.queue.insert(l.queue.end(), std::make_move_iterator(queue.begin()), std::make_move_iterator(queue.end()));
      break;
    }
  }
}

void OneSidedReplicator::Fail(Link& l, const Status& s) {
  ++stats_.failures;
  if (l.batch_timer != 0) {
    exec_->Cancel(l.batch_timer);
    l.batch_timer = 0;
  }
  auto batch = std::exchange(l.batch_writes, {});
  l.batch.clear();
  // The buffer may hold a torn transfer: never write there again (a backup
  // digests its whole prefix and stops at the tear).
  ++l.epoch;
  l.state = Link::State::kIdle;
  if (l.shared) {
    // share-kv: every worker stops writing there; the next open starts a
    // fresh buffer (the backup may have restarted without this one).
    shared_->Retire(l.node, l.shared);
    l.shared.reset();
  }
  auto queue = std::exchange(l.queue, {});
  for (auto& w : batch) w->Fail(s);
  for (auto& q : queue) q.w->Fail(s);
}

bool OneSidedReplicator::PollOnce() {
  fabric::Completion c[32];
  const size_t n = ep_->Poll(c);
  for (size_t i = 0; i < n; ++i) {
    auto it = ops_.find(c[i].context);
    if (it == ops_.end()) continue;
    Op op = std::move(it->second);
    ops_.erase(it);
    if (op.buffer != UINT32_MAX) {
      auto in = inflight_.find({op.node, op.buffer});
      if (in != inflight_.end() && in->second > 0) --in->second;
    }
    if (c[i].status != Code::kOk) {
      const Status s(c[i].status, "replicating to node " + std::to_string(op.node) + " failed");
      for (auto& w : op.writes) w->Fail(s);
      Link& l = links_[op.node];
      if (l.epoch == op.epoch) Fail(l, s);
    } else {
      for (auto& w : op.writes) w->Ack();
    }
    if (op.buffer != UINT32_MAX) MaybeClose(op.node, op.buffer);
    if (op.shared) ReleaseShared(op.node, op.shared);
  }
  return n > 0;
}

}  // namespace slip::replication
