// RpcChannel: request/response RPC over one fabric endpoint, both roles —
// a node answers requests and calls its peers through the same channel.
// Driven by one executor (a poller on the endpoint); every callback runs
// there. Wire: rpc/frame.h frames in the peers' multi-receive buffers
// (docs/formats/wire.md).
//
//   Sessions   Completions do not name the sender, so the first call to a
//              peer sends a HELLO carrying our address; the server adds us as
//              a fabric peer and answers with a channel id that every later
//              request carries in the top 24 bits of its request id.
//   Timeouts   each call has a deadline (executor timer); a late response
//              is dropped.
//   Retries    optional: the same frame (same request id) is resent on
//              timeout, and the server answers a duplicate from a bounded
//              reply cache instead of running the handler twice.
//   Back-pressure  at most `max_outstanding` calls in flight per peer; more
//              wait in a bounded queue; beyond it a call fails with Busy.
//   Bad input  a frame that fails to decode is counted and dropped (there is
//              no trustworthy request id to answer); an oversized payload is
//              refused with TooLarge, locally or by the server. Never a crash.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "fabric/fabric.h"
#include "runtime/runtime.h"

namespace slip::rpc {

struct Response {
  Code status = Code::kOk;  // the handler's outcome
  std::string payload;
};

struct ChannelOptions {
  // Largest payload in one frame. The frame (32 B header, padded to 64 B)
  // must fit the fabric's largest multi-receive message (ofi: 8 KiB).
  size_t max_payload = 8192 - 64;
  size_t recv_buffer_bytes = 256 << 10;
  size_t recv_buffers = 4;
  runtime::Nanos timeout = 2 * runtime::kSecond;
  uint32_t max_outstanding = 128;  // per peer
  uint32_t max_queued = 8192;      // per peer, beyond max_outstanding
  uint32_t reply_cache = 8192;     // answered requests remembered for retries
};

class RpcChannel {
 public:
  using Reply = std::function<void(Code status, std::string payload)>;
  // `payload` is valid during the call only; `reply` may run later, once.
  using Handler = std::function<void(uint16_t method, std::span<const std::byte> payload, Reply reply)>;
  using Peer = uint32_t;

  static Result<std::unique_ptr<RpcChannel>> Open(runtime::Executor* exec,
                                                  std::unique_ptr<fabric::Endpoint> endpoint,
                                                  ChannelOptions options = {});
  ~RpcChannel();
  RpcChannel(const RpcChannel&) = delete;
  RpcChannel& operator=(const RpcChannel&) = delete;

  std::string address() const { return endpoint_->address(); }
  void SetHandler(Handler h) { handler_ = std::move(h); }

  // A peer to call (no traffic until the first call). Same address, same Peer.
  Result<Peer> Connect(const std::string& address);

  struct CallOptions {
    runtime::Nanos timeout = 0;  // 0: the channel's default
    uint32_t retries = 0;        // resends of the same request after a timeout
  };
  // `done` runs exactly once on the executor, never inside Call: with the
  // response, or TooLarge / Busy / Timeout / Unavailable.
  void Call(Peer peer, uint16_t method, std::string payload, CallOptions options,
            std::function<void(Result<Response>)> done);

  struct Counters {
    uint64_t calls = 0, retries = 0, timeouts = 0, busy = 0, late_responses = 0;
    uint64_t requests = 0, duplicates = 0, malformed = 0, send_failures = 0;
  };
  const Counters& counters() const { return counters_; }

 private:
  struct PendingCall;
  struct PeerState;
  RpcChannel(runtime::Executor* exec, std::unique_ptr<fabric::Endpoint> endpoint, ChannelOptions o);

  bool Poll();
  void OnMessage(const std::byte* data, size_t len);
  void OnRequest(uint64_t request_id, uint16_t method, std::span<const std::byte> payload);
  void OnHello(uint64_t request_id, std::span<const std::byte> payload);
  void OnResponse(uint64_t request_id, Code status, std::span<const std::byte> payload);
  void Pump(Peer p);
  void Launch(Peer p, std::shared_ptr<PendingCall> c);
  void Arm(std::shared_ptr<PendingCall> c);
  void Complete(std::shared_ptr<PendingCall> c, Result<Response> r);
  Status SendFrame(fabric::PeerId to, std::vector<std::byte> frame);
  void SendReply(fabric::PeerId to, uint64_t request_id, uint16_t method, Code status,
                 const std::string& payload);

  runtime::Executor* exec_;
  std::unique_ptr<fabric::Endpoint> endpoint_;
  ChannelOptions o_;
  Handler handler_;
  runtime::PollerId poller_ = 0;
  std::shared_ptr<bool> alive_;  // timers and replies check it after destruction

  struct RecvBuffer {
    std::byte* data = nullptr;
  };
  std::vector<RecvBuffer> recv_;
  std::unordered_map<uint64_t, std::vector<std::byte>> sending_;  // context -> frame in flight
  uint64_t next_send_ = 1;

  // Client role.
  std::vector<std::unique_ptr<PeerState>> peers_;
  std::unordered_map<std::string, Peer> peer_by_address_;
  std::unordered_map<uint64_t, std::shared_ptr<PendingCall>> pending_;  // request id -> call

  // Server role: clients by channel id (= their fabric PeerId here).
  std::unordered_map<std::string, fabric::PeerId> client_by_address_;
  std::unordered_set<uint64_t> known_channels_;
  struct Cached {
    bool answered = false;
    std::vector<std::byte> frame;
  };
  std::unordered_map<uint64_t, Cached> replies_;  // (channel, request id) -> answer
  std::deque<uint64_t> reply_order_;

  Counters counters_;
};

}  // namespace slip::rpc
