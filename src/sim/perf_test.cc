// Performance runs on the cost model: deterministic per seed, every input
// charged where the work happens, and inputs move predictions the expected
// way.
#include <gtest/gtest.h>

#include <string>

#include "sim/cluster_sim.h"
#include "sim/perf_model.h"

namespace slip::sim {
namespace {

using runtime::Cost;
using runtime::Nanos;

PerfOptions SmallModel() {
  PerfOptions p;
  p.costs[Cost::kMessageSend] = {2000, 0.5};
  p.costs[Cost::kMessageReceive] = {2000, 0.5};
  p.costs[Cost::kRpcCall] = {400, 0};
  p.costs[Cost::kRequest] = {500, 0};
  p.costs[Cost::kClientOp] = {1000, 0};
  p.costs[Cost::kStorePut] = {800, 0.3};
  p.costs[Cost::kStoreGet] = {300, 0.1};
  p.costs[Cost::kDigest] = {300, 0.1};
  p.costs[Cost::kFabricPost] = {1500, 0.3};
  p.costs[Cost::kFabricCompletion] = {300, 0};
  p.costs[Cost::kFabricTarget] = {1500, 0.3};
  p.costs[Cost::kWakeup] = {4000, 0};
  p.costs[Cost::kWakeupBusy] = {300, 0};
  p.costs[Cost::kSwitchIn] = {1500, 0};
  p.costs[Cost::kWakeupLocal] = {1200, 0};
  p.costs[Cost::kSwitchInLocal] = {1800, 0};
  p.shared_host = true;
  p.host_cores = 2;
  p.park_after = 20 * runtime::kMicrosecond;
  p.one_way = 5 * runtime::kMicrosecond;
  p.software_nic = true;
  p.workload = *ycsb::StandardWorkload("a");
  p.workload.records = 2000;
  p.workload.sizes.value_bytes = 1000;
  p.warmup = 20 * runtime::kMillisecond;
  p.measure = 200 * runtime::kMillisecond;
  return p;
}

ClusterSimOptions Cluster(replication::Protocol design, uint32_t clients, const PerfOptions& p) {
  ClusterSimOptions o;
  o.protocol = design;
  o.nodes = 3;
  o.replication = 3;
  o.shards = 12;
  o.clients = clients;
  o.perf = p;
  return o;
}

double Cpu(const ClusterSimResult& r, Cost c) { return r.perf.cpu_per_op[static_cast<size_t>(c)]; }

TEST(PerfTest, ARunIsDeterministicPerSeed) {
  auto o = Cluster(replication::Protocol::kRowan, 1, SmallModel());
  o.perf->threads_per_client = 4;
  o.seed = 5;
  auto a = RunClusterSim(o), b = RunClusterSim(o);
  o.seed = 6;
  auto c = RunClusterSim(o);
  ASSERT_TRUE(a.ok && b.ok && c.ok) << a.failure << b.failure << c.failure;
  EXPECT_GT(a.perf.ops, 100u);
  // An update waits for its backups, a read does not; threads that park
  // between operations are counted doing so.
  EXPECT_GT(a.perf.write_p50, a.perf.read_p50);
  EXPECT_GT(a.perf.read_p50, 0);
  EXPECT_GT(a.perf.client_parks, 0);
  EXPECT_GT(a.perf.worker_parks, 0);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.perf.ops, b.perf.ops);
  EXPECT_EQ(a.perf.p50, b.perf.p50);
  EXPECT_NE(a.trace_hash, c.trace_hash);
}

TEST(PerfTest, EveryStepIsChargedWhereItHappens) {
  PerfOptions rdma = SmallModel();
  rdma.software_nic = false;  // one-sided work costs no wire messages
  auto rpc = RunClusterSim(Cluster(replication::Protocol::kRpc, 2, SmallModel()));
  auto rowan = RunClusterSim(Cluster(replication::Protocol::kRowan, 2, rdma));
  auto rowan_sw = RunClusterSim(Cluster(replication::Protocol::kRowan, 2, SmallModel()));
  ASSERT_TRUE(rpc.ok && rowan.ok && rowan_sw.ok) << rpc.failure << rowan.failure << rowan_sw.failure;
  // YCSB-A: half the operations are PUTs, each stored on three replicas
  // (rpc-kv: by three store PUTs; rowan-kv: one PUT and two digests), and
  // half are GETs, read once.
  EXPECT_NEAR(Cpu(rpc, Cost::kStoreGet) / SmallModel().costs.Of(Cost::kStoreGet, 1040), 0.5, 0.1);
  EXPECT_NEAR(Cpu(rpc, Cost::kStorePut) / SmallModel().costs.Of(Cost::kStorePut, 1040), 1.5, 0.2);
  EXPECT_NEAR(Cpu(rowan, Cost::kStorePut) / SmallModel().costs.Of(Cost::kStorePut, 1040), 0.5, 0.1);
  EXPECT_GT(Cpu(rowan, Cost::kDigest), 0);
  EXPECT_EQ(Cpu(rpc, Cost::kDigest), 0);
  // rpc-kv replicates in messages each a backup's worker handles; rowan-kv
  // writes one-sidedly: no replication messages, fabric work instead.
  EXPECT_GT(Cpu(rpc, Cost::kMessageSend), 1.5 * Cpu(rowan, Cost::kMessageSend));
  EXPECT_GT(Cpu(rpc, Cost::kRequest), 1.5 * Cpu(rowan, Cost::kRequest));
  // Without offload the backups' CPUs place what primaries write.
  EXPECT_GT(Cpu(rowan_sw, Cost::kFabricTarget), 0);
  EXPECT_EQ(Cpu(rowan, Cost::kFabricTarget), 0);
  EXPECT_EQ(Cpu(rpc, Cost::kFabricPost), 0);
  EXPECT_GT(Cpu(rowan, Cost::kFabricPost), 0);
  EXPECT_GT(Cpu(rowan, Cost::kFabricCompletion), 0);
  EXPECT_GT(Cpu(rpc, Cost::kClientOp), 0);
  // By role, each step lands on whoever takes it, and the roles add up to
  // the whole: the client encodes and is woken locally, the workers handle
  // requests and store, rowan's digests digest.
  for (const ClusterSimResult* r : {&rpc, &rowan, &rowan_sw}) {
    const auto& by = r->perf.cpu_per_op_by_role;
    for (size_t i = 0; i < runtime::kCostCount; ++i) {
      double sum = 0;
      for (const auto& role : by) sum += role[i];
      EXPECT_NEAR(sum, r->perf.cpu_per_op[i], 1e-6 * (1 + r->perf.cpu_per_op[i]))
          << runtime::CostName(static_cast<Cost>(i));
    }
  }
  auto role = [](const ClusterSimResult& r, PerfResult::Role k, Cost c) {
    return r.perf.cpu_per_op_by_role[k][static_cast<size_t>(c)];
  };
  EXPECT_EQ(role(rpc, PerfResult::kClient, Cost::kClientOp), Cpu(rpc, Cost::kClientOp));
  EXPECT_GT(Cpu(rpc, Cost::kSwitchInLocal), 0);
  EXPECT_EQ(role(rpc, PerfResult::kClient, Cost::kSwitchInLocal), Cpu(rpc, Cost::kSwitchInLocal));
  EXPECT_GT(Cpu(rowan_sw, Cost::kFabricTarget), 0);  // the backups' NIC threads place what primaries write
  EXPECT_EQ(role(rowan_sw, PerfResult::kNic, Cost::kFabricTarget), Cpu(rowan_sw, Cost::kFabricTarget));
  EXPECT_EQ(role(rpc, PerfResult::kWorker, Cost::kRequest), Cpu(rpc, Cost::kRequest));
  EXPECT_EQ(role(rpc, PerfResult::kWorker, Cost::kStoreGet), Cpu(rpc, Cost::kStoreGet));
  EXPECT_EQ(role(rowan, PerfResult::kDigest, Cost::kDigest), Cpu(rowan, Cost::kDigest));
}

// The RPC layer works on every message at both ends, also when the
// transport carries a turn's messages to a peer in one frame (whose fixed
// cost is paid once). YCSB-A per operation: the client's request and its
// answer (2 messages); rpc-kv's PUTs add two REPLICATE calls and their
// answers (4 more, half the time).
TEST(PerfTest, TheRpcLayerIsPaidPerMessageWhereFramesCarrySeveral) {
  PerfOptions p = SmallModel();
  p.costs[Cost::kMessageSend] = {2000, 0};
  p.threads_per_client = 8;
  auto rpc = RunClusterSim(Cluster(replication::Protocol::kRpc, 2, p));
  auto rowan = RunClusterSim(Cluster(replication::Protocol::kRowan, 2, p));
  ASSERT_TRUE(rpc.ok && rowan.ok) << rpc.failure << rowan.failure;
  const double rpc_messages = Cpu(rpc, Cost::kRpcCall) / 400 / 2;  // each paid at both ends
  EXPECT_NEAR(rpc_messages, 4, 0.4);
  EXPECT_NEAR(Cpu(rowan, Cost::kRpcCall) / 400 / 2, 2, 0.2);
  // Frames carried several: fewer transport sends than messages.
  EXPECT_LT(Cpu(rpc, Cost::kMessageSend) / 2000, 0.9 * rpc_messages);
  // The fabric messages each role sent are its whole kMessageSend steps
  // (a message riding in a frame already paid for adds bytes only).
  const auto sent = [](const ClusterSimResult& r, PerfResult::Role k) {
    return r.perf.steps_per_op_by_role[k][static_cast<size_t>(Cost::kMessageSend)];
  };
  double all = 0;
  for (size_t k = 0; k < PerfResult::kRoles; ++k) all += sent(rpc, static_cast<PerfResult::Role>(k));
  EXPECT_NEAR(all, Cpu(rpc, Cost::kMessageSend) / 2000, 0.02 * all);
  EXPECT_GT(sent(rpc, PerfResult::kClient), 0.2);
  EXPECT_GT(sent(rpc, PerfResult::kWorker), 0.2);
  EXPECT_EQ(sent(rpc, PerfResult::kNic), 0);
}

TEST(PerfTest, AOneSidedWriteCostsTheTargetCpuOnlyWithoutOffload) {
  PerfOptions software = SmallModel(), rdma = SmallModel();
  rdma.software_nic = false;
  auto sw = RunClusterSim(Cluster(replication::Protocol::kRowan, 2, software));
  auto hw = RunClusterSim(Cluster(replication::Protocol::kRowan, 2, rdma));
  ASSERT_TRUE(sw.ok && hw.ok) << sw.failure << hw.failure;
  EXPECT_GT(Cpu(sw, Cost::kFabricTarget), 0);
  EXPECT_EQ(Cpu(hw, Cost::kFabricTarget), 0);
  EXPECT_GT(Cpu(hw, Cost::kFabricPost), 0);  // the initiator still posts
  EXPECT_GT(hw.perf.ops_per_sec, sw.perf.ops_per_sec);
}

TEST(PerfTest, ASoftwareProvidersAcknowledgementsWakeParkedSenders) {
  // rpc-kv has no one-sided work: the provider's kind changes only whether
  // each fabric message comes back acknowledged. Threads park 2 us after a
  // turn, before an ack (a message's flight back) can come.
  PerfOptions software = SmallModel(), rdma = SmallModel();
  software.park_after = rdma.park_after = 2 * runtime::kMicrosecond;
  rdma.software_nic = false;
  auto sw = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, software));
  auto hw = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, rdma));
  ASSERT_TRUE(sw.ok && hw.ok) << sw.failure << hw.failure;
  // Per operation the workers send a read's answer, or an update's two
  // replication calls, their two answers and the client's answer: ~3
  // messages, whose acks mostly find their senders parked.
  EXPECT_GT(sw.perf.worker_parks, hw.perf.worker_parks + 1.0);
  EXPECT_GT(sw.perf.client_parks, hw.perf.client_parks);
  EXPECT_GT(Cpu(sw, Cost::kWakeup), Cpu(hw, Cost::kWakeup));
  EXPECT_LT(sw.perf.ops_per_sec, hw.perf.ops_per_sec);
  // The acks' own CPU is in the message costs: nothing more is charged.
  EXPECT_NEAR(Cpu(sw, Cost::kMessageSend), Cpu(hw, Cost::kMessageSend), 0.05 * Cpu(hw, Cost::kMessageSend));
}

TEST(PerfTest, AWakeUpIsWholeOnlyWhenACoreIsIdle) {
  PerfOptions crowded = SmallModel(), roomy = SmallModel();
  crowded.threads_per_client = 8;  // ~12 threads on 2 cores
  roomy.host_cores = 32;
  auto c = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, crowded));
  auto r = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, roomy));
  ASSERT_TRUE(c.ok && r.ok) << c.failure << r.failure;
  // Crowded, most wake-ups find no idle core: the waker hands over, the
  // woken (and every preempted spinner) pays its switch back in. A whole
  // wake-up costs its waker its part (the woken pays a switch-in too).
  const Nanos wakers_part = crowded.costs.Of(Cost::kWakeup, 0) - crowded.costs.Of(Cost::kSwitchIn, 0);
  const double busy_wakes = Cpu(c, Cost::kWakeupBusy) / crowded.costs.Of(Cost::kWakeupBusy, 0);
  const double whole_wakes = Cpu(c, Cost::kWakeup) / static_cast<double>(wakers_part);
  EXPECT_GT(busy_wakes, whole_wakes);
  EXPECT_GE(Cpu(c, Cost::kSwitchIn) / crowded.costs.Of(Cost::kSwitchIn, 0), (busy_wakes + whole_wakes) * 0.99);
  EXPECT_GT(c.perf.preemptions(), 0);
  // Every preemption has a taker among the placed threads: each role's
  // row of preemptions_by sums to its preemptions. The client has one
  // executor, which cannot take its own core. (Rowan, crowded the same
  // way, has NIC threads to preempt; rpc-kv has none.)
  auto w = RunClusterSim(Cluster(replication::Protocol::kRowan, 1, crowded));
  ASSERT_TRUE(w.ok) << w.failure;
  for (const ClusterSimResult* x : {&c, &w}) {
    auto row = [x](PerfResult::Thread t) {
      double sum = 0;
      for (double v : x->perf.preemptions_by[t]) sum += v;
      return sum;
    };
    EXPECT_NEAR(row(PerfResult::kClientThread), x->perf.client_preemptions, 1e-9);
    EXPECT_NEAR(row(PerfResult::kAppThread), x->perf.app_preemptions, 1e-9);
    EXPECT_NEAR(row(PerfResult::kWorkerThread), x->perf.worker_preemptions, 1e-9);
    EXPECT_NEAR(row(PerfResult::kNicThread), x->perf.nic_preemptions, 1e-9);
    EXPECT_EQ(x->perf.preemptions_by[PerfResult::kClientThread][PerfResult::kClientThread], 0);
  }
  EXPECT_GT(w.perf.nic_preemptions, 0);
  // With a core to spare for every thread, every wake-up is whole: one
  // switch-in for each, none for a preemption.
  EXPECT_EQ(Cpu(r, Cost::kWakeupBusy), 0);
  EXPECT_GT(Cpu(r, Cost::kWakeup), 0);
  EXPECT_EQ(r.perf.preemptions(), 0);
  EXPECT_NEAR(Cpu(r, Cost::kSwitchIn) / roomy.costs.Of(Cost::kSwitchIn, 0),
              Cpu(r, Cost::kWakeup) / static_cast<double>(wakers_part), 0.01);
}

TEST(PerfTest, InputsMoveThePredictionTheExpectedWay) {
  auto run = [](PerfOptions p, uint32_t cores) {
    p.host_cores = cores;
    auto o = Cluster(replication::Protocol::kRpc, 1, p);
    o.perf->threads_per_client = 8;
    return RunClusterSim(o);
  };
  PerfOptions base = SmallModel(), dear = SmallModel(), far = SmallModel();
  dear.costs[Cost::kMessageSend].per_op *= 3;
  far.one_way *= 10;
  auto b = run(base, 2), d = run(dear, 2), more = run(base, 4), f = run(far, 2);
  ASSERT_TRUE(b.ok && d.ok && more.ok && f.ok);
  EXPECT_LT(d.perf.ops_per_sec, b.perf.ops_per_sec);
  EXPECT_GT(d.perf.p50, b.perf.p50);
  EXPECT_GT(more.perf.ops_per_sec, b.perf.ops_per_sec);
  EXPECT_GT(f.perf.p50, b.perf.p50);
  // The host is the bottleneck at 2 cores: nearly always busy.
  EXPECT_GT(b.perf.host_busy.at(0), 0.9);
}

TEST(PerfTest, SeparateMachinesAndSpinningThreads) {
  PerfOptions p = SmallModel();
  p.shared_host = false;
  p.node_cores = 4;
  p.client_cores = 4;
  p.park_after = -1;
  p.sync_clients = false;
  auto o = Cluster(replication::Protocol::kRowan, 1, p);
  o.perf->threads_per_client = 4;
  auto r = RunClusterSim(o);
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_EQ(r.perf.host_busy.size(), 4u);  // three nodes, one client machine
  EXPECT_EQ(Cpu(r, Cost::kWakeup), 0);    // spinning threads never park
  EXPECT_EQ(r.perf.client_parks + r.perf.worker_parks + r.perf.nic_parks, 0);
  EXPECT_GT(r.perf.ops, 100u);
}

TEST(PerfTest, SynchronousApplicationThreadsParkAndAreWokenByEveryAnswer) {
  PerfOptions sync = SmallModel(), async = SmallModel();
  async.sync_clients = false;
  sync.host_cores = async.host_cores = 8;  // a core idle for every wake-up: each costs a whole one
  auto s = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, sync));
  auto a = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, async));
  ASSERT_TRUE(s.ok && a.ok) << s.failure << a.failure;
  // One application thread: it blocks in every call (no spin), so every
  // answer finds it parked and wakes it; an asynchronous application has
  // no such thread.
  EXPECT_NEAR(s.perf.app_parks, 1.0, 0.01);
  EXPECT_EQ(a.perf.app_parks, 0);
  // Woken inside its process (a futex), not through a socket: the waker
  // pays a local wake-up, the application thread its local switch-in.
  EXPECT_NEAR(Cpu(s, Cost::kSwitchInLocal), 1800 * s.perf.app_parks, 18);
  EXPECT_GE(Cpu(s, Cost::kWakeupLocal), 0.99 * 1200);
  EXPECT_EQ(Cpu(a, Cost::kWakeupLocal) + Cpu(a, Cost::kSwitchInLocal), 0);
  EXPECT_GT(s.perf.p50, a.perf.p50);
}

// An application thread's own side of each synchronous call (choosing the
// operation, its promise and closure) is its CPU, once per operation, plus
// per byte of the value an update writes (YCSB-A: half the operations); an
// asynchronous application pays none.
TEST(PerfTest, SynchronousApplicationThreadsPayTheirSideOfEachCall) {
  PerfOptions sync = SmallModel(), async = SmallModel();
  sync.costs[Cost::kAppOp] = async.costs[Cost::kAppOp] = {700, 2.0};
  async.sync_clients = false;
  auto s = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, sync));
  auto a = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, async));
  ASSERT_TRUE(s.ok && a.ok) << s.failure << a.failure;
  const double value = sync.workload.sizes.value_bytes;
  EXPECT_NEAR(Cpu(s, Cost::kAppOp), 700 + 0.5 * 2.0 * value, 0.1 * 2.0 * value);
  EXPECT_EQ(s.perf.cpu_per_op_by_role[PerfResult::kClient][static_cast<size_t>(Cost::kAppOp)], Cpu(s, Cost::kAppOp));
  EXPECT_EQ(Cpu(a, Cost::kAppOp), 0);
}

// A real thread's clock counts its spin before it parks; the role's CPU
// does too (SimRuntime::SpunBy), beside the inputs, which do not. Spinning
// longer moves the role's CPU and leaves the inputs' sum below it.
TEST(PerfTest, CpuByRoleCountsTheSpinBeforeEachPark) {
  PerfOptions brief = SmallModel(), longer = SmallModel();
  brief.park_after = 2 * runtime::kMicrosecond;
  longer.park_after = 40 * runtime::kMicrosecond;
  auto b = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, brief));
  auto l = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, longer));
  ASSERT_TRUE(b.ok && l.ok) << b.failure << l.failure;
  for (const ClusterSimResult* r : {&b, &l}) {
    double inputs = 0;
    for (double c : r->perf.cpu_per_op_by_role[PerfResult::kWorker]) inputs += c;
    const double spin = r->perf.spin_per_op_by_role[PerfResult::kWorker];
    EXPECT_GT(spin, 0);
    // Turns across the window's edges are split differently: within 2%.
    EXPECT_NEAR(r->perf.worker_cpu, inputs + spin, 0.02 * r->perf.worker_cpu);
  }
  EXPECT_GT(l.perf.spin_per_op_by_role[PerfResult::kWorker], 2 * b.perf.spin_per_op_by_role[PerfResult::kWorker]);
}

// The call's hand-over to the client's executor wakes it when it parked
// meanwhile (at once, here): a local wake-up, the executor's return
// through its endpoints' wait. Spinning long enough, it needs none.
TEST(PerfTest, AnApplicationThreadWakesTheClientsExecutorIfItParked) {
  PerfOptions parks = SmallModel(), spins = SmallModel();
  parks.host_cores = spins.host_cores = 8;
  parks.park_after = 0;
  spins.park_after = 10 * runtime::kMillisecond;
  auto p = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, parks));
  auto s = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, spins));
  ASSERT_TRUE(p.ok && s.ok) << p.failure << s.failure;
  // Two local wake-ups per operation: the call's and its answer's.
  EXPECT_NEAR(Cpu(p, Cost::kWakeupLocal), 2 * 1200, 0.05 * 2 * 1200);
  EXPECT_NEAR(Cpu(s, Cost::kWakeupLocal), 1200, 0.01 * 1200);
  EXPECT_GT(p.perf.client_parks, s.perf.client_parks + 0.9);
}

// A performance run keeps a real server's deadlines: erda's GETs on a
// crowded host take longer than the fault runs' 500 us read bound, and are
// still answered one-sidedly (with the bound, every one fell back to a
// two-sided GET: a worker's call on top of its READs).
TEST(PerfTest, ErdaReadsStayOneSidedOnACrowdedHost) {
  PerfOptions p = SmallModel();
  p.workload = *ycsb::StandardWorkload("c");
  p.workload.records = 2000;
  p.workload.sizes.value_bytes = 1000;
  p.threads_per_client = 64;
  p.host_cores = 1;
  auto r = RunClusterSim(Cluster(replication::Protocol::kErda, 1, p));
  ASSERT_TRUE(r.ok) << r.failure;
  EXPECT_GT(r.perf.read_p50, 500 * runtime::kMicrosecond);
  ASSERT_GT(r.direct.gets, 1000u);
  EXPECT_GT(r.direct.one_sided_gets, r.direct.gets * 19 / 20);
  EXPECT_LT(r.direct.fallback_gets, r.direct.gets / 20);
  EXPECT_EQ(r.direct.fallback_puts, 0u);
}

TEST(PerfTest, ScansAreRefused) {
  PerfOptions p = SmallModel();
  p.workload = *ycsb::StandardWorkload("e");
  auto r = RunClusterSim(Cluster(replication::Protocol::kRpc, 1, p));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.failure.find("scan"), std::string::npos);
}

// --input: one input set over a model, for sensitivity runs; a bad
// override changes nothing.
TEST(PerfModelTest, AnInputCanBeOverridden) {
  MachineModel m;
  m.costs[Cost::kRpcCall] = {95, 0};
  m.costs[Cost::kMessageSend] = {50, 0.107};
  ASSERT_TRUE(OverrideInput(m, "rpc_call=50").ok());
  EXPECT_EQ(m.costs[Cost::kRpcCall].per_op, 50);
  EXPECT_NE(m.sources.at("rpc_call").find("rpc_call=50"), std::string::npos);
  ASSERT_TRUE(OverrideInput(m, "message_send=0/0.2").ok());
  EXPECT_EQ(m.costs[Cost::kMessageSend].per_op, 0);
  EXPECT_DOUBLE_EQ(m.costs[Cost::kMessageSend].per_byte, 0.2);
  for (const char* bad : {"teleport=5", "rpc_call", "rpc_call=", "rpc_call=-1", "rpc_call=5x", "rpc_call=5/nan",
                          "rpc_call=inf"}) {
    EXPECT_FALSE(OverrideInput(m, bad).ok()) << bad;
  }
  EXPECT_EQ(m.costs[Cost::kRpcCall].per_op, 50);
}

// A migration cost puts the shared host on Linux's scheduler: with 16
// synchronous threads on 2 cores the client's executor is preempted by
// the application threads it wakes (one queue: only while it spins), and
// the run stays deterministic.
TEST(PerfTest, AMigrationCostPreemptsTurnsWithTheThreadsTheyWake) {
  PerfOptions p = SmallModel();
  p.threads_per_client = 16;
  p.sync_clients = true;
  auto one = Cluster(replication::Protocol::kRpc, 1, p);
  p.migration_cost = 500 * runtime::kMicrosecond;
  auto linux = Cluster(replication::Protocol::kRpc, 1, p);
  auto a = RunClusterSim(one), b = RunClusterSim(linux), c = RunClusterSim(linux);
  ASSERT_TRUE(a.ok && b.ok && c.ok) << a.failure << b.failure << c.failure;
  EXPECT_GT(b.perf.client_preemptions, a.perf.client_preemptions + 0.1)
      << a.perf.client_preemptions << " " << b.perf.client_preemptions;
  EXPECT_EQ(b.trace_hash, c.trace_hash);
  EXPECT_NE(a.trace_hash, b.trace_hash);
}

TEST(PerfModelTest, ParsesAModelAndRejectsBadOnes) {
  std::string good = R"({"provider":"tcp","network":{"one_way_ns":1500,"software_nic":true},"inputs":{)";
  for (size_t i = 0; i < runtime::kCostCount; ++i) {
    good += std::string(i ? "," : "") + "\"" + std::string(runtime::CostName(static_cast<Cost>(i))) +
            R"(":{"per_op_ns":)" + std::to_string(100 + i) + R"(,"per_byte_ns":0.5,"source":"test"})";
  }
  good += "}}";
  auto m = ParseMachineModel(good);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->one_way, 1500);
  EXPECT_EQ(m->costs[Cost::kMessageSend].per_op, 100 + static_cast<Nanos>(Cost::kMessageSend));
  EXPECT_EQ(m->sources.at("store_put"), "test");
  EXPECT_FALSE(ParseMachineModel("not json").ok());
  EXPECT_FALSE(ParseMachineModel(R"({"inputs":{}})").ok());  // inputs missing
  std::string negative = good;
  negative.replace(negative.find("\"per_op_ns\":100"), 15, "\"per_op_ns\":-10");
  EXPECT_FALSE(ParseMachineModel(negative).ok());
  // Steps are charged in whole nanoseconds: a fraction is refused, not
  // dropped.
  std::string fraction = good;
  fraction.replace(fraction.find("\"per_op_ns\":100"), 15, "\"per_op_ns\":3.9");
  auto f = ParseMachineModel(fraction);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("whole nanoseconds"), std::string::npos) << f.status().ToString();
  std::string unknown = good;
  unknown.insert(unknown.find("\"inputs\":{") + 10, R"("teleport":{"per_op_ns":1,"per_byte_ns":0},)");
  auto u = ParseMachineModel(unknown);
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("teleport"), std::string::npos);
  EXPECT_FALSE(LoadMachineModel("/nonexistent/model.json").ok());
}

TEST(PerfModelTest, TheMigrationCostSelectsTheHostsSchedulerAndIsChecked) {
  std::string doc = R"({"inputs":{)";
  for (size_t i = 0; i < runtime::kCostCount; ++i) {
    doc += std::string(i ? "," : "") + "\"" + std::string(runtime::CostName(static_cast<Cost>(i))) +
           R"(":{"per_op_ns":100,"per_byte_ns":0})";
  }
  doc += "}";
  auto with = [&doc](const std::string& runtime) { return doc + R"(,"runtime":)" + runtime + "}"; };
  auto none = ParseMachineModel(doc + "}");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(FromModel(*none).migration_cost, 0);  // one shared run queue
  EXPECT_FALSE(none->Gives("runtime.migration_cost_ns"));
  auto linux = ParseMachineModel(with(R"({"migration_cost_ns":500000,"migration_cost_source":"sysctl"})"));
  ASSERT_TRUE(linux.ok()) << linux.status().ToString();
  EXPECT_EQ(FromModel(*linux).migration_cost, 500000);
  EXPECT_EQ(ThisMachine(*linux, 2).migration_cost, 500000);
  EXPECT_EQ(linux->sources.at("runtime.migration_cost_ns"), "sysctl");
  for (const char* bad : {R"({"migration_cost_ns":-1})", R"({"migration_cost_ns":"500us"})",
                          R"({"migration_cost_ns":0.5})"}) {
    auto m = ParseMachineModel(with(bad));
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_NE(m.status().message().find("migration_cost_ns"), std::string::npos) << m.status().ToString();
  }
}

}  // namespace
}  // namespace slip::sim
