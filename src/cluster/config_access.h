// Opening a cluster's ConfigStore from what a user types: a directory (the
// embedded store in DIR) or a ZooKeeper connect string.
#pragma once

#include <memory>
#include <string>

#include "cluster/config_store.h"
#include "runtime/runtime.h"

namespace slip::cluster {

Result<std::unique_ptr<ConfigStore>> OpenConfigStore(const std::string& dir,
                                                     const std::string& zookeeper);

// Load, retried until a configuration exists or `wait` passes.
Result<VersionedConfig> LoadWhenPresent(ConfigStore* store, runtime::Nanos wait);

}  // namespace slip::cluster
