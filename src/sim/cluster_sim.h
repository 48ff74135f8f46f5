// ClusterSim: a whole sharded, replicated cluster — the real NodeCore,
// replication, promotion and client code — in one process on the simulated
// runtime's virtual time, driven by a seed (issue "Deterministic cluster
// simulation"). One seed, one trace: every event goes through SimRuntime.
//
// Every replication design runs here: rpc-kv replicates over the same
// simulated messages as client requests; the one-sided designs (rowan-kv,
// rwrite/batch/share-kv, tailwind) get a fabric::SimFabric under the nodes —
// each node has a replication endpoint its peers write into with no worker
// involved, polled by a NIC executor and digested by a digest executor, as
// in a real server process (node/node_process.cc).
//
// What is simulated here: the network between nodes and clients (latency,
// jitter, message loss; per call, a timeout), node crashes with the PM crash
// model (unpersisted lines kept, dropped or torn), restarts, and the
// configuration manager (detects a dead node after a lease, commits a new
// term, promotes a backup, re-replicates to a spare). The nodes talk through
// rpc::PeerCaller, so the same node code runs over rpc/ in a real
// process.
//
// What is checked: every client operation goes into a history; at the end
// the cluster heals, every key is read back, and the history must be
// linearizable (which implies no acknowledged write is lost and no read
// returns a value that is later lost).
#pragma once

#include <cstdint>
#include <string>

#include <optional>
#include <vector>

#include "bench/workload/workload.h"
#include "client/erda_path.h"
#include "replication/design.h"
#include "runtime/cost.h"
#include "sim/linearizability.h"

namespace slip::sim {

// A performance run (docs/model.md): the cost model on, no faults and no
// history; the clients load the records, then run a closed-loop YCSB
// workload, and the result is throughput and latency on virtual time.
struct PerfOptions {
  runtime::CostModel costs;
  // Machines. shared_host: every node and client executor on one machine
  // of `host_cores` cores (this box). Otherwise each node is a machine of
  // `node_cores`, and the clients spread over `client_hosts` machines of
  // `client_cores`.
  bool shared_host = true;
  uint32_t host_cores = 2;
  uint32_t node_cores = 16;
  uint32_t client_hosts = 1, client_cores = 16;
  // Threads park after this long idle; handing one work wakes it: the
  // waker pays Cost::kWakeup less kSwitchIn and the woken kSwitchIn, or on
  // a busy host kWakeupBusy and kSwitchIn (runtime::SimRuntime::ChargeWake);
  // negative: they spin (dedicated polling cores).
  runtime::Nanos park_after = -1;
  // The hosts' scheduler (runtime::SimRuntime::AddHost): 0, one run queue
  // shared by a host's cores; positive, Linux's per-core queues with
  // wake-up preemption, threads moving between cores once off one this long.
  runtime::Nanos migration_cost = 0;
  // The network under messages and the replication fabric.
  runtime::Nanos one_way = 1000;  // propagation + switch, per message
  double bandwidth = 12.5;        // bytes per ns (12.5 = 100 Gb/s)
  runtime::Nanos nic_service = 13;  // target NIC per packet
  bool software_nic = false;        // fabric target side on the target's CPU
  // The workload: the records are loaded first (not measured).
  ycsb::WorkloadSpec workload;
  uint32_t load_depth = 8;  // loads each client keeps in flight
  // Closed-loop application threads per client (each keeps one operation
  // in flight); they share the client's executor, as `slip bench`'s
  // threads share one slip::Client.
  uint32_t threads_per_client = 1;
  // The application threads block in synchronous calls (slip::Client's
  // Get/Put, as `slip bench` uses them): each is an executor of the
  // client's machine that hands its call to the client's executor and is
  // woken by the answer. False: asynchronous applications running on the
  // client's executor.
  bool sync_clients = true;
  runtime::Nanos warmup = 50 * runtime::kMillisecond;
  runtime::Nanos measure = 500 * runtime::kMillisecond;
  // Pool designs (ClusterSimOptions::pool_design): the pool machine's
  // cores, each a thread serving the nodes' calls and merging their logs.
  uint32_t pool_cores = 4;
};

struct PerfResult {
  uint64_t ops = 0;  // completed in the measured window
  double ops_per_sec = 0;
  runtime::Nanos p50 = 0, p99 = 0, mean = 0;
  runtime::Nanos read_p50 = 0, write_p50 = 0;  // GETs; PUTs and read-modify-writes
  uint64_t errors = 0;  // operations that did not succeed (measured window)
  // Virtual CPU per operation, by input (ns), over the measured window
  // (chain designs: the load and the flushes and compactions it made due).
  std::array<double, runtime::kCostCount> cpu_per_op{};
  // The same by role (performance runs of the cluster designs): the
  // client with its application threads, workers, NICs, digests. Turns are
  // credited whole to the window they start in.
  enum Role : uint8_t { kClient, kWorker, kNic, kDigest, kRoles };
  std::array<std::array<double, runtime::kCostCount>, kRoles> cpu_per_op_by_role{};
  // Whole steps per operation by role and input (SimRuntime::StepsOf):
  // kMessageSend's are the fabric messages each role sent, what slip bench
  // reports as "rpc sends" of a real run.
  std::array<std::array<double, runtime::kCostCount>, kRoles> steps_per_op_by_role{};
  // Busy share of each host's cores over the measured window.
  std::vector<double> host_busy;
  // Virtual CPU per operation by role (ns), summed over the nodes as
  // `slip bench` reports real ones: the client, the nodes' request workers
  // (chain designs: each node's executor, its requests and chain calls),
  // NIC and digest executors.
  // Cluster and pool designs: each includes its threads' spin before they
  // park (SimRuntime::SpunBy), as a real thread's clock does; the inputs
  // above do not. Chain designs: the inputs only.
  double client_cpu = 0, worker_cpu = 0, nic_cpu = 0, digest_cpu = 0;
  // Of those, the spin per operation, by role (cluster designs).
  std::array<double, kRoles> spin_per_op_by_role{};
  // Parks per operation by role: turns that began after the executor's
  // spin had run out (handed work or a timer came due), as a real thread's
  // voluntary context switches count them.
  double client_parks = 0, worker_parks = 0, nic_parks = 0, app_parks = 0;
  // Spins cut short by another executor, per operation, by role (a real
  // thread's involuntary context switches), and in all.
  double client_preemptions = 0, worker_preemptions = 0, nic_preemptions = 0, app_preemptions = 0;
  double preemptions() const { return client_preemptions + worker_preemptions + nic_preemptions + app_preemptions; }
  // Preemptions by the thread that took the core, per operation:
  // preemptions_by[preempted][taker], each a Thread (the application
  // threads apart from the client's executor, as a real run's `perf sched`
  // tells them apart; bench/model/sched-summary.py). Its rows sum to the
  // counts above, and it has the digests' too, which those leave out.
  enum Thread : uint8_t { kClientThread, kAppThread, kWorkerThread, kNicThread, kDigestThread, kThreads };
  std::array<std::array<double, kThreads>, kThreads> preemptions_by{};
  // Pool designs: the pool's threads' CPU per operation (calls, merges),
  // and one-sided operations the KVS nodes posted to the pool per
  // operation (READs, batch WRITEs with their flush READs, swaps).
  double pool_cpu = 0, pool_round_trips = 0;  // pool_cpu with its threads' spin, as the roles'
  // The executor that was busy longest over the measured window, and its
  // busy share of the window: what caps a saturated run.
  std::string busiest;
  double busiest_share = 0;
  // The fewest free PM segments any node's store had at the window's end.
  // The simulated nodes run no cleaner, so a store down to its cleaner
  // reserve (log_full) refuses writes: the window then measured a stall,
  // not the design — shorten it, or load more records (a node's region is
  // sized by them).
  uint32_t min_free_segments = 0;
  bool log_full = false;
  // Every storage node executor's CPU per operation (ns): the papers'
  // "throughput per core" is 1e9 / node_cpu once the nodes' cores are
  // saturated (chain designs; 0 where not measured).
  double node_cpu = 0;
  // ... of which the chain designs' engine jobs (sim/chain_perf.h): writes,
  // followers' applies, flushes and compactions.
  double jobs_cpu = 0;
  // Chain designs: requests a head refused (Busy: its engine put writes
  // off) and the client sent again, per operation.
  double refused = 0;
};

struct ClusterSimOptions {
  uint64_t seed = 1;
  replication::Protocol protocol = replication::Protocol::kRpc;
  uint32_t nodes = 6;
  uint32_t replication = 3;
  uint32_t shards = 12;
  uint32_t clients = 4;
  uint32_t keys = 24;
  uint32_t ops_per_client = 150;
  // One PUT in four is conditional (SET NX or XX, at random), on the
  // designs whose primaries take them (not the erda family).
  bool conditional_puts = true;
  // Network: one-way latency uniform in [min, max] microseconds; loss.
  uint32_t latency_min_us = 5, latency_max_us = 60;
  double drop_probability = 0.01;
  uint32_t call_timeout_us = 2000;
  // Faults: crash this many nodes (one at a time), each restarted later as
  // a spare. At most replication - 1 are down at once.
  uint32_t crashes = 1;
  uint32_t lease_us = 10000;  // lease length; nodes renew every lease/4
  // CommitVer records every this many microseconds (0: none; promotions
  // then exchange whole shards).
  uint32_t commit_interval_us = 15000;
  // ... once the CommitVer moved by this many versions (NodeCore's
  // set_commit_record_step; real nodes use 64, these runs write a few
  // hundred entries in all).
  uint32_t commit_record_step = 4;
  // Request workers per node (server/worker_pool.h), each an executor of
  // its own with its own entry and sending endpoint, as a real node's
  // threads: a shard's writes arrive at its worker (some at another, and
  // hop there, World::Call), GETs at each worker in turn.
  uint32_t workers = 1;
  // Digest executors per one-sided node (replication/backup_log.h: each
  // step digests a used segment no other executor is on; Rowan-KV: five).
  uint32_t digest_executors = 1;
  // Crashes during failover: this many times, when the manager reassigns a
  // failed node's shards, one of the nodes promoted for them crashes 0-2 ms
  // later (while it gathers and scatters the shard), if that leaves every
  // shard an in-sync replica; it restarts as a spare after 4 leases.
  uint32_t failover_crashes = 0;
  // With cold_start: one node crashes 0-2 ms into the cold start, while the
  // primaries reconcile their shards.
  bool crash_in_cold_start = false;
  // Network partitions: this many times, cut one random node off from the
  // configuration manager and the other nodes (clients still reach it) for
  // 1-4 leases.
  uint32_t partitions = 0;
  // Slow nodes: this many times, one random node answers `slow_factor`
  // times slower for up to 30 ms (timeouts fire; its lease may lapse).
  uint32_t slow_nodes = 0;
  int64_t slow_factor = 20;
  // Shard moves (docs/papers/rowan.md §3.7): this many times, at random,
  // the CM moves a random shard's primary — or, one time in three, one of
  // its complete backups — to a random up node holding no replica of it.
  uint32_t migrations = 0;
  // With migrations: one move in two gets a fault 0-3 ms after it starts —
  // its source or its target crashes (restarted as a spare after 4 leases),
  // or the configuration manager restarts (a new one takes over a lease
  // later).
  bool migration_faults = false;
  // Whole-cluster power loss after the single-node faults: every node
  // crashes at once and restarts from its PM (cold start); the configuration
  // manager then reconciles every shard's replicas before serving.
  bool cold_start = false;
  // One-sided designs: data placed by the fabric becomes persistent this
  // long after it lands (0: at once). A flushing Read still answers only
  // once it is, so nothing acknowledged may depend on the delay.
  int64_t persist_delay_ns = 3000;
  // Test-only: acknowledge a write before any backup has it (replication is
  // sent later). The campaign must catch this: proof the checker can fail.
  bool bug_ack_before_replication = false;
  // Test-only: primaries ignore their lease (a cut-off old primary keeps
  // serving reads after its replacement took writes).
  bool bug_no_lease = false;
  bool trace = false;  // print a readable event trace to stderr
  // Set ("dinomo", "dinomo-s", "clover"): a performance run of a DINOMO
  // pool cluster instead (sim/pool_perf.h): `nodes` KVS nodes of `workers`
  // threads each over one pool; `protocol`, `replication` and `shards` do
  // not apply. Requires `perf`.
  std::string pool_design;
  // dinomo and dinomo-s: keys shared by every KVS node thread through the
  // pool's cells (selective replication, docs/papers/dinomo.md §4d): -1
  // those a policy would share — every record of the workload's zipfian
  // drawing more than one thread's share of the requests — 0 none, N the N
  // hottest. Clover ignores it (any node serves any key).
  int pool_shared_keys = -1;
  // Set ("rubble", "rubble-all-compact"): a performance run of RubbleDB
  // chains instead (sim/chain_perf.h): `nodes` machines, `shards` chains of
  // `replication` replicas; the run loads the workload's records and
  // measures the nodes' CPU per insert. Requires `perf`.
  std::string chain_design;
  // Chain designs: each engine's MemTables and tables (0: the harness's
  // default, sim/chain_perf.h); its levels are sized from it.
  uint64_t chain_table_bytes = 0;
  // Set: a performance run instead of a fault campaign (faults, drops and
  // the history check are off; the fields above that shape the cluster —
  // protocol, nodes, replication, shards, clients, workers — still apply).
  std::optional<PerfOptions> perf;
};

struct ClusterSimResult {
  bool ok = true;
  std::string failure;  // first violation, or why the run could not finish
  uint64_t operations = 0, unknown_outcomes = 0, faults = 0, failovers = 0;
  // REPLICATE requests the nodes served: rpc-kv's writes, and any design's
  // promotion and seeding pushes. One-sided designs' writes add none.
  uint64_t replicate_served = 0;
  // Requests that entered a node at another worker than the one serving
  // their shard (server/worker_pool.h; World::Call sends some there, as a
  // caller with an older configuration would), and the fewest PUTs and
  // DELs any worker of any node served as a primary (whether placement
  // spreads each node's shards over its workers).
  uint64_t requests_hopped = 0;
  uint64_t least_worker_writes = 0;
  // GETs served by a worker other than their shard's (any worker may).
  uint64_t gets_elsewhere = 0;
  // One-sided designs: operations posted on the replication fabric.
  uint64_t fabric_ops = 0, fabric_timeouts = 0;
  // Promotions that succeeded, the entries they moved (pulled + pushed) and
  // how many used a CommitVer floor above 0.
  uint64_t promotions = 0, promotion_entries = 0, promotions_with_floor = 0;
  uint64_t commit_records = 0;
  // Shard moves: started, finished (the target reported, or the moved
  // backup was seeded), ended by a failure of the source or the target
  // (rolled back); keys the targets fetched from sources on a miss, and
  // entries they copied.
  uint64_t migrations_started = 0, migrations_done = 0, migrations_failed = 0;
  uint64_t migration_fetches = 0, migration_copied = 0, shards_dropped = 0;
  // erda: GETs answered one-sidedly / by the two-sided fallback, PUTs whose
  // entry the client wrote / that fell back to a two-sided PUT.
  client::ErdaPath::Stats direct;
  uint64_t trace_hash = 0;
  int64_t virtual_ns = 0;
  CheckResult check;
  PerfResult perf;  // performance runs
};

ClusterSimResult RunClusterSim(const ClusterSimOptions& options);

}  // namespace slip::sim
