// rwrite-kv (Rowan's RWrite-KV baseline, FaRM-style): each sender Writes its
// entries at its own tail of a private remote log per backup. Many such
// streams per backup are what drives PM write amplification
// (docs/papers/rowan.md §6.2).
#include "replication/rwrite/rwrite.h"

#include "replication/onesided/replicator.h"

namespace slip::replication {
namespace {

class RWritePlacement final : public onesided::Placement {
 public:
  void Submit(OneSidedReplicator& r, onesided::Link& l, const onesided::PendingPtr& w,
              const onesided::Bytes& bytes) override {
    if (l.tail + bytes->size() > l.buffer_len) return r.Roll(l, w, bytes);
    onesided::Op op;
    op.keep = bytes;
    r.WriteAndFlush(l, std::move(op), {w});
  }
};

std::unique_ptr<Replicator> Make(const ReplicatorContext& c) {
  return std::make_unique<OneSidedReplicator>(c.exec, c.ep, c.peers, c.onesided, std::make_unique<RWritePlacement>());
}

}  // namespace

const Design& RWriteDesign() {
  static const Design d{.protocol = Protocol::kRWrite,
                        .name = "rwrite-kv",
                        .receive = BackupReceive::kPrivateBuffers,
                        .make_replicator = &Make};
  return d;
}

}  // namespace slip::replication
