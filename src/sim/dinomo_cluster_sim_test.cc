// A seeded campaign of a whole DINOMO cluster on virtual time: three KVS
// nodes (server::DinomoServer, as `slip server` runs it) over the real pool
// on the simulated fabric, the real configuration manager (cluster::Manager)
// on an in-memory store, node leases, and clients that route by the map
// they last read and refresh it when refused. Mid-run one node dies, or —
// for a third of the seeds — is cut off (no lease renewals, no new
// configurations) but keeps serving the clients that still route to it
// (half of them keep their stale map for a while on purpose).
// The manager notices the lapsed lease and gives the node's shards to the
// others, which merge its log before serving them (D4); the cut-off node's
// writes are fenced and its reads refused once its lease ran out. Every
// history is checked for linearizability (D2, D3).
//
// On every fifth seed the pool's index starts too small for the keys and
// grows mid-run under the nodes' one-sided readers (scenario 9).
// On even seeds a fourth node joins mid-run and the manager hands it
// shards from the live nodes; on every fourth a live node also leaves (its
// shards move away, then it drops out of the membership) — each handover
// waits for the losing node to let go (docs/papers/dinomo.md §5b).
//
// On every sixth seed the cluster is DINOMO-N (a partition per node, the
// shards a node gains copied into its partition before it serves them).
//
// On seeds 1 and 2 of every 3 the operator shares two hot keys with every
// up node mid-run (selective replication, docs/papers/dinomo.md §4d; clients
// then pick any owner of them), and on seeds 2 of 3 un-shares them later —
// both racing the fault, the join and the leave.
//
// One seed: SLIP_DINOMO_CLUSTER_SEED=17 build/src/sim/dinomo_cluster_sim_test
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include "cluster/config_store.h"
#include "cluster/manager.h"
#include "common/hash.h"
#include "dinomo/testing/sim_pool.h"
#include "proto/kv.h"
#include "rpc/local_network.h"
#include "server/dinomo_server.h"
#include "sim/linearizability.h"

namespace slip::sim {
namespace {

using runtime::kMicrosecond;
using runtime::kMillisecond;

struct CampaignResult {
  bool ok = false;
  std::string failure;
  uint64_t ops = 0, unknown = 0, refused = 0, reconfigurations = 0;
  bool replaced = false;  // the manager declared the victim failed
  bool leaving = false;   // a node was told to leave
  uint64_t left = 0;      // nodes that left
  bool grew = false;      // the node that joined came to own shards
  uint64_t index_grows = 0;
  bool shared = false, unshared = false;
  uint64_t adopted_keys = 0;  // DINOMO-N: keys copied into gaining nodes' partitions
  uint64_t swaps = 0, shared_gets = 0;  // of the shared keys, by the nodes alive at the end
};

constexpr runtime::Nanos kLease = 2 * kMillisecond;

CampaignResult RunCampaign(uint64_t seed) {
  runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = seed});
  dinomo::PoolOptions po;
  po.segment_bytes = 64 << 10;
  po.num_buckets = 256;
  if (seed % 5 == 3) {  // an index too small for the keys: the pool grows it mid-run
    po.num_buckets = 2;
    po.index_bytes = 64 * 4;
  }
  dinomo::testing::SimPool world(rt, 8 << 20, po);
  // DINOMO-N on every sixth seed: a partition per node, and a node copies
  // the shards it gains into its own before it serves them.
  const bool dinomo_n = seed % 6 == 4;
  if (dinomo_n) world.PartitionPerNode(8 << 20);
  fabric::LinkFaults jitter;
  jitter.jitter = 20 * kMicrosecond;
  world.fabric().SetDefaultFaults(jitter);

  auto store = cluster::OpenMemoryStore(cluster::NewMemoryStoreState());
  auto placed = cluster::Place({{1, "n1"}, {2, "n2"}, {3, "n3"}}, 6, 1);
  if (!placed.ok()) return CampaignResult{false, placed.status().ToString()};
  placed->design = dinomo_n ? "dinomo-n" : "dinomo";
  placed->pool = "00";
  if (!store->CompareAndSwap(cluster::kNoVersion, *placed).ok()) return CampaignResult{false, "first configuration"};
  auto clock = [&rt] { return rt.Now(); };
  runtime::Executor* cm = rt.CreateExecutor("cm");
  cluster::Manager manager(store.get(), cm, cluster::ManagerOptions{.lease = kLease, .holder = "cm", .clock = clock});
  cm->Post([&] { manager.Start(nullptr, nullptr); });

  struct Kn {
    uint32_t id = 0;
    runtime::Executor* exec = nullptr;
    std::unique_ptr<fabric::Endpoint> ep;
    std::unique_ptr<rpc::PeerCaller> calls;
    std::unique_ptr<server::DinomoServer> server;
    cluster::Lease lease;
    runtime::Nanos expiry = 0;
    bool cut_off = false;  // no renewals, no configurations: a zombie
    uint64_t seen = 0;     // store version adopted
  };
  std::map<uint32_t, Kn> kns;
  CampaignResult out;
  rpc::LocalNetwork net;
  world.AttachTo(net);
  static constexpr uint64_t kCaches[] = {0, 600, 4096};
  // A node as `slip server` runs one: gone when its endpoint, its server
  // and its place on the network are.
  auto stop = [&net](Kn* k) {
    k->ep.reset();
    k->server.reset();
    net.Detach(k->id);
  };
  // Starts node `id` (which holds its lease from then on); `join`: it is
  // not a member yet and adds itself, as a new `slip server` does.
  auto start = [&](uint32_t id, bool join) -> Status {
    Kn& kn = kns[id];
    kn.id = id;
    kn.exec = rt.CreateExecutor("kn" + std::to_string(id));
    kn.ep = std::move(world.fabric().CreateEndpoint(id, kn.exec, {})).value();
    kn.calls = net.CallerFor(kn.exec, 10 * kMillisecond);
    Kn* k = &kn;
    dinomo::KvsNodeOptions ko;
    ko.batch_entries = 4;
    ko.cache.capacity_bytes = kCaches[seed % 3];
    kn.server = std::make_unique<server::DinomoServer>(server::DinomoServerEnv{
        .self = id,
        .exec = kn.exec,
        .data = kn.ep.get(),
        .calls = kn.calls.get(),
        .pool_peer = dinomo::testing::SimPool::kPoolId,
        .set_peers = [](const cluster::ClusterConfig&) {},
        // A leaving node that let go of everything leaves the membership.
        .settled =
            [k, &store, &stop, &out](const cluster::ClusterConfig& c) {
              if (c.nodes.at(k->id).state != cluster::NodeState::kLeaving || k->cut_off) return;
              for (;;) {
                auto now = store->Load();
                auto next = cluster::DropLeaving(now->config, k->id);
                if (!next.ok()) return;
                if (store->CompareAndSwap(now->version, *next).ok()) break;
              }
              ++out.left;
              k->exec->After(kMillisecond, [k, &stop] { stop(k); });
            },
        .lease_left = [k, &rt] { return k->expiry - rt.Now(); },
        .fatal = [&out](Status s) { out.failure = "fatal: " + s.ToString(); },
        .node = ko,
        .copy_on_handover = dinomo_n,
        .joined = join,
    });
    kn.exec->AddPoller([k] { return k->server && k->server->Poll(); });
    net.Attach(id, kn.exec, [k](uint16_t method, std::span<const std::byte> payload, rpc::LocalNetwork::Reply reply) {
      if (k->server) k->server->Handle(method, payload, std::move(reply));
    });
    auto l = store->AcquireLease(cluster::NodeLeaseName(id), "kn" + std::to_string(id), kLease, rt.Now());
    if (!l.ok()) return l.status();
    kn.lease = *l;
    kn.expiry = l->expiry;
    while (join) {
      auto now = store->Load();
      auto next = cluster::JoinOwner(now->config, id, "n" + std::to_string(id));
      if (!next.ok()) return next.status();
      if (store->CompareAndSwap(now->version, *next).ok()) break;
    }
    // The node's control loop: renew the lease, adopt new configurations;
    // listed down or no longer listed, it stops (as the process does).
    auto loop = std::make_shared<std::function<void()>>();
    *loop = [k, loop, &store, &rt, &stop] {
      if (!k->server || k->cut_off) return;
      const runtime::Nanos now = rt.Now();
      if (now >= k->expiry - kLease / 2) {
        auto r = store->RenewLease(k->lease, kLease, now);
        if (!r.ok()) return stop(k);
        k->lease = *r;
        k->expiry = r->expiry;
      }
      auto c = store->Load();
      if (c.ok() && c->version != k->seen) {
        k->seen = c->version;
        auto self = c->config.nodes.find(k->id);
        if (self == c->config.nodes.end()) return;  // left: its settle stops it
        if (self->second.state == cluster::NodeState::kDown) return stop(k);
        k->server->Adopt(c->config);
      }
      k->exec->After(100 * kMicrosecond, [loop] { (*loop)(); });
    };
    kn.exec->Post([loop] { (*loop)(); });
    return Status::Ok();
  };
  for (uint32_t id = 1; id <= 3; ++id) {
    Status s = start(id, false);
    if (!s.ok()) return CampaignResult{false, "node " + std::to_string(id) + ": " + s.ToString()};
  }

  // The fault, somewhere in the first half of the clients' run.
  Random& dice = rt.CreateExecutor("dice")->Rng();
  const runtime::Nanos fault_at = (2 + static_cast<runtime::Nanos>(dice.Uniform(6))) * kMillisecond;
  const uint32_t victim = 1 + static_cast<uint32_t>(dice.Uniform(3));
  const bool zombie = seed % 3 == 1;
  kns[victim].exec->After(fault_at, [&] {
    Kn& v = kns[victim];
    if (zombie) {
      v.cut_off = true;
    } else {
      stop(&v);
    }
  });
  // Elasticity (docs/papers/dinomo.md §5b), on even seeds: node 4 joins and
  // the manager hands it shards from the live nodes; on every fourth seed a
  // live node also leaves. Both land before, during or after the fault.
  const bool grow = seed % 2 == 0, shrink = seed % 4 == 0;
  const runtime::Nanos join_at = (1 + static_cast<runtime::Nanos>(dice.Uniform(9))) * kMillisecond;
  const runtime::Nanos leave_at = (1 + static_cast<runtime::Nanos>(dice.Uniform(9))) * kMillisecond;
  const uint32_t leaver = victim % 3 + 1;
  runtime::Executor* ops = rt.CreateExecutor("operator");
  if (grow) {
    ops->After(join_at, [&] {
      Status s = start(4, true);
      if (!s.ok()) out.failure = "node 4 did not join: " + s.ToString();
    });
  }
  if (shrink) {
    ops->After(leave_at, [&] {
      for (;;) {
        auto now = store->Load();
        auto next = cluster::RemoveOwner(now->config, leaver);
        if (!next.ok()) return;  // no up node left to take its shards: skipped
        if (store->CompareAndSwap(now->version, *next).ok()) break;
      }
      out.leaving = true;
    });
  }

  // Selective replication: key0 and key1 shared with every up node, then
  // (on some seeds) shared no more.
  const bool share = seed % 3 != 0 && !dinomo_n, unshare = share && seed % 3 == 2;  // DINOMO-N shares nothing
  const runtime::Nanos share_at = (1 + static_cast<runtime::Nanos>(dice.Uniform(6))) * kMillisecond;
  const runtime::Nanos unshare_at = share_at + (1 + static_cast<runtime::Nanos>(dice.Uniform(6))) * kMillisecond;
  auto change_sharing = [&](bool on) {
    for (;;) {
      auto now = store->Load();
      Result<cluster::ClusterConfig> next = now->config;
      for (const char* key : {"key0", "key1"}) {
        std::vector<cluster::NodeId> up;
        for (const auto& [id, info] : next->nodes) {
          if (info.state == cluster::NodeState::kUp) up.push_back(id);
        }
        next = on ? cluster::ShareKey(*next, key, up) : cluster::UnshareKey(*next, key);
        if (!next.ok()) return;
      }
      if (store->CompareAndSwap(now->version, *next).ok()) break;
    }
    (on ? out.shared : out.unshared) = true;
  };
  if (share) ops->After(share_at, [&] { change_sharing(true); });
  if (unshare) ops->After(unshare_at, [&] { change_sharing(false); });

  // Clients: route by the map they hold, refresh it when refused.
  std::vector<Operation> history;
  constexpr int kClients = 4, kOpsPerClient = 250, kKeys = 16;
  int clients_done = 0;
  std::vector<std::unique_ptr<std::function<void(int)>>> loops;
  for (int c = 0; c < kClients; ++c) {
    runtime::Executor* ce = rt.CreateExecutor("client" + std::to_string(c));
    auto map = std::make_shared<cluster::ClusterConfig>(store->Load()->config);
    std::function<void(int)>* next = loops.emplace_back(std::make_unique<std::function<void(int)>>()).get();
    *next = [&, c, ce, next, map](int n) {
      if (n == kOpsPerClient) return void(++clients_done);
      int kind = static_cast<int>(ce->Rng().Uniform(5));  // 2 puts, 2 gets, 1 delete in 5
      // A client with a stale map only reads meanwhile: the zombie it
      // reaches is then never fenced by a write of its own, and only its
      // lease keeps it from answering from a cache gone stale.
      if (zombie && c % 2 == 0 && ce->Now() >= fault_at && ce->Now() < fault_at + 4 * kLease) kind = 2;
      const Operation::Kind k = kind < 2 ? Operation::Kind::kPut : kind < 4 ? Operation::Kind::kGet : Operation::Kind::kDel;
      const std::string key = "key" + std::to_string(ce->Rng().Uniform(kKeys));
      const std::string value = "c" + std::to_string(c) + "-" + std::to_string(n) + std::string(1500, '.');
      const uint32_t shard = map->ShardOf(HashKey(key));
      uint32_t to = map->shards[shard].primary;
      if (auto sh = map->shared.find(key); sh != map->shared.end()) {
        // A shared key: its shard's owner or any secondary.
        const size_t pick = ce->Rng().Uniform(sh->second.size() + 1);
        if (pick < sh->second.size()) to = sh->second[pick];
      }
      Kn& target = kns[to];
      const size_t slot = history.size();
      history.push_back(Operation{k, key, k == Operation::Kind::kPut ? std::optional<std::string>(value) : std::nullopt,
                                  false, false, ce->Now(), 0, static_cast<uint32_t>(c)});
      auto answered = std::make_shared<bool>(false);
      auto refresh_and_go_on = [&, c, ce, map, next](int then) {
        // With a cut-off node, the even clients keep their stale map for a
        // while: they go on reading from the zombie after others have
        // written through the new owner (its lease must stop it).
        const bool stale = zombie && c % 2 == 0 && ce->Now() < fault_at + 4 * kLease;
        auto now = store->Load();
        if (now.ok() && !stale) *map = now->config;
        ce->After((20 + static_cast<runtime::Nanos>(ce->Rng().Uniform(30))) * kMicrosecond, [next, then] { (*next)(then); });
      };
      // No answer in 5 ms: the node is gone. A write's outcome is unknown.
      ce->After(5 * kMillisecond, [&, slot, answered, n, k, refresh_and_go_on] {
        if (*answered) return;
        *answered = true;
        if (k == Operation::Kind::kGet) {
          history[slot].ret = kLeftOut;
        } else {
          history[slot].unknown = true;
        }
        refresh_and_go_on(n + 1);
      });
      const proto::Method m = k == Operation::Kind::kPut ? proto::Method::kPut
                              : k == Operation::Kind::kGet ? proto::Method::kGet
                                                           : proto::Method::kDel;
      const std::string payload = proto::Encode(proto::KvRequest{map->term, shard, key, value});
      auto reply = [&, ce, next, slot, answered, n, k, refresh_and_go_on](Code code, std::string p) {
        ce->Post([&, ce, next, slot, answered, n, k, code, p, refresh_and_go_on] {
          if (*answered) return;
          *answered = true;
          Operation& op = history[slot];
          op.ret = ce->Now();
          auto r = proto::DecodeKvResponse(proto::AsBytes(p), {});
          if (code == Code::kStaleTerm || (k == Operation::Kind::kGet && code != Code::kOk && code != Code::kNotFound)) {
            // Refused outright (a StaleTerm wrote nothing), or a read that
            // told nothing: not in the history; try again with a fresh map.
            op.ret = kLeftOut;
            if (code == Code::kStaleTerm) ++out.refused;
            return refresh_and_go_on(n);
          }
          if (k == Operation::Kind::kGet) {
            if (code == Code::kOk && r.ok()) op.value = std::string(r->value);
          } else if (code != Code::kOk) {
            // Outcome unknown: back off (a client hammering a node that
            // refuses fills the history with writes that may or may not
            // have happened, and the check grows exponentially with them).
            op.unknown = true;
            ce->After(200 * kMicrosecond, [refresh_and_go_on, n] { refresh_and_go_on(n + 1); });
            return;
          } else if (k == Operation::Kind::kDel) {
            // A DINOMO delete writes its tombstone without looking the key
            // up: done, but it cannot say whether the key had a value.
            op.found_unknown = true;
          }
          ce->After(static_cast<runtime::Nanos>(ce->Rng().Uniform(20)) * kMicrosecond, [next, n] { (*next)(n + 1); });
        });
      };
      target.exec->Post([&target, m, payload, reply] {
        if (!target.server) return;  // dead: no answer
        target.server->Handle(static_cast<uint16_t>(m), proto::AsBytes(payload), reply);
      });
    };
    ce->Post([next] { (*next)(0); });
  }

  rt.RunUntil([&] { return clients_done == kClients; }, rt.Now() + 20 * runtime::kSecond);
  // The clients may finish before every event of the seed played out: let
  // the cluster run on until the victim is replaced, the joined node owns
  // shards and the leaving one is gone.
  auto played_out = [&] {
    auto c = store->Load();
    if (!c.ok()) return false;
    const auto& n = c->config.nodes;
    if (!n.contains(victim) || n.at(victim).state != cluster::NodeState::kDown) return false;
    if (grow && server::OwnedBy(c->config, 4).empty()) return false;
    return !shrink || !out.leaving || !n.contains(leaver);
  };
  rt.RunUntil(played_out, rt.Now() + 200 * kMillisecond);
  out.index_grows = world.pool().index_grows();
  if (dinomo_n) out.adopted_keys = world.partitions()->adopted_keys();
  auto final_config = store->Load();
  out.replaced = final_config.ok() && final_config->config.nodes.contains(victim) &&
                 final_config->config.nodes.at(victim).state == cluster::NodeState::kDown;
  out.grew = final_config.ok() && !server::OwnedBy(final_config->config, 4).empty();
  for (auto& [id, kn] : kns) {
    if (!kn.server) continue;
    out.reconfigurations += kn.server->reconfigurations();
    out.swaps += kn.server->stats().swaps;
    out.shared_gets += kn.server->stats().shared_gets;
  }
  cm->Post([&] { manager.Stop(); });
  rt.RunUntil([] { return false; }, rt.Now() + kMillisecond);
  for (auto& [id, kn] : kns) {
    kn.ep.reset();
    kn.server.reset();
  }
  if (!out.failure.empty()) return out;
  if (clients_done != kClients) return CampaignResult{false, "clients did not finish"};
  if (!out.replaced) return CampaignResult{false, "the manager never replaced node " + std::to_string(victim)};
  if (grow && !out.grew) return CampaignResult{false, "node 4 joined but owns nothing"};
  if (out.leaving && out.left == 0) return CampaignResult{false, "node " + std::to_string(leaver) + " never left"};
  if (auto c = store->Load(); c.ok() && c->config.shared.empty() != (!share || unshare)) {
    return CampaignResult{false, "the shared keys are not as the operator left them"};
  }
  out.failure = Verdict(history, &out.ops, &out.unknown);
  if (!out.failure.empty()) return out;
  out.ok = true;
  return out;
}

TEST(DinomoClusterSim, KillsAndCutOffsUnderTheManagerStayLinearizable) {
  uint64_t first = 1, last = 200;
  if (const char* one = std::getenv("SLIP_DINOMO_CLUSTER_SEED")) first = last = std::strtoull(one, nullptr, 10);
  uint64_t ops = 0, unknown = 0, refused = 0, reconfigurations = 0, grew = 0, left = 0, index_grows = 0;
  uint64_t shared = 0, unshared = 0, swaps = 0, shared_gets = 0, dinomo_n = 0, adopted = 0;
  for (uint64_t seed = first; seed <= last; ++seed) {
    const CampaignResult r = RunCampaign(seed);
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << "\n  replay: SLIP_DINOMO_CLUSTER_SEED=" << seed << " build/src/sim/dinomo_cluster_sim_test";
    ops += r.ops;
    unknown += r.unknown;
    refused += r.refused;
    reconfigurations += r.reconfigurations;
    grew += r.grew;
    left += r.left;
    index_grows += r.index_grows;
    shared += r.shared;
    unshared += r.unshared;
    swaps += r.swaps;
    shared_gets += r.shared_gets;
    dinomo_n += seed % 6 == 4;
    adopted += r.adopted_keys;
  }
  std::printf("  dinomo-n on %llu seeds: %llu keys copied into gaining nodes' partitions\n",
              static_cast<unsigned long long>(dinomo_n), static_cast<unsigned long long>(adopted));
  std::printf("  hot keys shared on %llu seeds (and un-shared on %llu): %llu swaps, %llu shared GETs by the nodes "
              "alive at the end\n",
              static_cast<unsigned long long>(shared), static_cast<unsigned long long>(unshared),
              static_cast<unsigned long long>(swaps), static_cast<unsigned long long>(shared_gets));
  std::printf("  %llu seeds: %llu operations checked (%llu with unknown outcome), %llu refused with StaleTerm, %llu "
              "reconfigurations; %llu joined nodes given shards, %llu nodes left; the index grew %llu times\n",
              static_cast<unsigned long long>(last - first + 1), static_cast<unsigned long long>(ops),
              static_cast<unsigned long long>(unknown), static_cast<unsigned long long>(refused),
              static_cast<unsigned long long>(reconfigurations), static_cast<unsigned long long>(grew),
              static_cast<unsigned long long>(left), static_cast<unsigned long long>(index_grows));
}

}  // namespace
}  // namespace slip::sim
