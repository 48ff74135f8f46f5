// `slip manager`: runs cluster::Manager (cluster/manager.h: the lease,
// failure detection, reassignment) on a thread of its own against the
// cluster's configuration store, with the machine clock the nodes' leases
// use, until `stop` is set or the manager lease is lost.
#pragma once

#include <atomic>
#include <string>

#include "common/status.h"
#include "runtime/runtime.h"

namespace slip::node {

struct ManagerOptions {
  std::string dir;
  std::string zookeeper;
  runtime::Nanos lease = 2 * runtime::kSecond;  // the nodes' lease length
};

// Ok once stopped by `stop`; Aborted if the manager lease was lost.
Status RunManager(const ManagerOptions& options, const std::atomic<bool>* stop);

}  // namespace slip::node
