// `slip server`, `slip manager` and `slip cluster up|down|status`: a local
// cluster of separate processes on the embedded configuration store in DIR.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/cluster_config.h"
#include "common/status.h"

namespace slip::cli {

struct ClusterCommandOptions {
  std::string dir;
  std::string zookeeper;
  // The cluster secret (auth/keyring.h): this file, else DIR/secret. A new
  // cluster gets a fresh one unless no_auth.
  std::string secret_file;
  bool no_auth = false;
  uint32_t nodes = 3;
  uint32_t shards = 24;
  uint32_t replication = 3;
  std::string design = "rpc-kv";  // replication design (first start)
  uint32_t node = 0;  // `slip server`: which node
  bool node_given = false;  // `cluster add-node`: --node was given
  std::string provider = "tcp";  // the cluster's, recorded in its first configuration
  std::string server_provider;   // slip server: empty = the configuration's
  // The PM durability class (first start): dram | dax | file; empty = file,
  // or dram when DIR is on tmpfs. Recorded in the configuration.
  std::string pm;
  std::string bind = "127.0.0.1";  // `slip server`: the IP it serves on
  uint64_t pm_mb = 256;
  uint32_t lease_ms = 2000;
  uint32_t commit_interval_ms = 15;  // servers: CommitVer records (0: none)
  uint32_t workers = 1;              // servers: request worker threads
  uint32_t digest_threads = 1;       // servers: backup-log digest threads (one-sided designs)
  std::string log_level = "info";    // passed on to the processes `cluster up` starts
  uint64_t pool_mb = 1024;           // `slip pool`: region size when creating it
  uint64_t segment_mb = 8;           // `slip pool`: log segment size when creating it
  // `cluster autoscale` (cluster/autoscale.h)
  uint32_t epoch_ms = 1000;   // one observation and at most one action per epoch
  uint32_t grace_ms = 9000;   // no action for this long after one
  double over = 0.20, under = 0.10;  // worker occupancy thresholds
  double slo_us = 1200;       // average latency objective of the probe GETs
  uint32_t min_nodes = 1, max_nodes = 8;
  uint32_t epochs = 0;        // stop after this many (0: until a signal)
  // `cluster share` / `unshare`: a hot key and its secondary owners.
  std::string key;
  std::vector<uint32_t> owners;
  // `cluster move`: the shard, and the node whose replica moves (-1: the primary).
  uint32_t shard = 0;
  int64_t from = -1;
  // `cluster rebalance` (cluster/rebalance.h): statistics period, thresholds.
  uint32_t period_ms = 500;
  double overloaded = 0.30, balanced = 0.05;
  // Moves under way at once (add-node, remove-node, rebalance).
  uint32_t parallel = 2;
  // The Redis-protocol front door (resp/server.h): `slip server` listens on
  // this port (0: none); `cluster up`/`add-node` give node i the port
  // resp_port + i, and remember the base in DIR/ports.json for later starts.
  uint32_t resp_port = 0;
  // The password its AUTH takes (the file's first line); default: the
  // cluster secret's keys in hex (`slip cluster password`), none without one.
  std::string resp_password_file;
  // Prometheus text at /metrics (metrics_port), and the web view with
  // /metrics and its JSON (http_port): ports as resp_port's (node i: P+i).
  uint32_t metrics_port = 0;
  uint32_t http_port = 0;
};

// The ports `cluster up` gave the nodes' front doors (DIR/ports.json): the
// ones `o` names, else those remembered, which o's replace when given —
// checked (CheckPortRanges with nodes up to `max_id`) before anything is
// written.
Result<ClusterCommandOptions> WithFrontDoorPorts(const ClusterCommandOptions& o, uint32_t max_id);

// For the commands that start node processes: a node's process name, and
// the `slip server` command line of node `id`.
std::string NodeName(uint32_t id);
// `cluster add-node`: the id the new node takes (--node, or one past the
// highest member's); InvalidArgument if --node names a member.
Result<uint32_t> JoiningNodeId(const ClusterCommandOptions& o, const cluster::ClusterConfig& c);
std::vector<std::string> ServerArgs(const ClusterCommandOptions& o, uint32_t id);

int RunServer(const ClusterCommandOptions& o);
int RunManagerCommand(const ClusterCommandOptions& o);
// `slip pool`: the PM pool of a cluster whose design keeps its data in one (dinomo).
int RunPool(const ClusterCommandOptions& o);
// Writes the first configuration (nodes, shards, replication, design) to the
// configuration store and starts nothing: for clusters whose servers are
// started one by one (`slip server --bind` on each host). Fails if one exists.
int ClusterInit(const ClusterCommandOptions& o);
int ClusterUp(const ClusterCommandOptions& o);
int ClusterDown(const ClusterCommandOptions& o);
int ClusterStatus(const ClusterCommandOptions& o);
// Replaces the cluster secret without downtime (docs/security.md "Rotation").
int ClusterRotateSecret(const ClusterCommandOptions& o);
// The `slip manager` command line of the cluster (restarts after a kill).
std::vector<std::string> ManagerArgs(const ClusterCommandOptions& o);
// Starts a new node (id `node`, or one past the highest) that joins the
// running cluster and waits until it owns its share of the shards. A pool
// design's (dinomo) shards move without copying; a sharded design's are
// moved by copying (reshard_command.h); the chains (rubble) cannot.
int ClusterAddNode(const ClusterCommandOptions& o);
// Node `node` hands its shards to the others and leaves the membership;
// waits for it. Only designs whose data lives in a pool (dinomo).
int ClusterRemoveNode(const ClusterCommandOptions& o);
// Selective replication (dinomo): `key` served by its shard's owner and
// `owners` through the pool's indirect cell (share), or by its owner alone
// again (unshare). Waits until every node serves the new configuration.
int ClusterShare(const ClusterCommandOptions& o, bool share);
// DINOMO's policy engine as a supervisor: every epoch it reads each KVS
// node's worker CPU (occupancy) and times probe GETs, and adds or removes a
// node by the policy of cluster/autoscale.h. Prints one line per epoch.
int ClusterAutoscale(const ClusterCommandOptions& o);
// Kills node `node` with SIGKILL (fault injection for tests and demos).
int ClusterKill(const ClusterCommandOptions& o);
// Prints the password the nodes' RESP front doors take: the cluster
// secret's current key in hex (or the --resp-password-file's).
int ClusterPassword(const ClusterCommandOptions& o);

}  // namespace slip::cli
