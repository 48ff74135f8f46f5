// The DINOMO pool process (`slip pool`): the disaggregated PM pool of a
// cluster whose design keeps its data in one (cluster::UsesPool) — a PM
// region in DIR/pool (or /dev/shm for the dram class) formatted as a
// dinomo::Pool, served by a dinomo::PoolServer on a fabric endpoint: KVS
// nodes call it to allocate, seal and merge log segments and read and write
// the region one-sidedly.
//
// Boot: load the configuration (it must be a pool design), take the lease
// "pool" (one pool process per region), open or format the region (a
// restarted pool keeps its index and the open segments of every node), and
// publish the endpoint's address in the configuration (the `pool` field, in
// a new term). Merges run on
// the thread that serves the calls (a seal merges inside its call).
//
// Losing the lease stops the process. Not built: a standby pool, and the
// manager doing anything about a dead one (KVS nodes answer Unavailable
// until it returns).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "runtime/runtime.h"

namespace slip::node {

struct PoolProcessOptions {
  std::string dir;        // cluster directory: the region in DIR/pool/, config in DIR (embedded)
  std::string zookeeper;  // "host:port": the configuration in ZooKeeper instead
  std::string bind_address = "127.0.0.1";
  std::string secret_file;  // the cluster secret: this file, else DIR/secret if there is one
  uint64_t pool_mb = 1024;     // region size when creating it
  uint64_t segment_mb = 8;     // log segment size when creating it (the paper's 8 MB)
  runtime::Nanos lease = 2 * runtime::kSecond;
};

class PoolProcess {
 public:
  static Result<std::unique_ptr<PoolProcess>> Start(const PoolProcessOptions& options);
  virtual ~PoolProcess() = default;
  // Blocks until Stop() or a fatal error (the lease lost).
  virtual Status Wait() = 0;
  virtual void Stop() = 0;
};

// The name of the pool's lease.
inline constexpr const char* kPoolLease = "pool";

}  // namespace slip::node
