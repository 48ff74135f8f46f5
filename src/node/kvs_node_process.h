// A DINOMO KVS node process (`slip server` in a cluster whose design keeps
// its data in the pool, cluster::UsesPool): it owns the keys of the shards
// the configuration makes it "primary" of and serves them through a
// dinomo::KvsNode over the pool (docs/papers/dinomo.md §5, "In the
// cluster"). It holds no data of its own: its writes go to its log in the
// pool, its cache is DRAM.
//
// Ownership changes (boot, a failed node's shards given to it, a pool that
// restarted) follow the paper's reconfiguration: the node stops serving,
// lets what it has on the wire finish, and asks the pool to merge — its own
// log (which also fences its previous incarnation) and every down node's,
// so nothing an earlier owner acknowledged is missing from the index when
// it serves those keys (merge before serve, D4) — then serves again with a
// new KvsNode whose epoch is the configuration term (its versions beat
// every earlier owner's; its cache starts empty). Nodes whose ownership
// does not change keep serving.
//
// Requests for shards it does not own, or of another term, get StaleTerm
// (the client refreshes its map and retries); without a valid lease it
// answers Unavailable, so a node cut off from the cluster never serves a
// stale cached value.
#pragma once

#include <memory>

#include "common/status.h"
#include "node/node_process.h"

namespace slip::node {

// REQUIRES: the cluster in options.dir (or ZooKeeper) uses a pool.
Result<std::unique_ptr<NodeProcess>> StartKvsNode(const NodeOptions& options);

}  // namespace slip::node
