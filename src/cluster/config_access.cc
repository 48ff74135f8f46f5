#include "cluster/config_access.h"

#include <chrono>
#include <thread>

#ifdef SLIP_HAVE_ZOOKEEPER
#include "cluster/zookeeper_store.h"
#endif

namespace slip::cluster {

Result<std::unique_ptr<ConfigStore>> OpenConfigStore(const std::string& dir,
                                                     const std::string& zookeeper) {
  if (!zookeeper.empty()) {
#ifdef SLIP_HAVE_ZOOKEEPER
    ZooKeeperStoreOptions o;
    o.connect = zookeeper;
    return OpenZooKeeperStore(o);
#else
    return Status::NotSupported("built without libzookeeper-mt");
#endif
  }
  if (dir.empty()) return Status::InvalidArgument("a cluster directory (--dir) or --zookeeper is required");
  EmbeddedStoreOptions o;
  o.dir = dir;
  return OpenEmbeddedStore(o);
}

Result<VersionedConfig> LoadWhenPresent(ConfigStore* store, runtime::Nanos wait) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(wait);
  for (;;) {
    auto c = store->Load();
    if (c.ok() || !c.status().Is(Code::kNotFound)) return c;
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::NotFound("no cluster configuration yet (run `slip cluster up`)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace slip::cluster
