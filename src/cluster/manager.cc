#include "cluster/manager.h"

#include <optional>
#include <set>

#include "common/log.h"

namespace slip::cluster {

Manager::Manager(ConfigStore* store, runtime::Executor* exec, ManagerOptions options)
    : store_(store), exec_(exec), o_(std::move(options)) {}

void Manager::Start(std::function<void(const Reassigned&)> on_reassigned, std::function<void(Status)> on_stopped) {
  on_reassigned_ = std::move(on_reassigned);
  on_stopped_ = std::move(on_stopped);
  TryAcquire();
}

void Manager::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (holding_) (void)store_->ReleaseLease(lease_);
  holding_ = false;
}

void Manager::Finish(Status s) {
  if (stopped_) return;
  Stop();
  if (on_stopped_) on_stopped_(std::move(s));
}

void Manager::TryAcquire() {
  if (stopped_) return;
  auto l = store_->AcquireLease("manager", o_.holder, o_.lease, Now());
  if (!l.ok()) {
    // Busy: another manager holds it, and we are its standby. Anything
    // else (store unreachable) may pass too: keep trying.
    if (!l.status().Is(Code::kBusy) && !l.status().Is(Code::kUnavailable) && !l.status().Is(Code::kIoError)) {
      return Finish(l.status());
    }
    exec_->After(o_.lease / 4, [this] { TryAcquire(); });
    return;
  }
  lease_ = *l;
  holding_ = true;
  started_ = Now();
  seen_alive_.clear();
  if (o_.log) logging::Info("holding the manager lease (epoch {})", lease_.epoch);
  exec_->After(o_.lease / 4, [this] { Tick(); });
}

void Manager::Tick() {
  if (stopped_) return;
  auto renewed = store_->RenewLease(lease_, o_.lease, Now());
  if (!renewed.ok()) {
    if (renewed.status().Is(Code::kAborted) || Now() >= lease_.expiry) {
      // Someone else may be managing now (or will be): act no more, and
      // stand by like any other manager. Exiting instead left a cluster
      // whose only manager missed a renewal on a loaded machine with no
      // manager at all — and no failover ever again.
      holding_ = false;
      if (o_.log) logging::Warn("lost the manager lease ({}): standing by", renewed.status().ToString());
      exec_->After(o_.lease / 4, [this] { TryAcquire(); });
      return;
    }
    // A transient store error: keep trying while the lease lasts.
  } else {
    lease_ = *renewed;
  }
  exec_->After(o_.lease / 4, [this] { Tick(); });

  auto vc = store_->Load();
  if (!vc.ok()) return;
  std::set<NodeId> live;  // up nodes seen holding their leases
  for (const auto& [id, info] : vc->config.nodes) {
    if (info.state == NodeState::kDown) continue;
    // The probe holds the node's lease (for a whole ttl, in case we stall)
    // until the verdict is written: a node that takes its lease and then
    // reads the configuration can trust what it reads about itself. With
    // the probe let go at once, a booting node took the lease between probe
    // and write, found itself up, served — and was listed down a moment later.
    auto probe = store_->AcquireLease(NodeLeaseName(id), o_.holder, o_.lease, Now());
    if (!probe.ok()) {
      if (probe.status().Is(Code::kBusy)) seen_alive_[id] = true;
      if (seen_alive_[id] && info.state == NodeState::kUp) live.insert(id);
      continue;
    }
    const bool grace_over = Now() - started_ > 3 * o_.lease;
    if (!seen_alive_[id] && !grace_over) {  // still booting
      (void)store_->ReleaseLease(*probe);
      continue;
    }
    // Its lease expired: replace it.
    auto next = UsesPool(vc->config.design) ? ReassignOwners(vc->config, id) : Reassign(vc->config, id);
    if (!next.ok()) {
      (void)store_->ReleaseLease(*probe);
      if (o_.log) logging::Warn("cannot reassign node {}: {}", id, next.status().ToString());
      continue;
    }
    auto w = store_->CompareAndSwap(vc->version, *next);
    (void)store_->ReleaseLease(*probe);
    if (w.ok()) {
      if (o_.log) logging::Info("node {} failed: term {}", id, next->term);
      seen_alive_[id] = false;
      if (on_reassigned_) on_reassigned_(Reassigned{id, *vc, VersionedConfig{*next, *w}});
    }
    return;  // the stored version moved on either way: Load again next tick
  }
  // A pool design moves ownership, never data: spread the shards evenly
  // over the live nodes (a node that joined or came back gets its share; a
  // leaving one gives its away).
  if (!UsesPool(vc->config.design)) return;
  std::optional<ClusterConfig> balanced = BalanceOwners(vc->config, live);
  if (!balanced || !balanced->Validate().ok()) return;
  auto w = store_->CompareAndSwap(vc->version, *balanced);
  if (w.ok() && o_.log) logging::Info("shards rebalanced over {} nodes: term {}", live.size(), balanced->term);
}

}  // namespace slip::cluster
