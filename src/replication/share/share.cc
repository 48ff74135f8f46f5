// share-kv (Rowan's Share-KV baseline): rwrite-kv, but all workers of a node
// share one remote log per backup, reserving addresses with a local atomic
// (shared_logs.h); reservations arrive out of order, and the backup's digest
// walks the buffer past holes.
#include "replication/share/share.h"

#include <map>
#include <memory>

#include "replication/onesided/replicator.h"
#include "replication/share/shared_logs.h"

namespace slip::replication {
namespace {

using Buffer = SharedRemoteLogs::Buffer;

class SharePlacement final : public onesided::Placement {
 public:
  explicit SharePlacement(std::shared_ptr<SharedRemoteLogs> logs)
      : logs_(logs ? std::move(logs) : std::make_shared<SharedRemoteLogs>()) {}

  bool flush_holds_buffer() const override { return false; }

  // Reserve and write into the node's shared buffer for `l`, or open the
  // next one when it is full.
  void Submit(OneSidedReplicator& r, onesided::Link& l, const onesided::PendingPtr& w,
              const onesided::Bytes& bytes) override {
    const size_t size = bytes->size();
    std::shared_ptr<Buffer>& mine = using_[l.node];
    for (;;) {
      if (mine) {
        if (auto at = mine->Reserve(size)) {
          onesided::Op op;
          op.keep = bytes;
          // The last write into a full buffer closes it, whichever worker's it was.
          op.release = [&r, node = l.node, b = mine] {
            if (b->Release()) r.SendClose(node, b->id, b->used());
          };
          return r.WriteAndFlush(l, std::move(op), {w}, *at);
        }
        if (size > mine->len) {
          return w->Fail(Status::TooLarge("entry of " + std::to_string(size) + " bytes exceeds a " +
                                          std::to_string(mine->len) + "-byte replication buffer"));
        }
      }
      // Full, or this worker has none: another worker may have opened the next.
      auto cur = logs_->Current(l.node);
      if (!cur || cur == mine || cur->full()) break;
      if (Status s = Use(r, l, std::move(cur)); !s.ok()) {
        w->Fail(s);
        return r.Fail(l, s);
      }
    }
    r.Reopen(l, w, bytes);
  }

  Status Adopt(OneSidedReplicator& r, onesided::Link& l, const proto::ReplOpenResponse& resp) override {
    auto fresh = std::make_shared<Buffer>();
    fresh->id = resp.buffer_id;
    fresh->address = std::string(resp.address);
    fresh->mem = fabric::RemoteMemory{resp.mem_addr, resp.mem_key, resp.mem_len};
    fresh->flush_offset = resp.flush_offset;
    fresh->persist_by_request = resp.persist_by_request;
    fresh->incarnation = resp.incarnation;
    fresh->offset = resp.buffer_offset;
    fresh->len = resp.buffer_len;
    auto use = logs_->Install(l.node, fresh, using_[l.node].get());
    if (use != fresh) r.SendClose(l.node, fresh->id, 0);  // another worker's came first
    return Use(r, l, std::move(use));
  }

  // A failed write retires the buffer for every worker: the backup may have
  // restarted without it; the next open starts a fresh one.
  std::vector<onesided::PendingPtr> Reset(OneSidedReplicator& /*r*/, onesided::Link& l) override {
    auto it = using_.find(l.node);
    if (it != using_.end() && it->second) {
      logs_->Retire(l.node, it->second);
      it->second.reset();
    }
    return {};
  }

 private:
  Status Use(OneSidedReplicator& r, onesided::Link& l, std::shared_ptr<Buffer> b) {
    SLIP_ASSIGN_OR_RETURN(l.peer, r.PeerAt(b->address));
    l.mem = b->mem;
    l.flush_offset = b->flush_offset;
    l.persist_by_request = b->persist_by_request;
    l.incarnation = b->incarnation;
    l.buffer = b->id;
    l.buffer_offset = b->offset;
    l.buffer_len = b->len;
    using_[l.node] = std::move(b);
    return Status::Ok();
  }

  const std::shared_ptr<SharedRemoteLogs> logs_;
  std::map<NodeId, std::shared_ptr<Buffer>> using_;  // this sender's current buffer per backup
};

std::unique_ptr<Replicator> Make(const ReplicatorContext& c) {
  return std::make_unique<OneSidedReplicator>(c.exec, c.ep, c.peers, c.onesided,
                                              std::make_unique<SharePlacement>(c.onesided.shared_logs));
}

}  // namespace

const Design& ShareDesign() {
  static const Design d{.protocol = Protocol::kShare,
                        .name = "share-kv",
                        .receive = BackupReceive::kPrivateBuffers,
                        .senders_share_a_log = true,
                        .make_replicator = &Make};
  return d;
}

}  // namespace slip::replication
