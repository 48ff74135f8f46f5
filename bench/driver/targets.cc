#include "bench/driver/targets.h"

#include "bench/cluster/cluster_target.h"

#include "bench/driver/local_target.h"
#include "bench/peers/peers.h"
#include "replication/design.h"

namespace slip::bench {

const std::vector<std::string>& TargetNames() {
  static const std::vector<std::string> names = {"rpc-kv",   "rowan-kv", "rwrite-kv",  "batch-kv",  "tailwind",
                                                 "local",    "rocksdb",  "redis",      "redis-wait", "memcached"};
  return names;
}

Result<std::unique_ptr<KvTarget>> MakeTarget(const TargetConfig& c) {
  // The replicated designs: the cluster running in c.dir, or a private one.
  if (replication::ParseDesign(c.name).ok()) {
    return MakeClusterTarget({.design = c.name, .dir = c.dir, .slip_binary = "", .nodes = 3, .replication = 3});
  }
  if (c.name == "local") return MakeLocalTarget({c.threads, c.region_mb, c.dir});
  if (c.name == "rocksdb") return MakeRocksDbTarget({c.dir});
  if (c.name == "redis") return MakeRedisTarget({2, false});
  if (c.name == "redis-wait") return MakeRedisTarget({2, true});
  if (c.name == "memcached") return MakeMemcachedTarget({});
  std::string known;
  for (auto& n : TargetNames()) known += (known.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("unknown target '" + c.name + "' (" + known + ")");
}

}  // namespace slip::bench
