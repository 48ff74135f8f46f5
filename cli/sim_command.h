// `slip sim`: deterministic cluster-simulation campaigns (src/sim/).
//
//   slip sim --seeds 1..200            run seeds, print failing ones and totals
//   slip sim --design rowan-kv ...     the whole cluster on any design
//   slip sim --layer replication ...   one-sided designs: the replication
//                                      layer alone (replication/testing/), with
//                                      seeded persist delays and torn transfers
//   slip sim --seed 17 --trace         replay one seed with a readable event trace
//   slip sim --seeds 1..50 --bug ack-before-replication
//                                      prove the checker catches a broken protocol
//   slip sim --perf this-machine --design rowan-kv --threads 16
//                                      predict a run's throughput and latency on
//                                      the cost model (docs/model.md)
//   slip sim --perf rowan-fig9         a paper's testbed and figure, simulated
//                                      beside the paper's numbers (--perf list)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replication/testing/campaign.h"

namespace slip::cli {

struct SimCommandOptions {
  std::string design = "rpc-kv";
  std::string layer = "cluster";  // or "replication" (one-sided designs)
  std::string seeds = "1..20";
  int64_t seed = -1;  // one seed (overrides --seeds)
  bool trace = false;
  std::string bug;    // "", "ack-before-replication", "no-lease"; one-sided designs: "ack-early", "skip-persist"
  // Replication layer: the file durability class (placed bytes persist only
  // when a backup msyncs them on REPL_PERSIST).
  bool file_class = false;
  // One-sided designs: max placement-to-persistence delay (the replication
  // layer draws one per seed up to it; the cluster uses it as is).
  uint64_t persist_delay_ns = replication::testing::CampaignOptions{}.max_persist_delay;
  uint32_t nodes = 6, replication = 3, shards = 12, clients = 4, keys = 24, ops = 150, crashes = 2;
  double drop = 0.01;
  bool cold_start = false;
  bool no_conditional = false;  // cluster layer: no conditional PUTs (SET NX/XX) in the workload
  uint32_t failover_crashes = 0;
  uint32_t commit_interval_us = 15000;  // CommitVer records; 0: none
  bool crash_in_cold_start = false;
  uint32_t partitions = 0;
  uint32_t slow_nodes = 0;
  uint32_t workers = 1;  // request workers per node (cluster layer)
  uint32_t digest_executors = 1;  // backup-log digest executors per one-sided node
  uint32_t migrations = 0;       // shard moves per seed (cluster layer)
  bool migration_faults = false;  // crash a move's source or target, or restart the CM, during some
  // Performance runs on the cost model (docs/model.md): this-machine, a
  // paper's testbed scenario (sim/testbeds.h), or "list".
  std::string perf;
  std::string model = "bench/model/this-machine.json";  // the inputs (a scenario's own file unless changed)
  std::string only;  // scenarios: run only these designs (comma-separated)
  std::vector<std::string> inputs;  // NAME=NS[/NS_PER_BYTE]: inputs set over the model's
  // Scenarios of pool designs: ClusterSimOptions::pool_shared_keys, when given.
  int shared_keys = -1;
  bool shared_keys_given = false;
  // Which of the options were given (a default value may be given too):
  // a scenario uses its own testbed and window unless --model/--measure
  // are, and refuses the options that shape this-machine's run.
  bool model_given = false, measure_given = false;
  std::vector<std::string> this_machine_options_given;
  uint32_t threads = 16;             // this-machine: client threads (one slip::Client)
  // this-machine: > 1, an asynchronous application keeping `depth`
  // operations in flight on the client's executor (with --threads 1; the
  // nearest real run is `slip bench --threads 1 --depth N`, whose one
  // driver thread the model does not have).
  uint32_t depth = 1;
  uint32_t cores = 2;                // this-machine: the host's cores
  std::string workload = "a";
  uint32_t records = 10000, value_size = 1000;
  double measure_s = 1.0;
  bool json = false;  // print the result as one JSON line
};

int RunSimCommand(const SimCommandOptions& o);

}  // namespace slip::cli
