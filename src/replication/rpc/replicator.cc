#include "replication/rpc/replicator.h"

#include <memory>

namespace slip::replication {

void RpcReplicator::Replicate(std::span<const NodeId> backups, const proto::ReplicateRequest& entry,
                              std::function<void(Status)> done) {
  if (backups.empty()) return done(Status::Ok());
  struct Fanout {
    size_t left;
    bool finished = false;
    std::function<void(Status)> done;
  };
  auto f = std::make_shared<Fanout>(Fanout{backups.size(), false, std::move(done)});
  const std::string bytes = proto::Encode(entry);
  for (NodeId b : backups) {
    peers_->Call(rpc::Target{b, entry.meta.shard}, static_cast<uint16_t>(proto::Method::kReplicate), bytes,
                 [f, b](Result<rpc::PeerResponse> r) {
                   if (f->finished) return;  // an earlier backup already failed
                   Status s = !r.ok() ? r.status()
                              : r->status != Code::kOk
                                  ? Status(r->status, "backup " + std::to_string(b) + " refused")
                                  : Status::Ok();
                   if (!s.ok() || --f->left == 0) {
                     f->finished = true;
                     f->done(s);
                   }
                 });
  }
}

}  // namespace slip::replication
