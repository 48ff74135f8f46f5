// See sim/chain_perf.h.
#include "sim/chain_perf.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_config.h"
#include "common/hash.h"
#include "lsm/testing/temp_dir.h"
#include "proto/kv.h"
#include "runtime/cost.h"
#include "runtime/sim_runtime.h"
#include "server/rubble_server.h"
#include "sim/perf_net.h"
#include "sim/perf_stats.h"

namespace slip::sim {
namespace {

namespace fs = std::filesystem;
using runtime::Charge;
using runtime::Cost;
using runtime::Executor;
using runtime::kMicrosecond;
using runtime::kMillisecond;
using runtime::Nanos;

// An answer's bytes beyond its value (KvResponse's fixed fields).
constexpr size_t kHeaderBytes = 16;
// A head that put a write off (Busy) is asked again this much later, for
// up to kGiveUp since the insert was first sent: a head that refuses
// that long has stopped taking writes, and the run fails.
constexpr Nanos kRetry = 200 * kMicrosecond;
constexpr Nanos kGiveUp = 10 * runtime::kSecond;
// The engines are idle once no flush or compaction was charged for this
// long: one compaction of the harness's tables takes a few milliseconds.
constexpr Nanos kQuietFor = 100 * kMillisecond;

// The harness's engines (sim/chain_perf.h, kChainTableBytes): the paper's
// shape scaled to `table`, slots for twice a shard's data (a compaction's
// inputs and outputs are held at once) and a few dozen spare.
server::RubbleShape ChainShape(uint64_t table, uint64_t shard_bytes) {
  server::RubbleShape s;
  s.db.memtable_bytes = table;
  s.db.target_file_bytes = table;
  s.db.l0_compaction_trigger = 4;
  s.db.level1_bytes = 16 * table;
  s.db.level_multiplier = 10;
  s.db.block_cache_bytes = 4 << 20;
  s.db.direct_io = false;  // files in memory (/dev/shm)
  // A table may end a key's versions past its target: the paper's 1/16 of
  // padding, and room for one more large entry; in whole 4 KiB pages.
  s.slots.slot_bytes = (table + table / 16 + (8 << 10) + 4095) / 4096 * 4096;
  s.slots.count = static_cast<uint32_t>(2 * (shard_bytes / table) + 64);
  return s;
}

class ChainCluster {
 public:
  explicit ChainCluster(const ClusterSimOptions& o)
      : o_(o), p_(*o.perf), rt_(runtime::SimRuntimeOptions{.seed = o.seed}), net_(rt_, p_) {}

  ClusterSimResult Run();

  // A node's call to another: a message there, the handler, a message back.
  void Call(uint32_t from, uint32_t to, uint16_t method, std::string payload,
            std::function<void(Result<rpc::PeerResponse>)> done);

 private:
  class Caller final : public rpc::PeerCaller {
   public:
    Caller(ChainCluster& c, uint32_t self) : c_(c), self_(self) {}
    void Call(rpc::Target to, uint16_t method, std::string payload,
              std::function<void(Result<rpc::PeerResponse>)> done) override {
      c_.Call(self_, to.node, method, std::move(payload), std::move(done));
    }

   private:
    ChainCluster& c_;
    const uint32_t self_;
  };
  struct Node {
    Executor* exec = nullptr;
    Executor* jobs = nullptr;
    std::unique_ptr<Caller> calls;
    std::unique_ptr<server::RubbleServer> server;
  };
  struct Client {
    Executor* exec = nullptr;
    std::unique_ptr<ycsb::OpGenerator> gen;
  };

  Status Build();
  // Every node adopts the configuration as it is now.
  void Publish();
  void Synced(cluster::ShardId shard, uint32_t node);
  bool AllSynced() const;
  void LoadLoop(uint32_t c);
  void Insert(uint32_t c, uint64_t record, Nanos start);

  const ClusterSimOptions& o_;
  const PerfOptions& p_;
  runtime::SimRuntime rt_;
  detail::PerfNet net_;
  std::unique_ptr<lsm::testing::TempDir> dir_;  // outlives the nodes' engines
  cluster::ClusterConfig config_;
  std::vector<Client> clients_;
  uint64_t next_record_ = 0, loaded_ = 0, refused_ = 0;
  Nanos last_ack_ = 0;
  std::vector<Nanos> latencies_;
  std::string failure_;
  // Last: the servers go first, while what their callbacks touch is still
  // there (failure_ above).
  std::vector<Node> nodes_;
};

void ChainCluster::Call(uint32_t from, uint32_t to, uint16_t method, std::string payload,
                        std::function<void(Result<rpc::PeerResponse>)> done) {
  if (to >= nodes_.size()) {
    nodes_[from].exec->Post([done = std::move(done), to] {
      done(Status::Unavailable("no node " + std::to_string(to)));
    });
    return;
  }
  auto body = std::make_shared<std::string>(std::move(payload));
  net_.Send(nodes_[to].exec, body->size(), "chain-call", [this, from, to, method, body, done = std::move(done)] {
    nodes_[to].server->Handle(method, proto::AsBytes(*body), [this, from, done](Code c, std::string p) {
      const size_t bytes = p.size();
      auto resp = std::make_shared<rpc::PeerResponse>(rpc::PeerResponse{c, std::move(p)});
      net_.Send(nodes_[from].exec, bytes, "chain-reply", [done, resp] { done(std::move(*resp)); });
    });
  });
}

Status ChainCluster::Build() {
  const std::string& d = o_.chain_design;
  if (!IsChainPerfDesign(d)) return Status::InvalidArgument("not a chain design this harness runs: " + d);
  const ycsb::WorkloadSpec& w = p_.workload;
  if (o_.nodes == 0 || o_.shards == 0 || o_.clients == 0 || w.records == 0) {
    return Status::InvalidArgument("a chain run needs nodes, shards, clients and records to load");
  }
  if (o_.replication < 2 || o_.replication > o_.nodes) {
    return Status::InvalidArgument("a chain of " + std::to_string(o_.replication) + " replicas on " +
                                   std::to_string(o_.nodes) + " nodes");
  }
  if (p_.sync_clients) return Status::InvalidArgument("chain designs run asynchronous clients only");
  const uint64_t table = o_.chain_table_bytes != 0 ? o_.chain_table_bytes : kChainTableBytes;
  const uint64_t entry = (w.sizes.key_bytes == 0 ? 23 : w.sizes.key_bytes) + w.sizes.value_bytes;
  if (table < 4 * entry || entry > server::kMaxEntryBytes) {
    return Status::InvalidArgument("tables of " + std::to_string(table) + " bytes for entries of " +
                                   std::to_string(entry));
  }
  rt_.SetCostModel(p_.costs);

  std::map<cluster::NodeId, std::string> names;
  for (uint32_t n = 0; n < o_.nodes; ++n) names[n] = "n" + std::to_string(n);
  auto placed = cluster::Place(names, o_.shards, o_.replication);
  if (!placed.ok()) return placed.status();
  placed->design = d;
  // As the nodes' first boots leave it (`slip server`): every follower to
  // be seeded by its head, here with nothing.
  for (uint32_t n = 0; n < o_.nodes && placed.ok(); ++n) placed = cluster::Resync(*placed, n);
  if (!placed.ok()) return placed.status();
  config_ = *placed;

  const std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
  dir_ = std::make_unique<lsm::testing::TempDir>(base);
  if (!dir_->ok()) return Status::IoError("no temporary directory under " + base);
  const server::RubbleShape shape = ChainShape(table, w.records / o_.shards * entry);
  nodes_.resize(o_.nodes);
  for (uint32_t n = 0; n < o_.nodes; ++n) {
    Node& node = nodes_[n];
    const uint32_t host = rt_.AddHost(p_.node_cores, p_.park_after, p_.migration_cost);
    node.exec = rt_.CreateExecutor("node" + std::to_string(n));
    node.jobs = rt_.CreateExecutor("node" + std::to_string(n) + "/jobs");
    rt_.PlaceOn(node.exec, host);
    rt_.PlaceOn(node.jobs, host);
    node.calls = std::make_unique<Caller>(*this, n);
    server::RubbleServerEnv env;
    env.self = n;
    env.exec = node.exec;
    env.calls = node.calls.get();
    env.dir = dir_->path() + "/node-" + std::to_string(n);
    env.set_peers = [](const cluster::ClusterConfig&) {};
    env.mark_synced = [this](cluster::ShardId shard, uint32_t follower) { Synced(shard, follower); };
    // No leases here: no node fails.
    env.lease_left = [] { return 3600 * runtime::kSecond; };
    env.fatal = [this, n](Status s) {
      if (failure_.empty()) failure_ = "node " + std::to_string(n) + ": " + s.ToString();
    };
    env.shape = shape;
    env.all_compact = d == "rubble-all-compact";
    env.jobs = node.jobs;
    std::error_code ec;
    fs::create_directories(env.dir, ec);
    node.server = std::make_unique<server::RubbleServer>(std::move(env));
  }
  const std::vector<uint32_t> client_hosts = detail::AddClientHosts(rt_, p_);
  for (uint32_t c = 0; c < o_.clients; ++c) {
    Client& cl = clients_.emplace_back();
    cl.exec = rt_.CreateExecutor("client" + std::to_string(c));
    rt_.PlaceOn(cl.exec, client_hosts[c % client_hosts.size()]);
    cl.gen = std::make_unique<ycsb::OpGenerator>(w, nullptr);
  }
  Publish();
  // The heads link their followers and seed them (empty) first.
  rt_.RunUntil([this] { return AllSynced() || !failure_.empty(); }, rt_.Now() + 10 * runtime::kSecond);
  if (!failure_.empty()) return Status::Aborted(failure_);
  if (!AllSynced()) return Status::Unavailable("the heads did not seed their followers within 10 s");
  return Status::Ok();
}

void ChainCluster::Publish() {
  for (Node& n : nodes_) {
    n.exec->Post([server = n.server.get(), c = config_] { server->Adopt(c); });
  }
}

void ChainCluster::Synced(cluster::ShardId shard, uint32_t node) {
  const auto& sync = config_.shards.at(shard).syncing;
  if (std::find(sync.begin(), sync.end(), node) == sync.end()) return;
  auto next = cluster::MarkSynced(config_, shard, node);
  if (!next.ok()) {
    if (failure_.empty()) failure_ = "MarkSynced: " + next.status().ToString();
    return;
  }
  config_ = *next;
  Publish();
}

bool ChainCluster::AllSynced() const {
  for (const auto& s : config_.shards) {
    if (!s.syncing.empty()) return false;
  }
  return true;
}

void ChainCluster::LoadLoop(uint32_t c) {
  if (next_record_ >= p_.workload.records || !failure_.empty()) return;
  Insert(c, next_record_++, clients_[c].exec->Now());
}

void ChainCluster::Insert(uint32_t c, uint64_t record, Nanos start) {
  Client& cl = clients_[c];
  std::string key = cl.gen->Key(record);
  std::string value = cl.gen->Value(record, 0);
  Charge(Cost::kClientOp, key.size() + value.size());
  const cluster::ShardId shard = config_.ShardOf(HashKey(key));
  const uint32_t head = config_.shards[shard].primary;
  auto payload =
      std::make_shared<std::string>(proto::Encode(proto::KvRequest{config_.term, shard, key, std::move(value)}));
  net_.Send(nodes_[head].exec, payload->size(), "insert", [this, c, record, start, head, payload] {
    Charge(Cost::kRequest, payload->size());
    auto answer = [this, c, record, start](Code code, std::string) {
      net_.Send(clients_[c].exec, kHeaderBytes, "inserted", [this, c, record, start, code] {
        Executor* x = clients_[c].exec;
        if (code == Code::kOk) {
          ++loaded_;
          last_ack_ = x->Now();
          latencies_.push_back(x->Now() - start);
          return LoadLoop(c);
        }
        if (code == Code::kBusy && x->Now() - start < kGiveUp) {
          ++refused_;
          x->After(kRetry, [this, c, record, start] { Insert(c, record, start); });
          return;
        }
        if (!failure_.empty()) return;
        failure_ = code == Code::kBusy ? "a head refused an insert (Busy) for 10 s"
                                       : "an insert was answered " + std::string(CodeName(code));
      });
    };
    nodes_[head].server->Handle(static_cast<uint16_t>(proto::Method::kPut), proto::AsBytes(*payload),
                                std::move(answer));
  });
}

ClusterSimResult ChainCluster::Run() {
  ClusterSimResult res;
  auto fail = [&res](std::string why) {
    res.ok = false;
    res.failure = std::move(why);
    return res;
  };
  if (Status s = Build(); !s.ok()) return fail(s.ToString());
  const uint64_t records = p_.workload.records;

  // Every node executor's CPU, and the inputs' totals, from the load's start.
  std::vector<Executor*> measured;
  for (const Node& n : nodes_) {
    measured.push_back(n.exec);
    measured.push_back(n.jobs);
  }
  for (const Client& cl : clients_) measured.push_back(cl.exec);
  const Nanos t0 = rt_.Now();
  std::vector<Nanos> cpu0;
  for (Executor* x : measured) cpu0.push_back(rt_.CpuBy(x, t0));
  const std::array<Nanos, runtime::kCostCount> totals0 = rt_.CostTotals();

  for (uint32_t c = 0; c < o_.clients; ++c) {
    for (uint32_t d = 0; d < std::max<uint32_t>(p_.load_depth, 1); ++d) {
      clients_[c].exec->Post([this, c] { LoadLoop(c); });
    }
  }
  rt_.RunUntil([&] { return loaded_ == records || !failure_.empty(); }, rt_.Now() + 3600 * runtime::kSecond);
  if (!failure_.empty()) return fail(failure_);
  if (loaded_ != records) {
    return fail("load: " + std::to_string(loaded_) + " of " + std::to_string(records) + " records in an hour");
  }
  // The flushes and compactions the load made due, to their end: the
  // paper's CPU counts them whenever they run.
  auto background = [this] {
    const auto& t = rt_.CostTotals();
    return t[static_cast<size_t>(Cost::kFlush)] + t[static_cast<size_t>(Cost::kCompaction)];
  };
  bool quiet = false;
  for (int i = 0; i < 600 && !quiet; ++i) {
    const Nanos before = background();
    rt_.RunUntil(rt_.Now() + kQuietFor);
    if (!failure_.empty()) return fail(failure_);
    quiet = background() == before;
  }
  if (!quiet) return fail("the engines still flushed or compacted a minute after the load");
  const Nanos t1 = rt_.Now();

  PerfResult& r = res.perf;
  detail::SetLatencies(r, {}, std::move(latencies_), 0, std::max<Nanos>(last_ack_ - t0, 1));
  const auto per_op = [records](auto n) { return static_cast<double>(n) / static_cast<double>(records); };
  const auto& totals = rt_.CostTotals();
  for (size_t i = 0; i < runtime::kCostCount; ++i) r.cpu_per_op[i] = per_op(totals[i] - totals0[i]);
  Nanos node_cpu = 0, requests = 0, jobs = 0, clients = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    const Nanos used = rt_.CpuBy(measured[i], t1) - cpu0[i];
    const bool node = i < 2 * nodes_.size();
    if (node) {
      node_cpu += used;
      (i % 2 == 0 ? requests : jobs) += used;
    } else {
      clients += used;
    }
    const double share = static_cast<double>(used) / static_cast<double>(t1 - t0);
    if (share > r.busiest_share) {
      r.busiest_share = share;
      r.busiest = std::string(measured[i]->name());
    }
  }
  r.node_cpu = per_op(node_cpu);
  r.worker_cpu = per_op(requests);
  r.jobs_cpu = per_op(jobs);
  r.client_cpu = per_op(clients);
  r.refused = per_op(refused_);
  res.trace_hash = rt_.TraceHash();
  res.virtual_ns = rt_.Now();
  res.operations = records;
  return res;
}

}  // namespace

bool IsChainPerfDesign(std::string_view design) { return design == "rubble" || design == "rubble-all-compact"; }

ClusterSimResult RunChainPerf(const ClusterSimOptions& options) {
  if (!options.perf) {
    ClusterSimResult res;
    res.ok = false;
    res.failure = "chain designs run here in performance mode only (their fault campaigns: rubble_cluster_sim_test)";
    return res;
  }
  ChainCluster cluster(options);
  return cluster.Run();
}

}  // namespace slip::sim
