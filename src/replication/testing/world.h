// ReplicationWorld: nodes with real stores, BackupLogs and
// OneSidedReplicators on the simulated fabric and virtual time — what the
// replication tests and the DLWA benchmark run the protocols in, without the
// rest of a server (no clients, no configuration manager).
//
// A node has one NIC executor (its replication endpoint, polled through
// BackupLog::Poll), one digest executor (DigestStep every 100 us of virtual
// time) and `senders` sender executors, each with its own endpoint and
// replicator (a worker thread, in a real node). The control path (REPL_OPEN,
// REPL_CLOSE) goes through an in-process PeerCaller that delivers after
// `control_latency` on the caller's executor. With Protocol::kRpc there is
// no BackupLog: REPLICATE travels the same PeerCaller and the backup applies
// it at once (a backup worker's Store::Apply), so rpc-kv runs the same tests.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "fabric/sim/sim_fabric.h"
#include "pm/media_model.h"
#include "pm/region.h"
#include "replication/backup_log.h"
#include "replication/registry.h"
#include "runtime/sim_runtime.h"
#include "store/store.h"

namespace slip::replication::testing {

struct WorldOptions {
  Protocol protocol = Protocol::kRowan;
  int nodes = 3;
  int senders = 1;                      // per node
  uint64_t pm_bytes = 16 << 20;
  uint64_t segment_size = 256 << 10;
  uint32_t num_shards = 8;
  bool crash_model = true;              // PM regions keep a durable image
  size_t max_message = 4096;
  uint32_t posted_segments = 4;
  uint32_t max_open_buffers = 64;       // per sender at a backup (rwrite/batch/tailwind)
  runtime::Nanos control_latency = 5 * runtime::kMicrosecond;
  fabric::SimFabricOptions fabric;
  uint64_t seed = 1;
  bool bug_ack_early = false;           // OneSidedOptions::test_bug_ack_early
  // The file durability class: placed bytes are not persistent until the
  // backup persists them on request (BackupLogOptions::persist_by_request).
  bool file_class = false;
  // TEST ONLY, with file_class: backups answer REPL_PERSIST without persisting.
  bool bug_skip_persist = false;
  // False: no digest executor runs; the test digests (DigestStep) itself.
  bool digest = true;
};

class ReplicationWorld {
 public:
  explicit ReplicationWorld(WorldOptions options);
  ~ReplicationWorld();

  struct Sender {
    runtime::Executor* exec = nullptr;
    std::unique_ptr<fabric::Endpoint> ep;
    std::unique_ptr<Replicator> replicator;
    OneSidedReplicator* onesided = nullptr;  // the replicator, unless rpc
  };
  struct Node {
    std::unique_ptr<pm::PmRegion> region;
    std::unique_ptr<store::Store> store;
    runtime::Executor* nic = nullptr;
    runtime::Executor* digest = nullptr;
    std::unique_ptr<fabric::Endpoint> in;
    std::unique_ptr<BackupLog> backup;  // null with rpc
    std::vector<Sender> senders;
    bool up = true;
    // Bumped when the node's process stops: completions of its writes that
    // arrive later belong to a dead process and never run.
    uint64_t generation = 0;
    uint64_t control_calls = 0;  // REPL_OPEN/CLOSE this node served
    pm::MediaModel* media = nullptr;
  };

  // Writes like a primary's request path: Store::Prepare on `node`,
  // replicate to `backups`, Commit on success (Abandon otherwise); `done`
  // gets the outcome and the entry's version.
  //
  // `write_hook`, when set, sees every write pass each WritePoint; returning
  // false stops that write there, as if the node's process died at that
  // instant: nothing after the point happens (no replication, index update
  // or reply). The test then crashes the node.
  void Write(int node, int sender, log::EntryType type, const std::string& key, const std::string& value,
             std::vector<NodeId> backups, std::function<void(Status, uint64_t version)> done);

  // Power loss at `node` (PM crash model, seeded), then the node restarts:
  // store recovered from its region, fresh endpoints, backup log, senders.
  void CrashAndRestart(int node, uint64_t seed);
  // Runs until `pred` holds or `limit` of virtual time passes.
  bool RunUntil(const std::function<bool()>& pred, runtime::Nanos limit);
  // Feeds every range placed (persisted) at `node` by peers to `model`.
  void SetMediaModel(int node, pm::MediaModel* model) { nodes_[node]->media = model; }

  enum class WritePoint {
    kBeforePersist,  // nothing done yet
    kPersisted,      // in the local log, not yet sent to any backup
    kReplicated,     // every backup acknowledged; index not yet updated
    kCommitted,      // index updated; the reply not yet sent
  };
  std::function<bool(int node, const std::string& key, WritePoint point)> write_hook;

  // Every request or message to `node` takes `extra` longer (fabric and
  // control path): a slow replica, so a write can be caught between acks.
  void SlowNode(int node, runtime::Nanos extra);
  // Applies what has reached the backup role of `node`, so its store
  // shows it (BackupLog::CatchUp; rpc applies on arrival).
  Status Settle(int node);

  Node& node(int i) { return *nodes_[i]; }
  runtime::SimRuntime& rt() { return rt_; }
  fabric::SimFabric& fabric() { return fabric_; }
  const WorldOptions& options() const { return o_; }

 private:
  class Caller;
  Status StartNode(int i);
  void StopNode(int i);

  WorldOptions o_;
  // Self-rescheduling tasks (ticks, digest loops); destroyed after the
  // runtime whose queued events point at them.
  std::vector<std::unique_ptr<std::function<void()>>> periodic_;
  runtime::SimRuntime rt_;
  fabric::SimFabric fabric_;
  std::vector<std::unique_ptr<Node>> nodes_;
  // Live as long as the world: a call may be due after its replicator died.
  std::vector<std::unique_ptr<rpc::PeerCaller>> callers_;
  std::vector<runtime::Executor*> sender_execs_;  // per node * senders, reused across restarts
  std::vector<runtime::Executor*> nic_execs_, digest_execs_;
  std::vector<runtime::Nanos> slow_;  // per node, SlowNode
};

}  // namespace slip::replication::testing
