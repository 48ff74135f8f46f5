// slip: the Slipstream command.
//
//   slip bench [--target rpc-kv|local|rocksdb|redis|redis-wait|redis-wait-aof|memcached] [--workload a] ...
//   slip bench compare --targets a,b,c ...         one workload on several targets, ratios
//   slip cluster up|down|status --dir DIR [--nodes N]   a local cluster of processes
//   slip cluster up --dir DIR --resp-port 6380     ... with node i serving the Redis protocol on 6380+i
//                  [--metrics-port 9100] [--http-port 8080]   ... Prometheus /metrics, the web view
//   slip cluster init --dir DIR [--nodes N]        configure only; start servers one by one
//   slip server --dir DIR --node I [--bind IP]     one storage node
//   slip manager --dir DIR                         the configuration manager
//   slip pool --dir DIR                            the PM pool of a dinomo cluster
//   slip put --dir DIR KEY VALUE|-|--value-file F  store a value (- : from stdin)
//   slip get --dir DIR KEY                         the value's bytes alone on stdout
//   slip del --dir DIR KEY                         delete a key
//   (put/get/del talk to the cluster in DIR or --zookeeper; a DIR without a cluster is a
//    single-node store in DIR/pm)
//   slip inspect --dir DIR                         PM layout and recovery figures
//   slip sim --design rowan-kv --seeds 1..200      cluster simulation campaign
//   slip soak --dir DIR --design D --kills N       kill/restart soak of a real cluster, history checked
//   slip fsck --dir DIR --node N                   a stopped node's store checked for media damage
//   slip stats --dir DIR                           a live table of the cluster (per node and total)
//
// Global options (before the subcommand): --log-level trace|debug|info|warn|
// error|off for diagnostics, --log-file F to append them to F as well.
// Processes `slip cluster up` starts write theirs to DIR/logs/<name>.log.
//
// Errors are one line on stderr and a non-zero exit status.
#include <CLI/CLI.hpp>

#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/cluster_command.h"
#include "cli/reshard_command.h"
#include "bench/driver/bench_command.h"
#include "slip/client.h"
#include "cli/sim_command.h"
#include "cli/fsck_command.h"
#include "cli/soak_command.h"
#include "cli/stats_command.h"
#include "common/log.h"
#include "store/store.h"

namespace {

using slip::Status;

// A local store under DIR/pm (created on first use).
struct LocalStore {
  std::unique_ptr<slip::pm::PmRegion> region;
  std::unique_ptr<slip::store::Store> store;
};

slip::Result<LocalStore> OpenLocal(const std::string& dir, uint64_t size_mb) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir + ": " + ec.message());
  const std::string path = dir + "/pm";
  const uint64_t size = std::filesystem::exists(path) ? 0 : size_mb << 20;
  SLIP_ASSIGN_OR_RETURN(auto region, slip::pm::PmRegion::OpenFile(path, size, {}));
  SLIP_ASSIGN_OR_RETURN(auto store, slip::store::Store::Open(region.get(), {}));
  return LocalStore{std::move(region), std::move(store)};
}

// The value of `slip put`: "-" reads stdin, --value-file a file, else the
// argument itself. Bytes are taken unchanged; more than the store's largest
// value is refused before anything is sent.
slip::Result<std::string> ReadValue(const std::string& arg, const std::string& file, bool have_arg) {
  if (have_arg == !file.empty()) return Status::InvalidArgument("give VALUE, \"-\" (stdin) or --value-file F, one of them");
  if (file.empty() && arg != "-") return arg;
  const size_t limit = slip::log::Limits{}.max_value;
  std::FILE* f = file.empty() ? stdin : std::fopen(file.c_str(), "rb");
  if (f == nullptr) return Status::IoError("cannot open " + file + ": " + std::strerror(errno));
  std::string v;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    if (v.size() + n > limit) {
      if (f != stdin) std::fclose(f);
      return Status::TooLarge("value exceeds the largest value, " + std::to_string(limit) + " bytes");
    }
    v.append(buf, n);
  }
  const bool bad = std::ferror(f) != 0;
  if (f != stdin) std::fclose(f);
  if (bad) return Status::IoError("reading " + (file.empty() ? std::string("stdin") : file) + " failed");
  return v;
}

// `slip get`'s output: the value's bytes unchanged; a newline after it only
// on a terminal, where it is for the eye.
void WriteValue(const std::string& v) {
  std::fwrite(v.data(), 1, v.size(), stdout);
  if (::isatty(::fileno(stdout))) std::fputc('\n', stdout);
  std::fflush(stdout);
}

int Fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "slip %s: %s\n", what.c_str(), s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Values up to 16 MiB pass through buffers of their size several times
  // per request (fragments reassembled, entries encoded, replicated). glibc
  // serves such allocations with fresh mmaps and gives them back on free,
  // so every request page-faults its buffers in again: with 1 MiB values a
  // third of a node's time went to those faults (perf). Keep freed memory
  // for reuse instead.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  CLI::App app{"Slipstream: a replicated key-value store for fast remote persistent memory"};
  app.require_subcommand(1);
  std::string log_level = "info", log_file;
  app.add_option("--log-level", log_level, "diagnostics: trace | debug | info | warn | error | off")
      ->capture_default_str();
  app.add_option("--log-file", log_file, "append diagnostics to this file as well as stderr");

  slip::bench::BenchCommandOptions bench_options;
  slip::bench::AddBenchCommand(app, &bench_options);

  std::string dir, key, value, value_file;
  uint64_t size_mb = 256;
  std::string bind, zookeeper, secret_file;
  auto add_dir = [&](CLI::App* c) {
    c->add_option("--dir", dir, "data directory")->required();
    c->add_option("--size-mb", size_mb, "PM size when creating the store")->capture_default_str();
  };
  auto add_bind = [&](CLI::App* c) {
    c->add_option("--bind", bind, "cluster: the local IP to talk from (default 127.0.0.1)");
    c->add_option("--zookeeper", zookeeper, "cluster: its configuration is in this ZooKeeper (host:port)");
    c->add_option("--secret-file", secret_file, "cluster: its secret (default: DIR/secret when there is one)");
  };
  auto* put = app.add_subcommand("put", "store KEY = VALUE (VALUE \"-\": read it from stdin)");
  add_dir(put);
  add_bind(put);
  put->add_option("key", key)->required();
  auto* value_opt = put->add_option("value", value, "the value; - reads stdin");
  put->add_option("--value-file", value_file, "read the value from this file (bytes unchanged)");
  auto* get = app.add_subcommand("get", "print the value of KEY");
  add_dir(get);
  add_bind(get);
  get->add_option("key", key)->required();
  auto* del = app.add_subcommand("del", "delete KEY");
  add_dir(del);
  add_bind(del);
  del->add_option("key", key)->required();
  auto* inspect = app.add_subcommand("inspect", "show the store's PM layout and recovery figures");
  add_dir(inspect);

  slip::cli::SimCommandOptions so;
  auto* sim = app.add_subcommand("sim", "run deterministic cluster simulations and check every history");
  sim->add_option("--design", so.design, "replication design")->capture_default_str();
  sim->add_option("--layer", so.layer, "cluster (whole clusters, every design) | replication (one-sided designs' replication layer alone)")
      ->capture_default_str();
  sim->add_option("--seeds", so.seeds, "seed range A..B")->capture_default_str();
  sim->add_option("--seed", so.seed, "one seed (replay)");
  sim->add_flag("--trace", so.trace, "print every event of the run");
  sim->add_option("--persist-delay-ns", so.persist_delay_ns, "one-sided designs: max seeded placement-to-persistence delay")->capture_default_str();
  sim->add_option("--bug", so.bug,
                  "inject a protocol bug: ack-before-replication | no-lease (cluster), ack-early | skip-persist (replication layer)");
  sim->add_flag("--file-class", so.file_class,
                "replication layer: PM in a file (placed bytes persist only when a backup msyncs them on request)");
  sim->add_option("--nodes", so.nodes, "nodes")->capture_default_str();
  sim->add_option("--replication", so.replication, "replicas per shard")->capture_default_str();
  sim->add_option("--shards", so.shards, "shards")->capture_default_str();
  sim->add_option("--clients", so.clients, "clients")->capture_default_str();
  sim->add_option("--keys", so.keys, "distinct keys")->capture_default_str();
  sim->add_option("--ops", so.ops, "operations per client")->capture_default_str();
  sim->add_option("--crashes", so.crashes, "node crashes per run")->capture_default_str();
  sim->add_option("--drop", so.drop, "message loss probability")->capture_default_str();
  sim->add_flag("--cold-start", so.cold_start, "end with a whole-cluster power loss and cold start");
  sim->add_flag("--no-conditional", so.no_conditional,
                "cluster layer: every PUT unconditional (by default one in four is SET NX or XX where the design takes them)");
  sim->add_option("--failover-crashes", so.failover_crashes, "crash a just-promoted primary during its promotion, this many times")
      ->capture_default_str();
  sim->add_option("--workers", so.workers, "request workers per node (each owns a range of shards and takes their writes; GETs go to each in turn)")
      ->capture_default_str();
  sim->add_option("--digest-executors", so.digest_executors,
                  "one-sided designs: executors digesting a node's backup log, each a used segment of its own")
      ->capture_default_str();
  sim->add_option("--commit-interval-us", so.commit_interval_us, "CommitVer records every this many us (0: none, whole-shard promotions)")
      ->capture_default_str();
  sim->add_flag("--crash-in-cold-start", so.crash_in_cold_start, "crash a node while the cold start reconciles shards");
  sim->add_option("--partitions", so.partitions, "network partitions per run (one node cut off)")->capture_default_str();
  sim->add_option("--migrations", so.migrations,
                  "shard moves per run: a random shard's primary or backup moved to a node holding none")
      ->capture_default_str();
  sim->add_flag("--migration-faults", so.migration_faults,
                "during half the moves, crash the source or the target, or restart the configuration manager");
  sim->add_option("--slow", so.slow_nodes, "slow-node episodes per run")->capture_default_str();
  sim->add_option("--perf", so.perf,
                  "a performance run on the cost model instead of a campaign: this-machine, or a paper's testbed "
                  "scenario (--perf list names them)");
  sim->add_option("--model", so.model,
                  "--perf: the cost model's inputs (bench/model/model_calibrate writes them; a scenario reads its "
                  "testbed's bench/model/paper-*.json unless this is given)")
      ->capture_default_str();
  sim->add_option("--only", so.only, "--perf SCENARIO: run only these designs (comma-separated)");
  sim->add_option("--shared-keys", so.shared_keys,
                  "--perf SCENARIO of DINOMO's designs: keys every KVS node thread owns together (selective "
                  "replication): the N hottest, or -1, each drawing more than one thread's share of the requests "
                  "(the default)");
  sim->add_option("--input", so.inputs,
                  "--perf: set one input of the model, NAME=NS or NAME=NS/NS_PER_BYTE (repeatable; a sensitivity "
                  "run, e.g. --input rpc_call=50)");
  sim->add_option("--threads", so.threads, "--perf: client threads")->capture_default_str();
  sim->add_option("--depth", so.depth,
                  "--perf this-machine: > 1, an asynchronous application on the client's executor keeping N "
                  "operations in flight (with --threads 1)")
      ->capture_default_str();
  sim->add_option("--cores", so.cores, "--perf this-machine: the host's cores")->capture_default_str();
  sim->add_option("--workload", so.workload, "--perf: YCSB workload a|b|c|d|f")->capture_default_str();
  sim->add_option("--records", so.records, "--perf: records loaded first")->capture_default_str();
  sim->add_option("--value-size", so.value_size, "--perf: value bytes")->capture_default_str();
  sim->add_option("--measure", so.measure_s, "--perf: virtual seconds measured (a scenario: its own window unless given)")
      ->capture_default_str();
  sim->add_flag("--json", so.json, "--perf: one JSON line");

  slip::cli::ClusterCommandOptions co;
  auto cluster_opts = [&](CLI::App* c) {
    c->add_option("--dir", co.dir, "cluster directory")->required();
    c->add_option("--zookeeper", co.zookeeper, "ZooKeeper host:port for the configuration");
    c->add_option("--lease-ms", co.lease_ms, "node lease")->capture_default_str();
    c->add_option("--secret-file", co.secret_file, "the cluster secret (default: DIR/secret when there is one)");
  };
  auto* server = app.add_subcommand("server", "run one storage node of the cluster in DIR");
  cluster_opts(server);
  server->add_option("--node", co.node, "node id")->required();
  server->add_option("--provider", co.server_provider,
                     "libfabric provider (default: the cluster configuration's; a different one is refused)");
  server->add_option("--pm-mb", co.pm_mb, "PM size when creating the node's store")->capture_default_str();
  server->add_option("--commit-interval-ms", co.commit_interval_ms, "CommitVer records every this many ms (0: none)")
      ->capture_default_str();
  server->add_option("--workers", co.workers, "request worker threads (each owns a range of shards and takes their writes at its own entry; GETs go to each in turn)")
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
  server->add_option("--digest-threads", co.digest_threads,
                     "one-sided designs: threads digesting the backup log (each a used segment of its own)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  server->add_option("--bind", co.bind, "tcp/verbs: the local IP to serve on (peers and clients must reach it)")
      ->capture_default_str();
  auto add_resp = [&](CLI::App* c, const char* port_help) {
    c->add_option("--resp-port", co.resp_port, port_help);
    c->add_option("--resp-password-file", co.resp_password_file,
                  "the passwords the RESP front door's AUTH takes: lines \"PASSWORD\" or \"USER PASSWORD\" "
                  "(default: the cluster secret, see `slip cluster password`)");
  };
  add_resp(server, "serve the Redis protocol on this TCP port (any node serves every key)");
  auto add_http = [&](CLI::App* c, bool base) {
    c->add_option("--metrics-port", co.metrics_port,
                  base ? "node i serves Prometheus text at http://BIND:M+i/metrics" : "serve Prometheus text at /metrics on this port");
    c->add_option("--http-port", co.http_port,
                  base ? "node i serves the web view (and /metrics) on H+i" : "serve the web view (and /metrics) on this port");
  };
  add_http(server, false);
  auto* pool = app.add_subcommand("pool", "run the PM pool of a dinomo cluster in DIR");
  cluster_opts(pool);
  pool->add_option("--pool-mb", co.pool_mb, "pool size when creating it")->capture_default_str();
  pool->add_option("--segment-mb", co.segment_mb, "log segment size when creating it")->capture_default_str();
  pool->add_option("--bind", co.bind, "tcp/verbs: the local IP to serve on (KVS nodes must reach it)")
      ->capture_default_str();
  auto* manager = app.add_subcommand("manager", "run the configuration manager of the cluster in DIR");
  cluster_opts(manager);
  auto* cluster = app.add_subcommand("cluster", "a local cluster of slip processes");
  cluster->require_subcommand(1);
  auto first_config = [&](CLI::App* c) {
    c->add_option("--nodes", co.nodes, "nodes (first start)")->capture_default_str();
    c->add_option("--shards", co.shards, "shards (first start)")->capture_default_str();
    c->add_option("--rf", co.replication, "replication factor (first start)")->capture_default_str();
    c->add_option("--design", co.design,
                  "design (first start): rpc-kv | rowan-kv | rwrite-kv | batch-kv | share-kv | tailwind | erda | "
                  "erda-raw | erda-redo | dinomo (KVS nodes over a PM pool; --rf does not apply) | dinomo-s (the same with "
                  "shortcut-only caches) | dinomo-n (a pool partition per node; handovers copy) | clover (any KVS node serves any key; versions chained in the pool)")
        ->capture_default_str();
    c->add_option("--provider", co.provider, "libfabric provider of every process (first start): tcp | shm | verbs")
        ->capture_default_str();
    c->add_option("--pm", co.pm,
                  "durability class of the nodes' PM (first start): dram (in memory, survives process crashes) | "
                  "dax (real PM on a -o dax mount) | file (msync'd, survives power loss); default: file, or dram "
                  "when DIR is on tmpfs")
        ->check(CLI::IsMember({"dram", "dax", "file"}));
  };
  auto* init = cluster->add_subcommand(
      "init", "write the first configuration of a cluster whose servers are started one by one (slip server)");
  cluster_opts(init);
  first_config(init);
  auto* up = cluster->add_subcommand("up", "start (or cold-start) the cluster in DIR");
  cluster_opts(up);
  first_config(up);
  for (CLI::App* c : {init, up}) {
    c->add_flag("--no-auth", co.no_auth,
                "first start: make no cluster secret (anyone who reaches a node's port is served)");
  }
  up->add_option("--pm-mb", co.pm_mb, "PM per node")->capture_default_str();
  add_resp(up, "node i serves the Redis protocol on port P+i (remembered for later starts)");
  add_http(up, true);
  up->add_option("--commit-interval-ms", co.commit_interval_ms, "CommitVer records every this many ms (0: none)")
      ->capture_default_str();
  up->add_option("--workers", co.workers, "request worker threads per server")
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
  up->add_option("--digest-threads", co.digest_threads, "one-sided designs: backup-log digest threads per server")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  auto* down = cluster->add_subcommand("down", "stop every process of the cluster in DIR");
  down->add_option("--dir", co.dir, "cluster directory")->required();
  auto* status = cluster->add_subcommand("status", "processes and configuration of the cluster in DIR");
  cluster_opts(status);
  auto* addnode = cluster->add_subcommand(
      "add-node", "start a node that joins the running cluster and takes its share of the shards");
  cluster_opts(addnode);
  addnode->add_option("--parallel", co.parallel, "shard moves under way at once (sharded designs)")->capture_default_str();
  addnode->add_option("--workers", co.workers, "request worker threads of the new server")
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
  addnode->add_option("--digest-threads", co.digest_threads, "one-sided designs: backup-log digest threads of the new server")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  auto* addnode_id = addnode->add_option("--node", co.node, "its id (default: one past the highest)");
  addnode->add_option("--pm-mb", co.pm_mb, "PM per node")->capture_default_str();
  add_resp(addnode, "the RESP port base, as for cluster up (default: the one cluster up remembered)");
  add_http(addnode, true);
  auto* password = cluster->add_subcommand(
      "password", "print the password the nodes' RESP front doors take (redis-cli -a \"$(slip cluster password --dir D)\")");
  cluster_opts(password);
  password->add_option("--resp-password-file", co.resp_password_file, "as given to cluster up");
  auto* removenode = cluster->add_subcommand("remove-node", "hand a node's shards to the others and stop it");
  cluster_opts(removenode);
  removenode->add_option("--parallel", co.parallel, "shard moves under way at once (sharded designs)")->capture_default_str();
  removenode->add_option("--node", co.node, "node id")->required();
  auto* share = cluster->add_subcommand(
      "share", "serve a hot key from more nodes through the pool's indirect cell (dinomo selective replication)");
  cluster_opts(share);
  share->add_option("--key", co.key, "the key")->required();
  share->add_option("--owners", co.owners, "node ids serving it besides its shard's owner (e.g. 1,2)")
      ->delimiter(',')
      ->required();
  auto* unshare = cluster->add_subcommand("unshare", "serve a shared key from its shard's owner alone again (dinomo)");
  cluster_opts(unshare);
  unshare->add_option("--key", co.key, "the key")->required();
  auto* autoscale = cluster->add_subcommand(
      "autoscale", "add and remove nodes by load: DINOMO's policy engine (dinomo; one line per epoch)");
  cluster_opts(autoscale);
  autoscale->add_option("--epoch-ms", co.epoch_ms, "observation epoch")->capture_default_str();
  autoscale->add_option("--grace-ms", co.grace_ms, "no action for this long after one")->capture_default_str();
  autoscale->add_option("--over", co.over, "add when every node's worker occupancy is above this (0..1) ...")
      ->capture_default_str();
  autoscale->add_option("--slo-us", co.slo_us, "... and the probe GETs average above this; remove below it")
      ->capture_default_str();
  autoscale->add_option("--under", co.under, "remove the idlest node when its occupancy is below this (0..1)")
      ->capture_default_str();
  autoscale->add_option("--min-nodes", co.min_nodes, "never fewer nodes")->capture_default_str();
  autoscale->add_option("--max-nodes", co.max_nodes, "never more nodes")->capture_default_str();
  autoscale->add_option("--epochs", co.epochs, "stop after this many epochs (0: until a signal)")->capture_default_str();
  autoscale->add_option("--pm-mb", co.pm_mb, "PM per added node")->capture_default_str();
  auto* rebalance = cluster->add_subcommand(
      "rebalance", "move hot shards off overloaded nodes: Rowan's policy, one line per statistics period (sharded designs)");
  cluster_opts(rebalance);
  rebalance->add_option("--period-ms", co.period_ms, "statistics period")->capture_default_str();
  rebalance->add_option("--overloaded", co.overloaded, "a node above mean x (1 + this) is overloaded")
      ->capture_default_str();
  rebalance->add_option("--balanced", co.balanced, "moves go on until every node is within mean x (1 + this)")
      ->capture_default_str();
  rebalance->add_option("--epochs", co.epochs, "stop after this many periods (0: until a signal)")->capture_default_str();
  auto* move = cluster->add_subcommand(
      "move", "move a shard's primary (or, with --from, one of its backups) to another node while it serves");
  cluster_opts(move);
  move->add_option("--shard", co.shard, "the shard")->required();
  move->add_option("--to", co.node, "the node it moves to (one holding no replica of it)")->required();
  move->add_option("--from", co.from, "the node whose replica moves (default: the primary)");
  auto* rotate = cluster->add_subcommand(
      "rotate-secret", "replace the cluster secret with a fresh one, without downtime (every process re-reads it)");
  cluster_opts(rotate);
  auto* killcmd = cluster->add_subcommand("kill", "SIGKILL one node (fault injection)");
  killcmd->add_option("--dir", co.dir, "cluster directory")->required();
  killcmd->add_option("--node", co.node, "node id")->required();

  slip::cli::SoakOptions soak_o;
  auto* soak = app.add_subcommand(
      "soak", "a real cluster under a write-heavy load while processes are SIGKILLed and restarted; then every "
              "acknowledged write and the whole history are checked");
  soak->add_option("--dir", soak_o.dir, "a new directory for the soak's cluster")->required();
  soak->add_option("--design", soak_o.design, "design (as for cluster up)")->capture_default_str();
  soak->add_option("--kills", soak_o.kills, "processes to kill in all")->capture_default_str();
  soak->add_option("--nodes", soak_o.nodes, "nodes")->capture_default_str();
  soak->add_option("--shards", soak_o.shards, "shards")->capture_default_str();
  soak->add_option("--rf", soak_o.replication, "replication factor")->capture_default_str();
  soak->add_option("--provider", soak_o.provider, "tcp | shm")->capture_default_str();
  soak->add_option("--pm", soak_o.pm, "durability class: dram | dax | file (default: as cluster up)");
  soak->add_option("--threads", soak_o.threads, "client threads")->capture_default_str();
  soak->add_option("--keys", soak_o.keys, "keys")->capture_default_str();
  soak->add_option("--value-size", soak_o.value_size, "bytes per value")->capture_default_str();
  soak->add_option("--interval-ms", soak_o.interval_ms, "load between a recovery and the next kill")
      ->capture_default_str();
  soak->add_option("--down-ms", soak_o.down_ms, "a killed process stays down 0.2x..2x this")->capture_default_str();
  soak->add_option("--lease-ms", soak_o.lease_ms, "node lease")->capture_default_str();
  soak->add_option("--seed", soak_o.seed, "what is killed when")->capture_default_str();
  soak->add_flag("--keep", soak_o.keep, "keep the cluster directory after a passing soak");
  soak->add_option("--report", soak_o.report, "append a markdown summary and per-kill table to this file");

  slip::cli::StatsOptions stats_o;
  auto* stats_cmd = app.add_subcommand("stats", "a live table of the cluster: per node and total ops/s, latency, CPU, term, lease");
  stats_cmd->add_option("--dir", stats_o.dir, "cluster directory")->required();
  stats_cmd->add_option("--zookeeper", stats_o.zookeeper, "ZooKeeper connect string, when the configuration is there");
  stats_cmd->add_option("--secret-file", stats_o.secret_file, "the cluster secret (default: DIR/secret when there is one)");
  stats_cmd->add_option("--interval", stats_o.interval_s, "seconds between tables")->capture_default_str()->check(CLI::Range(0.1, 3600.0));
  stats_cmd->add_option("--count", stats_o.count, "print this many tables, then stop (0: until interrupted)")->capture_default_str();
  stats_cmd->add_flag("--plain", stats_o.plain, "do not clear the screen between tables");

  slip::cli::FsckOptions fsck_o;
  auto* fsck = app.add_subcommand(
      "fsck", "check a stopped node's store for damage on the media (on a copy: changes nothing); exit 1 if damaged");
  fsck->add_option("--dir", fsck_o.dir, "cluster directory (with --node)");
  fsck->add_option("--node", fsck_o.node, "node id")->capture_default_str();
  fsck->add_option("--zookeeper", fsck_o.zookeeper, "ZooKeeper connect string, when the configuration is there");
  fsck->add_option("--file", fsck_o.file, "or the PM file itself");

  CLI11_PARSE(app, argc, argv);

  {
    auto level = slip::logging::ParseLevel(log_level);
    if (!level.ok()) return Fail("--log-level", level.status());
    std::string name = "slip";
    if (*server) name = "server-" + std::to_string(co.node);
    if (*manager) name = "manager";
    if (*pool) name = "pool";
    Status s = slip::logging::Configure({.name = name, .file = log_file, .level = *level});
    if (!s.ok()) return Fail("--log-file", s);
    co.log_level = log_level;
  }

  if (*soak) return slip::cli::RunSoak(soak_o);
  if (*fsck) return slip::cli::RunFsck(fsck_o);
  if (*stats_cmd) return slip::cli::RunStats(stats_o);
  if (*server) return slip::cli::RunServer(co);
  if (*manager) return slip::cli::RunManagerCommand(co);
  if (*pool) return slip::cli::RunPool(co);
  if (*init) return slip::cli::ClusterInit(co);
  if (*up) return slip::cli::ClusterUp(co);
  if (*down) return slip::cli::ClusterDown(co);
  if (*status) return slip::cli::ClusterStatus(co);
  if (*killcmd) return slip::cli::ClusterKill(co);
  if (*password) return slip::cli::ClusterPassword(co);
  if (*rotate) return slip::cli::ClusterRotateSecret(co);
  if (*move) return slip::cli::ClusterMove(co);
  if (*rebalance) return slip::cli::ClusterRebalance(co);
  if (*addnode) {
    co.node_given = addnode_id->count() > 0;
    return slip::cli::ClusterAddNode(co);
  }
  if (*removenode) return slip::cli::ClusterRemoveNode(co);
  if (*share) return slip::cli::ClusterShare(co, true);
  if (*unshare) return slip::cli::ClusterShare(co, false);
  if (*autoscale) return slip::cli::ClusterAutoscale(co);

  if (*put) {
    auto v = ReadValue(value, value_file, value_opt->count() > 0);
    if (!v.ok()) return Fail("put", v.status());
    value = std::move(*v);
  }

  // put/get/del against a cluster when DIR holds one.
  if ((*put || *get || *del) && (!zookeeper.empty() || std::filesystem::exists(dir + "/cluster.json"))) {
    slip::ClientOptions copts;
    copts.dir = dir;
    copts.bind_address = bind;
    copts.zookeeper = zookeeper;
    copts.secret_file = secret_file;
    auto client = slip::Client::Open(copts);
    const std::string what = app.get_subcommands()[0]->get_name();
    if (!client.ok()) return Fail(what, client.status());
    if (*put) {
      Status s = (*client)->Put(key, value);
      return s.ok() ? 0 : Fail("put", s);
    }
    if (*get) {
      auto v = (*client)->Get(key);
      if (v.status().Is(slip::Code::kNotFound)) {
        std::fprintf(stderr, "slip get: key not found: %s\n", key.c_str());
        return 1;
      }
      if (!v.ok()) return Fail("get", v.status());
      WriteValue(*v);
      return 0;
    }
    Status s = (*client)->Delete(key);
    if (s.Is(slip::Code::kNotFound)) {
      std::fprintf(stderr, "slip del: key not found: %s\n", key.c_str());
      return 1;
    }
    return s.ok() ? 0 : Fail("del", s);
  }

  if (app.got_subcommand("bench")) return slip::bench::RunBenchCommand(bench_options);
  if (*sim) {
    so.model_given = sim->get_option("--model")->count() > 0;
    so.measure_given = sim->get_option("--measure")->count() > 0;
    so.shared_keys_given = sim->get_option("--shared-keys")->count() > 0;
    for (const char* name : {"--design", "--threads", "--depth", "--cores", "--workload", "--records", "--value-size", "--nodes",
                             "--replication", "--shards", "--workers", "--digest-executors", "--seeds"}) {
      if (sim->get_option(name)->count() > 0) so.this_machine_options_given.emplace_back(name);
    }
    return slip::cli::RunSimCommand(so);
  }

  auto local = OpenLocal(dir, size_mb);
  if (!local.ok()) return Fail(app.get_subcommands()[0]->get_name(), local.status());
  slip::store::Store& st = *local->store;
  if (*put) {
    Status s = st.Put(0, key, value);
    return s.ok() ? 0 : Fail("put", s);
  }
  if (*get) {
    auto v = st.Get(key);
    if (!v.ok()) {
      if (v.status().Is(slip::Code::kNotFound)) {
        std::fprintf(stderr, "slip get: key not found: %s\n", key.c_str());
        return 1;
      }
      return Fail("get", v.status());
    }
    WriteValue(*v);
    return 0;
  }
  if (*del) {
    Status s = st.Delete(0, key);
    if (s.Is(slip::Code::kNotFound)) {
      std::fprintf(stderr, "slip del: key not found: %s\n", key.c_str());
      return 1;
    }
    return s.ok() ? 0 : Fail("del", s);
  }
  if (*inspect) {
    const auto& seg = st.segments();
    const auto& rs = st.recovery_stats();
    auto stats = st.stats();
    uint32_t by_state[4] = {};
    for (uint32_t i = 0; i < seg.num_segments(); ++i) ++by_state[static_cast<int>(seg.meta(i).state)];
    std::printf("segments      %u x %llu B (free %u, using %u, used %u, committed %u)\n",
                seg.num_segments(), static_cast<unsigned long long>(seg.segment_size()), by_state[0],
                by_state[1], by_state[2], by_state[3]);
    std::printf("shards        %u\n", seg.geometry().num_shards);
    std::printf("keys          %llu (including tombstones)\n", static_cast<unsigned long long>(stats.keys));
    std::printf("recovery      %u segments, %llu bytes, %llu blocks, %llu entries, %llu incomplete\n",
                rs.segments_scanned, static_cast<unsigned long long>(rs.bytes_scanned),
                static_cast<unsigned long long>(rs.blocks), static_cast<unsigned long long>(rs.entries),
                static_cast<unsigned long long>(rs.incomplete_entries));
    return 0;
  }
  return 0;
}
