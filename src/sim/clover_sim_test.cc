// A seeded campaign of Clover (dinomo/clover.h), DINOMO's shared-everything
// baseline, on virtual time: three nodes over the real pool on the
// simulated fabric, four clients each sending every operation to a random
// node (any node serves any key), a few hot keys so writers race on the same
// chains, caches of different sizes per seed, a jittery fabric, the
// metadata server's GC pass moving chain heads every few hundred
// microseconds, an index too small for the keys on every third seed (the
// metadata server grows it mid-run), and — on odd seeds — one node dying mid-run with its
// operations on the wire. Every history is checked for linearizability.
//
// One seed: SLIP_CLOVER_SEED=17 build/src/sim/clover_sim_test
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "dinomo/clover.h"
#include "dinomo/testing/sim_pool.h"
#include "sim/linearizability.h"

namespace slip::sim {
namespace {

using runtime::kMicrosecond;
using runtime::kMillisecond;

struct CampaignResult {
  bool ok = false;
  std::string failure;
  uint64_t ops = 0, unknown = 0, swap_failures = 0, advanced = 0, index_grows = 0;
};

CampaignResult RunCampaign(uint64_t seed) {
  runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = seed});
  dinomo::PoolOptions po;
  po.segment_bytes = 64 << 10;
  po.num_buckets = 64;  // few buckets: chains of buckets and slot collisions too
  if (seed % 3 == 0) {  // room for 3 of the 6 keys: the metadata server grows the index mid-run
    po.num_buckets = 1;
    po.index_bytes = 64 * 2;
  }
  dinomo::testing::SimPool world(rt, 16 << 20, po);
  fabric::LinkFaults jitter;
  jitter.jitter = 20 * kMicrosecond;
  world.fabric().SetDefaultFaults(jitter);

  struct Cn {
    runtime::Executor* exec = nullptr;
    std::unique_ptr<fabric::Endpoint> ep;
    std::unique_ptr<rpc::LocalCaller> calls;
    std::unique_ptr<dinomo::CloverNode> node;
  };
  CampaignResult out;
  std::map<uint32_t, Cn> cns;
  static constexpr uint64_t kCaches[] = {0, 300, 1 << 20};
  int ready = 0;
  for (uint32_t id = 1; id <= 3; ++id) {
    Cn& c = cns[id];
    c.exec = rt.CreateExecutor("cn" + std::to_string(id));
    c.ep = std::move(world.fabric().CreateEndpoint(id, c.exec, {})).value();
    c.calls = world.CallerFor(c.exec);
    c.node = std::make_unique<dinomo::CloverNode>(
        c.exec, c.ep.get(), c.calls.get(), dinomo::testing::SimPool::kPoolId,
        dinomo::CloverNodeOptions{.node = id, .epoch = 1, .cache_bytes = kCaches[(seed + id) % 3], .limits = {}});
    Cn* k = &c;
    c.exec->AddPoller([k] { return k->node && k->node->Poll(); });
    c.exec->Post([k, &ready, &out] {
      k->node->Start([&ready, &out](Status s) {
        if (!s.ok()) out.failure = "start: " + s.ToString();
        ++ready;
      });
    });
  }
  rt.RunUntil([&] { return ready == 3; }, rt.Now() + 10 * kMillisecond);
  if (ready != 3) return CampaignResult{false, "nodes did not start"};

  // The metadata server's GC pass.
  runtime::Executor* pool_exec = world.pool_exec();
  bool stop_gc = false;
  auto gc = std::make_shared<std::function<void()>>();
  *gc = [&, gc] {
    if (stop_gc) return;
    auto moved = dinomo::AdvanceChains(world.pool(), world.region());
    if (!moved.ok()) out.failure = "gc: " + moved.status().ToString();
    if (moved.ok()) out.advanced += *moved;
    pool_exec->After((100 + static_cast<runtime::Nanos>(pool_exec->Rng().Uniform(400))) * kMicrosecond,
                     [gc] { (*gc)(); });
  };
  pool_exec->Post([gc] { (*gc)(); });

  // On odd seeds a node dies mid-run, its operations on the wire.
  Random& dice = rt.CreateExecutor("dice")->Rng();
  const uint32_t victim = 1 + static_cast<uint32_t>(dice.Uniform(3));
  if (seed % 2 == 1) {
    cns[victim].exec->After((1 + static_cast<runtime::Nanos>(dice.Uniform(4))) * kMillisecond, [&] {
      Cn& v = cns[victim];
      v.ep.reset();
      v.node.reset();
    });
  }

  std::vector<Operation> history;
  constexpr int kClients = 4, kOpsPerClient = 200, kKeys = 6;
  int clients_done = 0;
  std::vector<std::unique_ptr<std::function<void(int)>>> loops;
  for (int c = 0; c < kClients; ++c) {
    runtime::Executor* ce = rt.CreateExecutor("client" + std::to_string(c));
    std::function<void(int)>* next = loops.emplace_back(std::make_unique<std::function<void(int)>>()).get();
    *next = [&, c, ce, next](int n) {
      if (n == kOpsPerClient) return void(++clients_done);
      const int kind = static_cast<int>(ce->Rng().Uniform(5));  // 2 puts, 2 gets, 1 delete in 5
      const Operation::Kind k = kind < 2 ? Operation::Kind::kPut : kind < 4 ? Operation::Kind::kGet : Operation::Kind::kDel;
      const std::string key = "key" + std::to_string(ce->Rng().Uniform(kKeys));
      const std::string value = "c" + std::to_string(c) + "-" + std::to_string(n);
      Cn& target = cns[1 + static_cast<uint32_t>(ce->Rng().Uniform(3))];
      const size_t slot = history.size();
      history.push_back(Operation{k, key, k == Operation::Kind::kPut ? std::optional<std::string>(value) : std::nullopt,
                                  false, false, ce->Now(), 0, static_cast<uint32_t>(c)});
      auto answered = std::make_shared<bool>(false);
      auto go_on = [ce, next, n] {
        ce->After((5 + static_cast<runtime::Nanos>(ce->Rng().Uniform(20))) * kMicrosecond, [next, n] { (*next)(n + 1); });
      };
      // No answer in 5 ms: the node is gone; a write's outcome is unknown.
      ce->After(5 * kMillisecond, [&, slot, answered, k, go_on] {
        if (*answered) return;
        *answered = true;
        if (k == Operation::Kind::kGet) {
          history[slot].ret = kLeftOut;
        } else {
          history[slot].unknown = true;
        }
        go_on();
      });
      auto finish = [&, ce, slot, answered, k, go_on](Status s, std::optional<std::string> v) {
        ce->Post([&, ce, slot, answered, k, go_on, s, v] {
          if (*answered) return;
          *answered = true;
          Operation& op = history[slot];
          op.ret = ce->Now();
          if (k == Operation::Kind::kGet) {
            if (s.ok()) {
              op.value = v;
            } else if (!s.Is(Code::kNotFound)) {
              op.ret = kLeftOut;  // told nothing
            }
          } else if (!s.ok()) {
            op.unknown = true;
          } else if (k == Operation::Kind::kDel) {
            op.found_unknown = true;  // a tombstone linked blindly
          }
          go_on();
        });
      };
      target.exec->Post([&target, k, key, value, finish] {
        if (!target.node) return;  // dead: no answer
        if (k == Operation::Kind::kGet) {
          return target.node->Get(key, [finish](Result<std::string> r) {
            finish(r.status(), r.ok() ? std::optional<std::string>(*r) : std::nullopt);
          });
        }
        auto done = [finish](Status s) { finish(s, std::nullopt); };
        if (k == Operation::Kind::kPut) return target.node->Put(key, value, done);
        target.node->Delete(key, done);
      });
    };
    ce->Post([next] { (*next)(0); });
  }

  rt.RunUntil([&] { return clients_done == kClients; }, rt.Now() + 20 * runtime::kSecond);
  stop_gc = true;
  out.index_grows = world.pool().index_grows();
  for (auto& [id, c] : cns) {
    if (c.node) out.swap_failures += c.node->stats().swap_failures;
  }
  rt.RunUntil([] { return false; }, rt.Now() + kMillisecond);
  for (auto& [id, c] : cns) {
    c.ep.reset();
    c.node.reset();
  }
  if (!out.failure.empty()) return out;
  if (clients_done != kClients) return CampaignResult{false, "clients did not finish"};
  out.failure = Verdict(history, &out.ops, &out.unknown);
  if (!out.failure.empty()) return out;
  out.ok = true;
  return out;
}

TEST(CloverSim, RacingWritersGcAndADeadNodeStayLinearizable) {
  uint64_t first = 1, last = 200;
  if (const char* one = std::getenv("SLIP_CLOVER_SEED")) first = last = std::strtoull(one, nullptr, 10);
  uint64_t ops = 0, unknown = 0, swap_failures = 0, advanced = 0, index_grows = 0;
  for (uint64_t seed = first; seed <= last; ++seed) {
    const CampaignResult r = RunCampaign(seed);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure << "\n  replay: SLIP_CLOVER_SEED=" << seed
                      << " build/src/sim/clover_sim_test";
    ops += r.ops;
    unknown += r.unknown;
    swap_failures += r.swap_failures;
    advanced += r.advanced;
    index_grows += r.index_grows;
  }
  std::printf("  %llu seeds: %llu operations checked (%llu with unknown outcome), %llu lost swaps, %llu chain heads "
              "moved by GC, %llu index growths\n",
              static_cast<unsigned long long>(last - first + 1), static_cast<unsigned long long>(ops),
              static_cast<unsigned long long>(unknown), static_cast<unsigned long long>(swap_failures),
              static_cast<unsigned long long>(advanced), static_cast<unsigned long long>(index_grows));
}

}  // namespace
}  // namespace slip::sim
