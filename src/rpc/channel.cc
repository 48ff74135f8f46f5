#include "rpc/channel.h"

#include <cstdlib>
#include <cstring>

#include "common/coding.h"
#include "rpc/frame.h"

namespace slip::rpc {
namespace {

constexpr uint16_t kHelloMethod = 0xFFFF;
constexpr int kChannelShift = 40;
constexpr uint64_t kSeqMask = (uint64_t{1} << kChannelShift) - 1;
constexpr uint64_t kNoChannel = (uint64_t{1} << 24) - 1;
// Contexts of receive buffers are tagged so send contexts never collide.
constexpr uint64_t kRecvTag = uint64_t{1} << 63;

uint64_t ChannelOf(uint64_t request_id) { return request_id >> kChannelShift; }

}  // namespace

struct RpcChannel::PendingCall {
  Peer peer = 0;
  uint16_t method = 0;
  uint64_t request_id = 0;
  std::string payload;
  std::vector<std::byte> frame;
  CallOptions options;
  uint32_t attempts = 0;
  runtime::TimerId timer = 0;
  bool hello = false;
  std::function<void(Result<Response>)> done;
};

struct RpcChannel::PeerState {
  std::string address;
  fabric::PeerId fabric_peer = 0;
  uint64_t channel = kNoChannel;  // ours at the server, once HELLO answered
  bool hello_in_flight = false;
  uint32_t outstanding = 0;
  std::deque<std::shared_ptr<PendingCall>> queue;
};

RpcChannel::RpcChannel(runtime::Executor* exec, std::unique_ptr<fabric::Endpoint> endpoint,
                       ChannelOptions o)
    : exec_(exec), endpoint_(std::move(endpoint)), o_(o), alive_(std::make_shared<bool>(true)) {}

Result<std::unique_ptr<RpcChannel>> RpcChannel::Open(runtime::Executor* exec,
                                                     std::unique_ptr<fabric::Endpoint> endpoint,
                                                     ChannelOptions options) {
  if (options.max_payload == 0 || options.recv_buffers == 0 ||
      options.recv_buffer_bytes % fabric::kStride != 0 ||
      options.recv_buffer_bytes < FrameSize(options.max_payload)) {
    return Status::InvalidArgument("rpc channel: receive buffers must be multiples of 64 B and hold a largest frame");
  }
  std::unique_ptr<RpcChannel> ch(new RpcChannel(exec, std::move(endpoint), options));
  for (size_t i = 0; i < options.recv_buffers; ++i) {
    auto* p = static_cast<std::byte*>(std::aligned_alloc(fabric::kStride, options.recv_buffer_bytes));
    if (p == nullptr) return Status::NoSpace("rpc channel: out of memory for receive buffers");
    ch->recv_.push_back({p});
    SLIP_RETURN_IF_ERROR(ch->endpoint_->PostMultiRecv(p, options.recv_buffer_bytes, nullptr, kRecvTag | i));
  }
  RpcChannel* self = ch.get();
  ch->poller_ = exec->AddPoller([self] { return self->Poll(); });
  return ch;
}

RpcChannel::~RpcChannel() {
  *alive_ = false;
  if (poller_ != 0) exec_->RemovePoller(poller_);
  endpoint_.reset();  // no more completions into our buffers
  for (auto& b : recv_) std::free(b.data);
}

Result<RpcChannel::Peer> RpcChannel::Connect(const std::string& address) {
  if (auto it = peer_by_address_.find(address); it != peer_by_address_.end()) return it->second;
  SLIP_ASSIGN_OR_RETURN(fabric::PeerId fp, endpoint_->AddPeer(address));
  auto ps = std::make_unique<PeerState>();
  ps->address = address;
  ps->fabric_peer = fp;
  const Peer p = static_cast<Peer>(peers_.size());
  peers_.push_back(std::move(ps));
  peer_by_address_[address] = p;
  return p;
}

void RpcChannel::Call(Peer peer, uint16_t method, std::string payload, CallOptions options,
                      std::function<void(Result<Response>)> done) {
  ++counters_.calls;
  auto c = std::make_shared<PendingCall>();
  c->peer = peer;
  c->method = method;
  c->payload = std::move(payload);
  c->options = options;
  c->done = std::move(done);
  auto fail_later = [this, c](Status s) {
    exec_->Post([c, s, alive = alive_] {
      if (*alive) c->done(s);
    });
  };
  if (peer >= peers_.size()) return fail_later(Status::InvalidArgument("unknown peer"));
  if (method == kHelloMethod) return fail_later(Status::InvalidArgument("method 0xFFFF is reserved"));
  if (c->payload.size() > o_.max_payload) {
    return fail_later(Status::TooLarge("rpc payload of " + std::to_string(c->payload.size()) +
                                       " bytes exceeds " + std::to_string(o_.max_payload)));
  }
  PeerState& ps = *peers_[peer];
  if (ps.queue.size() >= o_.max_queued) {
    ++counters_.busy;
    return fail_later(Status::Busy("too many calls queued for " + ps.address));
  }
  ps.queue.push_back(std::move(c));
  exec_->Post([this, peer, alive = alive_] {
    if (*alive) Pump(peer);
  });
}

// Sends queued calls while the peer has room; the first one waits for HELLO.
void RpcChannel::Pump(Peer p) {
  PeerState& ps = *peers_[p];
  if (ps.channel == kNoChannel) {
    if (ps.hello_in_flight || ps.queue.empty()) return;
    ps.hello_in_flight = true;
    auto h = std::make_shared<PendingCall>();
    h->peer = p;
    h->method = kHelloMethod;
    h->hello = true;
    h->payload = endpoint_->address();
    h->options.retries = 1;
    h->done = [this, p](Result<Response> r) {
      PeerState& s = *peers_[p];
      s.hello_in_flight = false;
      if (r.ok() && r->status == Code::kOk && r->payload.size() == 4) {
        s.channel = LoadLE<uint32_t>(reinterpret_cast<const std::byte*>(r->payload.data()));
        return Pump(p);
      }
      // The peer is unreachable: every queued call fails the same way.
      Status why = r.ok() ? Status(r->status, "peer refused the session") : r.status();
      auto q = std::move(s.queue);
      s.queue.clear();
      for (auto& c : q) c->done(why);
    };
    return Launch(p, std::move(h));
  }
  while (ps.outstanding < o_.max_outstanding && !ps.queue.empty()) {
    auto c = std::move(ps.queue.front());
    ps.queue.pop_front();
    Launch(p, std::move(c));
  }
}

void RpcChannel::Launch(Peer p, std::shared_ptr<PendingCall> c) {
  static uint64_t seq = 0;  // unique per process: request ids never repeat
  PeerState& ps = *peers_[p];
  const uint64_t channel = c->hello ? kNoChannel : ps.channel;
  c->request_id = (channel << kChannelShift) | (++seq & kSeqMask);
  FrameHeader h{FrameKind::kRequest, c->method, c->request_id, Code::kOk};
  Status s = EncodeFrame(h, c->payload, o_.max_payload, &c->frame);
  if (!s.ok()) return c->done(s);  // never counted as outstanding
  if (!c->hello) ++ps.outstanding;
  pending_[c->request_id] = c;
  s = SendFrame(ps.fabric_peer, c->frame);
  if (!s.ok()) {
    ++counters_.send_failures;
    return Complete(c, s);
  }
  c->attempts = 1;
  Arm(c);
}

void RpcChannel::Arm(std::shared_ptr<PendingCall> c) {
  const runtime::Nanos t = c->options.timeout > 0 ? c->options.timeout : o_.timeout;
  c->timer = exec_->After(t, [this, c, alive = alive_] {
    if (!*alive || !pending_.count(c->request_id)) return;
    if (c->attempts <= c->options.retries) {
      ++counters_.retries;
      ++c->attempts;
      Status s = SendFrame(peers_[c->peer]->fabric_peer, c->frame);
      if (s.ok()) return Arm(c);
    }
    ++counters_.timeouts;
    Complete(c, Status::Timeout("no answer from " + peers_[c->peer]->address));
  });
}

void RpcChannel::Complete(std::shared_ptr<PendingCall> c, Result<Response> r) {
  if (pending_.erase(c->request_id) == 0) return;  // finished already
  if (c->timer != 0) exec_->Cancel(c->timer);
  PeerState& ps = *peers_[c->peer];
  if (!c->hello && ps.outstanding > 0) --ps.outstanding;
  c->done(std::move(r));
  if (!c->hello) Pump(c->peer);
}

Status RpcChannel::SendFrame(fabric::PeerId to, std::vector<std::byte> frame) {
  const uint64_t ctx = next_send_++;
  auto& buf = sending_[ctx] = std::move(frame);
  Status s = endpoint_->Send(to, buf.data(), buf.size(), nullptr, ctx);
  if (!s.ok()) sending_.erase(ctx);
  return s;
}

bool RpcChannel::Poll() {
  fabric::Completion cs[32];
  const size_t n = endpoint_->Poll(cs);
  for (size_t i = 0; i < n; ++i) {
    const fabric::Completion& c = cs[i];
    if (c.op == fabric::Op::kRecv) {
      if (c.status == Code::kOk && c.data != nullptr && c.len > 0) OnMessage(c.data, c.len);
      if (c.buffer_released && (c.context & kRecvTag)) {
        const size_t b = c.context & ~kRecvTag;
        if (b < recv_.size()) {
          Status s = endpoint_->PostMultiRecv(recv_[b].data, o_.recv_buffer_bytes, nullptr, c.context);
          if (!s.ok()) ++counters_.send_failures;  // the buffer is lost; fewer remain
        }
      }
      continue;
    }
    if (c.op == fabric::Op::kSend) {
      sending_.erase(c.context);
      if (c.status != Code::kOk) ++counters_.send_failures;
    }
  }
  return n > 0;
}

void RpcChannel::OnMessage(const std::byte* data, size_t len) {
  auto f = DecodeFrame({data, len}, o_.max_payload);
  if (!f.ok()) {
    ++counters_.malformed;
    return;
  }
  const FrameHeader& h = f->header;
  if (h.kind == FrameKind::kResponse) return OnResponse(h.request_id, h.status, f->payload);
  if (h.method == kHelloMethod) return OnHello(h.request_id, f->payload);
  OnRequest(h.request_id, h.method, f->payload);
}

void RpcChannel::OnHello(uint64_t request_id, std::span<const std::byte> payload) {
  const std::string address(reinterpret_cast<const char*>(payload.data()), payload.size());
  fabric::PeerId pid;
  if (auto it = client_by_address_.find(address); it != client_by_address_.end()) {
    pid = it->second;
  } else {
    auto added = endpoint_->AddPeer(address);
    if (!added.ok()) {
      ++counters_.malformed;  // cannot answer someone we cannot address
      return;
    }
    pid = *added;
    client_by_address_[address] = pid;
    known_channels_.insert(pid);
  }
  std::string channel(4, '\0');
  StoreLE<uint32_t>(reinterpret_cast<std::byte*>(channel.data()), pid);
  SendReply(pid, request_id, kHelloMethod, Code::kOk, channel);
}

void RpcChannel::OnRequest(uint64_t request_id, uint16_t method, std::span<const std::byte> payload) {
  const uint64_t channel = ChannelOf(request_id);
  // The channel id is the client's fabric peer here; anything else is a
  // request we cannot answer.
  if (!known_channels_.count(channel)) {
    ++counters_.malformed;
    return;
  }
  const auto to = static_cast<fabric::PeerId>(channel);
  if (auto it = replies_.find(request_id); it != replies_.end()) {
    ++counters_.duplicates;  // a retry: answer again, never run twice
    if (it->second.answered) (void)SendFrame(to, it->second.frame);
    return;
  }
  ++counters_.requests;
  replies_[request_id] = Cached{};
  reply_order_.push_back(request_id);
  while (reply_order_.size() > o_.reply_cache) {
    replies_.erase(reply_order_.front());
    reply_order_.pop_front();
  }
  if (!handler_) return SendReply(to, request_id, method, Code::kNotSupported, "no handler");
  handler_(method, payload, [this, to, request_id, method, alive = alive_](Code status, std::string out) {
    if (!*alive) return;
    SendReply(to, request_id, method, status, out);
  });
}

void RpcChannel::SendReply(fabric::PeerId to, uint64_t request_id, uint16_t method, Code status,
                           const std::string& payload) {
  std::vector<std::byte> frame;
  FrameHeader h{FrameKind::kResponse, method, request_id, status};
  Status s = EncodeFrame(h, payload, o_.max_payload, &frame);
  if (s.Is(Code::kTooLarge)) {
    // The answer does not fit a frame: say so instead of going silent.
    s = EncodeFrame(FrameHeader{FrameKind::kResponse, method, request_id, Code::kTooLarge},
                    "response too large for one frame", o_.max_payload, &frame);
  }
  if (!s.ok()) return;
  if (auto it = replies_.find(request_id); it != replies_.end()) {
    it->second.answered = true;
    it->second.frame = frame;
  }
  if (!SendFrame(to, std::move(frame)).ok()) ++counters_.send_failures;
}

void RpcChannel::OnResponse(uint64_t request_id, Code status, std::span<const std::byte> payload) {
  auto it = pending_.find(request_id);
  if (it == pending_.end()) {
    ++counters_.late_responses;
    return;
  }
  Complete(it->second, Response{status, std::string(reinterpret_cast<const char*>(payload.data()),
                                                    payload.size())});
}

}  // namespace slip::rpc
