// tailwind (docs/papers/tailwind.md §2): rwrite-kv's private buffer per
// primary, each transfer being entry + running-checksum block (format.h),
// so the backup finds the whole valid prefix after a crash without ever
// having looked at the buffer; its digest trusts only that prefix.
#include "replication/tailwind/tailwind.h"

#include <cstring>
#include <map>

#include "replication/onesided/replicator.h"
#include "replication/tailwind/format.h"

namespace slip::replication {
namespace {

class TailwindPlacement final : public onesided::Placement {
 public:
  size_t framing_bytes() const override { return kChecksumBlockBytes; }

  void Submit(OneSidedReplicator& r, onesided::Link& l, const onesided::PendingPtr& w,
              const onesided::Bytes& bytes) override {
    const size_t size = bytes->size();
    if (l.tail + size + kChecksumBlockBytes > l.buffer_len) return r.Roll(l, w, bytes);
    // One Write carries the entry and the checksum that vouches for it.
    TailwindChain& chain = chains_[l.node];
    onesided::Op op;
    op.own.resize(size + kChecksumBlockBytes);
    std::memcpy(op.own.data(), bytes->data(), size);
    chain.Absorb(*bytes);
    chain.EncodeChecksum(op.own.data() + size);
    r.WriteAndFlush(l, std::move(op), {w});
  }

  // A fresh buffer starts a fresh running checksum.
  void Ready(onesided::Link& l) override { chains_[l.node].Reset(); }

 private:
  std::map<NodeId, TailwindChain> chains_;
};

uint64_t ValidPrefix(std::span<const std::byte> buffer, const log::Limits& limits) {
  return ScanTailwindBuffer(buffer, limits);
}

}  // namespace

const Design& TailwindDesign() {
  static const Design d{.protocol = Protocol::kTailwind,
                        .name = "tailwind",
                        .receive = BackupReceive::kPrivateBuffers,
                        .valid_prefix = &ValidPrefix,
                        .make_replicator = &OneSidedWith<TailwindPlacement>};
  return d;
}

}  // namespace slip::replication
