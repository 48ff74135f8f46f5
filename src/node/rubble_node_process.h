// A RubbleDB node process (`slip server` in a cluster of design `rubble`,
// cluster::UsesChain): a server::RubbleServer — one LSM engine per shard it
// replicates, head or follower in the shard's chain — with its transport,
// lease and configuration watch.
//
// Its data: DIR/node-<id>/rubble/shard-<s>/ (the engine's files) and
// shard-<s>.slots (a follower's slot image, which its head writes into).
// Starting again with its data (not declared failed meanwhile), the node
// keeps what it heads — a head recovers every write it acknowledged from
// its WAL and tables — and has everything it follows seeded again, as are
// the followers of what it heads (cluster::Resync): a follower's MemTables
// were in memory only. A node the manager replaced while it was away
// starts empty, as a new replica.
#pragma once

#include <memory>

#include "common/status.h"
#include "node/node_process.h"

namespace slip::node {

// REQUIRES: the cluster in options.dir (or ZooKeeper) uses chains.
Result<std::unique_ptr<NodeProcess>> StartRubbleNode(const NodeOptions& options);

}  // namespace slip::node
