// Replication: how a primary gets an entry persistent on its shard's
// backups before it acknowledges (DESIGN.md "replication/").
//
// One interface, one implementation per protocol (rpc today; rwrite, batch,
// share, rowan and tailwind build on the fabric's one-sided writes). The
// node's request path does not know which protocol runs:
//
//   primary:  Store::Prepare -> Replicator::Replicate -> Store::Commit -> reply
//
// A PUT/DEL is acknowledged only after `done(OK)`, i.e. after the entry is
// persistent on every backup; the primary's index changes only then.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "common/status.h"
#include "proto/kv.h"

namespace slip::replication {

using NodeId = uint32_t;

class Replicator {
 public:
  virtual ~Replicator() = default;

  // Makes `entry` persistent on every node in `backups`, then calls
  // done(OK); calls done(error) once any backup failed or timed out
  // (Unavailable / Timeout / StaleTerm: the entry's outcome is then unknown
  // to the caller). `entry`'s views need only live during this call. `done`
  // runs exactly once, on the executor that called Replicate. Concurrent
  // calls may complete in any order.
  virtual void Replicate(std::span<const NodeId> backups, const proto::ReplicateRequest& entry,
                         std::function<void(Status)> done) = 0;
};

}  // namespace slip::replication
