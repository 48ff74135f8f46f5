// The part of a cluster configuration a node acts on (NodeView), derived
// from the stored ClusterConfig, so there is one source of truth (clients
// route with cluster/routing.h).
#pragma once

#include <memory>

#include "cluster/cluster_config.h"
#include "server/node_core.h"

namespace slip::server {

std::shared_ptr<const NodeView> ViewFromConfig(const cluster::ClusterConfig& config);

}  // namespace slip::server
