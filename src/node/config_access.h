// Opening a cluster's ConfigStore from what a user types: a directory (the
// embedded store in DIR) or a ZooKeeper connect string.
#pragma once

#include <memory>
#include <string>

#include "cluster/config_store.h"

namespace slip::node {

// Every process of a cluster (nodes and clients) agrees on the largest
// message: libfabric multi-receive buffers retire by it (OfiOptions), so it
// is a deployment-wide constant. 64 KiB frames carry values up to ~63 KiB
// and 48 KiB promotion pages; larger values are refused with TooLarge.
inline constexpr size_t kMaxMessage = 64 << 10;

Result<std::unique_ptr<cluster::ConfigStore>> OpenConfigStore(const std::string& dir,
                                                              const std::string& zookeeper);

// Load, retried until a configuration exists or `wait` passes.
Result<cluster::VersionedConfig> LoadWhenPresent(cluster::ConfigStore* store, runtime::Nanos wait);

}  // namespace slip::node
