// Simulator-specific behaviour: exact timing of the model, determinism from a
// seed, torn writes, persistence and crashes. (Provider-independent
// behaviour is in the contract suite, sim_contract_test.cc.)
#include "fabric/sim/sim_fabric.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/random.h"
#include "pm/region.h"
#include "runtime/sim_runtime.h"

namespace slip::fabric {
namespace {

using runtime::kMicrosecond;
using runtime::kMillisecond;
using runtime::kSecond;

// 64 B-aligned zeroed memory for registrations.
struct Buf {
  explicit Buf(size_t n)
      : bytes(static_cast<std::byte*>(std::aligned_alloc(64, (n + 63) / 64 * 64))), len(n) {
    std::memset(bytes, 0, len);
  }
  ~Buf() { std::free(bytes); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  std::byte* bytes;
  size_t len;
};

uint64_t Word(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// A small simulated cluster: one NIC executor and one endpoint per node, all
// connected; completions are recorded with the virtual time they were polled.
class World {
 public:
  struct Seen {
    Completion c;
    Nanos at;
  };

  World(int n, SimFabricOptions options = {}, uint64_t seed = 1,
        EndpointOptions ep_options = EndpointOptions{})
      : rt(runtime::SimRuntimeOptions{.seed = seed}), fabric(rt, options) {
    for (int i = 0; i < n; ++i) {
      runtime::Executor* nic = rt.CreateExecutor("node" + std::to_string(i));
      nics.push_back(nic);
      auto ep = fabric.CreateEndpoint(static_cast<NodeId>(i), nic, ep_options);
      EXPECT_TRUE(ep.ok());
      eps.push_back(std::move(*ep));
      seen.emplace_back();
      nic->AddPoller([this, i] {
        Completion batch[16];
        size_t k = eps[i] ? eps[i]->Poll(batch) : 0;
        for (size_t j = 0; j < k; ++j) seen[i].push_back({batch[j], rt.Now()});
        return k > 0;
      });
    }
    peers.assign(n, std::vector<PeerId>(n));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) peers[i][j] = *eps[i]->AddPeer(eps[j]->address());
    }
  }

  Endpoint& ep(int i) { return *eps[i]; }
  PeerId peer(int from, int to) const { return peers[from][to]; }

  MemoryRegion Reg(int i, Buf& b) {
    auto r = eps[i]->Register(b.bytes, b.len,
                              Endpoint::kRemoteRead | Endpoint::kRemoteWrite | Endpoint::kRemoteAtomic);
    EXPECT_TRUE(r.ok());
    return *r;
  }

  // Copies: `seen` grows while the simulation runs.
  std::optional<Seen> Find(int i, uint64_t ctx, Op op) const {
    for (const Seen& s : seen[i]) {
      if (s.c.context == ctx && s.c.op == op) return s;
    }
    return std::nullopt;
  }
  std::optional<Seen> Await(int i, uint64_t ctx, Op op, Nanos patience = 10 * kSecond) {
    rt.RunUntil([&] { return Find(i, ctx, op).has_value(); }, rt.Now() + patience);
    return Find(i, ctx, op);
  }

  runtime::SimRuntime rt;
  SimFabric fabric;
  std::vector<runtime::Executor*> nics;
  std::vector<std::unique_ptr<Endpoint>> eps;
  std::vector<std::vector<Seen>> seen;
  std::vector<std::vector<PeerId>> peers;
};

// ---------------------------------------------------------------------------
// CPU (the cost model)

// Posts three 10-byte writes from node 0 to node 1, in one executor turn or
// in three, and returns the CPU charged per input.
std::array<Nanos, runtime::kCostCount> WriteCosts(bool software, bool one_turn) {
  SimFabricOptions o;
  o.software_target = software;
  World w(2, o);
  runtime::CostModel m;
  m[runtime::Cost::kFabricPost] = {1000, 1.0};
  m[runtime::Cost::kFabricTarget] = {2000, 0};
  m[runtime::Cost::kFabricCompletion] = {300, 0};
  w.rt.SetCostModel(m);
  const uint32_t host = w.rt.AddHost(4, -1);
  for (auto* x : w.nics) w.rt.PlaceOn(x, host);
  Buf target(1024), src(64);
  MemoryRegion tmr = w.Reg(1, target);
  for (int i = 0; i < 3; ++i) {
    auto post = [&w, &src, tmr, i] {
      EXPECT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 10, nullptr, tmr.remote, 64 * i, i + 1).ok());
    };
    if (one_turn) {
      w.nics[0]->Post(post);
    } else {
      w.rt.Schedule(i * kMillisecond, w.nics[0], runtime::kFirstDeviceKind, "post", 0, post);
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(w.Await(0, i + 1, Op::kWrite).has_value());
  return w.rt.CostTotals();
}

TEST(SimFabricTest, CostsFollowASoftwareProvidersSystemCalls) {
  auto at = [](const auto& t, runtime::Cost c) { return t[static_cast<size_t>(c)]; };
  // Software provider (libfabric tcp): every post is a send of its own, in
  // one turn or apart (until 2026-11-30 one turn's posts to a peer paid the
  // fixed part once: `together` 1000 + 30). The target places each packet,
  // and the answers here come back one at a time, each a receive of its own.
  auto together = WriteCosts(true, true), apart = WriteCosts(true, false);
  EXPECT_EQ(at(together, runtime::Cost::kFabricPost), 3 * 1000 + 30);
  EXPECT_EQ(at(apart, runtime::Cost::kFabricPost), 3 * 1000 + 30);
  EXPECT_EQ(at(together, runtime::Cost::kFabricTarget), 3 * 2000);
  EXPECT_EQ(at(apart, runtime::Cost::kFabricTarget), 3 * 2000);
  EXPECT_EQ(at(together, runtime::Cost::kFabricCompletion), 3 * 300);
  EXPECT_EQ(at(apart, runtime::Cost::kFabricCompletion), 3 * 300);
  // An RDMA NIC: every work request pays its post and completion; placing
  // costs the target's CPU nothing.
  auto rdma = WriteCosts(false, true);
  EXPECT_EQ(at(rdma, runtime::Cost::kFabricPost), 3 * 1010);
  EXPECT_EQ(at(rdma, runtime::Cost::kFabricTarget), 0);
  EXPECT_EQ(at(rdma, runtime::Cost::kFabricCompletion), 3 * 300);
}

// Rowan's SEND + READ in one ibv_post_send, the SEND unsignalled: two
// Writes chained (kMore) and silent before a signalled Read pay one post
// and one completion; the same three posted plainly pay three of each.
TEST(SimFabricTest, AChainPaysOneDoorbellAndSilentOpsNoCompletion) {
  auto costs = [](bool chained) {
    World w(2);
    runtime::CostModel m;
    m[runtime::Cost::kFabricPost] = {1000, 1.0};
    m[runtime::Cost::kFabricCompletion] = {300, 0};
    w.rt.SetCostModel(m);
    const uint32_t host = w.rt.AddHost(4, -1);
    for (auto* x : w.nics) w.rt.PlaceOn(x, host);
    Buf target(1024), src(64), dst(64);
    MemoryRegion tmr = w.Reg(1, target);
    const uint32_t post = chained ? (kMore | kSilent) : kSignalled;
    w.nics[0]->Post([&] {
      EXPECT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 10, nullptr, tmr.remote, 0, 1, post).ok());
      EXPECT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 10, nullptr, tmr.remote, 64, 2, post).ok());
      EXPECT_TRUE(w.ep(0).Read(w.peer(0, 1), dst.bytes, 1, nullptr, tmr.remote, 0, 3).ok());
    });
    EXPECT_TRUE(w.Await(0, 3, Op::kRead).has_value());
    w.rt.RunUntil(w.rt.Now() + kMillisecond);
    EXPECT_EQ(w.Find(0, 1, Op::kWrite).has_value(), !chained);
    return w.rt.CostTotals();
  };
  auto at = [](const auto& t, runtime::Cost c) { return t[static_cast<size_t>(c)]; };
  auto chained = costs(true), plain = costs(false);
  EXPECT_EQ(at(chained, runtime::Cost::kFabricPost), 1000 + 10 + 10 + 1);
  EXPECT_EQ(at(chained, runtime::Cost::kFabricCompletion), 300);
  EXPECT_EQ(at(plain, runtime::Cost::kFabricPost), 3 * 1000 + 10 + 10 + 1);
  EXPECT_EQ(at(plain, runtime::Cost::kFabricCompletion), 3 * 300);
}

// A torn silent Write's failure comes before the Read behind it even when
// the answers are lost and retransmitted out of order (a lost answer waits
// its back-off; the Read's may get through first).
TEST(SimFabricTest, SilentFailureComesFirstDespiteLostAnswers) {
  int retransmitted = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    World w(2, SimFabricOptions{}, seed);
    LinkFaults lossy;
    lossy.drop_probability = 0.5;
    w.fabric.SetLinkFaults(1, 0, lossy);  // the answers' direction
    Buf target(256), src(64), dst(64);
    MemoryRegion tmr = w.Reg(1, target);
    w.fabric.TearNextWrite(1, 10);
    ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 64, nullptr, tmr.remote, 0, 1, kMore | kSilent).ok());
    ASSERT_TRUE(w.ep(0).Read(w.peer(0, 1), dst.bytes, 1, nullptr, tmr.remote, 128, 2).ok());
    auto read = w.Await(0, 2, Op::kRead);
    ASSERT_TRUE(read.has_value()) << "seed " << seed;
    auto write = w.Find(0, 1, Op::kWrite);
    ASSERT_TRUE(write.has_value()) << "seed " << seed << ": the Read completed before the torn Write's failure";
    EXPECT_EQ(write->c.status, Code::kAborted);
    EXPECT_LE(write->at, read->at);
    if (w.fabric.stats().retransmits > 0) ++retransmitted;
  }
  EXPECT_GT(retransmitted, 8);  // the seeds did lose answers
}

// ---------------------------------------------------------------------------
// Timing model

TEST(SimFabricTest, WriteLatencyFollowsTheModelExactly) {
  SimFabricOptions o;
  o.latency = 1000;
  o.bandwidth = 1.0;  // 1 byte/ns
  o.nic_service = 10;
  World w(2, o);
  Buf target(256), src(256);
  MemoryRegion tmr = w.Reg(1, target);
  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 100, nullptr, tmr.remote, 0, 1).ok());
  const auto c = w.Await(0, 1, Op::kWrite);
  ASSERT_TRUE(c.has_value());
  // 100 ns on the sender's wire, 1000 ns flight, 10 ns at the target NIC,
  // 1000 ns back.
  EXPECT_EQ(c->at, 100 + 1000 + 10 + 1000);
}

TEST(SimFabricTest, LinkAndNodeDelaysApplyWithPrecedence) {
  SimFabricOptions o;
  o.latency = 1000;
  o.bandwidth = 0;
  o.nic_service = 0;
  World w(3, o);
  LinkFaults slow_node;
  slow_node.extra_delay = 10000;
  w.fabric.SetNodeFaults(1, slow_node);  // both directions of 0<->1 and 2<->1
  LinkFaults fast_link;
  w.fabric.SetLinkFaults(1, 2, fast_link);  // ...except the link 1 -> 2
  Buf target(64), src(8);
  MemoryRegion tmr = w.Reg(1, target);
  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 8, nullptr, tmr.remote, 0, 1).ok());
  ASSERT_TRUE(w.ep(2).Write(w.peer(2, 1), src.bytes, 8, nullptr, tmr.remote, 0, 2).ok());
  const auto a = w.Await(0, 1, Op::kWrite);
  const auto b = w.Await(2, 2, Op::kWrite);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->at, 2 * (1000 + 10000));
  EXPECT_EQ(b->at, (1000 + 10000) + 1000);
}

TEST(SimFabricTest, TargetNicServiceSerialisesSenders) {
  SimFabricOptions o;
  o.latency = 1000;
  o.bandwidth = 0;  // no serialisation cost: isolate the NIC
  o.nic_service = 500;
  World w(3, o);
  Buf target(256), src(64);
  MemoryRegion tmr = w.Reg(0, target);
  ASSERT_TRUE(w.ep(1).Write(w.peer(1, 0), src.bytes, 8, nullptr, tmr.remote, 0, 1).ok());
  ASSERT_TRUE(w.ep(2).Write(w.peer(2, 0), src.bytes, 8, nullptr, tmr.remote, 8, 2).ok());
  const auto a = w.Await(1, 1, Op::kWrite);
  const auto b = w.Await(2, 2, Op::kWrite);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(std::min(a->at, b->at), 1000 + 500 + 1000);
  EXPECT_EQ(std::max(a->at, b->at), 1000 + 1000 + 1000);
}

// One node written or read by many is bound by its own link: what comes in
// crosses it one packet after another, and so does what goes out (READ
// answers) — a DINOMO pool's 7 GB/s.
TEST(SimFabricTest, WritesToOneNodeShareItsIncomingLink) {
  SimFabricOptions o;
  o.latency = 1000;
  o.bandwidth = 1.0;
  o.nic_service = 0;
  World w(3, o);
  Buf target(4096), src(1000);
  MemoryRegion tmr = w.Reg(0, target);
  ASSERT_TRUE(w.ep(1).Write(w.peer(1, 0), src.bytes, 1000, nullptr, tmr.remote, 0, 1).ok());
  ASSERT_TRUE(w.ep(2).Write(w.peer(2, 0), src.bytes, 1000, nullptr, tmr.remote, 2048, 2).ok());
  const auto a = w.Await(1, 1, Op::kWrite);
  const auto b = w.Await(2, 2, Op::kWrite);
  ASSERT_TRUE(a.has_value() && b.has_value());
  // Each sender's own wire 1000 ns, then the flight: both arrive at 2000,
  // but node 0's link carries the second only after the first.
  EXPECT_EQ(std::min(a->at, b->at), 1000 + 1000 + 1000);
  EXPECT_EQ(std::max(a->at, b->at), 1000 + 1000 + 1000 + 1000);
}

TEST(SimFabricTest, ReadAnswersShareTheTargetsOutgoingLink) {
  SimFabricOptions o;
  o.latency = 1000;
  o.bandwidth = 1.0;
  o.nic_service = 0;
  World w(3, o);
  Buf target(1000), d1(1000), d2(1000);
  MemoryRegion tmr = w.Reg(0, target);
  ASSERT_TRUE(w.ep(1).Read(w.peer(1, 0), d1.bytes, 1000, nullptr, tmr.remote, 0, 1).ok());
  ASSERT_TRUE(w.ep(2).Read(w.peer(2, 0), d2.bytes, 1000, nullptr, tmr.remote, 0, 2).ok());
  const auto a = w.Await(1, 1, Op::kRead);
  const auto b = w.Await(2, 2, Op::kRead);
  ASSERT_TRUE(a.has_value() && b.has_value());
  // The requests carry no data; node 0 sends one answer, then the other.
  EXPECT_EQ(std::min(a->at, b->at), 1000 + 1000 + 1000);
  EXPECT_EQ(std::max(a->at, b->at), 1000 + 1000 + 1000 + 1000);
}

TEST(SimFabricTest, LargeOperationsAreSplitAtTheMtuAndInterleaveAcrossConnections) {
  SimFabricOptions o;
  o.mtu = 1000;
  o.bandwidth = 0;
  World w(3, o);
  Buf t1(4000), t2(4000), src(4000);
  // Record placement order through the persist hook (dma_persist_delay = 0:
  // called at placement).
  std::vector<int> order;
  w.fabric.SetPersistHook(0, [&](const std::byte* p, size_t len) {
    EXPECT_LE(len, 1000u);
    order.push_back(p >= t1.bytes && p < t1.bytes + t1.len ? 1 : 2);
  });
  MemoryRegion m1 = w.Reg(0, t1);
  MemoryRegion m2 = w.Reg(0, t2);
  ASSERT_TRUE(w.ep(1).Write(w.peer(1, 0), src.bytes, 3500, nullptr, m1.remote, 0, 1).ok());
  ASSERT_TRUE(w.ep(2).Write(w.peer(2, 0), src.bytes, 3500, nullptr, m2.remote, 0, 2).ok());
  ASSERT_TRUE(w.Await(1, 1, Op::kWrite).has_value() && w.Await(2, 2, Op::kWrite).has_value());
  EXPECT_EQ(w.fabric.stats().packets, 8u);
  ASSERT_EQ(order.size(), 8u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 1, 2, 1, 2, 1, 2}));
}

// ---------------------------------------------------------------------------
// Determinism

struct RunResult {
  uint64_t trace;
  uint64_t memory;
  SimFabric::Stats stats;
};

// Three nodes exchange sends, writes and fetch-adds over a lossy, jittery
// network with tears, a partition that heals, and a crash.
RunResult FaultyWorkload(uint64_t seed) {
  SimFabricOptions o;
  o.mtu = 512;
  o.dma_persist_delay = 2 * kMicrosecond;
  EndpointOptions eo;
  eo.op_timeout = std::chrono::milliseconds(20);
  World w(4, o, seed, eo);
  LinkFaults f;
  f.drop_probability = 0.05;
  f.jitter = 3 * kMicrosecond;
  f.tear_probability = 0.1;
  w.fabric.SetDefaultFaults(f);
  std::vector<std::unique_ptr<Buf>> mem;
  std::vector<MemoryRegion> regs;
  for (int i = 0; i < 4; ++i) {
    mem.push_back(std::make_unique<Buf>(64 * 1024));
    regs.push_back(w.Reg(i, *mem.back()));
    EXPECT_TRUE(w.ep(i).PostMultiRecv(mem.back()->bytes + 32 * 1024, 32 * 1024, nullptr, 7).ok());
  }
  Random rng(seed);
  Buf src(4096);
  for (size_t i = 0; i < src.len; ++i) src.bytes[i] = static_cast<std::byte>(rng.Next());
  std::vector<uint64_t> olds(600);
  uint64_t ctx = 0;
  auto issue_round = [&] {
    for (int from = 0; from < 4; ++from) {
      if (w.fabric.crashed(from)) continue;
      for (int k = 0; k < 5; ++k) {
        const int to = static_cast<int>(rng.Uniform(4));
        const size_t len = 1 + rng.Uniform(1500);
        const uint64_t off = rng.Uniform(16 * 1024);
        switch (rng.Uniform(3)) {
          case 0:
            (void)w.ep(from).Send(w.peer(from, to), src.bytes, len, nullptr, ++ctx);
            break;
          case 1:
            (void)w.ep(from).Write(w.peer(from, to), src.bytes, len, nullptr, regs[to].remote, off,
                                   ++ctx);
            break;
          default:
            ++ctx;
            (void)w.ep(from).FetchAdd(w.peer(from, to), regs[to].remote, 30 * 1024, 1,
                                      &olds[ctx % olds.size()], ctx);
        }
      }
    }
  };
  for (int round = 0; round < 30; ++round) {
    if (round == 5) w.fabric.Partition(0, 1);
    if (round == 12) w.fabric.Heal(0, 1);
    if (round == 20) w.fabric.CrashNode(3);
    issue_round();
    w.rt.RunUntil(w.rt.Now() + 50 * kMicrosecond);
  }
  w.rt.RunUntilIdle();
  uint64_t h = 0;
  for (int i = 0; i < 3; ++i) {
    for (size_t b = 0; b < mem[i]->len; ++b) h = h * 1099511628211ull + static_cast<uint8_t>(mem[i]->bytes[b]);
  }
  return {w.rt.TraceHash(), h, w.fabric.stats()};
}

TEST(SimFabricTest, SameSeedReproducesTheRunExactlyAndAnotherSeedDiffers) {
  const RunResult a = FaultyWorkload(11);
  const RunResult b = FaultyWorkload(11);
  const RunResult c = FaultyWorkload(12);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.memory, b.memory);
  EXPECT_EQ(a.stats.retransmits, b.stats.retransmits);
  EXPECT_NE(a.trace, c.trace);
  // The workload really exercised the faults.
  EXPECT_GT(a.stats.retransmits, 0u);
  EXPECT_GT(a.stats.torn_writes, 0u);
  EXPECT_GT(a.stats.timeouts, 0u);
}

// ---------------------------------------------------------------------------
// Torn writes

TEST(SimFabricTest, TornWriteLeavesExactlyThePrefixAtEveryByte) {
  constexpr size_t kLen = 200;
  SimFabricOptions o;
  o.mtu = 64;  // the tear crosses packet boundaries too
  World w(2, o);
  Buf target(kLen + 64), src(kLen);
  MemoryRegion tmr = w.Reg(1, target);
  for (size_t i = 0; i < kLen; ++i) src.bytes[i] = static_cast<std::byte>(0x80 | (i % 0x7F));
  for (size_t k = 0; k <= kLen; ++k) {
    SCOPED_TRACE("torn after " + std::to_string(k) + " bytes");
    std::memset(target.bytes, 0x11, target.len);
    w.fabric.TearNextWrite(1, k);
    ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, kLen, nullptr, tmr.remote, 32, k).ok());
    const auto c = w.Await(0, k, Op::kWrite);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->c.status, k < kLen ? Code::kAborted : Code::kOk);
    ASSERT_EQ(std::memcmp(target.bytes + 32, src.bytes, k), 0);
    for (size_t i = 32 + k; i < target.len; ++i) ASSERT_EQ(target.bytes[i], std::byte{0x11}) << i;
    for (size_t i = 0; i < 32; ++i) ASSERT_EQ(target.bytes[i], std::byte{0x11}) << i;
  }
  EXPECT_EQ(w.fabric.stats().torn_writes, kLen);
}

// ---------------------------------------------------------------------------
// Persistence

TEST(SimFabricTest, WriteCompletionPrecedesPersistenceAndReadWaitsForIt) {
  SimFabricOptions o;
  o.latency = 1000;
  o.bandwidth = 0;
  o.nic_service = 0;
  o.dma_persist_delay = 50 * kMicrosecond;
  World w(2, o);
  Buf target(256), src(64), back(64);
  std::vector<std::pair<Nanos, size_t>> persisted;
  w.fabric.SetPersistHook(1, [&](const std::byte* p, size_t len) {
    persisted.emplace_back(w.rt.Now(), static_cast<size_t>(p - target.bytes) + len);
  });
  MemoryRegion tmr = w.Reg(1, target);
  std::memset(src.bytes, 0x42, 64);
  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 64, nullptr, tmr.remote, 0, 1).ok());
  ASSERT_TRUE(w.ep(0).Read(w.peer(0, 1), back.bytes, 8, nullptr, tmr.remote, 0, 2).ok());
  const auto wc = w.Await(0, 1, Op::kWrite);
  const auto rc = w.Await(0, 2, Op::kRead);
  ASSERT_TRUE(wc.has_value() && rc.has_value());
  EXPECT_EQ(wc->at, 2000);                         // acknowledged when placed
  EXPECT_EQ(rc->at, 1000 + 50 * kMicrosecond + 1000);  // answered once persistent
  ASSERT_EQ(persisted.size(), 1u);
  EXPECT_EQ(persisted[0].first, 1000 + 50 * kMicrosecond);
  EXPECT_EQ(persisted[0].second, 64u);
  EXPECT_EQ(Word(back.bytes), 0x4242424242424242ull);
}

// A node crash loses what was placed but not yet persistent; what a Read
// confirmed survives. PM is modelled by PmRegion's crash model.
TEST(SimFabricTest, CrashKeepsWhatReadConfirmedAndFailsPeersOps) {
  SimFabricOptions o;
  o.dma_persist_delay = kMillisecond;
  EndpointOptions eo;
  eo.op_timeout = std::chrono::milliseconds(10);
  World w(2, o, 3, eo);
  auto region = pm::PmRegion::Anonymous(4096, pm::RegionOptions{.mode = pm::PersistMode::kNone,
                                                                .crash_model = true});
  ASSERT_TRUE(region.ok());
  pm::PmRegion& pmr = **region;
  w.fabric.SetPersistHook(1, [&](const std::byte* p, size_t len) { pmr.Persist(p, len); });
  pm::CrashStats crash{};
  w.fabric.SetCrashHook(1, [&] { crash = pmr.SimulateCrash(99); });
  auto mr = w.eps[1]->Register(pmr.base(), pmr.size(), Endpoint::kRemoteWrite | Endpoint::kRemoteRead);
  ASSERT_TRUE(mr.ok());
  Buf a(64), b(64), back(64);
  std::memset(a.bytes, 0xA1, 64);
  std::memset(b.bytes, 0xB2, 64);

  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), a.bytes, 64, nullptr, mr->remote, 0, 1).ok());
  ASSERT_TRUE(w.ep(0).Read(w.peer(0, 1), back.bytes, 8, nullptr, mr->remote, 0, 2).ok());
  ASSERT_TRUE(w.Await(0, 2, Op::kRead).has_value());  // remote persist of `a`
  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), b.bytes, 64, nullptr, mr->remote, 64, 3).ok());
  const auto bc = w.Await(0, 3, Op::kWrite);
  ASSERT_TRUE(bc.has_value());
  EXPECT_EQ(bc->c.status, Code::kOk);  // placed, not yet persistent
  w.fabric.CrashNode(1);
  w.rt.RunUntil(w.rt.Now() + 2 * kMillisecond);  // the pending persist must not happen
  EXPECT_EQ(crash.dirty_lines, 1u);
  EXPECT_EQ(std::memcmp(pmr.base(), a.bytes, 64), 0);

  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), a.bytes, 64, nullptr, mr->remote, 128, 4).ok());
  const auto dead = w.Await(0, 4, Op::kWrite);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->c.status, Code::kTimeout);
  EXPECT_FALSE(w.fabric.CreateEndpoint(1, nullptr, eo).ok());
  w.fabric.RestartNode(1);
  EXPECT_TRUE(w.fabric.CreateEndpoint(1, nullptr, eo).ok());
}

// The flushing Read is answered only once the Writes before it persisted.
// If the target loses power in between, the answer must never leave — even
// when the node is back before the persist horizon (campaign seed 18 of
// rowan-kv at a 3 us persist delay acknowledged a lost write this way).
TEST(SimFabricTest, ReadIsNotAnsweredWhenTheTargetCrashesBeforePersisting) {
  SimFabricOptions o;
  o.latency = 1000;
  o.dma_persist_delay = 50 * kMicrosecond;
  EndpointOptions eo;
  eo.op_timeout = std::chrono::milliseconds(5);
  World w(2, o, 3, eo);
  int persists = 0;
  w.fabric.SetPersistHook(1, [&](const std::byte*, size_t) { ++persists; });
  Buf target(256), src(64), back(64);
  MemoryRegion tmr = w.Reg(1, target);
  std::memset(src.bytes, 0x42, 64);
  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 64, nullptr, tmr.remote, 0, 1).ok());
  ASSERT_TRUE(w.ep(0).Read(w.peer(0, 1), back.bytes, 8, nullptr, tmr.remote, 0, 2).ok());
  ASSERT_TRUE(w.Await(0, 1, Op::kWrite).has_value());  // placed at 2 us
  w.rt.RunUntil(w.rt.Now() + 10 * kMicrosecond);       // the Read waits for 51 us
  w.fabric.CrashNode(1);
  w.fabric.RestartNode(1);
  const auto rc = w.Await(0, 2, Op::kRead);
  ASSERT_TRUE(rc.has_value());
  EXPECT_NE(rc->c.status, Code::kOk) << "a Read vouched for a Write its target never persisted";
  EXPECT_EQ(persists, 0);
}

// ---------------------------------------------------------------------------
// Reliability

TEST(SimFabricTest, PartitionTimesOutAtOpTimeoutThenHealedConnectionWorks) {
  EndpointOptions eo;
  eo.op_timeout = std::chrono::milliseconds(5);
  World w(2, SimFabricOptions{}, 1, eo);
  Buf target(256), src(64);
  MemoryRegion tmr = w.Reg(1, target);
  w.fabric.Partition(0, 1);
  const Nanos t0 = w.rt.Now();
  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 8, nullptr, tmr.remote, 0, 1).ok());
  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 8, nullptr, tmr.remote, 8, 2).ok());
  const auto c1 = w.Await(0, 1, Op::kWrite);
  const auto c2 = w.Await(0, 2, Op::kWrite);
  ASSERT_TRUE(c1 && c2);
  EXPECT_EQ(c1->c.status, Code::kTimeout);
  EXPECT_EQ(c2->c.status, Code::kUnavailable);  // flushed with its connection
  EXPECT_EQ(c1->at - t0, 5 * kMillisecond);
  w.fabric.Heal(0, 1);
  std::memset(src.bytes, 0x77, 8);
  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 8, nullptr, tmr.remote, 16, 3).ok());
  const auto c3 = w.Await(0, 3, Op::kWrite);
  ASSERT_TRUE(c3.has_value());
  EXPECT_EQ(c3->c.status, Code::kOk);
  EXPECT_EQ(Word(target.bytes + 16), 0x7777777777777777ull);
  EXPECT_EQ(Word(target.bytes), 0u) << "a timed-out write must not land later";
}

TEST(SimFabricTest, DropsBecomeDelayNotLoss) {
  World w(2);
  LinkFaults f;
  f.drop_probability = 0.3;
  w.fabric.SetDefaultFaults(f);
  Buf target(8 * 1000), src(8);
  MemoryRegion tmr = w.Reg(1, target);
  for (uint64_t i = 0; i < 1000; ++i) {
    std::memcpy(src.bytes, &i, 8);
    ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 8, nullptr, tmr.remote, 8 * i, i).ok());
  }
  w.rt.RunUntilIdle();
  for (uint64_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(Word(target.bytes + 8 * i), i);
    const auto c = w.Find(0, i, Op::kWrite);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->c.status, Code::kOk);
  }
  EXPECT_GT(w.fabric.stats().retransmits, 100u);
  EXPECT_EQ(w.fabric.stats().timeouts, 0u);
}

TEST(SimFabricTest, JitterReordersAcrossConnectionsButNeverWithinOne) {
  World w(3);
  LinkFaults f;
  f.jitter = 20 * kMicrosecond;
  w.fabric.SetDefaultFaults(f);
  Buf rbuf(64 * 400);
  ASSERT_TRUE(w.ep(0).PostMultiRecv(rbuf.bytes, rbuf.len, nullptr, 1).ok());
  for (uint64_t i = 0; i < 100; ++i) {
    for (int s = 1; s <= 2; ++s) {
      uint64_t tag = (static_cast<uint64_t>(s) << 32) | i;
      ASSERT_TRUE(w.ep(s).Send(w.peer(s, 0), &tag, 8, nullptr, i).ok());
    }
  }
  w.rt.RunUntilIdle();
  std::vector<uint64_t> tags;
  for (const auto& s : w.seen[0]) {
    if (s.c.op == Op::kRecv && s.c.data) tags.push_back(Word(s.c.data));
  }
  ASSERT_EQ(tags.size(), 200u);
  uint64_t next[3] = {0, 0, 0};
  int same_sender_runs = 0;
  for (size_t k = 0; k < tags.size(); ++k) {
    const uint64_t s = tags[k] >> 32;
    EXPECT_EQ(tags[k] & 0xFFFFFFFF, next[s]++) << "FIFO broken for sender " << s;
    if (k > 0 && (tags[k] >> 32) == (tags[k - 1] >> 32)) ++same_sender_runs;
  }
  // Posting alternated strictly; only reordering across connections can put
  // two messages of one sender next to each other.
  EXPECT_GT(same_sender_runs, 0);
}

TEST(SimFabricTest, SendWithoutABufferTimesOutAfterRnrRetries) {
  EndpointOptions eo;
  eo.op_timeout = std::chrono::milliseconds(1);
  World w(2, SimFabricOptions{}, 1, eo);
  uint64_t v = 5;
  ASSERT_TRUE(w.ep(0).Send(w.peer(0, 1), &v, 8, nullptr, 1).ok());
  const auto c = w.Await(0, 1, Op::kSend);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->c.status, Code::kTimeout);
  EXPECT_GT(w.fabric.stats().rnr_retries, 10u);
}

// Stricter than the contract (which lets a buffer retire once its tail is
// below the provider's limit): the simulator moves to the next buffer
// exactly when the next message does not fit, and only then.
TEST(SimFabricTest, MultiRecvOverflowsExactlyWhenTheNextMessageDoesNotFit) {
  World w(2);
  Buf a(256), b(4096);
  ASSERT_TRUE(w.ep(1).PostMultiRecv(a.bytes, a.len, nullptr, 100).ok());
  ASSERT_TRUE(w.ep(1).PostMultiRecv(b.bytes, b.len, nullptr, 101).ok());
  std::vector<std::byte> msg(192, std::byte{7});
  // 192 B, then 128 B (64 B left in `a`: does not fit), then 70 B.
  ASSERT_TRUE(w.ep(0).Send(w.peer(0, 1), msg.data(), 192, nullptr, 1).ok());
  ASSERT_TRUE(w.ep(0).Send(w.peer(0, 1), msg.data(), 128, nullptr, 2).ok());
  ASSERT_TRUE(w.ep(0).Send(w.peer(0, 1), msg.data(), 70, nullptr, 3).ok());
  ASSERT_TRUE(w.Await(0, 3, Op::kSend).has_value());
  w.rt.RunUntil([&] { return false; }, w.rt.Now() + 10 * kMillisecond);
  std::vector<Completion> got;
  bool a_released = false;
  for (const auto& seen : w.seen[1]) {
    if (seen.c.op != Op::kRecv) continue;
    if (seen.c.context == 100 && seen.c.buffer_released) a_released = true;
    if (seen.c.context == 101) {
      EXPECT_FALSE(seen.c.buffer_released) << "`b` still has room";
    }
    if (seen.c.data != nullptr && seen.c.len > 0) got.push_back(seen.c);
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].data, a.bytes);
  EXPECT_EQ(got[1].data, b.bytes);
  EXPECT_EQ(got[2].data, b.bytes + 128);
  EXPECT_EQ(got[2].len, 128u);
  EXPECT_TRUE(a_released);
}

TEST(SimFabricTest, MessageTooLargeForAnyBufferFailsAndSingleRecvTruncates) {
  World w(2);
  Buf small(128), single(16);
  ASSERT_TRUE(w.ep(1).PostMultiRecv(small.bytes, small.len, nullptr, 1).ok());
  std::vector<std::byte> big(200, std::byte{1});
  ASSERT_TRUE(w.ep(0).Send(w.peer(0, 1), big.data(), big.size(), nullptr, 1).ok());
  const auto c = w.Await(0, 1, Op::kSend);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->c.status, Code::kTooLarge);

  Endpoint& r = w.ep(1);
  // The multi buffer is untouched and still first; a fitting message uses it.
  ASSERT_TRUE(w.ep(0).Send(w.peer(0, 1), big.data(), 100, nullptr, 2).ok());
  ASSERT_TRUE(w.Await(1, 1, Op::kRecv).has_value());
  EXPECT_EQ(w.Find(1, 1, Op::kRecv)->c.data, small.bytes);
  // 128 B buffer now full: released with that message; next a 16 B buffer.
  EXPECT_TRUE(w.Find(1, 1, Op::kRecv)->c.buffer_released);
  ASSERT_TRUE(r.PostRecv(single.bytes, single.len, nullptr, 9).ok());
  ASSERT_TRUE(w.ep(0).Send(w.peer(0, 1), big.data(), 40, nullptr, 3).ok());
  const auto rc = w.Await(1, 9, Op::kRecv);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(rc->c.status, Code::kTooLarge);
  EXPECT_EQ(rc->c.len, 16u);
  EXPECT_EQ(w.Await(0, 3, Op::kSend)->c.status, Code::kOk);
}

TEST(SimFabricTest, TargetChecksKeysRightsAndAlignment) {
  World w(2);
  Buf target(256), src(64);
  auto ro = w.eps[1]->Register(target.bytes, target.len, Endpoint::kRemoteRead);
  ASSERT_TRUE(ro.ok());
  uint64_t old = 0;
  ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 8, nullptr, ro->remote, 0, 1).ok());
  ASSERT_TRUE(w.ep(0).FetchAdd(w.peer(0, 1), ro->remote, 0, 1, &old, 2).ok());
  RemoteMemory forged = ro->remote;
  forged.key += 1;
  ASSERT_TRUE(w.ep(0).Read(w.peer(0, 1), src.bytes, 8, nullptr, forged, 0, 3).ok());
  RemoteMemory shifted = ro->remote;
  shifted.addr += 200;  // lies past the registration's end on the target
  ASSERT_TRUE(w.ep(0).Read(w.peer(0, 1), src.bytes, 64, nullptr, shifted, 0, 4).ok());
  EXPECT_FALSE(w.ep(0).FetchAdd(w.peer(0, 1), ro->remote, 4, 1, &old, 5).ok());
  EXPECT_FALSE(w.ep(0).Write(w.peer(0, 1), src.bytes, 8, nullptr, ro->remote, 250, 6).ok());
  EXPECT_FALSE(w.ep(0).Send(77, src.bytes, 8, nullptr, 7).ok());
  for (uint64_t ctx : {1, 2, 3, 4}) {
    w.rt.RunUntilIdle();
    bool found = false;
    for (const auto& s : w.seen[0]) {
      if (s.c.context == ctx) {
        found = true;
        EXPECT_EQ(s.c.status, Code::kInvalidArgument) << ctx;
      }
    }
    EXPECT_TRUE(found) << ctx;
  }
  EXPECT_TRUE(std::all_of(target.bytes, target.bytes + target.len,
                          [](std::byte b) { return b == std::byte{0}; }));
  ASSERT_TRUE(w.eps[1]->Deregister(*ro).ok());
  EXPECT_FALSE(w.eps[1]->Deregister(*ro).ok());
}

TEST(SimFabricTest, DestroyingAnEndpointWithOperationsInFlightIsSafe) {
  World w(3);
  Buf target(4096), src(4096);
  MemoryRegion tmr = w.Reg(1, target);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(w.ep(0).Write(w.peer(0, 1), src.bytes, 4096, nullptr, tmr.remote, 0, i).ok());
    ASSERT_TRUE(w.ep(2).Write(w.peer(2, 1), src.bytes, 64, nullptr, tmr.remote, 0, i).ok());
  }
  // Some of node 2's writes are placed, some wait in node 1's NIC.
  w.rt.RunUntil(w.rt.Now() + 1050);
  w.eps[0].reset();  // initiator gone mid-flight
  w.eps[1].reset();  // target gone mid-flight
  w.rt.RunUntilIdle();
  size_t failed = 0;
  for (const auto& s : w.seen[2]) failed += s.c.status != Code::kOk;
  EXPECT_GT(failed, 0u) << "writes to the destroyed target must fail";
  EXPECT_EQ(w.seen[2].size(), 20u);
}

TEST(SimFabricTest, ForNodeGivesProtocolCodeAPlainFabric) {
  runtime::SimRuntime rt;
  SimFabric fabric(rt);
  runtime::Executor* nic = rt.CreateExecutor("n5/nic");
  std::unique_ptr<Fabric> f = fabric.ForNode(5, nic);
  EXPECT_EQ(f->provider(), "sim");
  auto a = f->CreateEndpoint(EndpointOptions{});
  auto b = f->CreateEndpoint(EndpointOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  auto p = (*a)->AddPeer((*b)->address());
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE((*a)->AddPeer("tcp/1.2.3.4").ok());
  EXPECT_FALSE((*a)->AddPeer("sim/99").ok());
  Buf rbuf(64);
  ASSERT_TRUE((*b)->PostMultiRecv(rbuf.bytes, 64, nullptr, 1).ok());
  uint64_t v = 42;
  ASSERT_TRUE((*a)->Send(*p, &v, 8, nullptr, 2).ok());
  fabric.CrashNode(5);  // both endpoints live on node 5
  rt.RunUntilIdle();
  Completion c[4];
  EXPECT_EQ((*a)->Poll(c), 0u);
  EXPECT_EQ((*a)->Send(*p, &v, 8, nullptr, 3).code(), Code::kUnavailable);
}

}  // namespace
}  // namespace slip::fabric
