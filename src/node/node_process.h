// The node process (`slip server`): one storage node of a cluster, put
// together from the layers below — a PM store recovered from its file, an
// RPC channel on a fabric endpoint, the request path (NodeCore), the
// configuration adopter (NodeAgent) and a lease from the ConfigStore.
//
// Threads: "node" (the RPC channel's poller, worker 0's requests and
// replication, promotion), "node/workerN" (the other workers: the requests
// of their shards), "control" (ConfigStore calls, which block on files or
// ZooKeeper: lease renewal, configuration watch, reports), and for the
// one-sided designs "nic" and "digest" (the backup log). They talk by
// posting tasks to each other.
//
// Boot: Load the configuration (waiting for `slip cluster up` to write it),
// open the store with the cluster's shard count, publish this process's
// fabric address in a new term, take the node lease, then reconcile every
// shard it serves before serving it (NodeAgent::ColdStart) — the same path
// after a crash, a restart or a whole-cluster power loss. A node the
// configuration lists as down was replaced while it was away: it wipes its
// store and rejoins empty (cluster::Rejoin).
//
// Losing the lease (it could not be renewed in time), or finding itself
// listed down, stops the node (Fenced below): the manager may already have
// promoted a replacement. `slip server` then boots a fresh one to rejoin.
// The manager declares a node failed only while holding its lease, so a
// node that reads the configuration after taking its lease
// knows whether it was declared failed while it booted (then it boots again,
// as a replaced node).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/log.h"
#include "common/status.h"
#include <nlohmann/json.hpp>

#include "auth/key_source.h"
#include "cluster/cluster_config.h"
#include "fabric/fabric.h"
#include "pm/region.h"
#include "rpc/channel.h"
#include "runtime/runtime.h"

namespace slip::node {

struct NodeOptions {
  uint32_t id = 0;
  std::string dir;        // cluster directory: data in DIR/node-<id>/, config in DIR (embedded)
  std::string zookeeper;  // "host:port": keep the configuration in ZooKeeper instead
  std::string provider;  // empty: the cluster configuration's (else it must match)
  std::string bind_address = "127.0.0.1";
  // The cluster secret (auth/keyring.h): this file, else DIR/secret if
  // there is one; without either the node authenticates no one.
  std::string secret_file;
  uint64_t pm_mb = 256;
  runtime::Nanos lease = 2 * runtime::kSecond;
  // How often a primary writes its CommitVer records (Rowan: 15 ms); 0 turns
  // them off, and promotions then exchange whole shards.
  runtime::Nanos commit_interval = 15 * runtime::kMillisecond;
  // Request workers (server/worker_pool.h): each owns a range of shards
  // (WorkerOfShard), with its own executor (thread), RPC entry and, for
  // the one-sided designs, its own sending endpoint.
  uint32_t workers = 1;
  // Digest executors of a one-sided design's backup log (Rowan-KV: five
  // digest threads): each step digests a used segment no other is on. The
  // first also runs the store's cleaner.
  uint32_t digest_threads = 1;
};

class NodeProcess {
 public:
  static Result<std::unique_ptr<NodeProcess>> Start(const NodeOptions& options);
  virtual ~NodeProcess() = default;
  // Blocks until Stop() or a fatal error (lost lease, store failure).
  virtual Status Wait() = 0;
  virtual void Stop() = 0;
  // The node's counters as its STATS call answers them (JSON; docs/metrics.md),
  // from any thread; `done` runs on one of the node's threads — or never, if
  // the node stops first.
  virtual void StatsAsync(std::function<void(std::string)> done) = 0;
};

// Why Boot gave up when the manager declared the node failed while it was
// starting (nothing served yet): Start boots it again, as a replaced node.
inline constexpr const char* kReplacedWhileStarting =
    "declared failed while starting, with data that may be stale by now";

// Why a node stopped serving when the cluster fenced it: its lease ran out
// (the process stalled for longer than a lease, or could not reach the
// configuration store), or the manager declared it failed. Nothing is wrong
// with its store: `slip server` boots it again to rejoin (Fenced).
inline constexpr const char* kLostLease = "lost the node lease";
inline constexpr const char* kDeclaredFailed = "declared failed by the manager";
inline bool Fenced(const Status& s) {
  return s.Is(Code::kAborted) && (s.message() == kLostLease || s.message() == kDeclaredFailed);
}

// How a newer configuration `c` ends node `id`, logged: dropped from it
// (`slip cluster remove-node` finished: OK) or listed down (the manager
// replaced it: kDeclaredFailed). Nothing while it is listed up.
std::optional<Status> EndedBy(const cluster::ClusterConfig& c, uint32_t id);

// Boots a `P` (a NodeProcess with Boot()), and boots a fresh one again —
// up to 5 times — while Boot gives up because the manager declared the
// node failed while it was starting: nothing was served yet, and a fresh
// boot takes the path of a replaced node. A slow machine can lose that
// race with the manager more than once.
template <typename P>
Result<std::unique_ptr<NodeProcess>> BootUntilNotReplaced(const NodeOptions& options) {
  auto n = std::make_unique<P>(options);
  Status s = n->Boot();
  for (int again = 0; again < 5 && s.Is(Code::kAborted) && s.message() == kReplacedWhileStarting; ++again) {
    logging::Warn("{}", std::string(kReplacedWhileStarting) + "; booting again to rejoin");
    n.reset();
    n = std::make_unique<P>(options);
    s = n->Boot();
  }
  SLIP_RETURN_IF_ERROR(s);
  return std::unique_ptr<NodeProcess>(std::move(n));
}

// The libfabric provider a process of the cluster runs over: the
// cluster's, when `*provider` (its option) is empty; InvalidArgument when
// the option names another.
Status TakeProvider(const std::string& cluster_provider, std::string* provider);

// Node `id`'s data directory in the cluster directory.
std::string DataDir(const std::string& cluster_dir, uint32_t id);

// Where node `id` keeps its PM file, and the durability class it runs
// (`configured`: the configuration's pm field, maybe empty). Refuses the
// file class in a directory on tmpfs.
struct PmPlace {
  std::string path;
  std::string pm_class;  // dram | dax | file
};
Result<PmPlace> PlacePm(const std::string& configured, const std::string& cluster_dir, uint32_t id);
// The same for the process whose data directory is DIR/`name` (the DINOMO
// pool's is DIR/pool).
Result<PmPlace> PlacePm(const std::string& configured, const std::string& cluster_dir, const std::string& name);

// Whether power may have failed since the PM file at `pm_path` was last
// opened by a node: the boot it recorded (RecordBoot) is not this one, or
// none was recorded. Without a power loss a recovery takes a local log's
// broken block for damage, not a tear (store::StoreOptions::tears_possible).
bool PowerMayHaveFailed(const std::string& pm_path);
// Records this boot next to the PM file (PATH.boot).
Status RecordBoot(const std::string& pm_path);

// Opens the PM file at `place` (created with `create_bytes` if missing, its
// directory too), persisted the way its class is: dram not at all, dax by
// cache-line write-back, file by msync. InvalidArgument when the class is
// dax and the file is not DAX-mapped.
Result<std::unique_ptr<pm::PmRegion>> OpenPm(const PmPlace& place, uint64_t create_bytes);

// An RPC channel on `ep` with the settings every process of a cluster uses
// (frames up to proto::kMaxMessage; authenticated with `keys` unless null),
// polled on `ex`, which parks on the endpoint's wait object when idle.
Result<std::unique_ptr<rpc::RpcChannel>> OpenServingChannel(runtime::Executor* ex,
                                                           std::unique_ptr<fabric::Endpoint> ep,
                                                           std::shared_ptr<auth::KeySource> keys);

// A process's cluster secret (NodeOptions::secret_file), reloaded on `ex`
// every half second so a rotation reaches it without a restart.
Result<std::shared_ptr<auth::KeySource>> OpenProcessKeys(const std::string& cluster_dir,
                                                         const std::string& secret_file, runtime::Executor* ex);
// What STATS says of it: {"on", "current", "keys"} (slip cluster rotate-secret
// waits on it).
nlohmann::json AuthJson(const std::shared_ptr<auth::KeySource>& keys);
// What STATS says of the process's RPC traffic, summed over its channels
// (each read on its own executor): {"requests", "calls", "frames_sent",
// "messages_sent"}. A message carries one turn's frames for one peer, so
// frames per message is how much the batching saves.
nlohmann::json RpcJson(const std::vector<rpc::RpcChannel::Counters>& channels);

// Nanoseconds on the machine-wide monotonic clock: what every process that
// shares an embedded ConfigStore passes as `now`.
runtime::Nanos MachineNow();

}  // namespace slip::node
