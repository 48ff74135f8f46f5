// The part of a cluster configuration a node acts on (NodeView) and the
// part a client routes with (RoutingTable), derived from the stored
// ClusterConfig, so there is one source of truth.
#pragma once

#include <memory>

#include "client/client_core.h"
#include "cluster/cluster_config.h"
#include "server/node_core.h"

namespace slip::server {

std::shared_ptr<const NodeView> ViewFromConfig(const cluster::ClusterConfig& config);
client::RoutingTable RoutingFromConfig(const cluster::ClusterConfig& config);

}  // namespace slip::server
