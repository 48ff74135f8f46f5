// Membership: what every process of a cluster (a storage node, a DINOMO
// KVS node, the DINOMO pool) does with the configuration store — change the
// configuration by compare-and-swap, hold its lease, and hear of newer
// configurations.
//
// The lease says the process is alive; losing it (not renewed in time, or
// taken by the manager) means another process may already act in its place,
// so the owner must stop acting at once. Renewals and watches run on the
// `control` executor, whose calls may block on files or ZooKeeper. The
// owner stops that executor before destroying the Membership.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "cluster/config_store.h"
#include "common/status.h"
#include "runtime/runtime.h"

namespace slip::node {

// Stores change(current) in `store`, recomputed from the newest
// configuration after every conflict. Blocking.
Status UpdateConfig(cluster::ConfigStore* store,
                    const std::function<Result<cluster::ClusterConfig>(const cluster::ClusterConfig&)>& change);

class Membership {
 public:
  Membership(cluster::ConfigStore* store, runtime::Executor* control, runtime::Nanos lease_ttl)
      : store_(store), control_(control), ttl_(lease_ttl) {}

  // UpdateConfig on this process's store.
  Status Update(const std::function<Result<cluster::ClusterConfig>(const cluster::ClusterConfig&)>& change) {
    return UpdateConfig(store_, change);
  }

  // Takes lease `name` for `holder`, waiting while an earlier holder's lease
  // runs out or the manager probes it (about 10 s at most). Blocking.
  Status Acquire(const std::string& name, const std::string& holder);

  // How a process lists itself in the configuration: Update(change) with
  // its lease taken first when `lease_first` — it lists itself up where
  // the manager probes every up node's lease (joining, or back after it
  // was declared failed), and a free lease in between would get it
  // declared failed before it served anything — and taken or renewed
  // after, so that it lasts until KeepAlive's first renewal. If the update
  // fails, a lease taken first is released. Blocking.
  Status UpdateHoldingLease(const std::string& name, const std::string& holder, bool lease_first,
                            const std::function<Result<cluster::ClusterConfig>(const cluster::ClusterConfig&)>& change);

  // Renews the lease every ttl/4 on `control`; `lost` runs there, once, when
  // it could not be renewed in time.
  void KeepAlive(std::function<void(Status)> lost);

  // `changed` runs on `control` with each configuration stored after
  // version `known` (perhaps skipping some in between).
  void Watch(uint64_t known, std::function<void(const cluster::VersionedConfig&)> changed);

  // The end of the lease on the machine clock (0: not held).
  runtime::Nanos lease_expiry() const { return expiry_.load(); }

 private:
  void Renew(std::function<void(Status)> lost);

  cluster::ConfigStore* const store_;
  runtime::Executor* const control_;
  const runtime::Nanos ttl_;
  cluster::Lease lease_;
  std::atomic<runtime::Nanos> expiry_{0};
};

}  // namespace slip::node
