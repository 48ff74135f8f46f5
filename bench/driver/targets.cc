#include "bench/driver/targets.h"

#include "bench/cluster/cluster_target.h"

#include "bench/driver/local_target.h"
#include "bench/peers/peers.h"
#include "cluster/cluster_config.h"
#include "replication/design.h"

#include <algorithm>

namespace slip::bench {

const std::vector<std::string>& TargetNames() {
  static const std::vector<std::string> names = {"rpc-kv", "rowan-kv",   "rwrite-kv", "batch-kv",
                                                 "share-kv", "tailwind", "erda",      "erda-raw",  "erda-redo", "rubble", "rubble-all-compact", "local", "rocksdb", "lsm",
                                                 "redis",  "redis-wait", "redis-wait-aof", "memcached"};
  return names;
}

namespace {

// "<design>[/<workers>][+noauth]": the cluster without a secret (to measure
// authentication's cost, docs/security.md).
constexpr std::string_view kNoAuth = "+noauth";
bool StripNoAuth(std::string* name) {
  if (name->size() <= kNoAuth.size() || !name->ends_with(kNoAuth)) return false;
  name->resize(name->size() - kNoAuth.size());
  return true;
}

// "<design>/<workers>" -> (design, workers); workers 1 without a slash.
std::pair<std::string, uint32_t> SplitWorkers(const std::string& name) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return {name, 1};
  const std::string n = name.substr(slash + 1);
  if (n.empty() || n.size() > 2 || n.find_first_not_of("0123456789") != std::string::npos) return {name, 0};
  return {name.substr(0, slash), static_cast<uint32_t>(std::stoul(n))};
}

// A replication design, one that keeps its data in a pool (dinomo), or one
// of chains of LSM engines (rubble).
bool IsDesign(const std::string& design) {
  return replication::ParseDesign(design).ok() || cluster::UsesPool(design) || cluster::UsesChain(design);
}

}  // namespace

bool IsTargetName(const std::string& name) {
  if (std::find(TargetNames().begin(), TargetNames().end(), name) != TargetNames().end()) return true;
  std::string base = name;
  StripNoAuth(&base);
  auto [design, workers] = SplitWorkers(base);
  return workers >= 1 && workers <= 32 && IsDesign(design);
}

Result<std::unique_ptr<KvTarget>> MakeTarget(const TargetConfig& c) {
  // The replicated designs: the cluster running in c.dir, or a private one.
  std::string base = c.name;
  const bool no_auth = StripNoAuth(&base);
  if (auto [design, workers] = SplitWorkers(base); workers >= 1 && workers <= 32 && IsDesign(design)) {
    return MakeClusterTarget({.design = design, .dir = c.dir, .slip_binary = "", .nodes = 3, .replication = 3,
                              .workers = workers, .provider = c.provider, .pm_mb = c.pm_mb, .auth = !no_auth});
  }
  if (c.name == "local") return MakeLocalTarget({c.threads, c.region_mb, c.dir});
  if (c.name == "rocksdb") return MakeRocksDbTarget({c.dir});
  if (c.name == "lsm") return MakeLsmTarget({c.dir});
  if (c.name == "redis") return MakeRedisTarget({2, false, false});
  if (c.name == "redis-wait") return MakeRedisTarget({2, true, false});
  if (c.name == "redis-wait-aof") return MakeRedisTarget({2, true, true});
  if (c.name == "memcached") return MakeMemcachedTarget({});
  std::string known;
  for (auto& n : TargetNames()) known += (known.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("unknown target '" + c.name + "' (" + known +
                                 ", or <design>[/<workers>][+noauth])");
}

}  // namespace slip::bench
