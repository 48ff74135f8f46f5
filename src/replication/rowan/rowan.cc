// rowan-kv (docs/papers/rowan.md §2.2, §3.4): every sender Sends its entries
// into the backup's one shared multi-receive log; the backup's NIC places
// each at the next 64 B stride, so all of a backup's replication writes
// form one sequential stream in PM. No buffer is opened per sender; each
// message starts with the sender's seal (replication/seal.h).
#include "replication/rowan/rowan.h"

#include <cstring>

#include "log/entry.h"
#include "replication/onesided/replicator.h"
#include "replication/seal.h"

namespace slip::replication {
namespace {

class RowanPlacement final : public onesided::Placement {
 public:
  proto::ReplBuffer buffer_kind() const override { return proto::ReplBuffer::kNone; }
  bool flush_holds_buffer() const override { return false; }

  void Submit(OneSidedReplicator& r, onesided::Link& l, const onesided::PendingPtr& w,
              const onesided::Bytes& bytes) override {
    // One Send per log block (each fits one multi-receive message), each
    // sealed with this link's send token so the backup knows it is ours.
    const size_t size = bytes->size();
    size_t blocks = 0;
    for (size_t pos = 0; pos < size; pos += log::PeekHeader(bytes->data() + pos).BlockBytes()) ++blocks;
    auto sealed = std::make_shared<std::vector<std::byte>>(size + blocks * kSealBytes);
    std::byte* out = sealed->data();
    for (size_t pos = 0; pos < size;) {
      const uint32_t block = log::PeekHeader(bytes->data() + pos).BlockBytes();
      EncodeSeal(l.send_token, block, out);
      std::memcpy(out + kSealBytes, bytes->data() + pos, block);
      if (Status s = r.PostSend(l, sealed, out, kSealBytes + block, w); !s.ok()) {
        w->Fail(s);
        return r.Fail(l, s);
      }
      out += kSealBytes + block;
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
