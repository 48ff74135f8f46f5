// batch-kv (Rowan's Batch-KV baseline): rwrite-kv, but entries to one
// backup are gathered and written together once `batch_bytes` are pending
// or `batch_timeout` passed (256 B or 5 us in the paper).
#include "replication/batch/batch.h"

#include <map>
#include <utility>
#include <vector>

#include "replication/onesided/replicator.h"

namespace slip::replication {
namespace {

class BatchPlacement final : public onesided::Placement {
 public:
  void Submit(OneSidedReplicator& r, onesided::Link& l, const onesided::PendingPtr& w,
              const onesided::Bytes& bytes) override {
    Gathered& g = gathered_[l.node];
    const size_t size = bytes->size();
    if (l.tail + g.bytes.size() + size > l.buffer_len) {
      if (!g.bytes.empty()) Flush(r, l, false);
      if (l.tail + size > l.buffer_len) return r.Roll(l, w, bytes);
    }
    g.bytes.insert(g.bytes.end(), bytes->begin(), bytes->end());
    g.writes.push_back(w);
    if (g.bytes.size() >= r.options().batch_bytes) return Flush(r, l, false);
    if (g.timer == 0) {
      const NodeId node = l.node;
      const uint64_t epoch = l.epoch;
      g.timer = r.exec()->After(r.options().batch_timeout, [this, &r, node, epoch] {
        Gathered& gt = gathered_[node];
        gt.timer = 0;
        onesided::Link& lk = r.LinkTo(node);
        if (lk.epoch == epoch && lk.state == onesided::Link::State::kReady && !gt.bytes.empty()) Flush(r, lk, true);
      });
    }
  }

  std::vector<onesided::PendingPtr> Reset(OneSidedReplicator& r, onesided::Link& l) override {
    Gathered& g = gathered_[l.node];
    CancelTimer(r, g);
    g.bytes.clear();
    return std::exchange(g.writes, {});
  }

  void Stop(OneSidedReplicator& r) override {
    for (auto& [node, g] : gathered_) CancelTimer(r, g);
  }

 private:
  // Entries gathered for one Write to a backup, and whose they are.
  struct Gathered {
    std::vector<std::byte> bytes;
    std::vector<onesided::PendingPtr> writes;
    runtime::TimerId timer = 0;
  };

  static void CancelTimer(OneSidedReplicator& r, Gathered& g) {
    if (g.timer != 0) {
      r.exec()->Cancel(g.timer);
      g.timer = 0;
    }
  }

  void Flush(OneSidedReplicator& r, onesided::Link& l, bool by_timeout) {
    Gathered& g = gathered_[l.node];
    CancelTimer(r, g);
    ++r.mutable_stats().batches;
    if (by_timeout) ++r.mutable_stats().batch_timeouts;
    onesided::Op op;
    op.own = std::move(g.bytes);
    g.bytes.clear();
    r.WriteAndFlush(l, std::move(op), std::exchange(g.writes, {}));
  }

  std::map<NodeId, Gathered> gathered_;
};

}  // namespace

const Design& BatchDesign() {
  static const Design d{.protocol = Protocol::kBatch,
                        .name = "batch-kv",
                        .receive = BackupReceive::kPrivateBuffers,
                        .make_replicator = &OneSidedWith<BatchPlacement>};
  return d;
}

}  // namespace slip::replication
