// ClusterSim: a whole sharded, replicated cluster — the real NodeCore,
// replication, promotion and client code — in one process on the simulated
// runtime's virtual time, driven by a seed (issue "Deterministic cluster
// simulation"). One seed, one trace: every event goes through SimRuntime.
//
// What is simulated here: the network between nodes and clients (latency,
// jitter, message loss; per call, a timeout), node crashes with the PM crash
// model (unpersisted lines kept, dropped or torn), restarts, and the
// configuration manager (detects a dead node after a lease, commits a new
// term, promotes a backup, re-replicates to a spare). The nodes talk through
// replication::PeerCaller, so the same node code runs over rpc/ in a real
// process.
//
// What is checked: every client operation goes into a history; at the end
// the cluster heals, every key is read back, and the history must be
// linearizable (which implies no acknowledged write is lost and no read
// returns a value that is later lost).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/linearizability.h"

namespace slip::sim {

struct ClusterSimOptions {
  uint64_t seed = 1;
  uint32_t nodes = 6;
  uint32_t replication = 3;
  uint32_t shards = 12;
  uint32_t clients = 4;
  uint32_t keys = 24;
  uint32_t ops_per_client = 150;
  // Network: one-way latency uniform in [min, max] microseconds; loss.
  uint32_t latency_min_us = 5, latency_max_us = 60;
  double drop_probability = 0.01;
  uint32_t call_timeout_us = 2000;
  // Faults: crash this many nodes (one at a time), each restarted later as
  // a spare. At most replication - 1 are down at once.
  uint32_t crashes = 1;
  uint32_t lease_us = 10000;  // lease length; nodes renew every lease/4
  // Network partitions: this many times, cut one random node off from the
  // configuration manager and the other nodes (clients still reach it) for
  // 1-4 leases.
  uint32_t partitions = 0;
  // Slow nodes: this many times, one random node answers `slow_factor`
  // times slower for up to 30 ms (timeouts fire; its lease may lapse).
  uint32_t slow_nodes = 0;
  int64_t slow_factor = 20;
  // Whole-cluster power loss after the single-node faults: every node
  // crashes at once and restarts from its PM (cold start); the configuration
  // manager then reconciles every shard's replicas before serving.
  bool cold_start = false;
  // Test-only: acknowledge a write before any backup has it (replication is
  // sent later). The campaign must catch this: proof the checker can fail.
  bool bug_ack_before_replication = false;
  // Test-only: primaries ignore their lease (a cut-off old primary keeps
  // serving reads after its replacement took writes).
  bool bug_no_lease = false;
  bool trace = false;  // print a readable event trace to stderr
};

struct ClusterSimResult {
  bool ok = true;
  std::string failure;  // first violation, or why the run could not finish
  uint64_t operations = 0, unknown_outcomes = 0, faults = 0, failovers = 0;
  uint64_t trace_hash = 0;
  int64_t virtual_ns = 0;
  CheckResult check;
};

ClusterSimResult RunClusterSim(const ClusterSimOptions& options);

}  // namespace slip::sim
