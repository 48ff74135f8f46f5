// DirectPath: another way than a two-sided call to serve a GET or a PUT at a
// shard's primary — the erda design's one-sided access (erda_path.h).
// ClientCore takes it when the routing table says the cluster's clients
// access primaries directly and Takes() accepts the operation; everything
// else (DEL, oversized entries, other designs) stays a two-sided call.
//
// Answers come as a PeerCaller's do — a transport error, or a frame status
// with a KvResponse payload — so ClientCore's retry rules (StaleTerm, Busy,
// Unavailable, unknown outcomes) apply unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "rpc/peer_caller.h"

namespace slip::client {

class DirectPath {
 public:
  using Done = std::function<void(Result<rpc::PeerResponse>)>;
  virtual ~DirectPath() = default;

  // Whether a PUT of this size goes this way.
  virtual bool TakesPut(size_t key_len, size_t value_len) const = 0;
  // `done` runs on the caller's executor, never inside the call.
  virtual void Get(rpc::NodeId node, uint64_t term, uint32_t shard, const std::string& key, Done done) = 0;
  virtual void Put(rpc::NodeId node, uint64_t term, uint32_t shard, const std::string& key,
                   const std::string& value, Done done) = 0;
};

}  // namespace slip::client
