// rpc-kv (Rowan's RPC-KV baseline): a backup worker appends each entry
// (REPLICATE, applied by server/NodeCore) — the two-sided design the
// one-sided ones are measured against.
#include "replication/rpc/rpc.h"

#include "replication/rpc/replicator.h"

namespace slip::replication {
namespace {

std::unique_ptr<Replicator> Make(const ReplicatorContext& c) { return std::make_unique<RpcReplicator>(c.peers); }

}  // namespace

const Design& RpcDesign() {
  static const Design d{.protocol = Protocol::kRpc,
                        .name = "rpc-kv",
                        .receive = BackupReceive::kWorker,
                        .make_replicator = &Make};
  return d;
}

}  // namespace slip::replication
