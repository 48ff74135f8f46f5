// Performance runs (docs/model.md): the same cluster as a fault campaign,
// with the cost model on — executors placed on machines, handlers charged
// the named costs of what they do — and a YCSB workload in place of the
// fault schedule. Virtual time then says how fast the real code would run
// on the machines the model describes.
#include <algorithm>

#include "sim/perf_net.h"
#include "sim/perf_stats.h"
#include "sim/world.h"

namespace slip::sim::detail {

void World::PlaceExecutors() {
  const PerfOptions& p = *o_.perf;
  auto node_execs = [](const Node& n) {
    std::vector<runtime::Executor*> xs = n.workers;  // [0] is n.exec
    if (n.nic != nullptr) xs.push_back(n.nic);
    xs.insert(xs.end(), n.digests.begin(), n.digests.end());
    return xs;
  };
  if (p.shared_host) {
    const uint32_t h = rt_.AddHost(p.host_cores, p.park_after, p.migration_cost);
    for (const auto& n : nodes_) {
      for (runtime::Executor* x : node_execs(*n)) rt_.PlaceOn(x, h);
    }
    for (const Client& c : clients_) rt_.PlaceOn(c.exec, h);
    // Application threads block in their calls at once (a future's wait),
    // no spin, on no endpoint.
    for (runtime::Executor* a : apps_) rt_.PlaceOn(a, h, 0, runtime::SimRuntime::Wait::kLocal);
    return;
  }
  for (const auto& n : nodes_) {
    const uint32_t h = rt_.AddHost(p.node_cores, p.park_after, p.migration_cost);
    for (runtime::Executor* x : node_execs(*n)) rt_.PlaceOn(x, h);
  }
  const std::vector<uint32_t> client_hosts = detail::AddClientHosts(rt_, p);
  const size_t hosts = client_hosts.size();
  for (size_t c = 0; c < clients_.size(); ++c) rt_.PlaceOn(clients_[c].exec, client_hosts[c % hosts]);
  const size_t per_client = clients_.empty() ? 0 : apps_.size() / clients_.size();
  for (size_t a = 0; a < apps_.size(); ++a) {
    rt_.PlaceOn(apps_[a], client_hosts[(a / per_client) % hosts], 0, runtime::SimRuntime::Wait::kLocal);
  }
  // The configuration manager is off the data path: not placed, free.
}

// Loads the next unloaded record; each client keeps load_depth of these
// chains going.
void World::LoadLoop(uint32_t c) {
  const auto& w = o_.perf->workload;
  if (inserts_->Count() >= w.records) return;
  const uint64_t r = inserts_->Take();
  if (r >= w.records) return;
  Client& cl = clients_[c];
  cl.core->Put(cl.gen->Key(r), cl.gen->Value(r, 0), [this, c](Result<uint64_t> v) {
    if (v.ok()) {
      ++loaded_;
    } else {
      if (load_failed_++ == 0) first_load_error_ = v.status().ToString();
    }
    clients_[c].exec->Post([this, c] { LoadLoop(c); });
  });
}

// One closed-loop client thread: an operation, and the next when it ends.
void World::PerfLoop(uint32_t c, runtime::Executor* app, Nanos issued, std::optional<ycsb::Op> chosen) {
  if (stop_) return;
  Client& cl = clients_[c];
  if (app != nullptr && !cl.exec->IsCurrent()) {
    // An application thread chooses its operation (and makes an update's
    // value) and hands the call to the client's executor (its eventfd: a
    // wake-up if the executor parked meanwhile); the latency counts from
    // here, as slip bench's does.
    const Nanos now = app->Now();
    // The client's one generator and its stream, as before application
    // threads chose operations: a run's operations stay those of its seed.
    const ycsb::Op op = cl.gen->Next(cl.exec->Rng());
    const bool writes = op.type == ycsb::OpType::kUpdate || op.type == ycsb::OpType::kInsert ||
                        op.type == ycsb::OpType::kReadModifyWrite;
    // The value's size, not its content (a named size distribution sizes each record its own way).
    runtime::Charge(runtime::Cost::kAppOp, writes ? cl.gen->Value(op.record, 0).size() : 0);
    rt_.ChargeWake(cl.exec, runtime::SimRuntime::Wake::kLocal);
    return cl.exec->Post([this, c, app, now, op] { PerfLoop(c, app, now, op); });
  }
  const ycsb::Op op = chosen ? *chosen : cl.gen->Next(cl.exec->Rng());
  const Nanos start = issued >= 0 ? issued : cl.exec->Now();
  const bool read = op.type == ycsb::OpType::kRead;
  auto finish = [this, c, app, start, read](bool ok) {
    // The operation ends where its caller sees the answer.
    auto record = [this, start, read, ok](Nanos end) {
      if (start >= window_start_ && end <= window_end_) {
        if (ok) {
          (read ? read_latencies_ : write_latencies_).push_back(end - start);
        } else {
          ++window_errors_;
        }
      }
    };
    runtime::Executor* x = clients_[c].exec;
    if (app == nullptr) {
      record(x->Now());
      x->Post([this, c] { PerfLoop(c, nullptr); });
      return;
    }
    // The application thread blocked in the synchronous call is handed the
    // answer: it is parked, so the client's executor wakes it (a futex).
    rt_.ChargeWake(app, runtime::SimRuntime::Wake::kLocal);
    app->Post([this, c, app, record] {
      record(app->Now());
      PerfLoop(c, app);
    });
  };
  std::string key = cl.gen->Key(op.record);
  switch (op.type) {
    case ycsb::OpType::kRead:
      cl.core->Get(std::move(key), [finish](Result<std::string> v) { finish(v.ok() || v.status().Is(Code::kNotFound)); });
      return;
    case ycsb::OpType::kUpdate:
    case ycsb::OpType::kInsert:
      cl.core->Put(std::move(key), cl.gen->Value(op.record, ++cl.updates),
                   [finish](Result<uint64_t> v) { finish(v.ok()); });
      return;
    case ycsb::OpType::kReadModifyWrite: {
      auto* core = cl.core.get();
      std::string value = cl.gen->Value(op.record, ++cl.updates);
      core->Get(key, [core, key, value = std::move(value), finish](Result<std::string> v) mutable {
        if (!v.ok() && !v.status().Is(Code::kNotFound)) return finish(false);
        core->Put(std::move(key), std::move(value), [finish](Result<uint64_t> p) { finish(p.ok()); });
      });
      return;
    }
    case ycsb::OpType::kScan:
      break;
  }
  finish(false);  // scans: refused by RunClusterSim before a run starts
}

void World::RunPerf(ClusterSimResult& res) {
  const PerfOptions& p = *o_.perf;
  const uint32_t threads = std::max<uint32_t>(p.threads_per_client, 1);
  for (uint32_t c = 0; p.sync_clients && c < o_.clients; ++c) {
    for (uint32_t t = 0; t < threads; ++t) {
      apps_.push_back(rt_.CreateExecutor("client" + std::to_string(c) + "/app" + std::to_string(t)));
    }
  }
  PlaceExecutors();
  inserts_ = std::make_unique<ycsb::InsertCounter>(0);
  for (uint32_t c = 0; c < o_.clients; ++c) {
    for (uint32_t d = 0; d < std::max<uint32_t>(p.load_depth, 1); ++d) {
      clients_[c].exec->Post([this, c] { LoadLoop(c); });
    }
  }
  const uint64_t records = p.workload.records;
  rt_.RunUntil([&] { return !failure_.empty() || loaded_ + load_failed_ >= records; },
               rt_.Now() + 600 * runtime::kSecond);
  if (failure_.empty() && loaded_ != records) {
    failure_ = "load: " + std::to_string(loaded_) + " of " + std::to_string(records) + " records written (" +
               std::to_string(load_failed_) + " failed" +
               (first_load_error_.empty() ? "" : ", the first: " + first_load_error_) + ")";
  }
  if (!failure_.empty()) {
    res.ok = false;
    res.failure = failure_;
    return;
  }
  // Inserts (workload d) continue after the loaded records.
  inserts_ = std::make_unique<ycsb::InsertCounter>(records);
  for (Client& cl : clients_) cl.gen = std::make_unique<ycsb::OpGenerator>(p.workload, inserts_.get());

  window_start_ = rt_.Now() + p.warmup;
  window_end_ = window_start_ + p.measure;
  std::array<Nanos, runtime::kCostCount> totals0{};
  std::vector<Nanos> busy0;
  // Every placed executor with its role, once: CPU by role (client and
  // application threads, workers, NICs, digests), in all and by input,
  // parks by role (client, workers, NICs, application threads) and
  // preemptions of those, and the busiest executor are read off this list.
  // A thread's role; PerfResult::Role is the CPU's, which counts the
  // application threads as the client's (kCpuRole, below).
  using Role = PerfResult::Thread;
  constexpr Role kClientRole = PerfResult::kClientThread, kAppRole = PerfResult::kAppThread,
                 kWorkerRole = PerfResult::kWorkerThread, kNicRole = PerfResult::kNicThread,
                 kDigestRole = PerfResult::kDigestThread;
  // The role whose CPU an executor's counts toward: application threads
  // are the client's, as slip bench counts the client process.
  static constexpr size_t kCpuRole[] = {PerfResult::kClient, PerfResult::kClient, PerfResult::kWorker,
                                        PerfResult::kNic, PerfResult::kDigest};
  std::vector<std::pair<runtime::Executor*, Role>> placed;
  for (const Client& c : clients_) placed.emplace_back(c.exec, kClientRole);
  for (runtime::Executor* a : apps_) placed.emplace_back(a, kAppRole);
  for (const auto& n : nodes_) {
    for (runtime::Executor* w : n->workers) placed.emplace_back(w, kWorkerRole);
    if (n->nic != nullptr) placed.emplace_back(n->nic, kNicRole);
    for (runtime::Executor* d : n->digests) placed.emplace_back(d, kDigestRole);
  }
  // CPU up to `t`: a turn running across the window's edge is split at it;
  // with the spin counted so far (SpunBy: a spin is counted when it ends).
  auto roles = [this, &placed](Nanos t) {
    std::array<Nanos, PerfResult::kRoles> r{};
    for (const auto& [x, role] : placed) r[kCpuRole[role]] += rt_.CpuBy(x, t) + rt_.SpunBy(x);
    return r;
  };
  auto spun = [this, &placed] {
    std::array<Nanos, PerfResult::kRoles> r{};
    for (const auto& [x, role] : placed) r[kCpuRole[role]] += rt_.SpunBy(x);
    return r;
  };
  // Parks by role (client, workers, NICs, application threads), then
  // preemptions in the same order.
  auto parks = [this, &placed] {
    static constexpr size_t kParkIndex[] = {0, 3, 1, 2};  // the digest's are not counted
    std::array<uint64_t, 8> r{};
    for (const auto& [x, role] : placed) {
      if (role == kDigestRole) continue;
      r[kParkIndex[role]] += rt_.Parks(x);
      r[4 + kParkIndex[role]] += rt_.Preemptions(x);
    }
    return r;
  };
  // Preemptions by the preempted thread's role and the taker's.
  using ByTaker = std::array<std::array<uint64_t, PerfResult::kThreads>, PerfResult::kThreads>;
  auto preempted_by = [this, &placed] {
    ByTaker r{};
    for (const auto& [x, role] : placed) {
      for (const auto& [y, taker] : placed) r[role][taker] += rt_.PreemptionsBy(x, y);
    }
    return r;
  };
  // By role and input, summed over the placed executors: `of` gives an
  // executor's per-input array (CostsOf: CPU, turns credited whole;
  // StepsOf: whole steps).
  auto by_role = [&placed](const auto& of) {
    std::array<std::decay_t<decltype(of(placed.front().first))>, PerfResult::kRoles> r{};
    for (const auto& [x, role] : placed) {
      const auto& c = of(x);
      for (size_t i = 0; i < runtime::kCostCount; ++i) r[kCpuRole[role]][i] += c[i];
    }
    return r;
  };
  auto inputs = [&] { return by_role([this](runtime::Executor* x) { return rt_.CostsOf(x); }); };
  auto steps = [&] { return by_role([this](runtime::Executor* x) { return rt_.StepsOf(x); }); };
  decltype(inputs()) inputs0{};
  decltype(steps()) steps0{};
  std::array<uint64_t, 8> parks0{};
  ByTaker preempted_by0{};
  std::array<Nanos, PerfResult::kRoles> roles0{}, spun0{};
  std::vector<Nanos> cpu0;
  rt_.Schedule(window_start_, nullptr, kEventControl, "window", 0, [&] {
    totals0 = rt_.CostTotals();
    roles0 = roles(window_start_);
    spun0 = spun();
    parks0 = parks();
    preempted_by0 = preempted_by();
    inputs0 = inputs();
    steps0 = steps();
    for (const auto& [x, role] : placed) cpu0.push_back(rt_.CpuBy(x, window_start_));
    for (uint32_t h = 0; h < rt_.host_count(); ++h) busy0.push_back(rt_.HostBusy(h));
  });
  for (uint32_t c = 0; c < o_.clients; ++c) {
    for (uint32_t t = 0; t < threads; ++t) {
      runtime::Executor* app = apps_.empty() ? nullptr : apps_[c * threads + t];
      (app ? app : clients_[c].exec)->Post([this, c, app] { PerfLoop(c, app); });
    }
  }
  rt_.RunUntil(window_end_);
  stop_ = true;

  PerfResult& r = res.perf;
  SetLatencies(r, std::move(read_latencies_), std::move(write_latencies_), window_errors_, p.measure);
  const auto& totals = rt_.CostTotals();
  for (size_t i = 0; i < runtime::kCostCount; ++i) {
    r.cpu_per_op[i] = r.ops == 0 ? 0 : static_cast<double>(totals[i] - totals0[i]) / static_cast<double>(r.ops);
  }
  const std::array<Nanos, PerfResult::kRoles> roles1 = roles(window_end_);
  auto per_op = [&r](auto n) { return r.ops == 0 ? 0.0 : static_cast<double>(n) / static_cast<double>(r.ops); };
  r.client_cpu = per_op(roles1[PerfResult::kClient] - roles0[PerfResult::kClient]);
  r.worker_cpu = per_op(roles1[PerfResult::kWorker] - roles0[PerfResult::kWorker]);
  r.nic_cpu = per_op(roles1[PerfResult::kNic] - roles0[PerfResult::kNic]);
  r.digest_cpu = per_op(roles1[PerfResult::kDigest] - roles0[PerfResult::kDigest]);
  const std::array<Nanos, PerfResult::kRoles> spun1 = spun();
  for (size_t k = 0; k < PerfResult::kRoles; ++k) r.spin_per_op_by_role[k] = per_op(spun1[k] - spun0[k]);
  // (end - start) / ops of each role and input.
  auto per_op_by_role = [&per_op](const auto& end, const auto& start) {
    std::array<std::array<double, runtime::kCostCount>, PerfResult::kRoles> out{};
    for (size_t k = 0; k < PerfResult::kRoles; ++k) {
      for (size_t i = 0; i < runtime::kCostCount; ++i) out[k][i] = per_op(end[k][i] - start[k][i]);
    }
    return out;
  };
  r.cpu_per_op_by_role = per_op_by_role(inputs(), inputs0);
  r.steps_per_op_by_role = per_op_by_role(steps(), steps0);
  const std::array<uint64_t, 8> parks1 = parks();
  r.client_parks = per_op(parks1[0] - parks0[0]);
  r.worker_parks = per_op(parks1[1] - parks0[1]);
  r.nic_parks = per_op(parks1[2] - parks0[2]);
  r.app_parks = per_op(parks1[3] - parks0[3]);
  r.client_preemptions = per_op(parks1[4] - parks0[4]);
  r.worker_preemptions = per_op(parks1[5] - parks0[5]);
  r.nic_preemptions = per_op(parks1[6] - parks0[6]);
  r.app_preemptions = per_op(parks1[7] - parks0[7]);
  const ByTaker preempted_by1 = preempted_by();
  for (size_t a = 0; a < PerfResult::kThreads; ++a) {
    for (size_t b = 0; b < PerfResult::kThreads; ++b) {
      r.preemptions_by[a][b] = per_op(preempted_by1[a][b] - preempted_by0[a][b]);
    }
  }
  for (size_t i = 0; i < cpu0.size(); ++i) {
    const double share =
        static_cast<double>(rt_.CpuBy(placed[i].first, window_end_) - cpu0[i]) / static_cast<double>(p.measure);
    if (share > r.busiest_share) {
      r.busiest_share = share;
      r.busiest = std::string(placed[i].first->name());
    }
  }
  bool any_store = false;
  r.min_free_segments = UINT32_MAX;
  for (const auto& n : nodes_) {
    if (n->live == nullptr || n->live->store == nullptr) continue;
    const store::Store& st = *n->live->store;
    any_store = true;
    r.min_free_segments = std::min(r.min_free_segments, st.stats().free_segments);
    r.log_full = r.log_full || st.stats().free_segments <= st.options().cleaner_reserve;
  }
  if (!any_store) r.min_free_segments = 0;
  for (uint32_t h = 0; h < busy0.size(); ++h) {
    const uint32_t cores = rt_.HostCores(h);
    r.host_busy.push_back(static_cast<double>(rt_.HostBusy(h) - busy0[h]) /
                          (static_cast<double>(p.measure) * cores));
  }
  res.trace_hash = rt_.TraceHash();
  res.virtual_ns = rt_.Now();
  res.operations = r.ops;
}

}  // namespace slip::sim::detail
