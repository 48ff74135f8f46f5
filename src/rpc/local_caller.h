// LocalCaller: a PeerCaller whose peer is a request handler in the same
// process, on another executor of the same runtime — what the RPC layer
// does between processes, for tests, benchmarks and simulations. A call is
// posted to the handler's executor; the reply is posted back to the
// caller's, so `done` never runs inside Call (the PeerCaller contract).
// Counts calls per method.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "rpc/peer_caller.h"
#include "runtime/runtime.h"

namespace slip::rpc {

class LocalCaller final : public PeerCaller {
 public:
  using Reply = std::function<void(Code, std::string)>;
  using Handler = std::function<void(uint16_t method, std::span<const std::byte> payload, Reply reply)>;

  LocalCaller(runtime::Executor* caller, runtime::Executor* handler_exec, Handler handler)
      : caller_(caller), handler_exec_(handler_exec), handler_(std::move(handler)) {}

  void Call(Target, uint16_t method, std::string payload, std::function<void(Result<PeerResponse>)> done) override {
    ++calls_[method];
    handler_exec_->Post([this, method, payload = std::move(payload), done = std::move(done)]() mutable {
      const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(payload.data()), payload.size());
      handler_(method, bytes, [this, done](Code c, std::string p) {
        caller_->Post([done, c, p = std::move(p)] { done(PeerResponse{c, p}); });
      });
    });
  }

  // Calls made so far of `method` (any enum of method ids).
  template <typename Method>
  int calls(Method method) const {
    auto it = calls_.find(static_cast<uint16_t>(method));
    return it == calls_.end() ? 0 : it->second;
  }

 private:
  runtime::Executor* caller_;
  runtime::Executor* handler_exec_;
  Handler handler_;
  std::map<uint16_t, int> calls_;
};

}  // namespace slip::rpc
