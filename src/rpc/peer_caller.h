// PeerCaller: one request/response exchange with another node — what the
// rpc replication protocol and promotion need from the RPC layer, and all
// they need, so they run unchanged over rpc/ sessions and in-process tests.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace slip::rpc {

using NodeId = uint32_t;

struct PeerResponse {
  Code status = Code::kOk;  // the handler's outcome
  std::string payload;
};

class PeerCaller {
 public:
  virtual ~PeerCaller() = default;
  // Sends `payload` to `node`'s handler for `method`. `done` runs exactly
  // once on the calling executor, never inside Call itself: with the
  // response, or with a transport error (Unavailable for a dead or unknown
  // peer, Timeout).
  virtual void Call(NodeId node, uint16_t method, std::string payload,
                    std::function<void(Result<PeerResponse>)> done) = 0;
};

}  // namespace slip::rpc
