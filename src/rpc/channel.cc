#include "rpc/channel.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>

#include "common/coding.h"
#include "rpc/frame.h"

namespace slip::rpc {
namespace {

// Request ids: session (24 bits, assigned by the server) << 40 | sequence
// (40 bits, per calling channel, never 0). docs/formats/wire.md "Sessions".
constexpr uint16_t kHelloMethod = 0xFFFF;
constexpr int kSessionShift = 40;
constexpr uint64_t kSeqMask = (uint64_t{1} << kSessionShift) - 1;
constexpr uint64_t kNoSession = (uint64_t{1} << 24) - 1;  // HELLO's session field
// HELLO's payload (wire.md "Sessions"): format, flags (bit 0: authenticated),
// key id, client nonce, then the caller's address.
constexpr uint8_t kHelloFormat = 2;
constexpr uint8_t kHelloAuth = 1;
constexpr size_t kHelloFixed = 1 + 1 + 4 + auth::kNonceBytes;
// Contexts of receive buffers are tagged so send contexts never collide.
constexpr uint64_t kRecvTag = uint64_t{1} << 63;
constexpr uint32_t kNone = UINT32_MAX;

// A fabric address for a person: tcp's sockaddr_in as ip:port, a printable
// one (shm's names) as it is, anything else in hex.
std::string Printable(const std::string& address) {
  if (address.size() == sizeof(sockaddr_in)) {
    sockaddr_in in;
    std::memcpy(&in, address.data(), sizeof(in));
    char ip[INET_ADDRSTRLEN];
    if (in.sin_family == AF_INET && ::inet_ntop(AF_INET, &in.sin_addr, ip, sizeof(ip)) != nullptr) {
      return std::string(ip) + ":" + std::to_string(ntohs(in.sin_port));
    }
  }
  if (std::all_of(address.begin(), address.end(), [](char c) { return c >= 0x20 && c < 0x7f; })) return address;
  static const char* digits = "0123456789abcdef";
  std::string hex = "0x";
  for (unsigned char c : address) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

uint64_t SessionOf(uint64_t request_id) { return request_id >> kSessionShift; }
uint64_t SeqOf(uint64_t request_id) { return request_id & kSeqMask; }

// Takes a pooled record's index from `free`, or grows the pool by one.
template <typename T>
uint32_t TakeOrGrow(std::vector<std::unique_ptr<T>>& pool, std::vector<uint32_t>& free) {
  if (!free.empty()) {
    const uint32_t i = free.back();
    free.pop_back();
    return i;
  }
  pool.push_back(std::make_unique<T>());
  return static_cast<uint32_t>(pool.size() - 1);
}

}  // namespace

// --- IdMap: linear probing, backward-shift deletion (no tombstones) ---

uint32_t* IdMap::Find(uint64_t key) {
  // 0 marks an empty entry, so it is never a key; a peer can still send
  // it (an id in a forged or corrupt frame), and it must find nothing.
  if (n_ == 0 || key == 0) return nullptr;
  const size_t mask = t_.size() - 1;
  for (size_t i = Home(key);; i = (i + 1) & mask) {
    if (t_[i].key == key) return &t_[i].value;
    if (t_[i].key == 0) return nullptr;
  }
}

void IdMap::Insert(uint64_t key, uint32_t value) {
  if ((n_ + 1) * 2 > t_.size()) Grow();
  const size_t mask = t_.size() - 1;
  size_t i = Home(key);
  while (t_[i].key != 0) i = (i + 1) & mask;
  t_[i] = {key, value};
  ++n_;
}

bool IdMap::Erase(uint64_t key) {
  if (n_ == 0 || key == 0) return false;
  const size_t mask = t_.size() - 1;
  size_t i = Home(key);
  while (t_[i].key != key) {
    if (t_[i].key == 0) return false;
    i = (i + 1) & mask;
  }
  // Pull later entries of the probe run back over the hole when their home
  // is not cyclically inside (i, j]: lookups then never meet a false gap.
  for (size_t j = (i + 1) & mask; t_[j].key != 0; j = (j + 1) & mask) {
    const size_t h = Home(t_[j].key);
    if (((j - h) & mask) >= ((j - i) & mask)) {
      t_[i] = t_[j];
      i = j;
    }
  }
  t_[i] = {};
  --n_;
  return true;
}

void IdMap::Grow() {
  std::vector<Entry> old = std::move(t_);
  const size_t size = std::max<size_t>(16, old.size() * 2);
  t_.assign(size, Entry{});
  shift_ = 64 - std::countr_zero(size);
  n_ = 0;
  for (const Entry& e : old) {
    if (e.key != 0) Insert(e.key, e.value);
  }
}

// --- records ---

struct RpcChannel::CallSlot {
  bool in_use = false;
  bool launched = false;  // false: waiting in its peer's queue
  bool hello = false;
  bool expired = false;   // scratch flag for OnTimer
  bool reauth = false;    // already sent again after its session's key retired
  Peer peer = 0;
  uint16_t method = 0;
  uint64_t request_id = 0;  // once launched
  std::string payload;      // kept for resends
  CallOptions options;
  uint32_t attempts = 0;
  runtime::Nanos deadline = 0;     // of the current attempt
  uint64_t answers_at_launch = 0;  // the peer's PeerState::answers then
  std::function<void(Result<Response>)> done;
  uint32_t next_free = kNone;
};

struct RpcChannel::PeerState {
  std::string address;
  std::string name;  // the address, printable (for messages)
  fabric::PeerId fabric_peer = 0;
  uint64_t session = kNoSession;  // ours at the server, once HELLO answered
  bool hello_pending = false;
  // Authentication: the session key (once HELLO is answered), and what our
  // pending HELLO offered.
  bool keyed = false;
  auth::SessionKey key;
  auth::Nonce hello_nonce{};
  uint32_t hello_key_id = 0;
  uint32_t outstanding = 0;
  uint64_t answers = 0;  // responses received from this peer: "is it alive?"
  std::deque<uint32_t> queue;  // call slots waiting for room
};

struct RpcChannel::Session {
  fabric::PeerId peer = 0;
  uint64_t forgotten_seq = 0;  // highest sequence evicted from the reply cache
  bool keyed = false;    // authenticated: every frame signed under `key`
  bool retired = false;  // its cluster key is no longer accepted
  uint32_t key_id = 0;
  auth::SessionKey key;
};

struct RpcChannel::Cached {
  uint64_t request_id = 0;  // 0: empty
  uint32_t session = 0;
  bool answered = false;
  uint16_t method = 0;
  Code status = Code::kOk;
  std::string payload;
};

// One fabric message: the frames bound for one peer during an executor
// turn, back to back.
struct RpcChannel::SendBuf {
  std::vector<std::byte> frames;
  std::vector<uint64_t> request_ids;  // the requests in it, to fail their calls if the send fails
  fabric::PeerId to = 0;
};

// --- lifecycle ---

RpcChannel::RpcChannel(runtime::Executor* exec, std::unique_ptr<fabric::Endpoint> endpoint,
                       ChannelOptions o)
    : exec_(exec), endpoint_(std::move(endpoint)), o_(o), alive_(std::make_shared<bool>(true)) {
  if (o_.max_call_payload < o_.max_payload) o_.max_call_payload = o_.max_payload;
  cache_.resize(o_.reply_cache);
  if (o_.keys) RefreshKeys();
  if (!o_.random) o_.random = auth::RandomBytes;
}

Result<std::unique_ptr<RpcChannel>> RpcChannel::Open(runtime::Executor* exec,
                                                     std::unique_ptr<fabric::Endpoint> endpoint,
                                                     ChannelOptions options) {
  if (options.max_payload == 0 || options.recv_buffers == 0 ||
      options.recv_buffer_bytes % fabric::kStride != 0 ||
      options.recv_buffer_bytes < FrameSize(options.max_payload, options.keys != nullptr)) {
    return Status::InvalidArgument("rpc channel: receive buffers must be multiples of 64 B and hold a largest frame");
  }
  if (options.max_call_payload > UINT32_MAX) {
    return Status::InvalidArgument("rpc channel: max_call_payload must be below 4 GiB");
  }
  if (options.max_outstanding == 0 || options.reply_cache == 0 || options.timeout <= 0) {
    return Status::InvalidArgument("rpc channel: max_outstanding, reply_cache and timeout must be positive");
  }
  std::unique_ptr<RpcChannel> ch(new RpcChannel(exec, std::move(endpoint), options));
  for (size_t i = 0; i < options.recv_buffers; ++i) {
    auto* p = static_cast<std::byte*>(std::aligned_alloc(fabric::kStride, options.recv_buffer_bytes));
    if (p == nullptr) return Status::NoSpace("rpc channel: out of memory for receive buffers");
    ch->recv_.push_back(p);
    SLIP_RETURN_IF_ERROR(ch->endpoint_->PostMultiRecv(p, options.recv_buffer_bytes, nullptr, kRecvTag | i));
  }
  RpcChannel* self = ch.get();
  ch->poller_ = exec->AddPoller([self] { return self->Poll(); });
  return ch;
}

RpcChannel::~RpcChannel() {
  *alive_ = false;
  if (poller_ != 0) exec_->RemovePoller(poller_);
  if (timer_ != 0) exec_->Cancel(timer_);
  endpoint_.reset();  // no more completions into our buffers
  for (std::byte* b : recv_) std::free(b);
}

Result<RpcChannel::Peer> RpcChannel::Connect(const std::string& address) {
  if (auto it = peer_by_address_.find(address); it != peer_by_address_.end()) return it->second;
  SLIP_ASSIGN_OR_RETURN(fabric::PeerId fp, endpoint_->AddPeer(address));
  auto ps = std::make_unique<PeerState>();
  ps->address = address;
  ps->name = Printable(address);
  ps->fabric_peer = fp;
  const Peer p = static_cast<Peer>(peers_.size());
  peers_.push_back(std::move(ps));
  peer_by_address_[address] = p;
  return p;
}

// --- client role ---

uint32_t RpcChannel::AllocSlot() {
  const uint32_t i = TakeOrGrow(slots_, free_slots_);
  CallSlot& c = *slots_[i];
  c.in_use = true;
  c.launched = c.hello = c.expired = c.reauth = false;
  c.request_id = 0;
  c.attempts = 0;
  return i;
}

void RpcChannel::Call(Peer peer, uint16_t method, std::string payload, CallOptions options,
                      std::function<void(Result<Response>)> done) {
  ++counters_.calls;
  auto fail_later = [&](Status s) {
    exec_->Post([done = std::move(done), s = std::move(s), alive = alive_] {
      if (*alive) done(s);
    });
  };
  if (peer >= peers_.size()) return fail_later(Status::InvalidArgument("unknown peer"));
  if (method == kHelloMethod) return fail_later(Status::InvalidArgument("method 0xFFFF is reserved"));
  if (payload.size() > o_.max_call_payload) {
    return fail_later(Status::TooLarge("rpc payload of " + std::to_string(payload.size()) +
                                       " bytes exceeds " + std::to_string(o_.max_call_payload)));
  }
  PeerState& ps = *peers_[peer];
  if (ps.queue.size() >= o_.max_queued) {
    ++counters_.busy;
    return fail_later(Status::Busy("too many calls queued for " + ps.name));
  }
  const uint32_t i = AllocSlot();
  CallSlot& c = *slots_[i];
  c.peer = peer;
  c.method = method;
  c.payload = std::move(payload);
  c.options = options;
  if (c.options.timeout <= 0) c.options.timeout = o_.timeout;
  c.done = std::move(done);
  // While queued the call may use its whole budget (every attempt's
  // timeout); once launched each attempt gets `timeout` from its send.
  const runtime::Nanos budget = c.options.timeout > INT64_MAX / (int64_t{c.options.retries} + 2)
                                    ? INT64_MAX / 2
                                    : c.options.timeout * (int64_t{c.options.retries} + 1);
  const runtime::Nanos now = exec_->Now();
  c.deadline = now + budget;
  ps.queue.push_back(i);
  ArmTimer(c.deadline);
  // On the executor (the usual case: called from a callback) launch at once;
  // Launch never completes a call synchronously, so `done` still cannot run
  // inside Call. From outside (tests, before the runtime runs) defer.
  if (exec_->IsCurrent()) return Pump(peer, now);
  exec_->Post([this, peer, alive = alive_] {
    if (*alive) Pump(peer);
  });
}

// Sends queued calls while the peer has room; the first one waits for HELLO.
// `now`: the caller's clock reading, if it has one (saves a clock read).
void RpcChannel::Pump(Peer p, runtime::Nanos now) {
  PeerState& ps = *peers_[p];
  if (ps.queue.empty()) return;
  if (now < 0) now = exec_->Now();
  if (ps.session == kNoSession) {
    if (!ps.hello_pending) StartHello(p, now);
    return;
  }
  while (ps.outstanding < o_.max_outstanding && !ps.queue.empty()) {
    const uint32_t i = ps.queue.front();
    ps.queue.pop_front();
    ++ps.outstanding;
    Launch(i, now);
  }
}

void RpcChannel::StartHello(Peer p, runtime::Nanos now) {
  PeerState& ps = *peers_[p];
  ps.hello_pending = true;
  const uint32_t i = AllocSlot();
  CallSlot& c = *slots_[i];
  c.peer = p;
  c.method = kHelloMethod;
  c.hello = true;
  c.payload.assign(kHelloFixed, '\0');
  auto* b = reinterpret_cast<std::byte*>(c.payload.data());
  StoreLE<uint8_t>(b, kHelloFormat);
  if (o_.keys) {
    if (o_.keys->generation() != keys_generation_) RefreshKeys();
    ps.hello_key_id = keyring_->current().id;
    o_.random(ps.hello_nonce.data(), ps.hello_nonce.size());
    StoreLE<uint8_t>(b + 1, kHelloAuth);
    StoreLE<uint32_t>(b + 2, ps.hello_key_id);
    std::memcpy(b + 6, ps.hello_nonce.data(), ps.hello_nonce.size());
  }
  c.payload += endpoint_->address();
  c.options = CallOptions{.timeout = o_.timeout, .retries = 1};
  c.done = nullptr;
  Launch(i, now);
}

void RpcChannel::HelloDone(Peer p, Result<Response> r) {
  PeerState& ps = *peers_[p];
  ps.hello_pending = false;
  // An authenticated answer was checked, and its key set, in Authentic.
  const size_t expect = o_.keys ? 4 + auth::kNonceBytes : 4;
  if (r.ok() && r->status == Code::kOk && r->payload.size() == expect) {
    ps.session = LoadLE<uint32_t>(reinterpret_cast<const std::byte*>(r->payload.data()));
    ps.keyed = o_.keys != nullptr;
    ++counters_.sessions;
    return Pump(p);
  }
  // The peer is unreachable or refuses us: every queued call fails the same way.
  const Status why = r.ok() ? Status(r->status, "peer refused the session: " + r->payload) : r.status();
  std::deque<uint32_t> q;
  q.swap(ps.queue);
  for (uint32_t i : q) Complete(i, why);
}

void RpcChannel::Launch(uint32_t i, runtime::Nanos now) {
  CallSlot& c = *slots_[i];
  PeerState& ps = *peers_[c.peer];
  const uint64_t session = c.hello ? kNoSession : ps.session;
  c.launched = true;
  c.request_id = (session << kSessionShift) | (++next_seq_ & kSeqMask);
  c.answers_at_launch = ps.answers;
  pending_.Insert(c.request_id, i);
  c.attempts = 1;
  c.deadline = now + c.options.timeout;
  ArmTimer(c.deadline);
  if (Status s = SendRequest(c); !s.ok()) {
    ++counters_.send_failures;
    FailLater(i, std::move(s));
  }
}

Status RpcChannel::SendRequest(CallSlot& c) {
  const PeerState& ps = *peers_[c.peer];
  return SendFrame(ps.fabric_peer, c.request_id, c.method, /*request=*/true, Code::kOk, c.payload,
                   !c.hello && ps.keyed ? &ps.key : nullptr);
}

void RpcChannel::FailLater(uint32_t i, Status s) {
  exec_->Post([this, i, id = slots_[i]->request_id, s = std::move(s), alive = alive_] {
    if (!*alive) return;
    if (const uint32_t* at = pending_.Find(id); at != nullptr && *at == i) Complete(i, s);
  });
}

// Finishes a call, launched or still queued (the caller removed it from the
// queue). The record is recycled before `done` runs, so `done` may call again.
void RpcChannel::Complete(uint32_t i, Result<Response> r) {
  CallSlot& c = *slots_[i];
  const Peer p = c.peer;
  const bool hello = c.hello;
  if (c.launched) {
    pending_.Erase(c.request_id);
    if (!hello && peers_[p]->outstanding > 0) --peers_[p]->outstanding;
  }
  auto done = std::move(c.done);
  c.done = nullptr;
  c.in_use = false;
  c.payload.clear();
  free_slots_.push_back(i);
  if (hello) return HelloDone(p, std::move(r));
  done(std::move(r));
  Pump(p);
}

void RpcChannel::ArmTimer(runtime::Nanos deadline) {
  if (timer_ != 0 && timer_due_ <= deadline) return;
  if (timer_ != 0) exec_->Cancel(timer_);
  timer_due_ = deadline;
  timer_ = exec_->After(deadline - exec_->Now(), [this, alive = alive_] {
    if (!*alive) return;
    timer_ = 0;
    OnTimer();
  });
}

// Resends or expires every call whose attempt deadline passed, then re-arms
// for the earliest remaining one. Scans all records: it runs about once per
// timeout, not per call. Slot order keeps the simulator deterministic.
void RpcChannel::OnTimer() {
  const runtime::Nanos now = exec_->Now();
  std::vector<uint32_t> expired;
  bool queued_expired = false;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    CallSlot& c = *slots_[i];
    if (!c.in_use || c.deadline > now) continue;
    if (c.launched && c.attempts <= c.options.retries) {
      ++counters_.retries;
      ++c.attempts;
      c.deadline = now + c.options.timeout;
      if (!SendRequest(c).ok()) ++counters_.send_failures;  // the next deadline tries again
      continue;
    }
    c.expired = true;
    queued_expired |= !c.launched;
    expired.push_back(i);
  }
  if (queued_expired) {
    for (auto& ps : peers_) std::erase_if(ps->queue, [&](uint32_t i) { return slots_[i]->expired; });
  }
  for (uint32_t i : expired) {
    CallSlot& c = *slots_[i];
    if (!c.in_use || !c.expired) continue;  // finished meanwhile by an earlier callback
    PeerState& ps = *peers_[c.peer];
    ++counters_.timeouts;
    // Not a word from the peer since this call left: drop the session, so
    // the next call says HELLO again (a restarted server forgot it).
    if (c.launched && !c.hello && ps.answers == c.answers_at_launch) {
      ps.session = kNoSession;
      ps.keyed = false;
    }
    Complete(i, Status::Timeout(std::string(c.launched ? "no answer from " : "still queued for ") + ps.name));
  }
  runtime::Nanos next = INT64_MAX;
  for (auto& c : slots_) {
    if (c->in_use) next = std::min(next, c->deadline);
  }
  if (next != INT64_MAX) ArmTimer(next);
}

void RpcChannel::OnResponse(uint64_t request_id, Code status, std::span<const std::byte> payload) {
  const uint32_t* at = pending_.Find(request_id);
  if (at == nullptr) {
    ++counters_.late_responses;
    return;
  }
  const uint32_t i = *at;
  CallSlot& c = *slots_[i];
  PeerState& ps = *peers_[c.peer];
  ++ps.answers;
  if (status == Code::kUnauthenticated && o_.keys && !c.hello && !c.reauth) {
    // Our session's key was retired (a signed answer: it is the server
    // speaking). Say HELLO again with the current key and send this call
    // once more, at the head of the queue; it ran nowhere.
    c.reauth = true;
    if (ps.session == SessionOf(c.request_id)) {
      ps.session = kNoSession;
      ps.keyed = false;
    }
    pending_.Erase(c.request_id);
    c.launched = false;
    if (ps.outstanding > 0) --ps.outstanding;
    ps.queue.push_front(i);
    return Pump(c.peer);
  }
  Complete(i, Response{status, std::string(reinterpret_cast<const char*>(payload.data()), payload.size())});
}

// --- server role ---

void RpcChannel::OnHello(uint64_t request_id, std::span<const std::byte> payload) {
  if (payload.size() < kHelloFixed || LoadLE<uint8_t>(payload.data()) != kHelloFormat) {
    ++counters_.malformed;  // no address we could answer to
    return;
  }
  const bool wants_auth = (LoadLE<uint8_t>(payload.data() + 1) & kHelloAuth) != 0;
  const uint32_t key_id = LoadLE<uint32_t>(payload.data() + 2);
  auth::Nonce client_nonce;
  std::memcpy(client_nonce.data(), payload.data() + 6, client_nonce.size());
  const std::string address(reinterpret_cast<const char*>(payload.data() + kHelloFixed),
                            payload.size() - kHelloFixed);
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
  }
  const auth::Key* key = nullptr;
  if (o_.keys) {
    if (o_.keys->generation() != keys_generation_) RefreshKeys();
    key = wants_auth ? keyring_->Find(key_id) : nullptr;
    if (key == nullptr) {
      ++counters_.unauthenticated;
      return SendResponse(pid, request_id, kHelloMethod, Code::kUnauthenticated,
                          wants_auth ? "not authenticated: key " + std::to_string(key_id) +
                                           " of the cluster secret is not accepted here (rotated, or another cluster's?)"
                                     : "not authenticated: this node requires the cluster secret (the cluster "
                                       "directory's `secret` file, or --secret-file)");
    }
  } else if (wants_auth) {
    ++counters_.unauthenticated;
    return SendResponse(pid, request_id, kHelloMethod, Code::kUnauthenticated,
                        "not authenticated: this node has no cluster secret and cannot prove one");
  }
  if (sessions_.size() >= kNoSession) {
    ++counters_.refused;
    return SendResponse(pid, request_id, kHelloMethod, Code::kNoSpace, "no session ids left");
  }
  const auto session = static_cast<uint32_t>(sessions_.size());
  Session& ss = sessions_.emplace_back();
  ss.peer = pid;
  ++counters_.sessions;
  std::byte answer[4 + auth::kNonceBytes];
  StoreLE<uint32_t>(answer, session);
  size_t answer_len = 4;
  if (key != nullptr) {
    auth::Nonce server_nonce;
    o_.random(server_nonce.data(), server_nonce.size());
    std::memcpy(answer + 4, server_nonce.data(), server_nonce.size());
    answer_len += server_nonce.size();
    ss.keyed = true;
    ss.key_id = key->id;
    ss.key = auth::DeriveSessionKey(*key, client_nonce, server_nonce, session, address);
  }
  // Signed under the new session's key: that proves us to the client.
  if (!SendFrame(pid, request_id, kHelloMethod, /*request=*/false, Code::kOk,
                 std::string_view(reinterpret_cast<const char*>(answer), answer_len), ss.keyed ? &ss.key : nullptr)
           .ok()) {
    ++counters_.send_failures;
  }
}

void RpcChannel::OnRequest(uint64_t request_id, uint16_t method, std::span<const std::byte> payload) {
  const uint64_t sid = SessionOf(request_id);
  if (sid >= sessions_.size() || SeqOf(request_id) == 0) {
    ++counters_.malformed;  // no session: we would not know where to answer
    return;
  }
  Session& session = sessions_[sid];
  const fabric::PeerId to = session.peer;
  if (const uint32_t* at = cached_.Find(request_id)) {
    ++counters_.duplicates;  // a retry: answer again, never run twice
    const Cached& e = cache_[*at];
    if (e.answered) SendResponse(to, request_id, e.method, e.status, e.payload);
    return;
  }
  if (SeqOf(request_id) <= session.forgotten_seq) {
    // Older than what the cache still remembers of this session: it may
    // have run already. Refusing keeps the handler at most once.
    ++counters_.refused;
    return SendResponse(to, request_id, method, Code::kAborted,
                        "request too old for the reply cache; it may have run");
  }
  ++counters_.requests;
  EvictCached(cache_next_);
  Cached& e = cache_[cache_next_];
  e.request_id = request_id;
  e.session = static_cast<uint32_t>(sid);
  e.answered = false;
  e.method = method;
  e.payload.clear();
  cached_.Insert(request_id, static_cast<uint32_t>(cache_next_));
  cache_next_ = (cache_next_ + 1) % cache_.size();
  if (!handler_) return Answer(request_id, to, method, Code::kNotSupported, "no handler");
  handler_(method, payload, [this, to, request_id, method, alive = alive_](Code status, std::string out) {
    if (*alive) Answer(request_id, to, method, status, std::move(out));
  });
}

// Forgets cache entry `index` (if it holds one): a later retry of its
// request is refused rather than run again.
void RpcChannel::EvictCached(size_t index) {
  Cached& e = cache_[index];
  if (e.request_id == 0) return;
  cached_.Erase(e.request_id);
  Session& old = sessions_[e.session];
  old.forgotten_seq = std::max(old.forgotten_seq, SeqOf(e.request_id));
  cache_bytes_ -= e.payload.size();
  e.request_id = 0;
  e.payload = std::string();  // give a large answer's memory back
}

void RpcChannel::Answer(uint64_t request_id, fabric::PeerId to, uint16_t method, Code status,
                        std::string payload) {
  if (payload.size() > o_.max_call_payload) {
    // The answer does not fit: say so instead of going silent.
    status = Code::kTooLarge;
    payload = "response of " + std::to_string(payload.size()) + " bytes exceeds the limit of " +
              std::to_string(o_.max_call_payload);
  }
  if (const uint32_t* at = cached_.Find(request_id)) {
    Cached& e = cache_[*at];
    if (e.answered) return;  // a second reply
    e.answered = true;
    e.status = status;
    e.payload = std::move(payload);
    cache_bytes_ += e.payload.size();
    SendResponse(to, request_id, method, status, e.payload);
    // Over the byte budget: forget the oldest answers (ring order from the
    // next slot to reuse), this one last.
    for (size_t k = 1; cache_bytes_ > o_.reply_cache_bytes && k <= cache_.size(); ++k) {
      const size_t i = (cache_next_ + k - 1) % cache_.size();
      if (cache_[i].answered) EvictCached(i);
    }
    return;
  }
  // Evicted while the handler ran (more than reply_cache newer requests).
  SendResponse(to, request_id, method, status, payload);
}

void RpcChannel::SendResponse(fabric::PeerId to, uint64_t request_id, uint16_t method, Code status,
                              std::string_view payload) {
  if (!SendFrame(to, request_id, method, /*request=*/false, status, payload, ResponseKey(request_id)).ok()) {
    ++counters_.send_failures;
  }
}

// The key an answer to `request_id` is signed with: its session's, if the
// session is authenticated (a HELLO's refusal, before any session, is not).
const auth::SessionKey* RpcChannel::ResponseKey(uint64_t request_id) const {
  if (!o_.keys) return nullptr;
  const uint64_t sid = SessionOf(request_id);
  return sid < sessions_.size() && sessions_[sid].keyed ? &sessions_[sid].key : nullptr;
}

// --- authentication ---

// Takes the key source's current keyring; sessions whose key it no longer
// accepts are retired (their next request is told so).
void RpcChannel::RefreshKeys() {
  keys_generation_ = o_.keys->generation();
  keyring_ = o_.keys->keys();
  for (Session& ss : sessions_) {
    if (ss.keyed && keyring_->Find(ss.key_id) == nullptr) ss.retired = true;
  }
}

// Whether a decoded frame may be acted on: with authentication, its tag
// checks out under its session's key; without, it is not signed (we could
// not check it). A frame refused here is counted and dropped unanswered:
// whoever sent it cannot be told apart from the session's owner.
bool RpcChannel::Authentic(const DecodedFrame& f) {
  const FrameHeader& h = f.header;
  if (!o_.keys) {
    if (f.signed_frame) ++counters_.unauthenticated;
    return !f.signed_frame;
  }
  if (o_.keys->generation() != keys_generation_) RefreshKeys();
  if (h.kind == FrameKind::kRequest) {
    if (h.method == kHelloMethod) return !f.signed_frame;  // OnHello checks what it offers
    const uint64_t sid = SessionOf(h.request_id);
    if (sid >= sessions_.size() || !sessions_[sid].keyed || !VerifyFrame(f, sessions_[sid].key)) {
      ++counters_.unauthenticated;
      return false;
    }
    if (sessions_[sid].retired) {
      ++counters_.unauthenticated;
      SendResponse(sessions_[sid].peer, h.request_id, h.method, Code::kUnauthenticated,
                   "not authenticated: this session's key was retired (the cluster secret was rotated)");
      return false;
    }
    return true;
  }
  const uint32_t* at = pending_.Find(h.request_id);
  if (at == nullptr) return true;  // late: OnResponse drops it
  if (slots_[*at]->hello) return AuthenticHelloAnswer(f, *at);
  const PeerState& ps = *peers_[slots_[*at]->peer];
  if (ps.keyed && VerifyFrame(f, ps.key)) return true;
  ++counters_.unauthenticated;
  return false;
}

// HELLO's answer: a refusal is taken as it is (HelloDone reports it); an
// acceptance must be signed under the session key our nonce, the server's
// nonce and our cluster key give, or the server does not know the secret.
bool RpcChannel::AuthenticHelloAnswer(const DecodedFrame& f, uint32_t slot) {
  if (f.header.status != Code::kOk) return !f.signed_frame || o_.keys != nullptr;
  PeerState& ps = *peers_[slots_[slot]->peer];
  const auth::Key* key = keyring_->Find(ps.hello_key_id);
  if (f.signed_frame && f.payload.size() == 4 + auth::kNonceBytes && key != nullptr) {
    auth::Nonce server_nonce;
    std::memcpy(server_nonce.data(), f.payload.data() + 4, server_nonce.size());
    const auth::SessionKey k = auth::DeriveSessionKey(*key, ps.hello_nonce, server_nonce,
                                                      LoadLE<uint32_t>(f.payload.data()), endpoint_->address());
    if (VerifyFrame(f, k)) {
      ps.key = k;
      return true;
    }
  }
  ++counters_.unauthenticated;
  Complete(slot, Status::Unauthenticated("not authenticated: " + ps.name +
                                         " did not prove the cluster secret (its answer fails our key " +
                                         std::to_string(ps.hello_key_id) + "; do the secrets differ?)"));
  return false;
}

// --- both roles ---

// Appends the frame to the message being gathered for `to`; Flush (at the
// end of every poll, i.e. of every executor turn) sends each gathered
// message once. A message never exceeds the largest frame, which the
// receiver's buffers are sized for.
Status RpcChannel::SendFrame(fabric::PeerId to, uint64_t request_id, uint16_t method, bool request,
                             Code status, std::string_view payload, const auth::SessionKey* key) {
  if (payload.size() > o_.max_call_payload) {
    return Status::TooLarge("RPC payload of " + std::to_string(payload.size()) +
                            " bytes exceeds the limit of " + std::to_string(o_.max_call_payload));
  }
  FrameHeader h{request ? FrameKind::kRequest : FrameKind::kResponse, method, request_id,
                request ? Code::kOk : status};
  if (payload.size() <= o_.max_payload) return AppendOne(to, h, payload, key);
  // Fragments, each a full frame (and so its own message), in order.
  h.fragment = true;
  for (size_t off = 0; off < payload.size(); off += o_.max_payload) {
    h.offset = static_cast<uint32_t>(off);
    h.last_fragment = off + o_.max_payload >= payload.size();
    SLIP_RETURN_IF_ERROR(AppendOne(to, h, payload.substr(off, o_.max_payload), key));
  }
  return Status::Ok();
}

Status RpcChannel::AppendOne(fabric::PeerId to, const FrameHeader& h, std::string_view payload,
                             const auth::SessionKey* key) {
  const bool request = h.kind == FrameKind::kRequest;
  const bool sign = key != nullptr;
  if (to >= open_.size()) open_.resize(to + 1, kNone);
  if (open_[to] != kNone && send_bufs_[open_[to]]->frames.size() + FrameSize(payload.size(), sign) >
                                FrameSize(o_.max_payload, o_.keys != nullptr)) {
    FlushOne(open_[to]);
  }
  if (open_[to] == kNone) {
    const uint32_t b = TakeOrGrow(send_bufs_, free_send_);
    SendBuf& buf = *send_bufs_[b];
    buf.frames.clear();
    buf.request_ids.clear();
    buf.to = to;
    open_[to] = b;
    gathering_.push_back(b);
    // Gathered outside our poll (a task, a timer, another poller): make sure
    // a loop turn, and so our poll, follows before the executor parks.
    if (!in_poll_) exec_->Wake();
  }
  SendBuf& buf = *send_bufs_[open_[to]];
  SLIP_RETURN_IF_ERROR(AppendFrame(h, payload, o_.max_payload, &buf.frames, key));
  if (request) buf.request_ids.push_back(h.request_id);
  ++counters_.frames_sent;
  return Status::Ok();
}

void RpcChannel::Flush() {
  // FlushOne may complete calls whose callbacks send more: take the list first.
  while (!gathering_.empty()) {
    std::vector<uint32_t> now;
    now.swap(gathering_);
    for (uint32_t b : now) {
      if (open_[send_bufs_[b]->to] == b) FlushOne(b);
    }
  }
}

void RpcChannel::FlushOne(uint32_t b) {
  SendBuf& buf = *send_bufs_[b];
  open_[buf.to] = kNone;
  std::erase(gathering_, b);
  if (buf.frames.empty()) {
    free_send_.push_back(b);
    return;
  }
  ++counters_.messages_sent;
  Status s = endpoint_->Send(buf.to, buf.frames.data(), buf.frames.size(), nullptr, uint64_t{b} + 1);
  if (!s.ok()) OnSendDone(uint64_t{b} + 1, s.code());
}

void RpcChannel::OnSendDone(uint64_t context, Code status) {
  if (context == 0 || context > send_bufs_.size()) return;
  const auto b = static_cast<uint32_t>(context - 1);
  free_send_.push_back(b);
  // Fragments of a large payload grow the pool by one buffer each: past a
  // small working set, give their memory back.
  if (free_send_.size() > 64) std::vector<std::byte>().swap(send_bufs_[b]->frames);
  if (status == Code::kOk) return;
  ++counters_.send_failures;
  // The fabric gave up on the peer. With resends left the timer tries again;
  // otherwise the call fails now rather than at its deadline. (The buffer
  // is free again, but nothing reuses it before this loop ends.)
  std::vector<uint64_t> ids;
  ids.swap(send_bufs_[b]->request_ids);
  for (uint64_t request_id : ids) {
    const uint32_t* at = pending_.Find(request_id);
    if (at == nullptr) continue;
    const uint32_t i = *at;
    CallSlot& c = *slots_[i];
    if (c.attempts <= c.options.retries) continue;
    Complete(i, Status(status, "sending to " + peers_[c.peer]->name + " failed"));
  }
}

bool RpcChannel::Poll() {
  // A member array: a local one would be value-initialised (1 KiB) on every
  // executor loop turn, busy or idle.
  std::span<fabric::Completion> cs(completions_);
  in_poll_ = true;
  const size_t n = endpoint_->Poll(cs);
  for (size_t k = 0; k < n; ++k) {
    const fabric::Completion& c = cs[k];
    if (c.op == fabric::Op::kRecv) {
      if (c.status == Code::kOk && c.data != nullptr && c.len > 0) OnMessage(c.data, c.len);
      if (c.buffer_released && (c.context & kRecvTag)) {
        const size_t b = c.context & ~kRecvTag;
        if (b < recv_.size()) {
          Status s = endpoint_->PostMultiRecv(recv_[b], o_.recv_buffer_bytes, nullptr, c.context);
          if (!s.ok()) ++counters_.send_failures;  // the buffer is lost; fewer remain
        }
      }
      continue;
    }
    if (c.op == fabric::Op::kSend) OnSendDone(c.context, c.status);
  }
  const bool sent = !gathering_.empty();
  Flush();
  in_poll_ = false;
  return n > 0 || sent;
}

// A message holds one or more frames back to back. A frame that fails to
// decode ends the message: what follows it cannot be located reliably.
void RpcChannel::OnMessage(const std::byte* data, size_t len) {
  while (len > 0) {
    auto f = DecodeFrame({data, len}, o_.max_payload);
    if (!f.ok()) return OnBadFrame({data, len}, f.status());
    if (!Authentic(*f)) {
      // Dropped; the frames after it still stand on their own.
    } else if (f->header.fragment) {
      OnFragment(f->header, f->payload);
    } else {
      OnFrame(f->header, f->payload);
    }
    data += f->frame_bytes;
    len -= f->frame_bytes;
  }
}

void RpcChannel::OnFrame(const FrameHeader& h, std::span<const std::byte> payload) {
  if (h.kind == FrameKind::kResponse) {
    OnResponse(h.request_id, h.status, payload);
  } else if (h.method == kHelloMethod) {
    OnHello(h.request_id, payload);
  } else {
    OnRequest(h.request_id, h.method, payload);
  }
}

// Appends a fragment to its payload; the last one delivers the whole. The
// connection is FIFO, so a fragment that does not continue its payload
// means one was lost: the partial payload is dropped, and the sender's
// retry (which starts again at offset 0) rebuilds it.
void RpcChannel::OnFragment(const FrameHeader& h, std::span<const std::byte> payload) {
  auto& partials = h.kind == FrameKind::kRequest ? partial_requests_ : partial_responses_;
  auto drop = [&](std::unordered_map<uint64_t, Partial>& m, auto at) {
    partial_bytes_ -= at->second.bytes.size();
    m.erase(at);
    ++counters_.reassembly_dropped;
  };
  if (h.method == kHelloMethod) {
    ++counters_.malformed;
    return;
  }
  auto it = partials.find(h.request_id);
  if (h.offset == 0) {
    if (it != partials.end()) drop(partials, it);
    it = partials.emplace(h.request_id, Partial{{}, ++partial_born_}).first;
  } else if (it == partials.end() || it->second.bytes.size() != h.offset) {
    if (it != partials.end()) drop(partials, it);
    ++counters_.malformed;
    return;
  }
  if (it->second.bytes.size() + payload.size() > o_.max_call_payload) {
    drop(partials, it);
    // Answered as an oversized single frame would be.
    return Refuse(h, Code::kTooLarge, "RPC payload exceeds the limit of " + std::to_string(o_.max_call_payload));
  }
  it->second.bytes.append(reinterpret_cast<const char*>(payload.data()), payload.size());
  partial_bytes_ += payload.size();
  if (h.last_fragment) {
    std::string whole = std::move(it->second.bytes);
    partial_bytes_ -= whole.size();
    partials.erase(it);
    ++counters_.reassembled;
    FrameHeader wh = h;
    wh.fragment = false;
    return OnFrame(wh, {reinterpret_cast<const std::byte*>(whole.data()), whole.size()});
  }
  // Over budget: drop the oldest incomplete payloads (never the one growing).
  while (partial_bytes_ > o_.reassembly_bytes) {
    std::unordered_map<uint64_t, Partial>* in = nullptr;
    uint64_t key = 0, born = UINT64_MAX;
    for (auto* m : {&partial_requests_, &partial_responses_}) {
      for (auto& [id, p] : *m) {
        if (&p != &it->second && p.born < born) {
          in = m;
          key = id;
          born = p.born;
        }
      }
    }
    if (in == nullptr) break;
    drop(*in, in->find(key));
  }
}

// A frame that failed to decode. If its header still names someone to tell,
// tell them (TooLarge for an oversized payload, Corruption otherwise); the
// request never runs and is not cached, so a clean resend still can.
void RpcChannel::OnBadFrame(std::span<const std::byte> frame, const Status& why) {
  ++counters_.malformed;
  const std::optional<FrameHeader> h = PeekHeader(frame);
  if (!h) return;
  Refuse(*h, why.Is(Code::kTooLarge) ? Code::kTooLarge : Code::kCorruption, why.message());
}

// A request we will not run: answer its caller, if its session is known.
// A response we cannot take: fail its pending call.
void RpcChannel::Refuse(const FrameHeader& h, Code code, const std::string& why) {
  std::string message = "rpc: " + why;
  if (message.size() > o_.max_payload) message.resize(o_.max_payload);
  if (h.kind == FrameKind::kRequest) {
    const uint64_t sid = SessionOf(h.request_id);
    if (h.method == kHelloMethod || sid >= sessions_.size()) return;
    ++counters_.refused;
    return SendResponse(sessions_[sid].peer, h.request_id, h.method, code, message);
  }
  const uint32_t* at = pending_.Find(h.request_id);
  if (at == nullptr) return;
  Complete(*at, Status(code, "response " + message));
}

}  // namespace slip::rpc
