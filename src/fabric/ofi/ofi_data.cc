// The libfabric provider's data path: operation state, posting (with the
// backlog the provider's EAGAIN forces), completions, timeouts, and waiting
// on the provider's wait object.
#include "fabric/ofi/ofi_internal.h"

namespace slip::fabric::ofi_internal {

Result<OfiEndpoint::OpState*> OfiEndpoint::BeginOp(Op op, PeerId peer, uint64_t context,
                                                   bool initiator) {
  if (free_ops_.empty()) {
    ProgressToPending();
    if (free_ops_.empty()) return Status::Busy("too many outstanding operations");
  }
  OpState* st = free_ops_.back();
  free_ops_.pop_back();
  st->user_context = context;
  st->op = op;
  st->peer = peer;
  st->phase = Phase::kPosted;
  st->multi = false;
  st->user_buf = nullptr;
  st->user_len = 0;
  st->old_out = nullptr;
  st->recv_base = nullptr;
  st->iov_count = 1;
  st->desc[0] = st->desc[1] = nullptr;
  st->deferred = false;
  st->silent = false;
  st->silent_open = false;
  st->seq = 0;
  if (initiator) {
    st->seq = ++peers_[peer].next_seq;
    st->deadline = Clock::now() + options_.op_timeout;
    Track(st);
  }
  return st;
}

void OfiEndpoint::FreeOp(OpState* st) {
  ResolveSilent(st);
  if (st->tracked) Untrack(st);
  if (st->deferred) Undefer(st);
  st->bounce.reset();
  st->phase = Phase::kFree;
  free_ops_.push_back(st);
}

void OfiEndpoint::Track(OpState* st) {
  deadlines_.PushBack(st);
  st->tracked = true;
}

void OfiEndpoint::Untrack(OpState* st) {
  deadlines_.Remove(st);
  st->tracked = false;
}

void OfiEndpoint::MarkSilent(OpState* st) {
  st->silent = true;
  st->silent_open = true;
  peers_[st->peer].silent_open.push_back(st->seq);
}

void OfiEndpoint::ResolveSilent(OpState* st) {
  if (!st->silent_open) return;
  st->silent_open = false;
  Peer& p = peers_[st->peer];
  p.silent_open.erase(std::find(p.silent_open.begin(), p.silent_open.end(), st->seq));
  // Released after whatever this call's caller reports for `st` itself: a
  // silent failure reaches the caller before the completions it held.
  while (!p.held.empty() && (p.silent_open.empty() || p.held.front().first < p.silent_open.front())) {
    pending_.push_back(p.held.front().second);
    p.held.pop_front();
  }
}

void OfiEndpoint::Hold(PeerId peer, uint64_t seq, const Completion& c) {
  auto& held = peers_[peer].held;
  auto at = std::upper_bound(held.begin(), held.end(), seq,
                             [](uint64_t s, const auto& h) { return s < h.first; });
  held.emplace(at, seq, c);
}

bool OfiEndpoint::MustHold(const OpState* st) const {
  if (st->op == Op::kRecv) return false;
  const Peer& p = peers_[st->peer];
  return !p.silent_open.empty() && p.silent_open.front() < st->seq;
}

void OfiEndpoint::Synthesize(OpState* st, Code status) {
  Completion c;
  c.context = st->user_context;
  c.op = st->op;
  c.status = status;
  pending_.push_back(c);
}

void OfiEndpoint::FailUnposted(OpState* st, Code status) {
  if (st->tracked) Untrack(st);
  if (MustHold(st)) {
    Hold(st->peer, st->seq, Completion{st->user_context, st->op, status});
  } else {
    Synthesize(st, status);
  }
  FreeOp(st);
}

ssize_t OfiEndpoint::PostNow(OpState* st) {
  // The peer's region is locked: libfabric would spin on it until the
  // holder lets go, and for ever if the holder was killed (region_lock.h).
  // A live holder lets go within microseconds (one pass over its queue),
  // so wait that long here; past it, try again later, from Poll(), while
  // the op's deadline runs.
  if (const RegionLockWatch* lock = st->op == Op::kRecv ? nullptr : peers_[st->peer].region_lock.get()) {
    for (int spin = 0; lock->Held(); ++spin) {
      if (spin == kRegionLockSpins) return -FI_EAGAIN;
      __builtin_ia32_pause();
    }
  }
  const ssize_t ret = PostOnce(st);
  if (st->op != Op::kRecv && (ret == 0 || ret == -FI_EAGAIN)) {
    if (const int bell = peers_[st->peer].bell; bell >= 0) Ring(bell);
  }
  return ret;
}

ssize_t OfiEndpoint::PostOnce(OpState* st) {
  void* ctx = &st->fi_ctx;
  fid_ep* ep = TxEp(st);
  switch (st->op) {
    case Op::kSend: {
      if (st->iov_count == 1 && send_flags_ == 0) {
        return cq_data_ ? fi_senddata(ep, st->iov[0].iov_base, st->iov[0].iov_len,
                                      st->desc[0], st->cq_data, st->dest, ctx)
                        : fi_send(ep, st->iov[0].iov_base, st->iov[0].iov_len, st->desc[0],
                                  st->dest, ctx);
      }
      fi_msg msg{};
      msg.msg_iov = st->iov;
      msg.desc = st->desc;
      msg.iov_count = st->iov_count;
      msg.addr = st->dest;
      msg.context = ctx;
      msg.data = st->cq_data;
      return fi_sendmsg(ep, &msg,
                        FI_COMPLETION | send_flags_ | (cq_data_ ? FI_REMOTE_CQ_DATA : 0));
    }
    case Op::kRecv: {
      if (!st->multi) {
        return fi_recv(ep, st->iov[0].iov_base, st->iov[0].iov_len, st->desc[0],
                       FI_ADDR_UNSPEC, ctx);
      }
      fi_msg msg{};
      msg.msg_iov = st->iov;
      msg.desc = st->desc;
      msg.iov_count = 1;
      msg.addr = FI_ADDR_UNSPEC;
      msg.context = ctx;
      return fi_recvmsg(ep, &msg, FI_MULTI_RECV | FI_COMPLETION);
    }
    case Op::kWrite: {
      if (write_flags_ == 0) {
        return fi_write(ep, st->iov[0].iov_base, st->iov[0].iov_len, st->desc[0], st->dest,
                        st->raddr, st->key, ctx);
      }
      fi_rma_iov rma{st->raddr, st->iov[0].iov_len, st->key};
      fi_msg_rma msg{};
      msg.msg_iov = st->iov;
      msg.desc = st->desc;
      msg.iov_count = 1;
      msg.addr = st->dest;
      msg.rma_iov = &rma;
      msg.rma_iov_count = 1;
      msg.context = ctx;
      return fi_writemsg(ep, &msg, FI_COMPLETION | write_flags_);
    }
    case Op::kRead:
      return fi_read(ep, st->iov[0].iov_base, st->iov[0].iov_len, st->desc[0], st->dest,
                     st->raddr, st->key, ctx);
    case Op::kCompareSwap:
      return fi_compare_atomic(ep, &st->operand, 1, ops_desc_, &st->compare, ops_desc_,
                               &st->result, ops_desc_, st->dest, st->raddr, st->key, FI_UINT64,
                               FI_CSWAP, ctx);
    case Op::kFetchAdd:
      return fi_fetch_atomic(ep, &st->operand, 1, ops_desc_, &st->result, ops_desc_, st->dest,
                             st->raddr, st->key, FI_UINT64, FI_SUM, ctx);
  }
  return -FI_EINVAL;
}

bool OfiEndpoint::ChannelDeferred(const OpState* st) const {
  return st->op == Op::kRecv ? deferred_recvs_ > 0 : peers_[st->peer].deferred > 0;
}

void OfiEndpoint::Defer(OpState* st) {
  backlog_.PushBack(st);
  st->deferred = true;
  if (st->op == Op::kRecv) {
    ++deferred_recvs_;
  } else {
    ++peers_[st->peer].deferred;
  }
}

void OfiEndpoint::Undefer(OpState* st) {
  backlog_.Remove(st);
  st->deferred = false;
  if (st->op == Op::kRecv) {
    --deferred_recvs_;
  } else {
    --peers_[st->peer].deferred;
  }
}

Status OfiEndpoint::Submit(OpState* st, const char* what) {
  // Later operations of a channel must not overtake its deferred ones.
  if (ChannelDeferred(st)) {
    Defer(st);
    return Status::Ok();
  }
  for (int attempt = 0;; ++attempt) {
    ssize_t ret = PostNow(st);
    if (ret == 0) return Status::Ok();
    if (ret != -FI_EAGAIN) {
      FreeOp(st);
      return FiStatus(what, static_cast<int>(ret));
    }
    // FI_EAGAIN also means "the peer has not answered yet": shm's first
    // operation to a peer waits for the peer to map our name, rxm's for the
    // connection to be accepted, both driven by the *peer's* progress. The
    // peer may be polled by this very thread (tests, simulations of several
    // nodes), so do not spin on it: defer and retry from Poll(). Its deadline
    // keeps running, so a dead peer still ends in Timeout.
    if (attempt == kPostRetries) {
      Defer(st);
      return Status::Ok();
    }
    ProgressToPending();
  }
}

void OfiEndpoint::DrainBacklog() {
  if (backlog_.empty()) return;
  const uint64_t pass = ++drain_pass_;
  bool recv_blocked = false;
  for (OpState* st = backlog_.front(); st != nullptr;) {
    OpState* next = backlog_.Next(st);
    const bool is_recv = st->op == Op::kRecv;
    if (is_recv ? recv_blocked : peers_[st->peer].blocked_pass == pass) {
      st = next;
      continue;
    }
    ssize_t ret = PostNow(st);
    if (ret == -FI_EAGAIN) {
      if (is_recv) {
        recv_blocked = true;
      } else {
        peers_[st->peer].blocked_pass = pass;
      }
    } else {
      Undefer(st);
      if (ret != 0) FailUnposted(st, MapFiErr(static_cast<int>(-ret)));
    }
    st = next;
  }
}

Status OfiEndpoint::Send(PeerId peer, const void* buf, size_t len, const MemoryRegion* mr,
                         uint64_t context, uint32_t post) {
  SLIP_ASSIGN_OR_RETURN(Peer * p, CheckPeer(peer));
  if (buf == nullptr && len > 0) return Status::InvalidArgument("null send buffer");
  // Any message may land in a multi-receive buffer, and libfabric cannot
  // skip a buffer whose free tail (>= max_multi_recv_message) is too short:
  // rxm would truncate the message and shm 1.17 corrupt its bookkeeping.
  // Refuse here, where the sender still gets a clean error.
  const size_t padded = PadLen(len);
  if (padded > core_->ofi.max_multi_recv_message || len > UINT32_MAX) {
    return Status::TooLarge("message of " + std::to_string(len) +
                            " bytes exceeds max_multi_recv_message (" +
                            std::to_string(core_->ofi.max_multi_recv_message) + ")");
  }
  SLIP_RETURN_IF_ERROR(CheckLocal(buf, len, mr));
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kSend, peer, context, true));
  if (post & kSilent) MarkSilent(st);
  st->dest = p->addr;
  st->cq_data = len;
  st->iov_count = 1;
  st->iov[0] = {const_cast<void*>(buf), len};
  st->desc[0] = mr ? mr->desc : nullptr;
  if ((local_mr_ && mr == nullptr && len > 0) || (padded != len && iov_limit_ < 2)) {
    auto b = MakeBounce(padded);
    if (!b.ok()) {
      FreeOp(st);
      return b.status();
    }
    st->bounce = std::move(*b);
    std::memcpy(st->bounce->buf, buf, len);
    std::memset(st->bounce->buf + len, 0, padded - len);
    st->iov[0] = {st->bounce->buf, padded};
    st->desc[0] = st->bounce->desc;
  } else if (padded != len) {
    // Pad with a second iov entry instead of copying the message.
    st->iov[1] = {zeros_.data(), padded - len};
    st->desc[1] = zeros_desc_;
    st->iov_count = 2;
  }
  return Submit(st, "fi_sendmsg");
}

Status OfiEndpoint::PostRecv(void* buf, size_t len, const MemoryRegion* mr, uint64_t context) {
  if (buf == nullptr || len == 0) return Status::InvalidArgument("empty receive buffer");
  SLIP_RETURN_IF_ERROR(CheckLocal(buf, len, mr));
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kRecv, 0, context, false));
  st->user_buf = buf;
  st->user_len = len;
  st->iov[0] = {buf, len};
  st->desc[0] = mr ? mr->desc : nullptr;
  // Senders pad to the stride, so a buffer of unaligned length would truncate
  // a message that fits it: receive into a padded bounce buffer and copy.
  if (len % kStride != 0 || (local_mr_ && mr == nullptr)) {
    auto b = MakeBounce(len);
    if (!b.ok()) {
      FreeOp(st);
      return b.status();
    }
    st->bounce = std::move(*b);
    st->iov[0] = {st->bounce->buf, st->bounce->len};
    st->desc[0] = st->bounce->desc;
  }
  return Submit(st, "fi_recv");
}

Status OfiEndpoint::PostMultiRecv(void* buf, size_t len, const MemoryRegion* mr,
                                  uint64_t context) {
  if (buf == nullptr || reinterpret_cast<uintptr_t>(buf) % kStride != 0 ||
      len % kStride != 0) {
    return Status::InvalidArgument("multi-recv buffer must be 64-byte aligned and sized");
  }
  // A message is placed at the buffer's current offset without regard to its
  // size, and the buffer retires once its free tail is below the limit; so
  // only buffers of at least the limit are guaranteed to fit any message.
  if (len < core_->ofi.max_multi_recv_message) {
    return Status::InvalidArgument("multi-recv buffer of " + std::to_string(len) +
                                   " bytes is below max_multi_recv_message (" +
                                   std::to_string(core_->ofi.max_multi_recv_message) + ")");
  }
  if (local_mr_ && mr == nullptr) {
    return Status::InvalidArgument("multi-recv buffer must be registered on this provider");
  }
  SLIP_RETURN_IF_ERROR(CheckLocal(buf, len, mr));
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kRecv, 0, context, false));
  st->multi = true;
  st->recv_base = static_cast<std::byte*>(buf);
  st->iov[0] = {buf, len};
  st->desc[0] = mr ? mr->desc : nullptr;
  return Submit(st, "fi_recvmsg(FI_MULTI_RECV)");
}

Status OfiEndpoint::Write(PeerId peer, const void* src, size_t len, const MemoryRegion* mr,
                          const RemoteMemory& remote, uint64_t remote_offset,
                          uint64_t context, uint32_t post) {
  SLIP_ASSIGN_OR_RETURN(Peer * p, CheckPeer(peer));
  if (src == nullptr && len > 0) return Status::InvalidArgument("null write source");
  SLIP_RETURN_IF_ERROR(CheckRemote(remote, remote_offset, len));
  SLIP_RETURN_IF_ERROR(CheckLocal(src, len, mr));
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kWrite, peer, context, true));
  if (post & kSilent) MarkSilent(st);
  st->dest = p->addr;
  st->raddr = RemoteAddr(remote, remote_offset);
  st->key = remote.key;
  st->iov[0] = {const_cast<void*>(src), len};
  st->desc[0] = mr ? mr->desc : nullptr;
  if (local_mr_ && mr == nullptr && len > 0) {
    auto b = MakeBounce(len);
    if (!b.ok()) {
      FreeOp(st);
      return b.status();
    }
    st->bounce = std::move(*b);
    std::memcpy(st->bounce->buf, src, len);
    st->iov[0] = {st->bounce->buf, len};
    st->desc[0] = st->bounce->desc;
  }
  return Submit(st, "fi_write");
}

Status OfiEndpoint::Read(PeerId peer, void* dst, size_t len, const MemoryRegion* mr,
                         const RemoteMemory& remote, uint64_t remote_offset, uint64_t context,
                         uint32_t post) {
  SLIP_ASSIGN_OR_RETURN(Peer * p, CheckPeer(peer));
  if (dst == nullptr && len > 0) return Status::InvalidArgument("null read destination");
  SLIP_RETURN_IF_ERROR(CheckRemote(remote, remote_offset, len));
  SLIP_RETURN_IF_ERROR(CheckLocal(dst, len, mr));
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kRead, peer, context, true));
  if (post & kSilent) MarkSilent(st);
  st->dest = p->addr;
  st->raddr = RemoteAddr(remote, remote_offset);
  st->key = remote.key;
  st->iov[0] = {dst, len};
  st->desc[0] = mr ? mr->desc : nullptr;
  if (local_mr_ && mr == nullptr && len > 0) {
    auto b = MakeBounce(len);
    if (!b.ok()) {
      FreeOp(st);
      return b.status();
    }
    st->bounce = std::move(*b);
    st->user_buf = dst;
    st->user_len = len;
    st->iov[0] = {st->bounce->buf, len};
    st->desc[0] = st->bounce->desc;
  }
  return Submit(st, "fi_read");
}

Status OfiEndpoint::CompareSwap(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset,
                                uint64_t expected, uint64_t desired, uint64_t* old,
                                uint64_t context) {
  if (!cas_ok_) {
    return Status::NotSupported(core_->provider + ": no 64-bit compare-and-swap");
  }
  SLIP_ASSIGN_OR_RETURN(Peer * p, CheckPeer(peer));
  SLIP_RETURN_IF_ERROR(CheckRemote(remote, remote_offset, sizeof(uint64_t)));
  const uint64_t raddr = RemoteAddr(remote, remote_offset);
  if (raddr % sizeof(uint64_t) != 0) return Status::InvalidArgument("unaligned atomic");
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kCompareSwap, peer, context, true));
  st->dest = p->addr;
  st->raddr = raddr;
  st->key = remote.key;
  st->operand = desired;
  st->compare = expected;
  st->old_out = old;
  return Submit(st, "fi_compare_atomic");
}

Status OfiEndpoint::FetchAdd(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset,
                             uint64_t add, uint64_t* old, uint64_t context) {
  if (!faa_ok_) return Status::NotSupported(core_->provider + ": no 64-bit fetch-and-add");
  SLIP_ASSIGN_OR_RETURN(Peer * p, CheckPeer(peer));
  SLIP_RETURN_IF_ERROR(CheckRemote(remote, remote_offset, sizeof(uint64_t)));
  const uint64_t raddr = RemoteAddr(remote, remote_offset);
  if (raddr % sizeof(uint64_t) != 0) return Status::InvalidArgument("unaligned atomic");
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kFetchAdd, peer, context, true));
  st->dest = p->addr;
  st->raddr = raddr;
  st->key = remote.key;
  st->operand = add;
  st->old_out = old;
  return Submit(st, "fi_fetch_atomic");
}

bool OfiEndpoint::MapEntry(const fi_cq_data_entry& e, Completion* c) {
  auto* st = static_cast<OpState*>(e.op_context);
  if (st == nullptr) return false;
  const bool released = st->multi && (e.flags & FI_MULTI_RECV);
  if (st->phase == Phase::kTimedOut) {
    // Its Timeout was reported already; the late completion only frees it.
    FreeOp(st);
    return false;
  }
  c->context = st->user_context;
  c->op = st->op;
  c->status = Code::kOk;
  c->len = 0;
  c->data = nullptr;
  c->buffer_released = false;
  switch (st->op) {
    case Op::kRecv:
      if (st->multi) {
        c->buffer_released = released;
        if (e.buf != nullptr && e.len > 0) {
          c->data = static_cast<std::byte*>(e.buf);
          c->len = static_cast<uint32_t>(e.len);
          // Senders pad to the stride; a message at an unaligned offset means
          // a peer that does not, and the rest of the buffer is unparseable.
          if ((c->data - st->recv_base) % kStride != 0 || e.len % kStride != 0) {
            c->status = Code::kCorruption;
          }
        }
        if (released) FreeOp(st);
        return true;
      }
      {
        const size_t placed = e.len;
        const size_t real = (cq_data_ && (e.flags & FI_REMOTE_CQ_DATA)) ? e.data : placed;
        if (real > placed || real > st->user_len) {
          c->status = Code::kTooLarge;
        } else if (st->bounce) {
          std::memcpy(st->user_buf, st->bounce->buf, real);
        }
        c->data = static_cast<std::byte*>(st->user_buf);
        c->len = static_cast<uint32_t>(std::min(real, st->user_len));
      }
      break;
    case Op::kRead:
      if (st->bounce) std::memcpy(st->user_buf, st->bounce->buf, st->user_len);
      break;
    case Op::kCompareSwap:
    case Op::kFetchAdd:
      if (st->old_out) *st->old_out = st->result;
      break;
    case Op::kSend:
    case Op::kWrite:
      break;
  }
  const bool silent = st->silent, hold = MustHold(st);
  const PeerId peer = st->peer;
  const uint64_t seq = st->seq;
  FreeOp(st);
  if (silent) return false;  // succeeded: nothing to report
  if (hold) {
    Hold(peer, seq, *c);
    return false;
  }
  return true;
}

bool OfiEndpoint::MapError(const fi_cq_err_entry& e, Completion* c) {
  auto* st = static_cast<OpState*>(e.op_context);
  if (st == nullptr) return false;
  // A multi-recv buffer stays posted after a failed message unless the
  // provider says it is retired.
  const bool retire = !st->multi || (e.flags & FI_MULTI_RECV);
  if (st->phase == Phase::kTimedOut) {
    if (retire) FreeOp(st);
    return false;
  }
  c->context = st->user_context;
  c->op = st->op;
  c->status = MapFiErr(e.err);
  if (c->status == Code::kOk) c->status = Code::kIoError;
  // We never fi_cancel an initiator operation: rxm cancels them when it
  // tears down the connection to a peer that went away.
  if (c->status == Code::kAborted && st->op != Op::kRecv) c->status = Code::kUnavailable;
  c->len = 0;
  c->data = nullptr;
  c->buffer_released = st->multi && retire;
  const bool hold = MustHold(st);
  const PeerId peer = st->peer;
  const uint64_t seq = st->seq;
  if (retire) FreeOp(st);
  if (hold) {
    Hold(peer, seq, *c);
    return false;
  }
  return true;
}

size_t OfiEndpoint::ReadCq(std::span<Completion> out) {
  size_t produced = 0;
  fi_cq_data_entry entries[kCqBatch];
  while (produced < out.size()) {
    const size_t want = std::min(kCqBatch, out.size() - produced);
    ssize_t n = fi_cq_read(cq_, entries, want);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if (MapEntry(entries[i], &out[produced])) ++produced;
      }
      if (static_cast<size_t>(n) < want) break;
      continue;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) == 1 && MapError(err, &out[produced])) ++produced;
      continue;
    }
    break;  // -FI_EAGAIN: empty
  }
  return produced;
}

void OfiEndpoint::ProgressToPending() {
  std::array<Completion, kCqBatch> buf;
  size_t n;
  do {
    // Completions released from `held` while reading go after the ones read.
    const size_t mark = pending_.size();
    n = ReadCq(buf);
    pending_.insert(pending_.begin() + static_cast<ptrdiff_t>(mark), buf.begin(), buf.begin() + n);
  } while (n == buf.size());
  DrainBacklog();
}

size_t OfiEndpoint::ExpireTimeouts(std::span<Completion> out) {
  if (deadlines_.empty()) return 0;
  const auto now = Clock::now();
  size_t n = 0;
  auto emit = [&](OpState* st, Code code) {
    Untrack(st);
    Completion c;
    c.context = st->user_context;
    c.op = st->op;
    c.status = code;
    // After whatever an earlier resolution released into pending_.
    if (n < out.size() && pending_.empty()) {
      out[n++] = c;
    } else {
      pending_.push_back(c);
    }
    if (st->deferred) {
      FreeOp(st);  // never posted: no late completion will come
    } else {
      ResolveSilent(st);
      st->phase = Phase::kTimedOut;  // freed when the provider completes it
    }
  };
  while (!deadlines_.empty() && deadlines_.front()->deadline <= now) {
    OpState* st = deadlines_.front();
    const PeerId peer = st->peer;
    emit(st, Code::kTimeout);
    // The peer stopped answering: the connection is considered reset, so
    // everything else in flight to it fails now rather than one op_timeout at
    // a time. Later operations start afresh (and time out too if the peer is
    // really gone).
    for (OpState* o = deadlines_.front(); o != nullptr;) {
      OpState* next = deadlines_.Next(o);
      if (o->peer == peer) emit(o, Code::kUnavailable);
      o = next;
    }
  }
  return n;
}

size_t OfiEndpoint::Poll(std::span<Completion> out) {
  size_t n = 0;
  while (n < out.size() && !pending_.empty()) {
    out[n++] = pending_.front();
    pending_.pop_front();
  }
  if (n < out.size()) {
    n += ReadCq(out.subspan(n));
    DrainBacklog();
  } else if (out.empty()) {
    // Still drive progress: a target's NIC thread may poll only to serve
    // peers' one-sided operations.
    ProgressToPending();
  }
  n += ExpireTimeouts(out.subspan(n));
  return n;
}

void OfiEndpoint::Wait(std::chrono::nanoseconds timeout) {
  if (!pending_.empty()) return;
  const auto start = Clock::now();
  auto deadline = start + timeout;
  // Wake up in time to report an operation's timeout.
  if (!deadlines_.empty() && deadlines_.front()->deadline < deadline) deadline = deadlines_.front()->deadline;
  // Deferred posts wait for the peer, which signals nothing on our wait
  // object: retry them at least every kMaxSleep.
  if (!backlog_.empty()) deadline = std::min(deadline, start + kMaxSleep);

  const auto spin_end = std::min(deadline, start + kWaitSpin);
  do {
    ProgressToPending();
    if (!pending_.empty()) return;
  } while (Clock::now() < spin_end);

  if (wait_fd_ >= 0 && !bell_) {
    fid* fids[1] = {&cq_->fid};
    for (;;) {
      const auto now = Clock::now();
      if (now >= deadline) return;
      // fi_trywait fails when the provider has queued events or must make
      // progress before the fd can be trusted; only then may we block.
      if (fi_trywait(core_->fabric, fids, 1) == FI_SUCCESS) {
        const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
        timespec ts{static_cast<time_t>(left.count() / 1000000000),
                    static_cast<long>(left.count() % 1000000000)};
        pollfd pfd{wait_fd_, POLLIN, 0};
        ppoll(&pfd, 1, &ts, nullptr);
        ProgressToPending();
        return;
      }
      ProgressToPending();
      if (!pending_.empty()) return;
    }
  }

  // No wait object (shm): fi_cq_sread with a timeout does not return in
  // libfabric 1.17 (DESIGN.md), so sleep in growing steps and progress in
  // between — on the doorbell if there is one, which peers' posts end
  // early. The completions of our own operations ring nothing: they wait
  // at most kMaxSleep.
  auto step = std::chrono::duration_cast<std::chrono::nanoseconds>(kFirstSleep);
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) return;
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
    const auto nap = std::min(step, left);
    timespec ts{static_cast<time_t>(nap.count() / 1000000000),
                static_cast<long>(nap.count() % 1000000000)};
    if (bell_) {
      if (!LookBeforeRingableBlock()) return;
      pollfd pfd{bell_->fd(), POLLIN, 0};
      ppoll(&pfd, 1, &ts, nullptr);
    } else {
      nanosleep(&ts, nullptr);
    }
    ProgressToPending();
    if (!pending_.empty()) return;
    step = std::min<std::chrono::nanoseconds>(step * 2, kMaxSleep);
  }
}

}  // namespace slip::fabric::ofi_internal
