// DinomoServer (server/dinomo_server.h) over the real pool on the simulated
// fabric: a node serves exactly the shards it owns in exactly its term; a
// failed owner's keys are served by the node that takes them over only
// after the pool merged its log, with every write it acknowledged (D4); the
// old owner, cut off but running, can no longer write or read (fenced;
// no lease); a pool that moved makes every node reconfigure without losing
// anything; a term past what versions can hold stops the node.
#include "server/dinomo_server.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "common/hash.h"
#include "dinomo/testing/sim_pool.h"
#include "proto/kv.h"

namespace slip::server {
namespace {

using runtime::kMillisecond;

constexpr rpc::NodeId kPool = dinomo::testing::SimPool::kPoolId;

struct Answer {
  Code code = Code::kAborted;
  std::string value;
};

class DinomoServerTest : public ::testing::Test {
 protected:
  struct Kn {
    runtime::Executor* exec = nullptr;
    std::unique_ptr<fabric::Endpoint> ep;
    std::unique_ptr<rpc::PeerCaller> calls;
    std::unique_ptr<DinomoServer> server;
    runtime::Nanos lease = 1 << 30;  // time left on its lease
    std::optional<Status> fatal;
    std::string pool_address;
    std::vector<uint64_t> settled;  // terms it settled at
  };

  void SetUp() override {
    dinomo::PoolOptions po;
    po.segment_bytes = 64 << 10;  // small: seals and back-pressure happen
    po.num_buckets = 1024;
    world_ = std::make_unique<dinomo::testing::SimPool>(rt_, 8 << 20, po);
    world_->AttachTo(net_);
    auto placed = cluster::Place({{1, "a"}, {2, "b"}}, 8, 1);
    ASSERT_TRUE(placed.ok());
    config_ = *placed;
    config_.design = "dinomo";
    config_.pool = "00";
    config_.term = 5;
  }
  void TearDown() override {
    for (auto& [id, kn] : kns_) {
      kn.ep.reset();  // the endpoint before the node whose buffers it uses
      kn.server.reset();
    }
  }

  Kn& Add(uint32_t id) {
    Kn& kn = kns_[id];
    kn.exec = rt_.CreateExecutor("kn" + std::to_string(id));
    kn.ep = std::move(world_->fabric().CreateEndpoint(id, kn.exec, {})).value();
    kn.calls = net_.CallerFor(kn.exec, 20 * kMillisecond);
    Kn* k = &kn;
    kn.server = std::make_unique<DinomoServer>(DinomoServerEnv{
        .self = id,
        .exec = kn.exec,
        .data = kn.ep.get(),
        .calls = kn.calls.get(),
        .pool_peer = kPool,
        .set_peers = [k](const cluster::ClusterConfig& c) { k->pool_address = c.pool; },
        .settled = [k](const cluster::ClusterConfig& c) { k->settled.push_back(c.term); },
        .lease_left = [k] { return k->lease; },
        .fatal = [k](Status s) { k->fatal = s; },
        .node = {},
    });
    kn.exec->AddPoller([k] { return k->server && k->server->Poll(); });
    net_.Attach(id, kn.exec, [k](uint16_t method, std::span<const std::byte> payload, rpc::LocalNetwork::Reply reply) {
      if (k->server) k->server->Handle(method, payload, std::move(reply));
    });
    return kn;
  }
  void Adopt(Kn& kn, const cluster::ClusterConfig& c) {
    kn.exec->Post([&kn, c] { kn.server->Adopt(c); });
    EXPECT_TRUE(rt_.RunUntil([&] { return kn.server->serving() && kn.server->serving_term() == c.term; },
                             rt_.Now() + 500 * kMillisecond))
        << "not serving term " << c.term;
  }
  // Every node adopts `c` (each waits for the others to settle at its term).
  void AdoptAll(const cluster::ClusterConfig& c) {
    for (auto& [id, kn] : kns_) {
      if (kn.server) kn.exec->Post([&kn, c] { kn.server->Adopt(c); });
    }
    EXPECT_TRUE(rt_.RunUntil(
        [&] {
          for (auto& [id, kn] : kns_) {
            if (kn.server && (!kn.server->serving() || kn.server->serving_term() != c.term)) return false;
          }
          return true;
        },
        rt_.Now() + 500 * kMillisecond))
        << "not all serving term " << c.term;
  }
  // A request as a client sends it: the term it knows, the key's shard.
  Answer Call(Kn& kn, proto::Method m, uint64_t term, const std::string& key, const std::string& value = "") {
    const uint32_t shard = config_.ShardOf(HashKey(key));
    const std::string payload = proto::Encode(proto::KvRequest{term, shard, key, value});
    std::optional<Answer> got;
    kn.exec->Post([&] {
      kn.server->Handle(static_cast<uint16_t>(m), proto::AsBytes(payload), [&](Code c, std::string p) {
        auto r = proto::DecodeKvResponse(proto::AsBytes(p), {});
        got = Answer{c, r.ok() ? std::string(r->value) : ""};
      });
    });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 200 * kMillisecond));
    return got.value_or(Answer{});
  }
  uint32_t Owner(const cluster::ClusterConfig& c, const std::string& key) const {
    return c.shards[c.ShardOf(HashKey(key))].primary;
  }

  runtime::SimRuntime rt_{runtime::SimRuntimeOptions{.seed = 3}};
  rpc::LocalNetwork net_;
  std::unique_ptr<dinomo::testing::SimPool> world_;
  cluster::ClusterConfig config_;
  std::map<uint32_t, Kn> kns_;
};

TEST_F(DinomoServerTest, ServesItsOwnShardsInItsTermOnly) {
  Kn& a = Add(1);
  Kn& b = Add(2);
  AdoptAll(config_);
  EXPECT_EQ(a.pool_address, "00");
  for (int i = 0; i < 40; ++i) {
    const std::string key = "k" + std::to_string(i);
    Kn& owner = Owner(config_, key) == 1 ? a : b;
    Kn& other = Owner(config_, key) == 1 ? b : a;
    EXPECT_EQ(Call(owner, proto::Method::kPut, 5, key, "v" + std::to_string(i)).code, Code::kOk);
    EXPECT_EQ(Call(other, proto::Method::kPut, 5, key, "x").code, Code::kStaleTerm) << "not its shard";
    EXPECT_EQ(Call(owner, proto::Method::kPut, 4, key, "x").code, Code::kStaleTerm) << "an older term";
    const Answer got = Call(owner, proto::Method::kGet, 5, key);
    EXPECT_EQ(got.code, Code::kOk);
    EXPECT_EQ(got.value, "v" + std::to_string(i));
  }
  // A delete writes its tombstone whether or not the key had a value.
  Kn& owner = Owner(config_, "absent-key") == 1 ? a : b;
  EXPECT_EQ(Call(owner, proto::Method::kDel, 5, "absent-key").code, Code::kOk);
  EXPECT_EQ(Call(owner, proto::Method::kGet, 5, "absent-key").code, Code::kNotFound);
  // Bad input changes nothing.
  std::optional<Code> bad;
  a.exec->Post([&] {
    const std::string junk = "not a request";
    a.server->Handle(static_cast<uint16_t>(proto::Method::kPut), proto::AsBytes(junk),
                     [&](Code c, std::string) { bad = c; });
  });
  ASSERT_TRUE(rt_.RunUntil([&] { return bad.has_value(); }, rt_.Now() + 100 * kMillisecond));
  EXPECT_NE(*bad, Code::kOk);
  // A term with no change of ownership is adopted in place (no merge, cache kept).
  cluster::ClusterConfig next = config_;
  next.term = 6;
  const uint64_t before = a.server->reconfigurations();
  Adopt(a, next);
  EXPECT_EQ(a.server->reconfigurations(), before);
}

TEST_F(DinomoServerTest, ATakeoverServesEveryAcknowledgedWriteAndFencesTheOldOwner) {
  Kn& a = Add(1);
  Kn& b = Add(2);
  AdoptAll(config_);
  // Node 1 acknowledges writes (several versions of some keys), which stay
  // in its open segments: nothing sealed them.
  std::map<std::string, std::string> want;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 30; ++i) {
      const std::string key = "k" + std::to_string(i);
      if (Owner(config_, key) != 1) continue;
      const std::string v = "r" + std::to_string(round) + "-" + std::to_string(i);
      ASSERT_EQ(Call(a, proto::Method::kPut, 5, key, v).code, Code::kOk);
      want[key] = v;
    }
  }
  ASSERT_FALSE(want.empty());
  // The manager gives node 1's shards to node 2; node 1 does not hear of it
  // and keeps running (a zombie).
  auto failed = cluster::ReassignOwners(config_, 1);
  ASSERT_TRUE(failed.ok());
  Adopt(b, *failed);
  for (const auto& [key, v] : want) {
    const Answer got = Call(b, proto::Method::kGet, failed->term, key);
    EXPECT_EQ(got.code, Code::kOk) << key;
    EXPECT_EQ(got.value, v) << key << ": the new owner must see what the old one acknowledged";
  }
  // The zombie's writes are refused by the pool, and never show up.
  const std::string key = want.begin()->first;
  const Answer z = Call(a, proto::Method::kPut, 5, key, "zombie");
  EXPECT_NE(z.code, Code::kOk);
  EXPECT_EQ(Call(b, proto::Method::kGet, failed->term, key).value, want[key]);
  // New writes on the new owner win over everything the old one wrote.
  ASSERT_EQ(Call(b, proto::Method::kPut, failed->term, key, "after").code, Code::kOk);
  EXPECT_EQ(Call(b, proto::Method::kGet, failed->term, key).value, "after");
  // Its lease gone, the zombie does not even read (its cache may be stale).
  a.lease = 0;
  EXPECT_EQ(Call(a, proto::Method::kGet, 5, key).code, Code::kUnavailable);
}

TEST_F(DinomoServerTest, APoolThatMovedIsFollowedAndATermPastTheEpochsStopsTheNode) {
  Kn& a = Add(1);
  Add(2);
  AdoptAll(config_);
  std::map<std::string, std::string> want;
  for (int i = 0; i < 30; ++i) {
    const std::string key = "k" + std::to_string(i);
    if (Owner(config_, key) != 1) continue;
    ASSERT_EQ(Call(a, proto::Method::kPut, 5, key, "v" + std::to_string(i)).code, Code::kOk);
    want[key] = "v" + std::to_string(i);
  }
  cluster::ClusterConfig moved = config_;
  moved.term = 7;
  moved.pool = "01";
  const uint64_t before = a.server->reconfigurations();
  AdoptAll(moved);
  EXPECT_EQ(a.server->reconfigurations(), before + 1);
  EXPECT_EQ(a.pool_address, "01");
  for (const auto& [key, v] : want) EXPECT_EQ(Call(a, proto::Method::kGet, 7, key).value, v) << key;

  cluster::ClusterConfig too_far = moved;
  too_far.term = DinomoServer::kMaxEpoch + 1;
  too_far.pool = "02";
  a.exec->Post([&] { a.server->Adopt(too_far); });
  ASSERT_TRUE(rt_.RunUntil([&] { return a.fatal.has_value(); }, rt_.Now() + 100 * kMillisecond));
  EXPECT_TRUE(a.fatal->Is(Code::kInvalidArgument)) << a.fatal->ToString();
  EXPECT_FALSE(a.server->serving());
}

// A live rebalancing (docs/papers/dinomo.md §5b): shards move from a
// running node to another. The gainer must not serve them while the loser
// may still answer from its cache, and must then see every write the loser
// acknowledged; a leaving node hands everything over the same way.
TEST_F(DinomoServerTest, ShardsMoveBetweenLiveNodesOnlyOnceTheLoserLetGo) {
  Kn& a = Add(1);
  Kn& b = Add(2);
  AdoptAll(config_);
  std::map<std::string, std::string> want;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "k" + std::to_string(i);
    if (Owner(config_, key) != 1) continue;
    ASSERT_EQ(Call(a, proto::Method::kPut, 5, key, "v" + std::to_string(i)).code, Code::kOk);
    ASSERT_EQ(Call(a, proto::Method::kGet, 5, key).value, "v" + std::to_string(i));  // cached
    want[key] = "v" + std::to_string(i);
  }
  ASSERT_FALSE(want.empty());
  // Node 1 leaves: its shards go to node 2. Node 2 hears of it first.
  auto leaving = cluster::RemoveOwner(config_, 1);
  ASSERT_TRUE(leaving.ok()) << leaving.status().ToString();
  EXPECT_TRUE(OwnedBy(*leaving, 1).empty());
  b.exec->Post([&b, c = *leaving] { b.server->Adopt(c); });
  rt_.RunUntil([] { return false; }, rt_.Now() + 100 * kMillisecond);
  EXPECT_FALSE(b.server->serving()) << "node 2 serves while node 1 may still answer from its cache";
  EXPECT_EQ(b.server->settled_term(), leaving->term) << "settling waits for nobody";
  const std::string key = want.begin()->first;
  EXPECT_EQ(Call(a, proto::Method::kGet, 5, key).value, want[key]) << "node 1 still serves its old term";
  // Node 1 hears of it: it lets go, node 2 serves everything it wrote.
  Adopt(a, *leaving);
  ASSERT_TRUE(rt_.RunUntil([&] { return b.server->serving() && b.server->serving_term() == leaving->term; },
                           rt_.Now() + 500 * kMillisecond));
  EXPECT_EQ(a.settled, (std::vector<uint64_t>{5, leaving->term}));
  for (const auto& [k, v] : want) {
    EXPECT_EQ(Call(b, proto::Method::kGet, leaving->term, k).value, v) << k;
    EXPECT_EQ(Call(a, proto::Method::kGet, leaving->term, k).code, Code::kStaleTerm) << k;
  }
  ASSERT_EQ(Call(b, proto::Method::kPut, leaving->term, key, "after").code, Code::kOk);
  EXPECT_EQ(Call(b, proto::Method::kGet, leaving->term, key).value, "after");
  // Node 1 is dropped; node 2 comes back to a balanced map with node 3.
  auto dropped = cluster::DropLeaving(*leaving, 1);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  Kn& c = Add(3);
  auto joined = cluster::JoinOwner(*dropped, 3, "c");
  ASSERT_TRUE(joined.ok());
  auto balanced = cluster::BalanceOwners(*joined, {2, 3});
  ASSERT_TRUE(balanced.has_value());
  EXPECT_EQ(OwnedBy(*balanced, 2).size(), 4u);
  EXPECT_EQ(OwnedBy(*balanced, 3).size(), 4u);
  a.ep.reset();  // gone: not asked any more, not adopting
  a.server.reset();
  net_.Detach(1);
  AdoptAll(*balanced);
  for (const auto& [k, v] : want) {
    Kn& owner = Owner(*balanced, k) == 2 ? b : c;
    EXPECT_EQ(Call(owner, proto::Method::kGet, balanced->term, k).value, k == key ? "after" : v) << k;
  }
}

// A node that skips a term must not adopt the next one in place: its
// shards may have been another node's in between. Node 1 owns half the
// shards in term 5; term 6 gives everything to node 2, term 7 gives it back;
// node 1 hears only of term 7. Node 2 must not serve term 6 while node 1
// still serves its term-5 cache, and node 1 must see what node 2 wrote.
TEST_F(DinomoServerTest, ASkippedTermMeansAFullReconfiguration) {
  Kn& a = Add(1);
  Kn& b = Add(2);
  AdoptAll(config_);
  std::map<std::string, std::string> want;
  for (int i = 0; i < 40; ++i) {
    const std::string key = "k" + std::to_string(i);
    if (Owner(config_, key) != 1) continue;
    ASSERT_EQ(Call(a, proto::Method::kPut, 5, key, "v" + std::to_string(i)).code, Code::kOk);
    ASSERT_EQ(Call(a, proto::Method::kGet, 5, key).value, "v" + std::to_string(i));  // cached
    want[key] = "v" + std::to_string(i);
  }
  cluster::ClusterConfig t6 = config_;
  t6.term = 6;
  for (auto& sh : t6.shards) sh.primary = 2;
  cluster::ClusterConfig t7 = config_;
  t7.term = 7;
  b.exec->Post([&b, t6] { b.server->Adopt(t6); });
  a.exec->Post([&a, t7] { a.server->Adopt(t7); });  // node 1 never sees term 6
  ASSERT_TRUE(rt_.RunUntil([&] { return b.server->serving() && b.server->serving_term() == 6; },
                           rt_.Now() + 500 * kMillisecond));
  EXPECT_FALSE(a.server->serving() && a.server->serving_term() == 5) << "node 1 let go of term 5";
  // Node 2, in term 6, sees node 1's acknowledged writes and writes one.
  const std::string key = want.begin()->first;
  for (const auto& [k, v] : want) EXPECT_EQ(Call(b, proto::Method::kGet, 6, k).value, v) << k;
  ASSERT_EQ(Call(b, proto::Method::kPut, 6, key, "from-2").code, Code::kOk);
  // Node 2 hears of term 7 and gives the shards back; node 1 sees its write.
  Adopt(b, t7);
  ASSERT_TRUE(rt_.RunUntil([&] { return a.server->serving() && a.server->serving_term() == 7; },
                           rt_.Now() + 500 * kMillisecond));
  EXPECT_EQ(Call(a, proto::Method::kGet, 7, key).value, "from-2");
  ASSERT_EQ(Call(a, proto::Method::kPut, 7, key, "from-1").code, Code::kOk);
  EXPECT_EQ(Call(a, proto::Method::kGet, 7, key).value, "from-1");
}

}  // namespace
}  // namespace slip::server
