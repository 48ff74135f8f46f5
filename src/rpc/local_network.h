// LocalNetwork: request/response between in-process handlers by node id, on
// their executors — what simulated clusters use where processes would use
// rpc::RpcPeers. A handler detached (a node that died) never answers, so its
// callers see the Timeout a real peer's silence gives them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "rpc/peer_caller.h"
#include "runtime/runtime.h"

namespace slip::rpc {

class LocalNetwork {
 public:
  using Reply = std::function<void(Code, std::string)>;
  using Handler = std::function<void(uint16_t method, std::span<const std::byte> payload, Reply reply)>;

  // `id`'s calls run `handler` on `exec` (replacing an earlier one).
  void Attach(NodeId id, runtime::Executor* exec, Handler handler) {
    if (auto old = targets_.find(id); old != targets_.end()) old->second->alive = false;
    targets_[id] = std::make_shared<Target>(Target{exec, std::move(handler), true});
  }
  // Calls to `id`, also those already sent, are never answered.
  void Detach(NodeId id) {
    if (auto t = targets_.find(id); t != targets_.end()) {
      t->second->alive = false;
      targets_.erase(t);
    }
  }

  // Calls from `exec`; each one unanswered after `timeout` fails with Timeout.
  std::unique_ptr<PeerCaller> CallerFor(runtime::Executor* exec, runtime::Nanos timeout) {
    return std::make_unique<Caller>(this, exec, timeout);
  }

 private:
  struct Target {
    runtime::Executor* exec;
    Handler handler;
    bool alive;
  };

  class Caller final : public PeerCaller {
   public:
    Caller(LocalNetwork* net, runtime::Executor* exec, runtime::Nanos timeout)
        : net_(net), exec_(exec), timeout_(timeout) {}
    void Call(rpc::Target to, uint16_t method, std::string payload,
              std::function<void(Result<PeerResponse>)> done) override {
      const NodeId node = to.node;
      auto answered = std::make_shared<bool>(false);
      auto finish = [answered, done = std::move(done)](Result<PeerResponse> r) {
        if (*answered) return;
        *answered = true;
        done(std::move(r));
      };
      exec_->After(timeout_, [finish] { finish(Status::Timeout("no answer")); });
      auto t = net_->targets_.find(node);
      if (t == net_->targets_.end()) return;  // nobody there: the timeout answers
      std::shared_ptr<Target> target = t->second;
      target->exec->Post([target, method, payload = std::move(payload), exec = exec_, finish]() mutable {
        if (!target->alive) return;
        const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(payload.data()), payload.size());
        target->handler(method, bytes, [target, exec, finish](Code c, std::string p) {
          if (!target->alive) return;
          exec->Post([finish, c, p = std::move(p)] { finish(PeerResponse{c, p}); });
        });
      });
    }

   private:
    LocalNetwork* net_;
    runtime::Executor* exec_;
    runtime::Nanos timeout_;
  };

  std::map<NodeId, std::shared_ptr<Target>> targets_;
};

}  // namespace slip::rpc
