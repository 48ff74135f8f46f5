// rowan-kv (docs/papers/rowan.md §2.2, §3.4): every sender Sends its entries
// into the backup's one shared multi-receive log; the backup's NIC places
// each at the next 64 B stride, so all of a backup's replication writes
// form one sequential stream in PM. No buffer is opened per sender.
#include "replication/rowan/rowan.h"

#include "log/entry.h"
#include "replication/onesided/replicator.h"

namespace slip::replication {
namespace {

class RowanPlacement final : public onesided::Placement {
 public:
  proto::ReplBuffer buffer_kind() const override { return proto::ReplBuffer::kNone; }
  bool flush_holds_buffer() const override { return false; }

  void Submit(OneSidedReplicator& r, onesided::Link& l, const onesided::PendingPtr& w,
              const onesided::Bytes& bytes) override {
    // One Send per log block (each fits one multi-receive message).
    const size_t size = bytes->size();
    size_t pos = 0;
    while (pos < size) {
      const uint32_t block = log::PeekHeader(bytes->data() + pos).BlockBytes();
      if (Status s = r.PostSend(l, bytes, bytes->data() + pos, block, w); !s.ok()) {
        w->Fail(s);
        return r.Fail(l, s);
      }
      pos += block;
    }
    r.PostRead(l, {w});
  }
};

}  // namespace

const Design& RowanDesign() {
  static const Design d{.protocol = Protocol::kRowan,
                        .name = "rowan-kv",
                        .receive = BackupReceive::kSharedLog,
                        .senders_share_a_log = true,
                        .make_replicator = &OneSidedWith<RowanPlacement>};
  return d;
}

}  // namespace slip::replication
