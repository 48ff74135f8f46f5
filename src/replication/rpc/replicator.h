// The `rpc` replication protocol (Rowan's RPC-KV baseline): the primary sends
// each entry to every backup as a REPLICATE request; a backup's worker
// appends it to its own log (Store::Apply) and replies. Simple and robust,
// but every replicated write costs backup worker CPU — the cost the
// one-sided protocols remove.
#pragma once

#include "rpc/peer_caller.h"
#include "replication/replicator.h"

namespace slip::replication {

class RpcReplicator final : public Replicator {
 public:
  explicit RpcReplicator(rpc::PeerCaller* peers) : peers_(peers) {}

  void Replicate(std::span<const NodeId> backups, const proto::ReplicateRequest& entry,
                 std::function<void(Status)> done) override;

 private:
  rpc::PeerCaller* peers_;
};

}  // namespace slip::replication
