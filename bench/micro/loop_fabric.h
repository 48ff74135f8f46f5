// An in-process fabric for measuring the RPC layer alone: a hand-driven
// executor and an endpoint pair whose Send is a memcpy into the peer's
// multi-receive buffer, completing at once — no provider, no scheduler.
// Used by rpc_overhead_bench and by model_calibrate (the `rpc_call` input
// of the simulator's cost model, docs/model.md).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/random.h"
#include "fabric/fabric.h"
#include "rpc/channel.h"
#include "runtime/runtime.h"

namespace slip::bench {

// A single-threaded executor driven by Turn(); the OS clock is fine here
// (this is a benchmark, not protocol code).
class LoopExecutor final : public runtime::Executor {
 public:
  std::string_view name() const override { return "loop"; }
  uint32_t id() const override { return 0; }
  runtime::Nanos Now() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  runtime::TimerId After(runtime::Nanos delay, std::function<void()> fn) override {
    const runtime::TimerId id = next_++;
    timers_[id] = {Now() + delay, std::move(fn)};
    return id;
  }
  bool Cancel(runtime::TimerId id) override { return timers_.erase(id) == 1; }
  void Post(std::function<void()> fn) override { tasks_.push_back(std::move(fn)); }
  runtime::PollerId AddPoller(std::function<bool()> poll) override {
    pollers_.push_back(std::move(poll));
    return pollers_.size();
  }
  void RemovePoller(runtime::PollerId id) override { pollers_[id - 1] = [] { return false; }; }
  void Wake() override {}
  void AddWaitFd(int, std::function<bool()>, bool) override {}
  Random& Rng() override { return rng_; }
  runtime::Nanos CpuTime() const override { return 0; }
  bool IsCurrent() const override { return true; }

  void Turn() {
    while (!tasks_.empty()) {
      auto fn = std::move(tasks_.front());
      tasks_.pop_front();
      fn();
    }
    if (!timers_.empty() && ++turns_ % 64 == 0) {  // timers are rare here
      const runtime::Nanos now = Now();
      for (auto it = timers_.begin(); it != timers_.end();) {
        if (it->second.first <= now) {
          auto fn = std::move(it->second.second);
          it = timers_.erase(it);
          fn();
        } else {
          ++it;
        }
      }
    }
    for (size_t i = 0; i < pollers_.size(); ++i) pollers_[i]();
  }

 private:
  std::deque<std::function<void()>> tasks_;
  std::map<runtime::TimerId, std::pair<runtime::Nanos, std::function<void()>>> timers_;
  runtime::TimerId next_ = 1;
  std::vector<std::function<bool()>> pollers_;
  Random rng_{1};
  uint64_t turns_ = 0;
};

// Two endpoints in one process; Send copies into the peer's current
// multi-receive buffer (64 B stride) and completes at once.
class LoopEndpoint final : public fabric::Endpoint {
 public:
  explicit LoopEndpoint(std::string address) : address_(std::move(address)) { registry()[address_] = this; }
  ~LoopEndpoint() override { registry().erase(address_); }

  std::string address() const override { return address_; }
  Result<fabric::PeerId> AddPeer(std::string_view address) override {
    auto it = registry().find(std::string(address));
    if (it == registry().end()) return Status::Unavailable("no such endpoint");
    peers_.push_back(it->second);
    return static_cast<fabric::PeerId>(peers_.size() - 1);
  }
  Result<fabric::MemoryRegion> Register(void*, size_t, uint32_t) override { return Status::NotSupported("-"); }
  Status Deregister(const fabric::MemoryRegion&) override { return Status::NotSupported("-"); }
  Status Send(fabric::PeerId peer, const void* buf, size_t len, const fabric::MemoryRegion*,
              uint64_t context, uint32_t post) override {
    if (peer >= peers_.size()) return Status::InvalidArgument("peer");
    if (!peers_[peer]->Place(static_cast<const std::byte*>(buf), len)) return Status::Busy("no buffer");
    if ((post & fabric::kSilent) == 0) done_.push_back({context, fabric::Op::kSend, Code::kOk, 0, nullptr, false});
    return Status::Ok();
  }
  Status PostRecv(void*, size_t, const fabric::MemoryRegion*, uint64_t) override {
    return Status::NotSupported("-");
  }
  Status PostMultiRecv(void* buf, size_t len, const fabric::MemoryRegion*, uint64_t context) override {
    bufs_.push_back({static_cast<std::byte*>(buf), len, 0, context});
    return Status::Ok();
  }
  Status Write(fabric::PeerId, const void*, size_t, const fabric::MemoryRegion*, const fabric::RemoteMemory&,
               uint64_t, uint64_t, uint32_t) override {
    return Status::NotSupported("-");
  }
  Status Read(fabric::PeerId, void*, size_t, const fabric::MemoryRegion*, const fabric::RemoteMemory&, uint64_t,
              uint64_t, uint32_t) override {
    return Status::NotSupported("-");
  }
  Status CompareSwap(fabric::PeerId, const fabric::RemoteMemory&, uint64_t, uint64_t, uint64_t, uint64_t*,
                     uint64_t) override {
    return Status::NotSupported("-");
  }
  Status FetchAdd(fabric::PeerId, const fabric::RemoteMemory&, uint64_t, uint64_t, uint64_t*, uint64_t) override {
    return Status::NotSupported("-");
  }
  size_t Poll(std::span<fabric::Completion> out) override {
    size_t n = 0;
    while (n < out.size() && !done_.empty()) {
      out[n++] = done_.front();
      done_.pop_front();
    }
    return n;
  }
  void Wait(std::chrono::nanoseconds) override {}

 private:
  static std::map<std::string, LoopEndpoint*>& registry() {
    static std::map<std::string, LoopEndpoint*> r;
    return r;
  }
  bool Place(const std::byte* data, size_t len) {
    const size_t padded = (len + 63) / 64 * 64;
    while (!bufs_.empty()) {
      Buf& b = bufs_.front();
      if (b.len - b.used >= padded) {
        std::memcpy(b.base + b.used, data, len);
        fabric::Completion c{b.context, fabric::Op::kRecv, Code::kOk, static_cast<uint32_t>(padded),
                             b.base + b.used, false};
        b.used += padded;
        if (b.len - b.used < 8192) {
          c.buffer_released = true;
          bufs_.pop_front();
        }
        done_.push_back(c);
        return true;
      }
      done_.push_back({b.context, fabric::Op::kRecv, Code::kOk, 0, nullptr, true});
      bufs_.pop_front();
    }
    return false;
  }
  struct Buf {
    std::byte* base;
    size_t len, used;
    uint64_t context;
  };
  std::string address_;
  std::vector<LoopEndpoint*> peers_;
  std::deque<Buf> bufs_;
  std::deque<fabric::Completion> done_;
};

struct RpcLayerCost {
  double min_ns = 0, median_ns = 0;  // per call, over the runs
  bool ok = false;
  std::string error;  // why not ok
};

// One round trip per call through two RpcChannels on one LoopExecutor:
// client Call + encode, server decode + dedup + handler (echo) + reply
// encode, client decode + callback, two copies and the executor loop —
// the RPC layer's work on two messages at both their ends. An untimed
// warm-up run first (a tenth of `calls`): caches, the allocator.
inline RpcLayerCost MeasureRpcLayer(size_t payload, int inflight, int calls, int runs,
                                    rpc::ChannelOptions options = {}) {
  RpcLayerCost out;
  LoopExecutor ex;
  auto open = [&](const char* name) -> std::unique_ptr<rpc::RpcChannel> {
    auto c = rpc::RpcChannel::Open(&ex, std::make_unique<LoopEndpoint>(name), options);
    if (!c.ok()) {
      out.error = "open " + std::string(name) + ": " + c.status().ToString();
      return nullptr;
    }
    return std::move(*c);
  };
  auto server = open("server");
  auto client = server ? open("client") : nullptr;
  if (!server || !client) return out;
  server->SetHandler([](uint16_t, std::span<const std::byte> p, rpc::RpcChannel::Reply r) {
    r(Code::kOk, std::string(reinterpret_cast<const char*>(p.data()), p.size()));
  });
  auto peer = client->Connect("server");
  if (!peer.ok()) {
    out.error = "connect: " + peer.status().ToString();
    return out;
  }
  const std::string body(payload, 'p');
  std::vector<double> ns_per_call;
  for (int run = -1; run < runs; ++run) {
    const int n = run < 0 ? std::max(calls / 10, 1) : calls;
    int issued = 0, completed = 0;
    bool failed = false;
    std::function<void()> issue = [&] {
      if (issued >= n) return;
      ++issued;
      client->Call(*peer, 1, body, {}, [&](Result<rpc::Response> r) {
        failed |= !r.ok();
        ++completed;
        issue();
      });
    };
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < inflight; ++k) issue();
    while (completed < n && !failed) ex.Turn();
    if (failed) {
      out.error = "a call failed";
      return out;
    }
    if (run < 0) continue;  // the warm-up
    ns_per_call.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                          n);
  }
  std::sort(ns_per_call.begin(), ns_per_call.end());
  out.min_ns = ns_per_call.front();
  out.median_ns = ns_per_call[ns_per_call.size() / 2];
  out.ok = true;
  return out;
}

}  // namespace slip::bench
