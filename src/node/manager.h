// The configuration manager (`slip manager`): holds the "manager" lease (one
// at a time; a standby waits for it) and replaces nodes whose lease has
// expired (cluster::Reassign, one new term each). It computes
// configurations only; nodes adopt them and move the data themselves
// (server/node_agent.h).
//
// Liveness probe: a node is alive while it holds its lease "node-<id>". The
// manager tries to take that lease for an instant; success means it had
// expired (it releases it at once). A node is declared failed only after it
// was seen alive once, or after a boot grace of three leases.
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

// Runs until `stop` becomes true (checked every quarter lease).
Status RunManager(const ManagerOptions& options, const std::atomic<bool>* stop);

}  // namespace slip::node
