// What a node process serves beside its libfabric port, for people and
// their tools: the Redis-protocol front door (resp/server.h, docs/resp.md),
// Prometheus metrics at /metrics and the web view (docs/metrics.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "auth/keyring.h"
#include "cli/cluster_command.h"
#include "common/status.h"
#include "node/node_process.h"
#include "resp/server.h"

namespace slip::cli {

class FrontDoors {
 public:
  // Starts what `o` asks for (resp_port, metrics_port, http_port: the exact
  // ports of this node; 0: not served). `node` must outlive the result.
  static Result<std::unique_ptr<FrontDoors>> Start(const ClusterCommandOptions& o, node::NodeProcess* node);
  virtual ~FrontDoors() = default;
};

// What the RESP front door's AUTH accepts, read at each use so a rotated
// secret or a changed password file takes effect without a restart: the
// password file's lines ("PASSWORD" for the default user, or "USER
// PASSWORD"; blank lines and # comments skipped), else every key of the
// cluster secret in hex for the default user, else nothing (no AUTH
// needed). An unreadable or empty file admits nobody.
std::vector<resp::ServerOptions::Credential> FrontDoorCredentials(const ClusterCommandOptions& o);
// A key as the password AUTH takes: its bytes in hex.
std::string KeyHex(const auth::Key& key);

}  // namespace slip::cli
