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

}  // namespace

const Design& RWriteDesign() {
  static const Design d{.protocol = Protocol::kRWrite,
                        .name = "rwrite-kv",
                        .receive = BackupReceive::kPrivateBuffers,
                        .make_replicator = &OneSidedWith<RWritePlacement>};
  return d;
}

}  // namespace slip::replication
