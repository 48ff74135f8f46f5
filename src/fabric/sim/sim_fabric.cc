#include "fabric/sim/sim_fabric.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/cost.h"

namespace slip::fabric {
namespace {

using runtime::Executor;

using EpId = uint32_t;

// Trace kinds of the fabric's events.
enum Kind : uint16_t {
  kArrive = runtime::kFirstDeviceKind,
  kPlace,
  kRetry,
  kComplete,
  kDeliver,
  kPersist,
  kFail,
};

constexpr size_t RoundUp(size_t n) { return (n + kStride - 1) / kStride * kStride; }

bool Overflows(uint64_t offset, uint64_t len, uint64_t limit) {
  return offset > limit || len > limit - offset;
}

struct Registration {
  std::byte* base;
  size_t len;
  uint32_t access;
  EpId ep;
};

struct RecvBuffer {
  std::byte* buf;
  size_t len;
  uint64_t context;
  bool multi;
  size_t used = 0;
};

struct Packet {
  uint64_t op;
  uint32_t epoch;
  uint64_t seq;     // per connection and epoch
  size_t offset;    // into the operation's payload
  size_t len;
  bool last;
  int attempt = 0;  // retransmission count, for back-off
  Nanos crossed = 0;  // its last byte crossed the target's link (Arrive)
};

// Target side of one connection.
struct RxConn {
  uint32_t epoch = 0;
  uint64_t expected = 0;               // next sequence number to process
  std::map<uint64_t, Packet> pending;  // arrived, waiting for their turn
  bool busy = false;                   // a packet is in the NIC pipeline
  Nanos persist_horizon = 0;           // all placements so far persist by then
};

// Initiator side of one connection.
struct TxConn {
  uint32_t epoch = 0;
  uint64_t next_seq = 0;
  std::vector<uint64_t> outstanding;  // op ids in posting order
  Nanos response_floor = 0;           // keeps completions FIFO per connection
  bool chain_open = false;  // the last post said kMore: the next rides its doorbell
};

struct EpState {
  EpId id;
  NodeId node;
  Executor* driver;
  EndpointOptions options;
  bool alive = true;
  std::vector<EpId> peers;  // PeerId -> EpId
  std::deque<Completion> cq;
  std::deque<RecvBuffer> rq;
  std::unordered_map<EpId, RxConn> rx;  // by initiator
  std::unordered_map<EpId, TxConn> tx;  // by target
  uint64_t poll_turn = 0;  // software NIC: the driver's turn that last reaped completions (+1)
};

struct OpState {
  uint64_t id;
  EpId src, dst;
  Op kind;
  uint64_t context;
  uint32_t epoch;
  Nanos deadline;
  size_t len = 0;
  std::vector<std::byte> payload;  // Send/Write data; Read: bytes read
  std::byte* local = nullptr;      // Read destination
  uint64_t* old = nullptr;         // atomics' result
  uint64_t raddr = 0, rkey = 0;
  uint64_t operand1 = 0, operand2 = 0;  // CAS expected/desired; FAA addend
  uint64_t old_value = 0;
  runtime::TimerId deadline_timer = 0;
  Code status = Code::kOk;  // decided at the target
  bool validated = false;   // target checks done (first packet)
  std::byte* dest = nullptr;  // where the target places bytes (null: nowhere)
  size_t limit = SIZE_MAX;    // bytes past this offset are not placed (tear, truncation)
  // Send: the receive completion delivered when the last packet is placed.
  Completion recv{};
  bool silent = false;  // kSilent: completes only if it fails
  // Answered, but its completion waits for an earlier silent op of its
  // connection (fabric.h: a silent failure is reported first).
  bool done = false;
  Completion result{};
};

}  // namespace

class SimFabric::Impl : public std::enable_shared_from_this<SimFabric::Impl> {
 public:
  Impl(runtime::SimRuntime& rt, SimFabricOptions options) : rt_(rt), options_(options) {}

  runtime::SimRuntime& rt_;
  const SimFabricOptions options_;
  SimFabric::Stats stats_;

  std::vector<std::unique_ptr<EpState>> eps_;
  std::unordered_map<uint64_t, Registration> regs_;  // by key
  uint64_t next_key_ = 1;
  std::unordered_map<uint64_t, OpState> ops_;
  uint64_t next_op_ = 1;

  std::set<NodeId> crashed_;
  std::map<NodeId, uint64_t> incarnation_;
  std::map<NodeId, Nanos> tx_free_;   // sender NIC busy until
  std::map<NodeId, Nanos> nic_free_;  // target NIC busy until
  std::map<NodeId, Nanos> rx_free_;   // target's incoming link busy until
  std::map<NodeId, Nanos> answer_free_;  // target's outgoing link busy with READ answers until
  LinkFaults default_faults_;
  std::map<std::pair<NodeId, NodeId>, LinkFaults> link_faults_;
  std::map<NodeId, LinkFaults> node_faults_;
  std::set<std::pair<NodeId, NodeId>> cut_;
  std::map<NodeId, std::deque<size_t>> tears_;
  std::map<NodeId, std::function<void(const std::byte*, size_t)>> persist_hooks_;
  std::map<NodeId, std::function<void()>> crash_hooks_;

  // Charges `c` in full the first time in a turn (`last` remembers which),
  // afterwards only its per-byte part: what rides in the same wire message.
  void ChargePerTurn(uint64_t& last, runtime::Cost c, uint64_t bytes) {
    const uint64_t turn = rt_.turn() + 1;
    if (last == turn) {
      runtime::ChargeBytes(c, bytes);
      return;
    }
    last = turn;
    runtime::Charge(c, bytes);
  }

  // Schedules `fn`; it does nothing once the fabric and its endpoints are gone.
  void At(Nanos t, Executor* exec, Kind kind, const char* label, uint64_t tag,
          std::function<void()> fn) {
    rt_.Schedule(t, exec, kind, label, tag,
                 [w = weak_from_this(), fn = std::move(fn)] {
                   if (auto self = w.lock()) fn();
                 });
  }

  // A cancellable At(), for operation deadlines.
  runtime::TimerId Deadline(Nanos t, Executor* exec, uint64_t tag, std::function<void()> fn) {
    return rt_.ScheduleTimer(t, exec, kFail, "deadline", tag,
                             [w = weak_from_this(), fn = std::move(fn)] {
                               if (auto self = w.lock()) fn();
                             });
  }

  Nanos Now() const { return rt_.Now(); }

  EpState* Ep(EpId id) { return id < eps_.size() ? eps_[id].get() : nullptr; }

  const LinkFaults& Faults(NodeId from, NodeId to) const {
    if (auto it = link_faults_.find({from, to}); it != link_faults_.end()) return it->second;
    if (auto it = node_faults_.find(to); it != node_faults_.end()) return it->second;
    if (auto it = node_faults_.find(from); it != node_faults_.end()) return it->second;
    return default_faults_;
  }
  bool Cut(NodeId a, NodeId b) const { return cut_.contains({std::min(a, b), std::max(a, b)}); }
  bool Reachable(NodeId from, NodeId to) const {
    return !crashed_.contains(from) && !crashed_.contains(to) && !Cut(from, to);
  }

  bool Dropped(NodeId from, NodeId to) {
    const double p = Faults(from, to).drop_probability;
    return p > 0 && rt_.Rng().Bernoulli(p);
  }

  Nanos Flight(NodeId from, NodeId to, size_t bytes) {
    const LinkFaults& f = Faults(from, to);
    Nanos t = options_.latency + f.extra_delay + Serialize(bytes);
    if (f.jitter > 0) t += static_cast<Nanos>(rt_.Rng().Uniform(static_cast<uint64_t>(f.jitter) + 1));
    return t;
  }
  Nanos Serialize(size_t bytes) const {
    return options_.bandwidth > 0 ? static_cast<Nanos>(static_cast<double>(bytes) / options_.bandwidth)
                                  : 0;
  }
  Nanos Backoff(int attempt) const {
    Nanos d = options_.retransmit_delay;
    for (int i = 0; i < attempt && d < options_.max_retransmit_interval; ++i) d *= 2;
    return std::min(d, options_.max_retransmit_interval);
  }

  // ---- posting (initiator) ----

  Result<uint64_t> NewOp(EpState& ep, PeerId peer, Op kind, uint64_t context) {
    if (!ep.alive) return Status::Unavailable("endpoint is dead");
    if (peer >= ep.peers.size()) return Status::InvalidArgument("unknown peer");
    EpState* dst = Ep(ep.peers[peer]);
    TxConn& conn = ep.tx[dst->id];
    const uint64_t id = next_op_++;
    OpState& op = ops_[id];
    op.id = id;
    op.src = ep.id;
    op.dst = dst->id;
    op.kind = kind;
    op.context = context;
    op.epoch = conn.epoch;
    op.deadline = Now() + ep.options.op_timeout.count();
    // Every operation ends by this deadline whatever befalls its packets
    // (lost, bounced, stuck in a dead NIC): it never hangs.
    const uint32_t epoch = op.epoch;
    const EpId src = ep.id, dst_id = dst->id;
    op.deadline_timer = Deadline(op.deadline, ep.driver, id, [this, src, dst_id, epoch, id] {
      FailConnection(src, dst_id, epoch, id);
    });
    conn.outstanding.push_back(id);
    ++stats_.ops;
    return id;
  }

  // Splits the operation into packets and sends them. `post`: fabric::Post.
  void Launch(uint64_t id, uint32_t post) {
    OpState& op = ops_.at(id);
    op.silent = (post & kSilent) != 0;
    TxConn& qp = Ep(op.src)->tx[op.dst];
    if (options_.software_target) {
      // A software provider sends each operation in a system call of its
      // own: rowan's Send and the Read behind it to one backup are a
      // sendmsg and a sendto (strace of a node, 2026-11-30).
      runtime::Charge(runtime::Cost::kFabricPost, op.len);
      rt_.ChargeWake(Ep(op.dst)->driver);  // the target's progress thread, if parked
    } else if (qp.chain_open) {
      // Chained behind a kMore post to the same peer: one doorbell.
      runtime::ChargeBytes(runtime::Cost::kFabricPost, op.len);
    } else {
      runtime::Charge(runtime::Cost::kFabricPost, op.len);
    }
    qp.chain_open = (post & kMore) != 0;
    EpState& src = *Ep(op.src);
    TxConn& conn = src.tx[op.dst];
    const bool carries_data = op.kind == Op::kSend || op.kind == Op::kWrite;
    const size_t n = carries_data && op.len > 0 ? (op.len + options_.mtu - 1) / options_.mtu : 1;
    for (size_t i = 0; i < n; ++i) {
      Packet p{id, op.epoch, conn.next_seq++, i * options_.mtu, 0, i + 1 == n};
      p.len = carries_data ? std::min(options_.mtu, op.len - p.offset) : 0;
      // The sender's NIC puts packets on the wire one after another.
      Nanos& free = tx_free_[src.node];
      free = std::max(free, Now()) + Serialize(p.len);
      Transmit(p, free);
    }
  }

  // One transmission attempt of `p` leaving its sender at `depart`.
  void Transmit(Packet p, Nanos depart) {
    auto it = ops_.find(p.op);
    if (it == ops_.end() || it->second.epoch != p.epoch) return;  // failed meanwhile
    OpState& op = it->second;
    const NodeId from = Ep(op.src)->node, to = Ep(op.dst)->node;
    if (crashed_.contains(from)) return;  // the sender died: nobody retransmits
    const bool lost = !Reachable(from, to) || !Ep(op.dst)->alive || Dropped(from, to);
    if (lost) {
      Retransmit(p, depart + Backoff(p.attempt));
      return;
    }
    At(depart + Flight(from, to, 0), nullptr, kArrive, "arrive", p.op, [this, p] { Arrive(p); });
  }

  // Retries `p` at `when`; past the deadline it gives up (the deadline timer
  // then fails the operation).
  void Retransmit(Packet p, Nanos when) {
    const OpState& op = ops_.at(p.op);
    ++stats_.retransmits;
    if (when > op.deadline) return;
    ++p.attempt;
    At(when, nullptr, kRetry, "retransmit", p.op, [this, p] { Transmit(p, Now()); });
  }

  // Reliable-connection failure: the timed-out op fails with Timeout, every
  // other outstanding op of the connection with Unavailable; the connection
  // starts a new epoch (the target discards the old one's leftovers).
  void FailConnection(EpId src_id, EpId dst_id, uint32_t epoch, uint64_t culprit) {
    EpState& src = *Ep(src_id);
    TxConn& conn = src.tx[dst_id];
    if (conn.epoch != epoch || !ops_.contains(culprit)) return;
    ++stats_.timeouts;
    ++conn.epoch;
    conn.next_seq = 0;
    std::vector<uint64_t> flushed;
    flushed.swap(conn.outstanding);
    for (uint64_t id : flushed) {
      auto it = ops_.find(id);
      if (it == ops_.end()) continue;
      rt_.CancelTimer(it->second.deadline_timer);
      // One answered already keeps its outcome (it was only waiting).
      Completion c = it->second.done ? it->second.result
                                     : Completion{it->second.context, it->second.kind,
                                                  id == culprit ? Code::kTimeout : Code::kUnavailable};
      const bool report = it->second.done || !it->second.silent || c.status != Code::kOk;
      ops_.erase(it);
      if (src.alive && report) src.cq.push_back(c);
    }
  }

  // ---- target NIC ----

  void Arrive(Packet p) {
    OpState* op = FindOp(p);
    if (op == nullptr) return;
    EpState& dst = *Ep(op->dst);
    if (!dst.alive) {  // died while the packet flew: no ack, sender retries
      Retransmit(p, Now() + Backoff(p.attempt));
      return;
    }
    RxConn& rc = dst.rx[op->src];
    if (p.epoch != rc.epoch) {
      if (p.epoch < rc.epoch) return;  // a leftover of a failed epoch
      rc = RxConn{};
      rc.epoch = p.epoch;
    }
    if (p.seq < rc.expected) return;  // duplicate
    // The packet came in over the target's link: its last byte arrives now,
    // or, while the link still carries earlier packets (many senders
    // writing to one node), once they and it have crossed.
    Nanos& link = rx_free_[dst.node];
    link = std::max(Now(), link + Serialize(p.len));
    p.crossed = link;
    rc.pending.insert_or_assign(p.seq, p);
    Pump(dst, op->src);
  }

  // Feeds the connection's next in-order packet to the target NIC.
  void Pump(EpState& dst, EpId src) {
    RxConn& rc = dst.rx[src];
    if (rc.busy || rc.pending.empty() || rc.pending.begin()->first != rc.expected) return;
    Packet p = rc.pending.begin()->second;
    rc.pending.erase(rc.pending.begin());
    rc.busy = true;
    Nanos& free = nic_free_[dst.node];
    free = std::max({free, Now(), p.crossed}) + options_.nic_service;
    const EpId dst_id = dst.id;
    if (options_.software_target && dst.driver != nullptr) {
      // The target's CPU does the NIC's work: when its driver is free.
      At(free, dst.driver, kPlace, "place", p.op, [this, p, dst_id, src] {
        // Each packet is placed in a turn of its own (an initiator's come
        // one at a time) and pays in full: a receive, and the answer the
        // provider sends for each operation (an ack, a Read's data).
        if (EpState* d = Ep(dst_id); d != nullptr && d->alive) {
          runtime::Charge(runtime::Cost::kFabricTarget, p.len);
        }
        Place(p, dst_id, src);
      });
      return;
    }
    At(free, nullptr, kPlace, "place", p.op, [this, p, dst_id, src] { Place(p, dst_id, src); });
  }

  OpState* FindOp(const Packet& p) {
    auto it = ops_.find(p.op);
    return it == ops_.end() || it->second.epoch != p.epoch ? nullptr : &it->second;
  }

  void Place(Packet p, EpId dst_id, EpId src_id) {
    EpState& dst = *Ep(dst_id);
    if (!dst.alive) return;  // died with the packet in its NIC: the deadline fails the op
    RxConn& rc = dst.rx[src_id];
    if (rc.epoch != p.epoch) return;
    rc.busy = false;
    OpState* op = FindOp(p);
    if (op == nullptr) {  // its connection failed meanwhile: skip it
      ++rc.expected;
      Pump(dst, src_id);
      return;
    }
    if (!op->validated) {
      op->validated = true;
      if (!Validate(*op, dst)) {
        // Receiver not ready: bounce; later packets wait behind it.
        ++stats_.rnr_retries;
        op->validated = false;
        RetryAfterRnr(p);
        return;
      }
    }
    ++stats_.packets;
    Apply(*op, dst, rc, p);
    ++rc.expected;
    if (p.last) Respond(*op, dst, rc);
    Pump(dst, src_id);
  }

  void RetryAfterRnr(Packet p) {
    const OpState& op = ops_.at(p.op);
    const Nanos when = Now() + options_.latency + options_.rnr_retry_delay;
    if (when > op.deadline) return;  // the deadline timer fails it
    At(when, nullptr, kRetry, "rnr-retry", p.op, [this, p] { Transmit(p, Now()); });
  }

  // Target-side checks at the first packet; decides where bytes go. Returns
  // false only for receiver-not-ready.
  bool Validate(OpState& op, EpState& dst) {
    switch (op.kind) {
      case Op::kSend: {
        if (!ChooseRecvBuffer(op, dst)) return false;
        // A torn Send keeps the receive space it was given (the NIC moved
        // on), holds part of its bytes, and completes no receive.
        if (op.dest != nullptr && op.status == Code::kOk) DecideTear(op, dst);
        return true;
      }
      case Op::kWrite:
      case Op::kRead:
      case Op::kCompareSwap:
      case Op::kFetchAdd: {
        const uint32_t need = op.kind == Op::kWrite  ? Endpoint::kRemoteWrite
                              : op.kind == Op::kRead ? Endpoint::kRemoteRead
                                                     : Endpoint::kRemoteAtomic;
        const size_t len = op.kind == Op::kWrite || op.kind == Op::kRead ? op.len : 8;
        auto it = regs_.find(op.rkey);
        if (it == regs_.end() || it->second.ep != dst.id || (it->second.access & need) == 0) {
          op.status = Code::kInvalidArgument;
          return true;
        }
        const Registration& r = it->second;
        const uint64_t base = reinterpret_cast<uint64_t>(r.base);
        if (op.raddr < base || Overflows(op.raddr - base, len, r.len) ||
            ((op.kind == Op::kCompareSwap || op.kind == Op::kFetchAdd) && op.raddr % 8 != 0)) {
          op.status = Code::kInvalidArgument;
          return true;
        }
        op.dest = r.base + (op.raddr - base);
        if (op.kind == Op::kWrite) DecideTear(op, dst);
        return true;
      }
      case Op::kRecv:
        break;
    }
    return true;
  }

  void DecideTear(OpState& op, EpState& dst) {
    auto& queue = tears_[dst.node];
    size_t at = SIZE_MAX;
    if (!queue.empty()) {
      at = queue.front();
      queue.pop_front();
    } else {
      const double p = Faults(Ep(op.src)->node, dst.node).tear_probability;
      if (p > 0 && rt_.Rng().Bernoulli(p)) at = rt_.Rng().Uniform(op.len + 1);
    }
    if (at < op.len) {
      op.limit = at;
      op.status = Code::kAborted;
      ++stats_.torn_writes;
    }
  }

  // The multi-receive / receive-buffer rules of fabric.h.
  bool ChooseRecvBuffer(OpState& op, EpState& dst) {
    const size_t need = RoundUp(op.len);
    while (!dst.rq.empty()) {
      RecvBuffer& b = dst.rq.front();
      if (!b.multi) {
        op.dest = b.buf;
        op.limit = std::min(op.len, b.len);
        op.recv = Completion{b.context, Op::kRecv,
                             op.len > b.len ? Code::kTooLarge : Code::kOk,
                             static_cast<uint32_t>(op.limit), b.buf, false};
        dst.rq.pop_front();
        return true;
      }
      if (need <= b.len - b.used) {
        op.dest = b.buf + b.used;
        b.used += need;
        const bool full = b.used == b.len;
        op.recv = Completion{b.context, Op::kRecv, Code::kOk, static_cast<uint32_t>(need), op.dest,
                             full};
        if (full) dst.rq.pop_front();
        return true;
      }
      if (b.used == 0) {  // would not fit even in an empty buffer
        op.status = Code::kTooLarge;
        op.dest = nullptr;
        return true;
      }
      if (dst.rq.size() == 1) return false;  // nowhere to go yet: RNR
      // Retire the current buffer; its tail stays unwritten.
      DeliverTo(dst, Completion{b.context, Op::kRecv, Code::kOk, 0, nullptr, true});
      dst.rq.pop_front();
    }
    return false;
  }

  void Apply(OpState& op, EpState& dst, RxConn& rc, const Packet& p) {
    if (op.status != Code::kOk && op.status != Code::kAborted) return;
    const Nanos persist_at = Now() + options_.dma_persist_delay;
    switch (op.kind) {
      case Op::kSend:
      case Op::kWrite: {
        if (op.dest == nullptr || p.offset >= op.limit) break;
        const size_t n = std::min(p.len, op.limit - p.offset);
        std::memcpy(op.dest + p.offset, op.payload.data() + p.offset, n);
        stats_.bytes += n;
        Persist(dst.node, op.dest + p.offset, n, persist_at);
        rc.persist_horizon = std::max(rc.persist_horizon, persist_at);
        break;
      }
      case Op::kRead:
        op.payload.assign(op.dest, op.dest + op.len);
        stats_.bytes += op.len;
        break;
      case Op::kCompareSwap:
      case Op::kFetchAdd: {
        uint64_t v;
        std::memcpy(&v, op.dest, 8);
        op.old_value = v;
        if (op.kind == Op::kFetchAdd) {
          v += op.operand1;
        } else if (v == op.operand1) {
          v = op.operand2;
        }
        std::memcpy(op.dest, &v, 8);
        Persist(dst.node, op.dest, 8, persist_at);
        rc.persist_horizon = std::max(rc.persist_horizon, persist_at);
        break;
      }
      case Op::kRecv:
        break;
    }
  }

  void Persist(NodeId node, const std::byte* addr, size_t len, Nanos at) {
    auto it = persist_hooks_.find(node);
    if (it == persist_hooks_.end() || len == 0) return;
    if (at <= Now()) {
      it->second(addr, len);
      return;
    }
    const uint64_t inc = incarnation_[node];
    At(at, nullptr, kPersist, "persist", len, [this, node, addr, len, inc] {
      if (incarnation_[node] != inc) return;  // lost in a crash
      auto h = persist_hooks_.find(node);
      if (h != persist_hooks_.end()) h->second(addr, len);
    });
  }

  // The last packet is placed: the receive completion (Send) and the
  // response to the initiator. A Read's response waits for persistence of
  // everything placed before it on this connection.
  void Respond(OpState& op, EpState& dst, RxConn& rc) {
    // A software target's acknowledgement wakes a parked initiator.
    if (options_.software_target) rt_.ChargeWake(Ep(op.src)->driver);
    if (op.kind == Op::kSend && op.recv.data != nullptr && op.status == Code::kOk) {
      DeliverTo(dst, op.recv);
    }
    if (op.kind == Op::kRead && rc.persist_horizon > Now()) {
      // The answer leaves only once those DMAs are persistent, and not at
      // all if the target loses power first — even if it is back by then
      // (an ack from the old incarnation would vouch for lost data).
      const NodeId node = dst.node;
      const uint64_t inc = incarnation_[node];
      At(rc.persist_horizon, nullptr, kRetry, "read-after-persist", op.id,
         [this, id = op.id, epoch = op.epoch, node, inc] {
           if (incarnation_[node] == inc) SendResponse(id, epoch, Now(), 0);
         });
      return;
    }
    SendResponse(op.id, op.epoch, Now(), 0);
  }

  void SendResponse(uint64_t id, uint32_t epoch, Nanos depart, int attempt) {
    auto it = ops_.find(id);
    if (it == ops_.end() || it->second.epoch != epoch) return;
    OpState& op = it->second;
    EpState& src = *Ep(op.src);
    const NodeId from = Ep(op.dst)->node, to = src.node;
    if (crashed_.contains(from)) return;  // the target died before answering
    const bool lost = !Reachable(from, to) || Dropped(from, to);
    if (lost) {
      ++stats_.retransmits;
      const Nanos when = depart + Backoff(attempt);
      if (when > op.deadline) return;  // the deadline timer fails it
      At(when, nullptr, kRetry, "re-respond", id,
         [this, id, epoch, attempt] { SendResponse(id, epoch, Now(), attempt + 1); });
      return;
    }
    const size_t bytes = op.kind == Op::kRead ? op.len : 0;
    TxConn& conn = src.tx[op.dst];
    // READ answers leave the target's NIC one after another: one node read
    // by many (a DINOMO pool) is bound by its link, as a sender's WRITEs
    // are by theirs. Apart from the node's own posts (tx_free_): those are
    // booked at the posting handler's time, which a long turn puts ahead
    // of answers due before it ends, and would delay them.
    if (bytes > 0) {
      Nanos& free = answer_free_[from];
      depart = std::max(free, depart);
      free = depart + Serialize(bytes);
    }
    Nanos arrival = std::max(depart + Flight(from, to, bytes), conn.response_floor);
    conn.response_floor = arrival;
    At(arrival, src.driver, kComplete, "complete", id, [this, id, epoch] { Complete(id, epoch); });
  }

  void Complete(uint64_t id, uint32_t epoch) {
    auto it = ops_.find(id);
    if (it == ops_.end() || it->second.epoch != epoch || it->second.done) return;
    OpState& op = it->second;
    EpState& src = *Ep(op.src);
    Completion c{op.context, op.kind, op.status};
    if (op.status == Code::kOk) {
      if (op.kind == Op::kRead) {
        if (op.len > 0) std::memcpy(op.local, op.payload.data(), op.len);
        c.len = static_cast<uint32_t>(op.len);
      } else if (op.kind == Op::kCompareSwap || op.kind == Op::kFetchAdd) {
        *op.old = op.old_value;
      }
    }
    rt_.CancelTimer(op.deadline_timer);
    op.done = true;
    op.result = c;
    DeliverInOrder(src, src.tx[op.dst]);
  }

  // Reports the connection's answered operations, in posting order, up to
  // the first silent one still unanswered: a silent op's failure comes
  // before any later op's completion even when its answer was lost and
  // retransmitted behind theirs. Silent successes report nothing.
  void DeliverInOrder(EpState& src, TxConn& conn) {
    bool blocked = false;
    // Compacted in place: this runs for every completion.
    size_t kept = 0;
    for (uint64_t id : conn.outstanding) {
      auto it = ops_.find(id);
      if (it == ops_.end()) continue;
      OpState& op = it->second;
      if (!op.done || blocked) {
        blocked = blocked || (!op.done && op.silent);
        conn.outstanding[kept++] = id;
        continue;
      }
      const bool report = !op.silent || op.result.status != Code::kOk;
      if (src.alive && report) src.cq.push_back(op.result);
      ops_.erase(it);
    }
    conn.outstanding.resize(kept);
  }

  // A completion for an endpoint, at the current time, on its executor.
  void DeliverTo(EpState& ep, Completion c) {
    const EpId id = ep.id;
    At(Now(), ep.driver, kDeliver, "deliver", c.context, [this, id, c] {
      EpState& e = *Ep(id);
      if (e.alive) e.cq.push_back(c);
    });
  }

  void Kill(EpState& ep) {
    ep.alive = false;
    ep.cq.clear();
    ep.rq.clear();
    ep.rx.clear();
    std::erase_if(regs_, [&](const auto& kv) { return kv.second.ep == ep.id; });
    // Its own outstanding operations die with it (nobody will poll them).
    for (auto& [dst, conn] : ep.tx) {
      for (uint64_t id : conn.outstanding) {
        auto it = ops_.find(id);
        if (it == ops_.end()) continue;
        rt_.CancelTimer(it->second.deadline_timer);
        ops_.erase(it);
      }
      conn.outstanding.clear();
      ++conn.epoch;
    }
  }
};

// ---------------------------------------------------------------------------

class SimEndpoint final : public Endpoint {
 public:
  SimEndpoint(std::shared_ptr<SimFabric::Impl> impl, EpId id) : impl_(std::move(impl)), id_(id) {}
  ~SimEndpoint() override { impl_->Kill(ep()); }

  std::string address() const override { return "sim/" + std::to_string(id_); }

  Result<PeerId> AddPeer(std::string_view address) override {
    if (!address.starts_with("sim/")) return Status::InvalidArgument("not a sim address");
    uint64_t id = 0;
    std::string_view digits = address.substr(4);
    if (digits.empty() || digits.size() > 9) return Status::InvalidArgument("bad sim address");
    for (char ch : digits) {
      if (ch < '0' || ch > '9') return Status::InvalidArgument("bad sim address");
      id = id * 10 + static_cast<uint64_t>(ch - '0');
    }
    if (impl_->Ep(static_cast<EpId>(id)) == nullptr) return Status::InvalidArgument("no such endpoint");
    ep().peers.push_back(static_cast<EpId>(id));
    return static_cast<PeerId>(ep().peers.size() - 1);
  }

  Result<MemoryRegion> Register(void* base, size_t len, uint32_t access) override {
    if (!ep().alive) return Status::Unavailable("endpoint is dead");
    if (base == nullptr || len == 0) return Status::InvalidArgument("empty registration");
    // An odd multiplier is a bijection: keys stay unique yet look random, so
    // a forged or stale key is unlikely to name another registration.
    const uint64_t key = impl_->next_key_++ * 0x9E3779B97F4A7C15ull;
    impl_->regs_[key] = Registration{static_cast<std::byte*>(base), len, access, id_};
    MemoryRegion mr;
    mr.base = static_cast<std::byte*>(base);
    mr.len = len;
    mr.remote = RemoteMemory{reinterpret_cast<uint64_t>(base), key, len};
    mr.id = key;
    return mr;
  }

  Status Deregister(const MemoryRegion& mr) override {
    auto it = impl_->regs_.find(mr.id);
    if (it == impl_->regs_.end() || it->second.ep != id_) {
      return ep().alive ? Status::NotFound("no such registration") : Status::Ok();
    }
    impl_->regs_.erase(it);
    return Status::Ok();
  }

  Status Send(PeerId peer, const void* buf, size_t len, const MemoryRegion*,
              uint64_t context, uint32_t post) override {
    if (len == 0 || len > UINT32_MAX) return Status::InvalidArgument("message length");
    SLIP_ASSIGN_OR_RETURN(uint64_t id, impl_->NewOp(ep(), peer, Op::kSend, context));
    OpState& op = impl_->ops_.at(id);
    op.len = len;
    op.payload.assign(static_cast<const std::byte*>(buf), static_cast<const std::byte*>(buf) + len);
    impl_->Launch(id, post);
    return Status::Ok();
  }

  Status PostRecv(void* buf, size_t len, const MemoryRegion*, uint64_t context) override {
    if (!ep().alive) return Status::Unavailable("endpoint is dead");
    if (buf == nullptr || len == 0) return Status::InvalidArgument("empty receive buffer");
    ep().rq.push_back(RecvBuffer{static_cast<std::byte*>(buf), len, context, false});
    return Status::Ok();
  }

  Status PostMultiRecv(void* buf, size_t len, const MemoryRegion*, uint64_t context) override {
    if (!ep().alive) return Status::Unavailable("endpoint is dead");
    if (buf == nullptr || len == 0 || len % kStride != 0 ||
        reinterpret_cast<uintptr_t>(buf) % kStride != 0) {
      return Status::InvalidArgument("multi-receive buffer must be 64 B aligned and sized");
    }
    ep().rq.push_back(RecvBuffer{static_cast<std::byte*>(buf), len, context, true});
    return Status::Ok();
  }

  Status Write(PeerId peer, const void* src, size_t len, const MemoryRegion*,
               const RemoteMemory& remote, uint64_t remote_offset, uint64_t context,
               uint32_t post) override {
    if (Overflows(remote_offset, len, remote.len)) {
      return Status::InvalidArgument("write outside the remote registration");
    }
    SLIP_ASSIGN_OR_RETURN(uint64_t id, impl_->NewOp(ep(), peer, Op::kWrite, context));
    OpState& op = impl_->ops_.at(id);
    op.len = len;
    op.payload.assign(static_cast<const std::byte*>(src), static_cast<const std::byte*>(src) + len);
    op.raddr = remote.addr + remote_offset;
    op.rkey = remote.key;
    impl_->Launch(id, post);
    return Status::Ok();
  }

  Status Read(PeerId peer, void* dst, size_t len, const MemoryRegion*, const RemoteMemory& remote,
              uint64_t remote_offset, uint64_t context, uint32_t post) override {
    if (Overflows(remote_offset, len, remote.len)) {
      return Status::InvalidArgument("read outside the remote registration");
    }
    SLIP_ASSIGN_OR_RETURN(uint64_t id, impl_->NewOp(ep(), peer, Op::kRead, context));
    OpState& op = impl_->ops_.at(id);
    op.len = len;
    op.local = static_cast<std::byte*>(dst);
    op.raddr = remote.addr + remote_offset;
    op.rkey = remote.key;
    impl_->Launch(id, post);
    return Status::Ok();
  }

  Status CompareSwap(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset,
                     uint64_t expected, uint64_t desired, uint64_t* old,
                     uint64_t context) override {
    return Atomic(peer, Op::kCompareSwap, remote, remote_offset, expected, desired, old, context);
  }

  Status FetchAdd(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset, uint64_t add,
                  uint64_t* old, uint64_t context) override {
    return Atomic(peer, Op::kFetchAdd, remote, remote_offset, add, 0, old, context);
  }

  size_t Poll(std::span<Completion> out) override {
    EpState& e = ep();
    size_t n = 0;
    while (n < out.size() && !e.cq.empty()) {
      out[n++] = e.cq.front();
      e.cq.pop_front();
      // A software provider took a turn's acknowledgements in together.
      if (impl_->options_.software_target) {
        impl_->ChargePerTurn(e.poll_turn, runtime::Cost::kFabricCompletion, 0);
      } else {
        runtime::Charge(runtime::Cost::kFabricCompletion);
      }
    }
    return n;
  }

  // The simulator never blocks: completions arrive as events.
  void Wait(std::chrono::nanoseconds) override {}

 private:
  EpState& ep() const { return *impl_->Ep(id_); }

  Status Atomic(PeerId peer, Op kind, const RemoteMemory& remote, uint64_t remote_offset,
                uint64_t a, uint64_t b, uint64_t* old, uint64_t context) {
    if (old == nullptr) return Status::InvalidArgument("atomic needs a result word");
    if (Overflows(remote_offset, 8, remote.len) || (remote.addr + remote_offset) % 8 != 0) {
      return Status::InvalidArgument("atomic word outside the registration or misaligned");
    }
    SLIP_ASSIGN_OR_RETURN(uint64_t id, impl_->NewOp(ep(), peer, kind, context));
    OpState& op = impl_->ops_.at(id);
    op.raddr = remote.addr + remote_offset;
    op.rkey = remote.key;
    op.operand1 = a;
    op.operand2 = b;
    op.old = old;
    impl_->Launch(id, kSignalled);
    return Status::Ok();
  }

  std::shared_ptr<SimFabric::Impl> impl_;
  const EpId id_;
};

class SimNodeFabric final : public Fabric {
 public:
  SimNodeFabric(SimFabric* fabric, NodeId node, Executor* driver)
      : fabric_(fabric), node_(node), driver_(driver) {}
  std::string_view provider() const override { return "sim"; }
  Result<std::unique_ptr<Endpoint>> CreateEndpoint(const EndpointOptions& options) override {
    return fabric_->CreateEndpoint(node_, driver_, options);
  }

 private:
  SimFabric* fabric_;
  NodeId node_;
  Executor* driver_;
};

// ---------------------------------------------------------------------------

SimFabric::SimFabric(runtime::SimRuntime& rt, SimFabricOptions options)
    : impl_(std::make_shared<Impl>(rt, options)) {}

SimFabric::~SimFabric() = default;

Result<std::unique_ptr<Endpoint>> SimFabric::CreateEndpoint(NodeId node, Executor* driver,
                                                            const EndpointOptions& options) {
  if (impl_->crashed_.contains(node)) return Status::Unavailable("node is crashed");
  const auto id = static_cast<EpId>(impl_->eps_.size());
  auto st = std::make_unique<EpState>();
  st->id = id;
  st->node = node;
  st->driver = driver;
  st->options = options;
  impl_->eps_.push_back(std::move(st));
  return std::unique_ptr<Endpoint>(std::make_unique<SimEndpoint>(impl_, id));
}

std::unique_ptr<Fabric> SimFabric::ForNode(NodeId node, Executor* driver) {
  return std::make_unique<SimNodeFabric>(this, node, driver);
}

void SimFabric::SetDefaultFaults(const LinkFaults& faults) { impl_->default_faults_ = faults; }

void SimFabric::SetLinkFaults(NodeId from, NodeId to, const LinkFaults& faults) {
  impl_->link_faults_[{from, to}] = faults;
}

void SimFabric::SetNodeFaults(NodeId node, const LinkFaults& faults) {
  impl_->node_faults_[node] = faults;
}

void SimFabric::Partition(NodeId a, NodeId b) { impl_->cut_.insert({std::min(a, b), std::max(a, b)}); }
void SimFabric::Heal(NodeId a, NodeId b) { impl_->cut_.erase({std::min(a, b), std::max(a, b)}); }
void SimFabric::HealAll() { impl_->cut_.clear(); }

void SimFabric::TearNextWrite(NodeId node, size_t after_bytes) {
  impl_->tears_[node].push_back(after_bytes);
}

void SimFabric::CrashNode(NodeId node) {
  if (!impl_->crashed_.insert(node).second) return;
  ++impl_->incarnation_[node];
  for (auto& ep : impl_->eps_) {
    if (ep->node == node && ep->alive) impl_->Kill(*ep);
  }
  auto it = impl_->crash_hooks_.find(node);
  if (it != impl_->crash_hooks_.end()) it->second();
}

void SimFabric::RestartNode(NodeId node) { impl_->crashed_.erase(node); }

bool SimFabric::crashed(NodeId node) const { return impl_->crashed_.contains(node); }

void SimFabric::SetPersistHook(NodeId node, std::function<void(const std::byte*, size_t)> hook) {
  impl_->persist_hooks_[node] = std::move(hook);
}

void SimFabric::SetCrashHook(NodeId node, std::function<void()> hook) {
  impl_->crash_hooks_[node] = std::move(hook);
}

const SimFabric::Stats& SimFabric::stats() const { return impl_->stats_; }
const SimFabricOptions& SimFabric::options() const { return impl_->options_; }

}  // namespace slip::fabric
