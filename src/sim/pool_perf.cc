#include "sim/pool_perf.h"

#include <algorithm>
#include <deque>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/hash.h"
#include "dinomo/clover.h"
#include "dinomo/kvs_node.h"
#include "dinomo/testing/sim_pool.h"
#include "proto/kv.h"
#include "runtime/cost.h"
#include "runtime/sim_runtime.h"
#include "sim/perf_net.h"
#include "sim/perf_stats.h"

namespace slip::sim {
namespace {

using runtime::Charge;
using runtime::Cost;
using runtime::Executor;
using runtime::kMillisecond;
using runtime::Nanos;

constexpr uint16_t kEventMessage = detail::PerfNet::kEventMessage;
// A request's or an answer's bytes beyond its key and value (method,
// lengths, status): KvRequest's and KvResponse's fixed fields.
constexpr size_t kHeaderBytes = 16;
// Each KVS node caches this share of the loaded data over its threads: the
// paper's 1 GB per node against 32 GB loaded (16 nodes cache half of it).
constexpr double kCacheShare = 1.0 / 32;
// Pool segments: the paper's are 8 MB, 0.8% of a node's share of the data
// at 16 nodes, and a node answers reads of its unmerged segments from DRAM.
// The records here are fewer: segments this small keep that share small.
constexpr uint64_t kSegmentBytes = 64 << 10;
constexpr Nanos kCloverGcEvery = 500 * runtime::kMicrosecond;
constexpr uint32_t kMaxSharedKeys = 64;
// The pool is one anonymous region in this process.
constexpr uint64_t kMaxRegionBytes = uint64_t{16} << 30;

// A KVS node thread's calls to the pool (POOL_*, CLOVER_INSERT), served by
// one of the pool's threads.
class PoolCaller final : public rpc::PeerCaller {
 public:
  PoolCaller(detail::PerfNet& net, Executor* self, Executor* pool_thread, dinomo::testing::SimPool& pool)
      : net_(net), self_(self), pool_thread_(pool_thread), pool_(pool) {}

  void Call(rpc::Target, uint16_t method, std::string payload,
            std::function<void(Result<rpc::PeerResponse>)> done) override {
    auto body = std::make_shared<std::string>(std::move(payload));
    net_.Send(pool_thread_, body->size(), "pool-call", [this, method, body, done = std::move(done)]() mutable {
      pool_.Handle(method, proto::AsBytes(*body), [this, done](Code c, std::string p) {
        const size_t bytes = p.size();
        auto resp = std::make_shared<rpc::PeerResponse>(rpc::PeerResponse{c, std::move(p)});
        net_.Send(self_, bytes, "pool-reply", [done, resp] { done(std::move(*resp)); });
      });
    });
  }

 private:
  detail::PerfNet& net_;
  Executor* const self_;
  Executor* const pool_thread_;
  dinomo::testing::SimPool& pool_;
};

// One thread of a KVS node: a node of its own to the pool. Members go in
// reverse: the endpoint first (operations in flight use the node's
// buffers), then the node, then its caller.
struct Thread {
  Executor* exec = nullptr;
  std::unique_ptr<PoolCaller> calls;
  std::unique_ptr<dinomo::KvsNode> kvs;
  std::unique_ptr<dinomo::CloverNode> clover;
  std::unique_ptr<fabric::Endpoint> ep;

  void Get(std::string key, std::function<void(Result<std::string>)> done) {
    if (kvs) return kvs->Get(std::move(key), std::move(done));
    clover->Get(std::move(key), std::move(done));
  }
  void Put(std::string key, std::string value, std::function<void(Status)> done) {
    if (kvs) return kvs->Put(std::move(key), std::move(value), std::move(done));
    clover->Put(std::move(key), std::move(value), std::move(done));
  }
  uint64_t round_trips() const {
    if (kvs) {
      const dinomo::KvsNodeStats& s = kvs->stats();
      return s.get_round_trips + s.batches + s.swaps;
    }
    const dinomo::CloverNodeStats& s = clover->stats();
    return s.get_round_trips + s.write_round_trips;
  }
};

class PoolCluster {
 public:
  explicit PoolCluster(const ClusterSimOptions& o)
      : o_(o), p_(*o.perf), rt_(runtime::SimRuntimeOptions{.seed = o.seed}), net_(rt_, p_) {}

  ClusterSimResult Run();

 private:
  Status Build();
  // The keys every thread owns together (ClusterSimOptions::pool_shared_keys).
  std::set<std::string> HotKeys() const;
  Thread& Route(const std::string& key, Random& rng);
  // A client's request to the thread serving `key`, and its answer.
  void Request(uint32_t c, bool read, std::string key, std::string value, std::function<void(bool ok)> done);
  void LoadLoop(uint32_t c);
  void Loop(uint32_t c);
  void CloverGc();

  struct Client {
    Executor* exec = nullptr;
    std::unique_ptr<ycsb::OpGenerator> gen;
    uint64_t updates = 0;
  };

  const ClusterSimOptions& o_;
  const PerfOptions& p_;
  bool clover_ = false;
  runtime::SimRuntime rt_;
  detail::PerfNet net_;
  std::unique_ptr<dinomo::testing::SimPool> pool_;
  std::vector<Executor*> pool_threads_;  // [0]: the pool's own (it polls its endpoint)
  std::deque<Thread> threads_;           // node-major
  std::set<std::string> shared_;         // routed to any thread
  std::vector<Client> clients_;
  std::unique_ptr<ycsb::InsertCounter> inserts_;
  uint64_t loaded_ = 0, load_failed_ = 0;
  std::string first_load_error_;
  Nanos window_start_ = 0, window_end_ = 0;
  std::vector<Nanos> read_latencies_, write_latencies_;
  uint64_t window_errors_ = 0;
  bool stop_ = false;
  std::string failure_;  // what stopped the run early
};

Status PoolCluster::Build() {
  const std::string& d = o_.pool_design;
  if (!IsPoolPerfDesign(d)) return Status::InvalidArgument("not a pool design this harness runs: " + d);
  clover_ = d == "clover";
  const ycsb::WorkloadSpec& w = p_.workload;
  if (w.scan > 0 || w.rmw > 0) return Status::InvalidArgument("pool designs run reads, updates and inserts only");
  if (p_.sync_clients) return Status::InvalidArgument("pool designs run asynchronous clients only");
  if (o_.nodes == 0 || o_.workers == 0 || o_.clients == 0 || p_.pool_cores == 0) {
    return Status::InvalidArgument("a pool cluster needs nodes, threads per node, clients and pool cores");
  }
  if (w.records > (uint64_t{1} << 30)) return Status::InvalidArgument("a pool cluster takes up to 2^30 records");
  if (o_.pool_shared_keys > static_cast<int>(kMaxSharedKeys)) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxSharedKeys) + " shared keys");
  }
  if (o_.pool_shared_keys > 0 && w.distribution != ycsb::Distribution::kZipfian &&
      w.distribution != ycsb::Distribution::kZipfianRanked) {
    return Status::InvalidArgument("shared keys are the hottest of a zipfian workload; this one is " +
                                   std::string(ycsb::DistributionName(w.distribution)));
  }
  rt_.SetCostModel(p_.costs);
  const uint32_t threads = o_.nodes * o_.workers;
  const uint64_t key_bytes = w.sizes.key_bytes == 0 ? 23 : w.sizes.key_bytes;
  const uint64_t entry_bytes = key_bytes + w.sizes.value_bytes + 64;
  const uint64_t data = w.records * entry_bytes;
  dinomo::PoolOptions po;
  po.segment_bytes = kSegmentBytes;
  po.num_buckets = 1u << 12;
  while (po.num_buckets < w.records / 2) po.num_buckets <<= 1;
  // Room for the load, every write the run could make at a few tens of
  // millions of operations a second (Clover reclaims no version), and two
  // open segments per thread.
  const Nanos run = p_.warmup + p_.measure;
  const uint64_t writes = static_cast<uint64_t>(static_cast<double>(run) * 1e-9 * 40e6 * (1 - w.read)) + 1;
  const uint64_t region = 2 * data + writes * (entry_bytes + 64) + 4ull * threads * kSegmentBytes + (64 << 20);
  if (region > kMaxRegionBytes) {
    return Status::InvalidArgument("the pool would need " + std::to_string(region >> 20) +
                                   " MiB for these records and this window (at most " +
                                   std::to_string(kMaxRegionBytes >> 20) + "): fewer records or a shorter window");
  }
  fabric::SimFabricOptions fo;
  fo.latency = p_.one_way;
  fo.bandwidth = p_.bandwidth;
  fo.nic_service = p_.nic_service;
  fo.software_target = p_.software_nic;
  pool_ = std::make_unique<dinomo::testing::SimPool>(rt_, region, po, fo);

  const uint32_t pool_host = rt_.AddHost(p_.pool_cores, p_.park_after, p_.migration_cost);
  pool_threads_.push_back(pool_->pool_exec());
  for (uint32_t i = 1; i < p_.pool_cores; ++i) pool_threads_.push_back(rt_.CreateExecutor("pool/t" + std::to_string(i)));
  for (Executor* x : pool_threads_) rt_.PlaceOn(x, pool_host);

  // Shared before anything is written: a key's first value goes into its
  // cell (as dinomo_rts_bench shares them).
  if (!clover_) shared_ = HotKeys();
  for (const std::string& k : shared_) SLIP_RETURN_IF_ERROR(pool_->pool().Share(k).status());
  const uint64_t cache = static_cast<uint64_t>(static_cast<double>(data) * kCacheShare / o_.workers);
  int started = 0, failed = 0;
  for (uint32_t n = 0; n < o_.nodes; ++n) {
    const uint32_t host = rt_.AddHost(p_.node_cores, p_.park_after, p_.migration_cost);
    for (uint32_t t = 0; t < o_.workers; ++t) {
      Thread& th = threads_.emplace_back();
      const uint32_t id = n * o_.workers + t + 1;  // the pool's node id, and the fabric address
      th.exec = rt_.CreateExecutor("kn" + std::to_string(n) + "/t" + std::to_string(t));
      rt_.PlaceOn(th.exec, host);
      SLIP_ASSIGN_OR_RETURN(th.ep, pool_->fabric().CreateEndpoint(id, th.exec, {}));
      th.calls = std::make_unique<PoolCaller>(net_, th.exec, pool_threads_[id % pool_threads_.size()], *pool_);
      auto ready = [&started, &failed](Status s) { (s.ok() ? started : failed)++; };
      if (clover_) {
        th.clover = std::make_unique<dinomo::CloverNode>(
            th.exec, th.ep.get(), th.calls.get(), dinomo::testing::SimPool::kPoolId,
            dinomo::CloverNodeOptions{.node = id, .epoch = 1, .cache_bytes = cache, .limits = {}});
        dinomo::CloverNode* cn = th.clover.get();
        th.exec->AddPoller([cn] { return cn->Poll(); });
        th.exec->Post([cn, ready] { cn->Start(ready); });
      } else {
        dinomo::KvsNodeOptions ko;
        ko.node = id;
        ko.cache.capacity_bytes = cache;
        ko.shared = shared_;
        if (o_.pool_design == "dinomo-s") {
          ko.cache.policy = dinomo::CacheOptions::Policy::kStatic;
          ko.cache.value_share = 0;
        }
        th.kvs = std::make_unique<dinomo::KvsNode>(th.exec, th.ep.get(), th.calls.get(),
                                                   dinomo::testing::SimPool::kPoolId, ko);
        dinomo::KvsNode* kn = th.kvs.get();
        th.exec->AddPoller([kn] { return kn->Poll(); });
        th.exec->Post([kn, ready] { kn->Start(ready); });
      }
    }
  }
  const std::vector<uint32_t> client_hosts = detail::AddClientHosts(rt_, p_);
  for (uint32_t c = 0; c < o_.clients; ++c) {
    Client& cl = clients_.emplace_back();
    cl.exec = rt_.CreateExecutor("client" + std::to_string(c));
    rt_.PlaceOn(cl.exec, client_hosts[c % client_hosts.size()]);
  }
  rt_.RunUntil([&] { return started + failed == static_cast<int>(threads); }, rt_.Now() + runtime::kSecond);
  if (started != static_cast<int>(threads)) {
    return Status::Unavailable(std::to_string(threads - started) + " of " + std::to_string(threads) +
                               " KVS node threads did not start");
  }
  return Status::Ok();
}

std::set<std::string> PoolCluster::HotKeys() const {
  const ycsb::WorkloadSpec& w = p_.workload;
  std::set<std::string> keys;
  const bool scrambled = w.distribution == ycsb::Distribution::kZipfian;
  if (o_.pool_shared_keys == 0 || w.records == 0 ||
      (!scrambled && w.distribution != ycsb::Distribution::kZipfianRanked)) {
    return keys;
  }
  // Rank r draws 1 / (zeta (r + 1)^theta) of the requests: of YCSB's 10^10
  // scrambled items, the record Fnv64(r) % records (bench/workload/ycsb.h);
  // ranked, the record r of that many.
  double zeta = 0;
  if (scrambled) {
    zeta = ycsb::ScrambledZipfian::ZetaOfItemCount(w.theta);
  } else {
    for (uint64_t i = 1; i <= w.records; ++i) zeta += 1.0 / std::pow(static_cast<double>(i), w.theta);
  }
  const double fair = 1.0 / (o_.nodes * o_.workers);
  ycsb::OpGenerator names(w, nullptr);
  for (uint64_t r = 0; r < w.records && keys.size() < kMaxSharedKeys; ++r) {
    const bool hot = o_.pool_shared_keys < 0 ? 1.0 / (zeta * std::pow(static_cast<double>(r + 1), w.theta)) > fair
                                             : r < static_cast<uint64_t>(o_.pool_shared_keys);
    if (!hot) break;
    keys.insert(names.Key(scrambled ? ycsb::ScrambledZipfian::Fnv64(r) % w.records : r));
  }
  return keys;
}

Thread& PoolCluster::Route(const std::string& key, Random& rng) {
  if (clover_ || shared_.contains(key)) return threads_[rng.Uniform(threads_.size())];
  const uint64_t h = HashKey(key);
  const uint64_t node = h % o_.nodes, thread = (h / o_.nodes) % o_.workers;
  return threads_[node * o_.workers + thread];
}

void PoolCluster::Request(uint32_t c, bool read, std::string key, std::string value,
                          std::function<void(bool)> done) {
  Client& cl = clients_[c];
  Charge(Cost::kClientOp, key.size() + value.size());
  Thread& t = Route(key, cl.exec->Rng());
  const size_t bytes = kHeaderBytes + key.size() + value.size();
  net_.Send(t.exec, bytes, "request",
            [this, &t, c, read, bytes, key = std::move(key), value = std::move(value), done = std::move(done)]() mutable {
              Charge(Cost::kRequest, bytes);
              auto answer = [this, c, done = std::move(done)](bool ok, size_t value_bytes) {
                net_.Send(clients_[c].exec, kHeaderBytes + value_bytes, "answer", [done, ok] { done(ok); });
              };
              if (read) {
                // Every record read was loaded first, unless the workload
                // inserts (its reads may reach a record being inserted).
                t.Get(std::move(key), [this, answer](Result<std::string> v) {
                  const bool absent = v.status().Is(Code::kNotFound) && p_.workload.insert > 0;
                  answer(v.ok() || absent, v.ok() ? v->size() : 0);
                });
              } else {
                t.Put(std::move(key), std::move(value), [answer](Status s) { answer(s.ok(), 0); });
              }
            });
}

void PoolCluster::LoadLoop(uint32_t c) {
  const ycsb::WorkloadSpec& w = p_.workload;
  if (inserts_->Count() >= w.records) return;
  const uint64_t r = inserts_->Take();
  if (r >= w.records) return;
  Client& cl = clients_[c];
  Request(c, false, cl.gen->Key(r), cl.gen->Value(r, 0), [this, c](bool ok) {
    if (ok) {
      ++loaded_;
    } else if (load_failed_++ == 0) {
      first_load_error_ = "a PUT failed";
    }
    LoadLoop(c);
  });
}

// An operation counts where it ends: completions in the window are the
// throughput, whenever they started. (sim/perf.cc counts those that start
// and end in it, which drops the slowest when latencies near the window —
// Clover's reach milliseconds here.)
void PoolCluster::Loop(uint32_t c) {
  if (stop_) return;
  Client& cl = clients_[c];
  const ycsb::Op op = cl.gen->Next(cl.exec->Rng());
  const Nanos start = cl.exec->Now();
  const bool read = op.type == ycsb::OpType::kRead;
  std::string value = read ? std::string() : cl.gen->Value(op.record, ++cl.updates);
  Request(c, read, cl.gen->Key(op.record), std::move(value), [this, c, start, read](bool ok) {
    Executor* x = clients_[c].exec;
    const Nanos end = x->Now();
    if (end >= window_start_ && end <= window_end_) {
      if (ok) {
        (read ? read_latencies_ : write_latencies_).push_back(end - start);
      } else {
        ++window_errors_;
      }
    }
    x->Post([this, c] { Loop(c); });
  });
}

// Clover's metadata server moves each key's index pointer to its newest
// version, so misses do not walk the whole history (dinomo/clover.h). It is
// a thread of a machine of its own in the paper: free here.
void PoolCluster::CloverGc() {
  if (stop_ || !failure_.empty()) return;
  if (auto moved = dinomo::AdvanceChains(pool_->pool(), pool_->region()); !moved.ok()) {
    failure_ = "Clover's GC pass: " + moved.status().ToString();
    return;
  }
  pool_threads_[0]->After(kCloverGcEvery, [this] { CloverGc(); });
}

ClusterSimResult PoolCluster::Run() {
  ClusterSimResult res;
  auto fail = [&res](std::string why) {
    res.ok = false;
    res.failure = std::move(why);
    return res;
  };
  if (Status s = Build(); !s.ok()) return fail(s.ToString());
  const ycsb::WorkloadSpec& w = p_.workload;
  inserts_ = std::make_unique<ycsb::InsertCounter>(0);
  for (Client& cl : clients_) cl.gen = std::make_unique<ycsb::OpGenerator>(w, inserts_.get());
  for (uint32_t c = 0; c < o_.clients; ++c) {
    for (uint32_t d = 0; d < std::max<uint32_t>(p_.load_depth, 1); ++d) {
      clients_[c].exec->Post([this, c] { LoadLoop(c); });
    }
  }
  rt_.RunUntil([&] { return loaded_ + load_failed_ >= w.records; }, rt_.Now() + 600 * runtime::kSecond);
  if (loaded_ != w.records) {
    return fail("load: " + std::to_string(loaded_) + " of " + std::to_string(w.records) + " records written (" +
                std::to_string(load_failed_) + " failed" +
                (first_load_error_.empty() ? "" : ", the first: " + first_load_error_) + ")");
  }
  // Inserts (workload d) continue after the loaded records.
  inserts_ = std::make_unique<ycsb::InsertCounter>(w.records);
  for (Client& cl : clients_) cl.gen = std::make_unique<ycsb::OpGenerator>(w, inserts_.get());
  if (clover_) pool_threads_[0]->Post([this] { CloverGc(); });

  window_start_ = rt_.Now() + p_.warmup;
  window_end_ = window_start_ + p_.measure;
  // Every placed executor's CPU at the window's start, and the counters.
  std::vector<Executor*> placed;
  for (const Client& c : clients_) placed.push_back(c.exec);
  for (const Thread& t : threads_) placed.push_back(t.exec);
  placed.insert(placed.end(), pool_threads_.begin(), pool_threads_.end());
  std::vector<Nanos> cpu0(placed.size()), spun0(placed.size());
  std::array<Nanos, runtime::kCostCount> totals0{};
  std::vector<Nanos> busy0;
  uint64_t round_trips0 = 0;
  auto round_trips = [this] {
    uint64_t n = 0;
    for (const Thread& t : threads_) n += t.round_trips();
    return n;
  };
  rt_.Schedule(window_start_, nullptr, kEventMessage + 1, "window", 0, [&] {
    for (size_t i = 0; i < placed.size(); ++i) {
      cpu0[i] = rt_.CpuBy(placed[i], window_start_);
      spun0[i] = rt_.SpunBy(placed[i]);
    }
    totals0 = rt_.CostTotals();
    for (uint32_t h = 0; h < rt_.host_count(); ++h) busy0.push_back(rt_.HostBusy(h));
    round_trips0 = round_trips();
  });
  const uint32_t per_client = std::max<uint32_t>(p_.threads_per_client, 1);
  for (uint32_t c = 0; c < o_.clients; ++c) {
    for (uint32_t t = 0; t < per_client; ++t) clients_[c].exec->Post([this, c] { Loop(c); });
  }
  rt_.RunUntil(window_end_);
  stop_ = true;
  if (!failure_.empty()) return fail(failure_);

  PerfResult& r = res.perf;
  detail::SetLatencies(r, std::move(read_latencies_), std::move(write_latencies_), window_errors_, p_.measure);
  auto per_op = [&r](auto n) { return r.ops == 0 ? 0.0 : static_cast<double>(n) / static_cast<double>(r.ops); };
  const auto& totals = rt_.CostTotals();
  for (size_t i = 0; i < runtime::kCostCount; ++i) r.cpu_per_op[i] = per_op(totals[i] - totals0[i]);
  Nanos clients = 0, workers = 0, pool = 0;
  for (size_t i = 0; i < placed.size(); ++i) {
    const Nanos used = rt_.CpuBy(placed[i], window_end_) - cpu0[i];  // a turn across an edge split at it
    // By role with the spin, as a real thread's clock counts it.
    (i < clients_.size() ? clients : i < clients_.size() + threads_.size() ? workers : pool) +=
        used + rt_.SpunBy(placed[i]) - spun0[i];
    const double share = static_cast<double>(used) / static_cast<double>(p_.measure);
    if (share > r.busiest_share) {
      r.busiest_share = share;
      r.busiest = std::string(placed[i]->name());
    }
  }
  r.client_cpu = per_op(clients);
  r.worker_cpu = per_op(workers);
  r.pool_cpu = per_op(pool);
  r.pool_round_trips = per_op(round_trips() - round_trips0);
  for (uint32_t h = 0; h < busy0.size(); ++h) {
    r.host_busy.push_back(static_cast<double>(rt_.HostBusy(h) - busy0[h]) /
                          (static_cast<double>(p_.measure) * rt_.HostCores(h)));
  }
  res.trace_hash = rt_.TraceHash();
  res.virtual_ns = rt_.Now();
  res.operations = r.ops;
  return res;
}

}  // namespace

bool IsPoolPerfDesign(std::string_view design) {
  return design == "dinomo" || design == "dinomo-s" || design == "clover";
}

ClusterSimResult RunPoolPerf(const ClusterSimOptions& options) {
  if (!options.perf) {
    ClusterSimResult res;
    res.ok = false;
    res.failure = "pool designs run in performance mode only (their fault campaigns: dinomo_cluster_sim_test)";
    return res;
  }
  PoolCluster cluster(options);
  return cluster.Run();
}

}  // namespace slip::sim
