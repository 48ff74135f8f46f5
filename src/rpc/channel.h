// RpcChannel: request/response RPC over one fabric endpoint, both roles —
// a node answers requests and calls its peers through the same channel.
// Driven by one executor (a poller on the endpoint); every callback runs
// there, and every method must be called there (or before the runtime runs).
// Wire: rpc/frame.h frames in the peers' multi-receive buffers
// (docs/formats/wire.md, which also describes the session protocol).
//
//   Sessions   Completions do not name the sender, so the first call to a
//              peer sends a HELLO carrying our address; the server adds us as
//              a fabric peer and answers with a fresh session id that every
//              later request carries in the top 24 bits of its request id.
//              A fresh id per HELLO (not per address) keeps a restarted
//              client, which reuses its address, from being answered out of
//              its previous incarnation's reply cache.
//   Timeouts   each attempt has a deadline, `timeout` after it was sent. A
//              call waiting behind back-pressure may wait its whole budget
//              (timeout x (1 + retries)) and then fails with Timeout without
//              being sent, so a dead peer fails every queued call within one
//              budget, not one timeout per max_outstanding calls. A late
//              response is dropped.
//              One executor timer serves all calls (armed at the earliest
//              deadline), not one per call: arming and cancelling a runtime
//              timer per call cost more than the rest of the call path.
//   Retries    optional: the same request (same request id) is resent on
//              timeout, and the server answers a duplicate from a bounded
//              reply cache instead of running the handler twice. A call that
//              times out without retries left also drops the session, so the
//              next call says HELLO again (the server may have restarted).
//   Back-pressure  at most `max_outstanding` calls in flight per peer; more
//              wait in a bounded queue; beyond it a call fails with Busy.
//   Batching   frames sent during one executor turn to the same peer go as
//              one fabric message (flushed at the end of the channel's poll,
//              which runs every turn): a server that takes many requests in
//              one poll answers each client, and replicates to each backup,
//              with one send. Frames keep their order per peer.
//   Fragments  a payload larger than one frame (up to max_call_payload) is
//              sent as consecutive fragments and reassembled by the receiver
//              before the handler or the callback sees it; FIFO connections
//              keep them in order, so a gap means loss and drops the partial
//              payload (the retry resends it whole).
//   Authentication  with `keys` (the cluster secret, auth/), HELLO carries
//              a client nonce and the key id it uses; the server answers
//              with a server nonce, and both ends derive a session key from
//              the cluster key and both nonces (auth/session_key.h). The
//              server signs its answer under that key, which proves it to
//              the client; the client signs every request, which proves it
//              to the server before any handler runs. Every later frame of
//              the session, both ways, is signed; a frame whose tag fails is
//              dropped unanswered. A client without the secret is refused
//              at HELLO with Unauthenticated. When a key stops being
//              accepted (rotation), its sessions are told Unauthenticated
//              in a signed answer and the client says HELLO again with its
//              current key and resends, so rotation costs no call.
//   Bad input  a frame that fails to decode is counted; if its header is
//              still readable and names a known session (request) or a
//              pending call (response), that request/call gets Corruption or
//              TooLarge, otherwise it is dropped (there is no trustworthy
//              request id to answer). Never a crash.
//
// Hot path (measured, bench/results/2026-11-23-rpc-latency.md): no runtime
// timer, no Post, no hash-node allocation per call; call records, send
// buffers and reply-cache entries are pooled and reused.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "auth/key_source.h"
#include "auth/session_key.h"
#include "common/status.h"
#include "fabric/fabric.h"
#include "rpc/frame.h"
#include "runtime/runtime.h"

namespace slip::rpc {

struct Response {
  Code status = Code::kOk;  // the handler's outcome (or the server's refusal:
                            // TooLarge / Corruption for a request it could not take)
  std::string payload;
};

struct ChannelOptions {
  // Largest payload in one frame. The frame (32 B header, padded to 64 B)
  // must fit the fabric's largest multi-receive message (ofi: 8 KiB).
  size_t max_payload = 8192 - 64;
  // Largest payload of one call or answer; one larger than max_payload
  // travels as max_payload-sized fragments (wire.md "Fragments").
  // 0: max_payload (no fragments). At most 4 GiB - 1.
  size_t max_call_payload = 0;
  // Bytes of fragments held for payloads not yet complete; past it the
  // oldest incomplete payload is dropped (a retry sends it again).
  size_t reassembly_bytes = 64 << 20;
  size_t recv_buffer_bytes = 256 << 10;
  size_t recv_buffers = 4;
  runtime::Nanos timeout = 2 * runtime::kSecond;  // per attempt, default for calls
  uint32_t max_outstanding = 128;  // per peer
  uint32_t max_queued = 8192;      // per peer, beyond max_outstanding
  // Requests remembered (with their answers) for deduplicating retries, over
  // all sessions, oldest forgotten first. A retry of a forgotten request is
  // refused with Aborted rather than run a second time.
  uint32_t reply_cache = 8192;
  // Bytes of answers the reply cache may hold; past it the oldest answers
  // are forgotten first (large GET answers would otherwise pin gigabytes).
  size_t reply_cache_bytes = 64 << 20;
  // The cluster secret: set, every session is authenticated and every frame
  // signed ("Authentication" above). Unset, frames carry a CRC only and a
  // peer that asks for authentication is refused.
  std::shared_ptr<auth::KeySource> keys;
  // Where nonces come from: the kernel's random bytes unless set (the
  // simulator sets a seeded generator to stay deterministic).
  std::function<void(void* out, size_t n)> random;
};

// An open-addressing map from request id (never 0) to a small index; no
// allocation per insert, unlike std::unordered_map. Internal; here so the
// channel can hold it by value.
class IdMap {
 public:
  uint32_t* Find(uint64_t key);  // null for key 0 (never present)
  void Insert(uint64_t key, uint32_t value);  // REQUIRES: key absent, != 0
  bool Erase(uint64_t key);
  size_t size() const { return n_; }

 private:
  size_t Home(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
  void Grow();
  struct Entry {
    uint64_t key = 0;  // 0: empty
    uint32_t value = 0;
  };
  std::vector<Entry> t_;
  size_t n_ = 0;
  int shift_ = 64;
};

class RpcChannel {
 public:
  using Reply = std::function<void(Code status, std::string payload)>;
  // `payload` is valid during the call only; `reply` may run later, once
  // (later calls are ignored), and is a no-op after the channel is gone.
  using Handler = std::function<void(uint16_t method, std::span<const std::byte> payload, Reply reply)>;
  using Peer = uint32_t;

  static Result<std::unique_ptr<RpcChannel>> Open(runtime::Executor* exec,
                                                  std::unique_ptr<fabric::Endpoint> endpoint,
                                                  ChannelOptions options = {});
  // Pending calls are abandoned: their callbacks never run.
  ~RpcChannel();
  RpcChannel(const RpcChannel&) = delete;
  RpcChannel& operator=(const RpcChannel&) = delete;

  std::string address() const { return endpoint_->address(); }
  void SetHandler(Handler h) { handler_ = std::move(h); }

  // A peer to call (no traffic until the first call). Same address, same Peer.
  Result<Peer> Connect(const std::string& address);

  struct CallOptions {
    runtime::Nanos timeout = 0;  // per attempt; 0: the channel's default
    uint32_t retries = 0;        // resends of the same request after a timeout
  };
  // `done` runs exactly once on the executor, never inside Call: with the
  // response, or InvalidArgument (unknown peer, reserved method) / TooLarge /
  // Busy (queue full) / Timeout / Unavailable (the fabric gave up on the
  // peer) / Corruption (the response failed its checksum) / Unauthenticated
  // (the peer refused our secret, or did not prove it knows it).
  void Call(Peer peer, uint16_t method, std::string payload, CallOptions options,
            std::function<void(Result<Response>)> done);

  struct Counters {
    uint64_t calls = 0, retries = 0, timeouts = 0, busy = 0, late_responses = 0;
    uint64_t requests = 0, duplicates = 0, malformed = 0, send_failures = 0;
    uint64_t refused = 0;   // bad requests answered with an error (TooLarge, Corruption, Aborted)
    uint64_t sessions = 0;  // HELLOs answered (server) / completed (client)
    // Frames, and the fabric messages that carried them (a message carries
    // every frame for one peer from one executor turn).
    uint64_t frames_sent = 0, messages_sent = 0;
    // Payloads that arrived in fragments; partial ones dropped (a gap, or
    // the reassembly budget).
    uint64_t reassembled = 0, reassembly_dropped = 0;
    // Frames dropped because their tag did not check out (or a session
    // could not be trusted), and sessions refused for want of the secret.
    uint64_t unauthenticated = 0;
  };
  const Counters& counters() const { return counters_; }
  // Bytes of answers the reply cache holds now (at most reply_cache_bytes).
  size_t reply_cache_bytes() const { return cache_bytes_; }

 private:
  struct CallSlot;
  struct PeerState;
  struct Session;
  struct Cached;
  struct SendBuf;
  RpcChannel(runtime::Executor* exec, std::unique_ptr<fabric::Endpoint> endpoint, ChannelOptions o);

  bool Poll();
  void OnMessage(const std::byte* data, size_t len);
  bool Authentic(const DecodedFrame& f);
  bool AuthenticHelloAnswer(const DecodedFrame& f, uint32_t slot);
  void RefreshKeys();
  const auth::SessionKey* ResponseKey(uint64_t request_id) const;
  void OnFrame(const FrameHeader& h, std::span<const std::byte> payload);
  void OnFragment(const FrameHeader& h, std::span<const std::byte> payload);
  void EvictCached(size_t index);
  void OnBadFrame(std::span<const std::byte> frame, const Status& why);
  void Refuse(const FrameHeader& h, Code code, const std::string& why);
  void OnRequest(uint64_t request_id, uint16_t method, std::span<const std::byte> payload);
  void OnHello(uint64_t request_id, std::span<const std::byte> payload);
  void OnResponse(uint64_t request_id, Code status, std::span<const std::byte> payload);
  void OnSendDone(uint64_t context, Code status);

  // Client role.
  uint32_t AllocSlot();
  void Pump(Peer p, runtime::Nanos now = -1);
  void StartHello(Peer p, runtime::Nanos now);
  void HelloDone(Peer p, Result<Response> r);
  void Launch(uint32_t slot, runtime::Nanos now);
  Status SendRequest(CallSlot& c);
  void Complete(uint32_t slot, Result<Response> r);
  void FailLater(uint32_t slot, Status s);
  void ArmTimer(runtime::Nanos deadline);
  void OnTimer();

  // Server role.
  void Answer(uint64_t request_id, fabric::PeerId to, uint16_t method, Code status,
              std::string payload);
  void SendResponse(fabric::PeerId to, uint64_t request_id, uint16_t method, Code status,
                    std::string_view payload);

  Status SendFrame(fabric::PeerId to, uint64_t request_id, uint16_t method, bool request,
                   Code status, std::string_view payload, const auth::SessionKey* key);
  Status AppendOne(fabric::PeerId to, const FrameHeader& h, std::string_view payload,
                   const auth::SessionKey* key);
  void Flush();
  void FlushOne(uint32_t buf);

  runtime::Executor* exec_;
  std::unique_ptr<fabric::Endpoint> endpoint_;
  ChannelOptions o_;
  Handler handler_;
  // Authentication: the keyring as of `keys_generation_` (null: off).
  std::shared_ptr<const auth::Keyring> keyring_;
  uint64_t keys_generation_ = 0;
  runtime::PollerId poller_ = 0;
  std::shared_ptr<bool> alive_;  // deferred tasks and replies check it after destruction

  std::vector<std::byte*> recv_;  // multi-receive buffers, owned
  fabric::Completion completions_[32];

  // Frames handed to the fabric, until their send completes (context =
  // index + 1). Pooled: a steady stream of calls allocates nothing here.
  std::vector<std::unique_ptr<SendBuf>> send_bufs_;
  std::vector<uint32_t> free_send_;
  // Messages being gathered this turn: the open buffer per fabric peer
  // (kNone: none), and the open ones in the order they were opened.
  std::vector<uint32_t> open_;
  std::vector<uint32_t> gathering_;
  bool in_poll_ = false;

  // Client role. Call records are pooled by index (a callback may start new
  // calls, so records live behind pointers that stay put).
  std::vector<std::unique_ptr<CallSlot>> slots_;
  std::vector<uint32_t> free_slots_;
  IdMap pending_;  // launched request id -> slot
  std::vector<std::unique_ptr<PeerState>> peers_;
  std::unordered_map<std::string, Peer> peer_by_address_;
  uint64_t next_seq_ = 0;  // request ids never repeat within this channel
  runtime::TimerId timer_ = 0;
  runtime::Nanos timer_due_ = 0;

  // Server role: sessions by id (index); the reply cache is a ring of
  // `reply_cache` entries indexed by request id through `cached_`.
  std::vector<Session> sessions_;
  std::unordered_map<std::string, fabric::PeerId> client_by_address_;
  std::vector<Cached> cache_;
  size_t cache_next_ = 0;  // ring position of the next entry (the oldest once full)
  IdMap cached_;           // request id -> cache_ index
  size_t cache_bytes_ = 0;  // answers' payload bytes held in cache_

  // Payloads arriving in fragments, by kind and request id (a request and a
  // response may share an id: they come from different id spaces).
  struct Partial {
    std::string bytes;
    uint64_t born = 0;  // arrival order, to drop the oldest first
  };
  std::unordered_map<uint64_t, Partial> partial_requests_, partial_responses_;
  size_t partial_bytes_ = 0;
  uint64_t partial_born_ = 0;

  Counters counters_;
};

}  // namespace slip::rpc
