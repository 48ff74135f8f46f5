// Performance runs of RubbleDB's chains on the cost model (docs/model.md,
// "rubble-fig7"): what sim/perf.cc is for NodeCore clusters, for chains of
// LSM engines. The real node code (server::RubbleServer, as `slip server`
// runs it for the chain designs, its engines without threads on the
// simulator's executors) on machines of their own, each executor charged
// the named costs of its steps:
//
//   clients    a machine per client_hosts; each client an executor keeping
//              load_depth inserts in flight at the heads; a request and
//              its answer are messages (transport + RPC layer at both ends).
//   nodes      a machine of node_cores per node: the node's executor (its
//              requests and the chain's calls, each a message), and one
//              executor its engines' jobs run on (writes, followers'
//              applies, flushes, compactions; lsm_write, flush and
//              compaction). A head writes each finished table into its
//              followers' slots as the paper's NVMe-oF target offload does:
//              one posted write per slot and follower (fabric_post), no
//              CPU of the follower's.
//
// What it measures is the paper's: CPU per operation (RubbleDB Table 3 and
// Figs. 7-8, "throughput per core"). A run loads the workload's records,
// then lets the engines finish the flushes and compactions the load made
// due; every node executor's CPU over that whole span, over the records, is
// PerfResult::node_cpu (cpu_per_op, worker_cpu — the node executors' —
// jobs_cpu and the busiest executor's share cover the same span). Its
// throughput (records over the load's virtual
// time) is not the paper's: one executor per node runs all of its engines'
// jobs, where the paper gives each instance 4 cores and 4 background
// threads, and no device time is modelled (WAL syncs, table writes).
#pragma once

#include <string_view>

#include "sim/cluster_sim.h"

namespace slip::sim {

// Whether RunChainPerf runs `design`: rubble and rubble-all-compact.
bool IsChainPerfDesign(std::string_view design);

// MemTables and tables of the harness's engines unless
// ClusterSimOptions::chain_table_bytes says otherwise: the paper's 16 MB
// scaled by 1/32, so a load of a few ten thousand records per shard makes
// three levels. Level 0 compacts at 4 tables and level 1 holds 16
// (the paper's 64 MB level 0 and RocksDB's default 256 MB level 1), each
// level 10 times the one above.
inline constexpr uint64_t kChainTableBytes = 512 << 10;

// The flushes' and compactions' CPU per operation of a run (ns).
inline double BackgroundCpu(const PerfResult& r) {
  return r.cpu_per_op[static_cast<size_t>(runtime::Cost::kFlush)] +
         r.cpu_per_op[static_cast<size_t>(runtime::Cost::kCompaction)];
}

// One run: load options.perf->workload.records records (inserts only; the
// workload's mix is not run), let the engines' due work finish, measure.
// ok = false with the reason for what it cannot run (another design, no
// records, more replicas than nodes) or a load that did not finish.
ClusterSimResult RunChainPerf(const ClusterSimOptions& options);

}  // namespace slip::sim
