// LocalPoolCaller: POOL_* calls from a KVS node's executor to a PoolServer
// on the pool's executor in the same process, and the answers back — what
// the RPC layer does between processes, for tests, benchmarks and the
// simulator (one runtime, many executors). Counts calls per method.
#pragma once

#include <map>
#include <string>

#include "dinomo/pool_server.h"
#include "proto/kv.h"
#include "rpc/peer_caller.h"
#include "runtime/runtime.h"

namespace slip::dinomo {

class LocalPoolCaller final : public rpc::PeerCaller {
 public:
  LocalPoolCaller(runtime::Executor* node, runtime::Executor* pool, PoolServer* server)
      : node_(node), pool_(pool), server_(server) {}
  void Call(rpc::NodeId, uint16_t method, std::string payload,
            std::function<void(Result<rpc::PeerResponse>)> done) override {
    ++calls_[static_cast<proto::Method>(method)];
    pool_->Post([this, method, payload = std::move(payload), done = std::move(done)]() mutable {
      server_->Handle(method, proto::AsBytes(payload), [this, done](Code c, std::string p) {
        node_->Post([done, c, p = std::move(p)] { done(rpc::PeerResponse{c, p}); });
      });
    });
  }
  int calls(proto::Method m) const {
    auto it = calls_.find(m);
    return it == calls_.end() ? 0 : it->second;
  }

 private:
  runtime::Executor* node_;
  runtime::Executor* pool_;
  PoolServer* server_;
  std::map<proto::Method, int> calls_;
};

}  // namespace slip::dinomo
