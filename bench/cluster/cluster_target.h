// The benchmark target for Slipstream's replicated designs: a local cluster
// of `slip server` processes driven through slip::Client. With a directory
// it uses the cluster already running there (`slip cluster up --dir DIR`);
// without one it starts its own (3 nodes, RF 3, over `provider`) in a temp
// directory and stops it when done.
#pragma once

#include <memory>
#include <string>

#include "bench/driver/kv_target.h"

namespace slip::bench {

struct ClusterTargetConfig {
  std::string design = "rpc-kv";
  std::string dir;          // empty: start a private cluster
  std::string slip_binary;  // to start one (default: the running executable)
  uint32_t nodes = 3;
  uint32_t replication = 3;
  uint32_t workers = 1;     // request workers per server (slip cluster up --workers)
  std::string provider = "tcp";  // of a cluster it starts; one in `dir` has its own
  uint64_t pm_mb = 256;          // PM per node of a cluster it starts
  bool auth = true;              // a cluster it starts has a secret (false: --no-auth)
};

Result<std::unique_ptr<KvTarget>> MakeClusterTarget(const ClusterTargetConfig& config);

}  // namespace slip::bench
