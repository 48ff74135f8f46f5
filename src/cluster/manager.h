// The configuration manager (CM): failure detection and reassignment,
// written once on the runtime and run by `slip manager` (a thread runtime,
// the embedded or ZooKeeper store, the machine's clock) and by the
// whole-cluster simulator (virtual time, the in-memory store). It computes
// configurations only; nodes adopt them and move the data themselves
// (server/node_agent.h). docs/papers/rowan.md §3.6, §3.8.
//
// One manager at a time: it holds the lease "manager" (a standby retries
// every tick until the holder is gone). It stops acting the moment a renewal
// fails and becomes a standby itself: when it takes the lease again (its own
// expired, or the other manager went away) it starts over with the boot grace,
// so the pause that cost it the lease never makes it declare nodes failed.
//
// Liveness: a node is alive while it holds its lease "node-<id>" in the
// store. Every tick (a quarter lease) the manager tries to take that lease
// for an instant; success means it had expired (it is released at once).
// A node is declared failed only after it was seen alive once, or after a
// boot grace of three leases (a node that never came up). A failed node is
// replaced by cluster::Reassign — one new term, one compare-and-swap; a
// conflict (someone else wrote) is retried at the next tick.
//
// In a design whose data lives in a pool (UsesPool) the manager also keeps
// ownership even: a tick with no failure to handle stores BalanceOwners over
// the up nodes it has seen alive, so a node that joins or comes back gets
// its share and a leaving node's shards move away (docs/papers/dinomo.md §5b).
//
// Store calls block (file locks, ZooKeeper round trips): give the manager
// an executor of its own.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "cluster/config_store.h"
#include "runtime/runtime.h"

namespace slip::cluster {

struct ManagerOptions {
  Nanos lease = 2 * runtime::kSecond;  // the nodes' lease length, and the manager's own
  std::string holder = "manager";      // names this manager in the "manager" lease
  // The clock every lease holder of the store reads (leases hold times from
  // it). Default: the executor's.
  std::function<Nanos()> clock;
  // Report taking and losing the lease, and each replacement, through
  // common/log (a real manager's log; the simulator keeps quiet).
  bool log = false;
};

class Manager {
 public:
  // A replacement it made: `failed` went down, `after` is the stored result.
  struct Reassigned {
    NodeId failed;
    VersionedConfig before;
    VersionedConfig after;
  };

  Manager(ConfigStore* store, runtime::Executor* exec, ManagerOptions options);
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Call on the executor. `on_reassigned` runs after each replacement;
  // `on_stopped` once, when the store failed in a way retrying cannot fix
  // (never after Stop()). Losing the lease is not that: it stands by.
  void Start(std::function<void(const Reassigned&)> on_reassigned, std::function<void(Status)> on_stopped);
  // Call on the executor: gives the lease up, no callbacks run afterwards.
  // The object must outlive timers it has already set; they do nothing.
  void Stop();

  bool holds_lease() const { return holding_; }

 private:
  Nanos Now() const { return o_.clock ? o_.clock() : exec_->Now(); }
  void TryAcquire();
  void Tick();
  void Finish(Status s);

  ConfigStore* store_;
  runtime::Executor* exec_;
  const ManagerOptions o_;
  std::function<void(const Reassigned&)> on_reassigned_;
  std::function<void(Status)> on_stopped_;
  bool stopped_ = false;
  bool holding_ = false;
  Lease lease_;
  Nanos started_ = 0;  // when it took the lease: the boot grace runs from here
  std::map<NodeId, bool> seen_alive_;
};

}  // namespace slip::cluster
