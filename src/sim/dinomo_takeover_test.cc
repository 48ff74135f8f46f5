// A seeded campaign on virtual time: clients read and write through a KVS
// node that owns their keys; mid-run the node dies (its DRAM — cache and
// unmerged writes — gone, its last batch perhaps still on the wire) or,
// for a third of the seeds, is cut off but keeps running while clients with
// a stale map still send it writes (a zombie, scenario 4); the pool fences
// it and merges its open segments, and a second node with a later epoch
// takes the keys over (docs/papers/dinomo.md §2, §4, §5; invariants D2–D4). Small
// segments force seals and back-pressure throughout; the fabric jitters.
// Every history is checked for linearizability.
//
// One seed: SLIP_DINOMO_SEED=17 build/src/sim/dinomo_sim_test
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "dinomo/testing/sim_pool.h"
#include "sim/linearizability.h"

namespace slip::dinomo {
namespace {

using runtime::kMicrosecond;
using runtime::kMillisecond;

struct Outcome {
  bool ok = false;
  std::string failure;
  uint64_t ops = 0, unknown = 0, seals = 0;
  uint64_t refused = 0;  // writes a fenced node refused (StaleTerm)
  bool took_over = false;
};

// Deliberate bugs, to show the campaign catches what the protocol prevents.
struct Bugs {
  bool serve_before_merge = false;  // the new owner skips MergeAll (D4)
  bool reuse_epoch = false;         // the new owner numbers its writes like the old one
  bool no_fence = false;            // the pool merges the old owner's log without fencing it
};

Outcome RunCampaign(uint64_t seed, Bugs bugs = {}) {
  runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = seed});
  PoolOptions po;
  po.segment_bytes = 64 << 10;
  po.num_buckets = 256;
  testing::SimPool world(rt, 8 << 20, po);
  fabric::LinkFaults jitter;
  jitter.jitter = 20 * kMicrosecond;
  world.fabric().SetDefaultFaults(jitter);
  runtime::Executor* pool_exec = world.pool_exec();

  using Kn = testing::SimPool::Node;
  Kn* kns[2] = {nullptr, nullptr};
  KvsNode* owner = nullptr;  // where clients send their operations
  const bool zombie = seed % 3 == 1 || bugs.no_fence;
  runtime::Nanos stale_until = 0;
  auto start = [&](int i, uint64_t epoch) {
    KvsNodeOptions o;
    o.node = static_cast<uint32_t>(i + 1);
    o.epoch = epoch;
    o.batch_entries = 4;
    // By seed: no cache (every GET of a merged key reads the index), room
    // for shortcuts only, a few values, most of the keys as values.
    static constexpr uint64_t kCaches[] = {0, 100, 600, 4096};
    o.cache.capacity_bytes = kCaches[seed % 4];
    kns[i] = &world.AddNode(o, [&owner, &kns, i](Status s) {
      if (s.ok()) owner = kns[i]->node.get();
    });
  };
  start(0, 1);

  Random& rng = rt.CreateExecutor("dice")->Rng();
  // Somewhere in the first half of the clients' run (~3 ms of virtual time).
  const runtime::Nanos takeover_at = (200 + static_cast<runtime::Nanos>(rng.Uniform(800))) * kMicrosecond;
  std::vector<sim::Operation> history;
  Outcome out;
  constexpr int kClients = 4, kOpsPerClient = 300, kKeys = 6;
  int clients_done = 0;
  std::vector<std::unique_ptr<std::function<void(int)>>> loops;  // each client's next operation
  for (int c = 0; c < kClients; ++c) {
    runtime::Executor* ce = rt.CreateExecutor("client" + std::to_string(c));
    std::function<void(int)>* next = loops.emplace_back(std::make_unique<std::function<void(int)>>()).get();
    *next = [&, c, ce, next](int n) {
      if (n == kOpsPerClient) return void(++clients_done);
      const bool put = ce->Rng().Uniform(2) == 0;
      // A zombie takeover: clients with a stale map (the even ones) keep
      // sending their writes to the old owner for a while.
      KvsNode* target = owner;
      if (zombie && put && c % 2 == 0 && ce->Now() < stale_until && kns[0]->node) target = kns[0]->node.get();
      if (target == nullptr) return void(ce->After(100 * kMicrosecond, [next, n] { (*next)(n); }));
      Kn& k = target == kns[0]->node.get() ? *kns[0] : *kns[1];
      const std::string key = "key" + std::to_string(ce->Rng().Uniform(kKeys));
      // Padded: 30 writes fill a 64 KB segment.
      const std::string value = "c" + std::to_string(c) + "-" + std::to_string(n) + std::string(2000, '.');
      const size_t slot = history.size();
      history.push_back(sim::Operation{put ? sim::Operation::Kind::kPut : sim::Operation::Kind::kGet, key,
                                       put ? std::optional<std::string>(value) : std::nullopt, false, false,
                                       ce->Now(), 0, static_cast<uint32_t>(c)});
      // No answer within 5 ms: the node is gone. A PUT's outcome is then
      // unknown; a GET told nothing.
      auto answered = std::make_shared<bool>(false);
      ce->After(5 * kMillisecond, [&, slot, answered, next, n, put] {
        if (*answered) return;
        *answered = true;
        if (put) {
          history[slot].unknown = true;
        } else {
          history[slot].ret = sim::kLeftOut;  // dropped below
        }
        (*next)(n + 1);
      });
      auto finish = [&, slot, answered, next, n, ce](Status s, std::optional<std::string> read) {
        ce->Post([&, slot, answered, next, n, s, read, ce] {
          if (*answered) return;
          *answered = true;
          sim::Operation& op = history[slot];
          op.ret = ce->Now();
          if (op.kind == sim::Operation::Kind::kGet) {
            if (s.ok() || s.Is(Code::kNotFound)) {
              op.value = read;
            } else {
              op.ret = sim::kLeftOut;
            }
          } else if (s.Is(Code::kStaleTerm)) {
            op.ret = sim::kLeftOut;  // refused outright: nothing was written (dropped below)
            ++out.refused;
          } else if (!s.ok()) {
            op.unknown = true;
          }
            // A little think time, so runs straddle the takeover.
          ce->After(static_cast<runtime::Nanos>(ce->Rng().Uniform(10)) * kMicrosecond, [next, n] { (*next)(n + 1); });
        });
      };
      k.exec->Post([&k, target, put, key, value, finish] {
        if (k.node.get() != target) return;  // the node died meanwhile: no answer
        if (put) return target->Put(key, value, [finish](Status s) { finish(s, std::nullopt); });
        target->Get(key, [finish](Result<std::string> r) {
          finish(r.status(), r.ok() ? std::optional<std::string>(*r) : std::nullopt);
        });
      });
    };
    ce->Post([next] { (*next)(0); });
  }

  // The takeover: node 1 dies — or, for a third of the seeds, is cut off
  // but keeps running (a zombie) — the pool fences it and merges its open
  // segments, node 2 (a later epoch) serves the keys.
  pool_exec->After(takeover_at, [&] {
    kns[0]->exec->Post([&] {
      owner = nullptr;
      out.seals += kns[0]->node->stats().seals;
      if (zombie) {
        stale_until = kns[0]->exec->Now() + 2 * kMillisecond;
      } else {
        world.Kill(*kns[0]);
      }
      pool_exec->After(200 * kMicrosecond, [&] {
        if (bugs.no_fence) {
          auto m = world.pool().MergeAll(1);
          if (!m.ok()) out.failure = "merge: " + m.status().ToString();
        } else if (!bugs.serve_before_merge) {
          Status m = world.FenceAndMerge(1, 2);
          if (!m.ok()) out.failure = "fence and merge: " + m.ToString();
        }
        out.took_over = true;
        start(1, bugs.reuse_epoch ? 1 : 2);
      });
    });
  });
  rt.RunUntil([&] { return clients_done == kClients; }, rt.Now() + 10 * runtime::kSecond);
  if (clients_done != kClients || !out.took_over) {
    out.failure = clients_done != kClients ? "clients did not finish" : "the clients finished before the takeover";
    return out;
  }
  if (kns[1] != nullptr && kns[1]->node) out.seals += kns[1]->node->stats().seals;
  if (!out.failure.empty()) return out;
  out.failure = sim::Verdict(history, &out.ops, &out.unknown);
  if (!out.failure.empty()) return out;
  out.ok = true;
  return out;
}

TEST(DinomoSimTest, TakeoverAfterANodeDiesIsLinearizable) {
  uint64_t first = 1, last = 200;
  if (const char* s = std::getenv("SLIP_DINOMO_SEED")) first = last = std::strtoull(s, nullptr, 10);
  uint64_t ops = 0, unknown = 0, seals = 0, refused = 0;
  for (uint64_t seed = first; seed <= last; ++seed) {
    const Outcome o = RunCampaign(seed);
    ASSERT_TRUE(o.ok) << "seed " << seed << ": " << o.failure
                      << "\n  reproduce: SLIP_DINOMO_SEED=" << seed << " build/src/sim/dinomo_sim_test";
    ops += o.ops;
    unknown += o.unknown;
    seals += o.seals;
    refused += o.refused;
  }
  std::printf("%llu seeds: %llu operations checked, %llu with unknown outcome, %llu segments sealed, %llu writes "
              "refused by fenced zombies\n",
              static_cast<unsigned long long>(last - first + 1), static_cast<unsigned long long>(ops),
              static_cast<unsigned long long>(unknown), static_cast<unsigned long long>(seals),
              static_cast<unsigned long long>(refused));
  EXPECT_GT(seals, 0u) << "the campaign should seal segments";
  if (last - first > 10) {
    EXPECT_GT(refused, 0u) << "zombies should have been sent writes";
  }
}

// The campaign has teeth: each deliberate bug is caught within the seeds.
TEST(DinomoSimTest, ServingBeforeTheMergeOrReusingAnEpochIsCaught) {
  for (Bugs bugs : {Bugs{.serve_before_merge = true}, Bugs{.reuse_epoch = true}, Bugs{.no_fence = true}}) {
    bool caught = false;
    for (uint64_t seed = 1; seed <= 40 && !caught; ++seed) caught = !RunCampaign(seed, bugs).ok;
    EXPECT_TRUE(caught) << (bugs.serve_before_merge ? "serving before the merge"
                            : bugs.reuse_epoch      ? "reusing an epoch"
                                                    : "merging a zombie's log without fencing it")
                        << " went unnoticed";
  }
}

}  // namespace
}  // namespace slip::dinomo
