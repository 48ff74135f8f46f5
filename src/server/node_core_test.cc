#include "server/node_core.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

#include "common/hash.h"
#include "common/random.h"

namespace slip::server {
namespace {

constexpr uint32_t kShards = 4;

// Delivers REPLICATE requests to other in-process NodeCores. Deliveries are
// queued until Pump(), so tests can look at the state in between; a node
// marked dead fails its deliveries.
class LoopbackReplicator : public replication::Replicator {
 public:
  std::map<NodeId, NodeCore*> nodes;
  std::set<NodeId> dead;
  std::deque<std::function<void()>> queue;

  void Replicate(std::span<const NodeId> backups, const proto::ReplicateRequest& entry,
                 std::function<void(Status)> done) override {
    auto bytes = std::make_shared<std::string>(proto::Encode(entry));
    auto left = std::make_shared<size_t>(backups.size());
    auto failed = std::make_shared<bool>(false);
    auto shared_done = std::make_shared<std::function<void(Status)>>(std::move(done));
    for (NodeId b : backups) {
      queue.push_back([=, this] {
        auto complete = [=](Status s) {
          if (*failed) return;
          if (!s.ok()) {
            *failed = true;
            (*shared_done)(s);
          } else if (--*left == 0) {
            (*shared_done)(Status::Ok());
          }
        };
        if (dead.count(b)) return complete(Status::Unavailable("node " + std::to_string(b) + " dead"));
        nodes[b]->Handle(static_cast<uint16_t>(proto::Method::kReplicate), proto::AsBytes(*bytes),
                         [=](Code c, std::string payload) {
                           complete(c == Code::kOk ? Status::Ok() : Status(c, payload));
                         });
      });
    }
  }
  void Pump() {
    while (!queue.empty()) {
      auto f = std::move(queue.front());
      queue.pop_front();
      f();
    }
  }
};

struct TestNode {
  std::unique_ptr<pm::PmRegion> region;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<NodeCore> core;
};

struct Result3 {
  Code code = Code::kAborted;  // "no reply yet"
  std::string payload;
  bool replied = false;
};

class NodeCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto view = std::make_shared<NodeView>();
    view->term = 5;
    // Shard s: primary s % 3, backups the other two.
    for (uint32_t s = 0; s < kShards; ++s) {
      ShardReplicas r;
      r.primary = s % 3;
      for (NodeId n = 0; n < 3; ++n) {
        if (n != r.primary) r.backups.push_back(n);
      }
      view->shards.push_back(r);
    }
    view->blocked.assign(kShards, false);
    views.Set(view);
    for (NodeId n = 0; n < 3; ++n) {
      TestNode& t = nodes[n];
      t.region = std::move(pm::PmRegion::Anonymous(4 << 20, {})).value();
      store::StoreOptions o;
      o.geometry.segment_size = 256 << 10;
      o.geometry.num_shards = kShards;
      o.limits.max_key = 1024;
      o.limits.max_value = 64 << 10;
      o.max_block_bytes = 16 << 10;
      t.store = std::move(store::Store::Open(t.region.get(), o)).value();
      t.core = std::make_unique<NodeCore>(n, t.store.get(), 0, &rep, &views);
      rep.nodes[n] = t.core.get();
    }
  }

  uint32_t ShardOfKey(std::string_view key) { return nodes[0].store->ShardOf(HashKey(key)); }
  NodeId PrimaryOf(std::string_view key) { return views.Get()->shards[ShardOfKey(key)].primary; }

  std::shared_ptr<Result3> Send(NodeId to, proto::Method m, std::string_view key,
                                std::string_view value = {}, std::optional<uint64_t> term = {},
                                std::optional<uint32_t> shard = {}) {
    auto r = std::make_shared<Result3>();
    std::string req = proto::Encode(proto::KvRequest{term.value_or(views.Get()->term),
                                                     shard.value_or(ShardOfKey(key)), key, value});
    nodes[to].core->Handle(static_cast<uint16_t>(m), proto::AsBytes(req),
                           [r](Code c, std::string p) {
                             EXPECT_FALSE(r->replied) << "replied twice";
                             r->replied = true;
                             r->code = c;
                             r->payload = std::move(p);
                           });
    return r;
  }
  std::shared_ptr<Result3> Put(std::string_view key, std::string_view value) {
    auto r = Send(PrimaryOf(key), proto::Method::kPut, key, value);
    rep.Pump();
    return r;
  }
  proto::KvResponse Decode(const Result3& r) {
    auto d = proto::DecodeKvResponse(proto::AsBytes(r.payload), log::Limits{});
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? *d : proto::KvResponse{};
  }

  ViewHolder views;
  LoopbackReplicator rep;
  TestNode nodes[3];
};

TEST_F(NodeCoreTest, PutIsOnEveryReplicaBeforeItIsAcknowledgedOrVisible) {
  const std::string key = "user42";
  const NodeId p = PrimaryOf(key);
  auto r = Send(p, proto::Method::kPut, key, "v1");
  // Replication in flight: no reply, and the primary still shows nothing.
  EXPECT_FALSE(r->replied);
  EXPECT_TRUE(nodes[p].store->Get(key).status().Is(Code::kNotFound));
  rep.Pump();
  ASSERT_TRUE(r->replied);
  ASSERT_EQ(r->code, Code::kOk) << r->payload;
  EXPECT_GT(Decode(*r).version, 0u);
  for (auto& n : nodes) EXPECT_EQ(*n.store->Get(key), "v1");

  auto g = Send(p, proto::Method::kGet, key);
  ASSERT_EQ(g->code, Code::kOk);
  EXPECT_EQ(Decode(*g).value, "v1");
  EXPECT_EQ(Decode(*g).term, 5u);

  auto d = Send(p, proto::Method::kDel, key);
  rep.Pump();
  ASSERT_EQ(d->code, Code::kOk) << d->payload;
  for (auto& n : nodes) EXPECT_TRUE(n.store->Get(key).status().Is(Code::kNotFound));
  auto d2 = Send(p, proto::Method::kDel, key);
  rep.Pump();
  EXPECT_EQ(d2->code, Code::kNotFound);
}

TEST_F(NodeCoreTest, StaleTermOrWrongNodeIsRefusedWithTheNodesTerm) {
  const std::string key = "k";
  const NodeId p = PrimaryOf(key);
  auto stale = Send(p, proto::Method::kPut, key, "v", /*term=*/4);
  ASSERT_EQ(stale->code, Code::kStaleTerm);
  EXPECT_EQ(Decode(*stale).term, 5u);
  auto wrong_node = Send((p + 1) % 3, proto::Method::kPut, key, "v");
  EXPECT_EQ(wrong_node->code, Code::kStaleTerm);
  auto wrong_shard = Send(p, proto::Method::kGet, key, {}, {}, (ShardOfKey(key) + 1) % kShards);
  EXPECT_EQ(wrong_shard->code, Code::kStaleTerm);
  rep.Pump();
  for (auto& n : nodes) EXPECT_EQ(n.store->stats().appended_bytes, 0u) << "a refusal wrote";
}

TEST_F(NodeCoreTest, ReplicationFailureIsUnavailableAndNeverVisible) {
  const std::string key = "fragile";
  const NodeId p = PrimaryOf(key);
  ASSERT_EQ(Put(key, "old")->code, Code::kOk);
  rep.dead.insert(views.Get()->shards[ShardOfKey(key)].backups[1]);
  auto r = Put(key, "new");
  ASSERT_EQ(r->code, Code::kUnavailable) << r->payload;
  EXPECT_NE(Decode(*r).value.find("outcome unknown"), std::string::npos);
  EXPECT_EQ(*nodes[p].store->Get(key), "old") << "an unacknowledged write became visible";
  rep.dead.clear();
  ASSERT_EQ(Put(key, "newer")->code, Code::kOk);
  for (auto& n : nodes) EXPECT_EQ(*n.store->Get(key), "newer");
}

TEST_F(NodeCoreTest, BackupRefusesReplicationFromAnotherTermOrShard) {
  const std::string key = "x";
  const uint32_t shard = ShardOfKey(key);
  const NodeId backup = views.Get()->shards[shard].backups[0];
  auto send = [&](NodeId to, uint64_t term, uint16_t s) {
    std::string req = proto::Encode(
        proto::ReplicateRequest{term, {log::EntryType::kPut, s, 9}, key, "v"});
    Code code = Code::kAborted;
    nodes[to].core->Handle(static_cast<uint16_t>(proto::Method::kReplicate), proto::AsBytes(req),
                           [&](Code c, std::string) { code = c; });
    return code;
  };
  EXPECT_EQ(send(backup, 4, static_cast<uint16_t>(shard)), Code::kStaleTerm);
  EXPECT_EQ(send(backup, 6, static_cast<uint16_t>(shard)), Code::kStaleTerm);
  EXPECT_EQ(send(views.Get()->shards[shard].primary, 5, static_cast<uint16_t>(shard)),
            Code::kStaleTerm);
  // The right term and node, but the key belongs to another shard.
  EXPECT_NE(send(backup, 5, static_cast<uint16_t>((shard + 3) % kShards)), Code::kOk);
  EXPECT_TRUE(nodes[backup].store->Get(key).status().Is(Code::kNotFound));
  EXPECT_EQ(send(backup, 5, static_cast<uint16_t>(shard)), Code::kOk);
  EXPECT_EQ(*nodes[backup].store->Get(key), "v");
}

TEST_F(NodeCoreTest, BlockedShardIsBusy) {
  const std::string key = "b";
  auto v = std::make_shared<NodeView>(*views.Get());
  v->blocked[ShardOfKey(key)] = true;
  views.Set(v);
  EXPECT_EQ(Put(key, "v")->code, Code::kBusy);
  EXPECT_EQ(Send(PrimaryOf(key), proto::Method::kGet, key)->code, Code::kBusy);
}

TEST_F(NodeCoreTest, MalformedRequestsGetClearErrorsAndChangeNothing) {
  Random rng(9);
  for (int i = 0; i < 20000; ++i) {
    std::string junk(rng.Uniform(80), '\0');
    for (auto& c : junk) c = static_cast<char>(rng.Uniform(3) ? rng.Uniform(4) : rng.Next());
    const uint16_t method = static_cast<uint16_t>(rng.Uniform(40));
    bool replied = false;
    nodes[rng.Uniform(3)].core->Handle(method, proto::AsBytes(junk), [&](Code c, std::string p) {
      replied = true;
      if (c != Code::kOk) {
        EXPECT_TRUE(proto::DecodeKvResponse(proto::AsBytes(p), log::Limits{}).ok());
      }
    });
    rep.Pump();
    EXPECT_TRUE(replied) << "method " << method;
  }
  auto big = Send(PrimaryOf("k"), proto::Method::kPut, std::string(2000, 'k'), "v");
  EXPECT_EQ(big->code, Code::kTooLarge);
  auto huge = Send(PrimaryOf("k"), proto::Method::kPut, "k", std::string(65 << 10, 'v'));
  EXPECT_EQ(huge->code, Code::kTooLarge);
}

}  // namespace
}  // namespace slip::server
