#include "node/membership.h"

#include <chrono>
#include <thread>

#include "common/log.h"
#include "node/node_process.h"

namespace slip::node {

Status UpdateConfig(cluster::ConfigStore* store,
                    const std::function<Result<cluster::ClusterConfig>(const cluster::ClusterConfig&)>& change) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    SLIP_ASSIGN_OR_RETURN(cluster::VersionedConfig cur, store->Load());
    SLIP_ASSIGN_OR_RETURN(cluster::ClusterConfig next, change(cur.config));
    auto w = store->CompareAndSwap(cur.version, next);
    if (w.ok()) return Status::Ok();
    if (!w.status().Is(Code::kAborted)) return w.status();
  }
  return Status::Aborted("configuration kept changing under us");
}

Status Membership::Acquire(const std::string& name, const std::string& holder) {
  for (int i = 0;; ++i) {
    auto l = store_->AcquireLease(name, holder, ttl_, MachineNow());
    if (l.ok()) {
      lease_ = *l;
      expiry_ = l->expiry;
      return Status::Ok();
    }
    if (!l.status().Is(Code::kBusy) || i > 200) return l.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status Membership::UpdateHoldingLease(
    const std::string& name, const std::string& holder, bool lease_first,
    const std::function<Result<cluster::ClusterConfig>(const cluster::ClusterConfig&)>& change) {
  if (lease_first) SLIP_RETURN_IF_ERROR(Acquire(name, holder));
  if (Status s = Update(change); !s.ok()) {
    // The process will not serve: a lease left to run out would keep a
    // restarted process (another holder) waiting, and the manager seeing a
    // live node, for a whole ttl. Best effort: a lease already lost is fine.
    if (lease_first) {
      if (Status r = store_->ReleaseLease(lease_); !r.ok()) {
        logging::Warn("{}", "could not release the lease " + name + ": " + r.ToString());
      }
      expiry_ = 0;
    }
    return s;
  }
  return Acquire(name, holder);
}

void Membership::KeepAlive(std::function<void(Status)> lost) {
  control_->After(ttl_ / 4, [this, lost = std::move(lost)]() mutable { Renew(std::move(lost)); });
}

void Membership::Renew(std::function<void(Status)> lost) {
  const runtime::Nanos t0 = MachineNow();
  auto l = store_->RenewLease(lease_, ttl_, t0);
  const runtime::Nanos took = MachineNow() - t0;
  if (took > ttl_ / 4) logging::Warn("{}", "slow lease renewal: " + std::to_string(took / 1000000) + " ms");
  if (l.ok()) {
    lease_ = *l;
    expiry_ = l->expiry;
  } else if (l.status().Is(Code::kAborted) || MachineNow() >= expiry_.load()) {
    expiry_ = 0;
    logging::Warn("{}", "lost the lease " + lease_.name + ": " + l.status().ToString());
    return lost(Status::Aborted("lost the lease " + lease_.name));
  } else {
    // A transient store error: keep trying while the lease lasts.
    logging::Warn("{}", "lease renewal failed: " + l.status().ToString());
  }
  KeepAlive(std::move(lost));
}

void Membership::Watch(uint64_t known, std::function<void(const cluster::VersionedConfig&)> changed) {
  auto again = [this, changed](uint64_t v) { control_->After(100 * runtime::kMillisecond, [this, v, changed] { Watch(v, changed); }); };
  Status s = store_->Watch(known, [this, known, changed, again] {
    control_->Post([this, known, changed, again] {
      auto c = store_->Load();
      if (!c.ok()) return again(known);
      if (c->version != known) changed(*c);
      Watch(c->version, changed);
    });
  });
  if (!s.ok()) again(known);
}

}  // namespace slip::node
