#include "server/node_core.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <set>

#include "common/hash.h"
#include "common/random.h"
#include "replication/rpc/replicator.h"
#include "server/promoter.h"

namespace slip::server {
namespace {

constexpr uint32_t kShards = 4;

// Delivers requests to in-process NodeCores. Deliveries and replies are
// queued until Pump(), so tests can look at the state in between, as the
// PeerCaller contract demands (done never runs inside Call). A node marked
// dead fails its calls with Unavailable.
class LoopbackPeers : public rpc::PeerCaller {
 public:
  std::map<NodeId, NodeCore*> nodes;
  std::set<NodeId> dead;
  std::deque<std::function<void()>> queue;
  uint64_t calls = 0;

  void Call(rpc::Target to, uint16_t method, std::string payload,
            std::function<void(Result<rpc::PeerResponse>)> done) override {
    const NodeId node = to.node;
    ++calls;
    auto shared_done = std::make_shared<decltype(done)>(std::move(done));
    queue.push_back([this, node, method, payload = std::move(payload), shared_done] {
      if (dead.count(node) || !nodes.count(node)) {
        return (*shared_done)(Status::Unavailable("node " + std::to_string(node) + " dead"));
      }
      nodes[node]->Handle(method, proto::AsBytes(payload), [this, shared_done](Code c, std::string p) {
        queue.push_back([shared_done, c, p = std::move(p)]() mutable {
          (*shared_done)(rpc::PeerResponse{c, std::move(p)});
        });
      });
    });
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
    for (NodeId n = 0; n < 4; ++n) {
      TestNode& t = nodes[n];
      t.region = std::move(pm::PmRegion::Anonymous(4 << 20, {})).value();
      store::StoreOptions o;
      o.geometry.segment_size = 256 << 10;
      o.geometry.num_shards = kShards;
      o.limits.max_key = 1024;
      o.limits.max_value = 64 << 10;
      o.max_block_bytes = 16 << 10;
      o.num_writers = 2;  // 0: the worker, 1: the promoter
      t.store = std::move(store::Store::Open(t.region.get(), o)).value();
      t.core = std::make_unique<NodeCore>(n, t.store.get(), 0, &replicator, &views);
      rep.nodes[n] = t.core.get();
    }
  }

  // Rebuilds every node's core (same store) with `options`.
  void RewireCores(const NodeCoreOptions& options) {
    for (NodeId n = 0; n < 4; ++n) {
      nodes[n].core = std::make_unique<NodeCore>(n, nodes[n].store.get(), 0, &replicator, &views, nullptr, options);
      rep.nodes[n] = nodes[n].core.get();
    }
  }

  // Term 6: `primary` (a former backup) serves `shard` with `backup`; the
  // shard stays blocked until its promotion ends.
  void FailOver(uint32_t shard, NodeId primary, NodeId backup) {
    auto v = std::make_shared<NodeView>(*views.Get());
    v->term = 6;
    v->shards[shard] = ShardReplicas{primary, {backup}, {}};
    v->blocked[shard] = true;
    views.Set(v);
  }

  uint32_t ShardOfKey(std::string_view key) { return nodes[0].store->ShardOf(HashKey(key)); }
  NodeId PrimaryOf(std::string_view key) { return views.Get()->shards[ShardOfKey(key)].primary; }
  std::vector<std::string> KeysOfShard(uint32_t shard, size_t count) {
    std::vector<std::string> keys;
    for (int i = 0; keys.size() < count; ++i) {
      std::string k = "key" + std::to_string(i);
      if (ShardOfKey(k) == shard) keys.push_back(k);
    }
    return keys;
  }

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
  LoopbackPeers rep;
  replication::RpcReplicator replicator{&rep};
  TestNode nodes[4];  // node 3 joins later (re-replication)
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
  for (int n = 0; n < 3; ++n) EXPECT_EQ(*nodes[n].store->Get(key), "v1");

  auto g = Send(p, proto::Method::kGet, key);
  ASSERT_EQ(g->code, Code::kOk);
  EXPECT_EQ(Decode(*g).value, "v1");
  EXPECT_EQ(Decode(*g).term, 5u);

  auto d = Send(p, proto::Method::kDel, key);
  rep.Pump();
  ASSERT_EQ(d->code, Code::kOk) << d->payload;
  for (int n = 0; n < 3; ++n) EXPECT_TRUE(nodes[n].store->Get(key).status().Is(Code::kNotFound));
  auto d2 = Send(p, proto::Method::kDel, key);
  rep.Pump();
  EXPECT_EQ(d2->code, Code::kNotFound);
}

// Group commit: the writes and applies of one turn are acknowledged only
// after that turn's flush, which persists them together; a refused request
// in the same turn fails alone and at once.
TEST_F(NodeCoreTest, ConditionalPutsDecideOnTheCommittedStateAndWaitForWritesInFlight) {
  const std::string key = "cond";
  const NodeId p = PrimaryOf(key);
  auto put_if = [&](proto::PutCondition c, std::string_view value) {
    auto r = std::make_shared<Result3>();
    const std::string req = proto::Encode(proto::PutIfRequest{c, {views.Get()->term, ShardOfKey(key), key, value}});
    nodes[p].core->Handle(static_cast<uint16_t>(proto::Method::kPutIf), proto::AsBytes(req), [r](Code code, std::string payload) {
      r->replied = true;
      r->code = code;
      r->payload = std::move(payload);
    });
    return r;
  };
  // Absent: XX writes nothing (version 0), NX writes on every replica.
  auto xx = put_if(proto::PutCondition::kIfPresent, "x");
  rep.Pump();
  ASSERT_TRUE(xx->replied);
  EXPECT_EQ(xx->code, Code::kOk);
  EXPECT_EQ(Decode(*xx).version, 0u);
  for (NodeId n = 0; n < 3; ++n) EXPECT_TRUE(nodes[n].store->Get(key).status().Is(Code::kNotFound));
  auto nx = put_if(proto::PutCondition::kIfAbsent, "first");
  rep.Pump();
  EXPECT_EQ(nx->code, Code::kOk);
  EXPECT_GT(Decode(*nx).version, 0u);
  for (NodeId n = 0; n < 3; ++n) EXPECT_EQ(*nodes[n].store->Get(key), "first") << "node " << n;
  // Present: NX writes nothing.
  auto again = put_if(proto::PutCondition::kIfAbsent, "second");
  rep.Pump();
  EXPECT_EQ(Decode(*again).version, 0u);
  EXPECT_EQ(*nodes[p].store->Get(key), "first");
  // A plain PUT of the key still replicating: a conditional one is Busy (it
  // cannot know whether that write will be there), and runs once it is done.
  auto plain = Send(p, proto::Method::kPut, key, "plain");
  auto busy = put_if(proto::PutCondition::kIfPresent, "third");
  ASSERT_TRUE(busy->replied);
  EXPECT_EQ(busy->code, Code::kBusy);
  rep.Pump();
  EXPECT_EQ(plain->code, Code::kOk);
  auto third = put_if(proto::PutCondition::kIfPresent, "third");
  rep.Pump();
  EXPECT_GT(Decode(*third).version, 0u);
  for (NodeId n = 0; n < 3; ++n) EXPECT_EQ(*nodes[n].store->Get(key), "third") << "node " << n;
  EXPECT_EQ(nodes[p].core->counters().conditional_unmet, 2u);
  // A malformed condition changes nothing.
  std::string bad = proto::Encode(proto::PutIfRequest{proto::PutCondition::kIfAbsent, {views.Get()->term, ShardOfKey(key), key, "bad"}});
  bad[0] = 9;
  auto r = std::make_shared<Result3>();
  nodes[p].core->Handle(static_cast<uint16_t>(proto::Method::kPutIf), proto::AsBytes(bad),
                        [r](Code c, std::string) { r->code = c; r->replied = true; });
  rep.Pump();
  EXPECT_EQ(r->code, Code::kCorruption);
  EXPECT_EQ(*nodes[p].store->Get(key), "third");
}

TEST_F(NodeCoreTest, GroupCommitAcknowledgesATurnsWritesAfterItsFlush) {
  std::deque<std::function<void()>> turn_end;
  NodeCoreOptions o;
  o.defer = [&](std::function<void()> fn) { turn_end.push_back(std::move(fn)); };
  RewireCores(o);
  auto run_turn_ends = [&] {
    while (!turn_end.empty()) {
      auto f = std::move(turn_end.front());
      turn_end.pop_front();
      f();
    }
  };
  const uint32_t shard = 0;
  const NodeId p = views.Get()->shards[shard].primary;
  const std::vector<std::string> keys = KeysOfShard(shard, 3);
  std::vector<std::shared_ptr<Result3>> puts;
  for (const auto& k : keys) puts.push_back(Send(p, proto::Method::kPut, k, "v-" + k));
  puts.push_back(Send(p, proto::Method::kPut, keys[0], "newest"));  // same key twice in one batch
  auto stale = Send(p, proto::Method::kPut, keys[1], "stale", /*term=*/4);
  ASSERT_TRUE(stale->replied) << "a refusal waited for the batch";
  EXPECT_EQ(stale->code, Code::kStaleTerm);

  rep.Pump();  // the backups apply, deferred
  for (const auto& r : puts) EXPECT_FALSE(r->replied) << "acknowledged before any flush";
  for (NodeId b : views.Get()->shards[shard].backups) {
    EXPECT_TRUE(nodes[b].store->HasDeferred(0));
    EXPECT_TRUE(nodes[b].store->Get(keys[1]).status().Is(Code::kNotFound))
        << "a backup shows an entry before it is persistent";
  }
  run_turn_ends();  // each node's flush: one per node for the whole batch
  rep.Pump();       // the backups' answers reach the primary, which commits
  run_turn_ends();
  rep.Pump();
  for (const auto& r : puts) {
    ASSERT_TRUE(r->replied);
    EXPECT_EQ(r->code, Code::kOk) << r->payload;
  }
  for (NodeId n = 0; n < 3; ++n) {
    EXPECT_FALSE(nodes[n].store->HasDeferred(0));
    EXPECT_EQ(*nodes[n].store->Get(keys[0]), "newest") << "node " << n;
    EXPECT_EQ(*nodes[n].store->Get(keys[2]), "v-" + keys[2]) << "node " << n;
  }
  for (NodeId b : views.Get()->shards[shard].backups) {
    EXPECT_EQ(nodes[b].core->counters().group_commits, 1u) << "backup " << b;
    EXPECT_EQ(nodes[b].core->counters().group_committed, 4u) << "backup " << b;
  }
}

// A backup's CPU for REPLICATEs is sampled (the thread's CPU clock is a
// system call where a REPLICATE takes a few microseconds): one in 17 is
// timed and counted for 17, so a steady cost adds up as if each were
// timed, with two clock reads per 17 REPLICATEs instead of 34.
TEST_F(NodeCoreTest, BackupCpuTimesOneReplicateInSeventeenAndCountsItForAll) {
  int64_t reads[4] = {0, 0, 0, 0};
  for (NodeId n = 0; n < 4; ++n) {
    NodeCoreOptions o;
    o.cpu_clock = [&reads, n] { return 1000 * ++reads[n]; };  // 1 us between two reads
    nodes[n].core = std::make_unique<NodeCore>(n, nodes[n].store.get(), 0, &replicator, &views, nullptr, o);
    rep.nodes[n] = nodes[n].core.get();
  }
  const std::vector<std::string> keys = KeysOfShard(0, 34);  // shard 0: primary 0, backups 1 and 2
  for (const std::string& k : keys) ASSERT_EQ(Put(k, "v")->code, Code::kOk);
  for (NodeId b : {NodeId{1}, NodeId{2}}) {
    EXPECT_EQ(nodes[b].core->counters().backup_requests, 34u);
    EXPECT_EQ(nodes[b].core->counters().backup_cpu_ns, 34 * 1000);
    EXPECT_EQ(reads[b], 4);  // two timed REPLICATEs, two reads each
  }
  EXPECT_EQ(nodes[0].core->counters().backup_cpu_ns, 0);
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
  for (int n = 0; n < 3; ++n) EXPECT_EQ(*nodes[n].store->Get(key), "newer");
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
    nodes[rng.Uniform(4)].core->Handle(method, proto::AsBytes(junk), [&](Code c, std::string p) {
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

// Failover data path: the primary of a shard dies; a backup is promoted in
// a new term. One survivor holds an entry the other never got (the dead
// primary's last, unacknowledged write). After Promote both replicas hold
// the same entries, the new primary numbers writes above all of them, and a
// new backup seeded by re-replication matches too.
TEST_F(NodeCoreTest, PromotionMakesReplicasAgreeAndSeedsANewBackup) {
  const uint32_t shard = 0;
  const NodeId old_primary = views.Get()->shards[shard].primary;
  const NodeId b1 = views.Get()->shards[shard].backups[0], b2 = views.Get()->shards[shard].backups[1];
  const std::vector<std::string> keys = KeysOfShard(shard, 40);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(Put(keys[i], "v" + std::to_string(i))->code, Code::kOk);
  }
  auto del = Send(old_primary, proto::Method::kDel, keys[0]);
  rep.Pump();
  ASSERT_EQ(del->code, Code::kOk);
  // The dead primary's last write reached b2 only.
  const uint64_t orphan_version = nodes[old_primary].store->shard_version(shard) + 1;
  ASSERT_TRUE(nodes[b2].store->Apply(0, {log::EntryType::kPut, shard, orphan_version}, keys[1],
                                     "orphan").ok());
  rep.dead.insert(old_primary);

  // New term: b1 primary, b2 backup, shard blocked until promotion ends.
  FailOver(shard, b1, b2);
  Promoter promoter(nodes[b1].store.get(), 1, &rep);
  bool finished = false;
  promoter.Promote(6, shard, {b2}, {}, [&](Status s, PromoteStats st) {
    finished = true;
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_GT(st.pulled_entries, 0u);
    EXPECT_GT(st.pushed_entries, 0u);
  });
  rep.Pump();
  ASSERT_TRUE(finished);
  for (const auto& k : keys) {
    auto a = nodes[b1].store->Get(k), b = nodes[b2].store->Get(k);
    ASSERT_EQ(a.ok(), b.ok()) << k;
    if (a.ok()) {
      EXPECT_EQ(*a, *b) << k;
    }
  }
  EXPECT_EQ(*nodes[b1].store->Get(keys[1]), "orphan") << "the gathered tail reached the new primary";
  EXPECT_GE(nodes[b1].store->shard_version(shard), orphan_version);

  // Unblock: the new primary serves, numbering above everything.
  auto v2 = std::make_shared<NodeView>(*views.Get());
  v2->blocked[shard] = false;
  views.Set(v2);
  auto put = Put(keys[1], "after failover");
  ASSERT_EQ(put->code, Code::kOk) << put->payload;
  EXPECT_GT(Decode(*put).version, orphan_version);
  EXPECT_EQ(*nodes[b2].store->Get(keys[1]), "after failover");
  auto stale = Send(old_primary, proto::Method::kGet, keys[2], {}, /*term=*/6);
  EXPECT_EQ(stale->code, Code::kStaleTerm) << "the old primary must not serve the new term";

  // Re-replication: node 3 becomes the second backup and is seeded.
  auto v3 = std::make_shared<NodeView>(*views.Get());
  v3->term = 7;
  v3->shards[shard].backups.push_back(3);
  views.Set(v3);
  bool seeded = false;
  promoter.Seed(7, shard, 3, [&](Status s, PromoteStats) {
    seeded = true;
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
  rep.Pump();
  ASSERT_TRUE(seeded);
  for (const auto& k : keys) {
    auto a = nodes[b1].store->Get(k), c = nodes[3].store->Get(k);
    ASSERT_EQ(a.ok(), c.ok()) << k;
    if (a.ok()) {
      EXPECT_EQ(*a, *c) << k;
    }
  }
}

TEST_F(NodeCoreTest, PromotionFailsCleanlyWhenAReplicaIsUnreachable) {
  const uint32_t shard = 1;
  const NodeId b1 = views.Get()->shards[shard].backups[0], b2 = views.Get()->shards[shard].backups[1];
  FailOver(shard, b1, b2);
  rep.dead.insert(b2);
  Promoter promoter(nodes[b1].store.get(), 1, &rep);
  Status result = Status::Ok();
  bool finished = false;
  promoter.Promote(6, shard, {b2}, {}, [&](Status s, PromoteStats) {
    finished = true;
    result = s;
  });
  rep.Pump();
  ASSERT_TRUE(finished);
  EXPECT_TRUE(result.Is(Code::kUnavailable)) << result.ToString();
  // A replica still in the old term refuses: the promoter reports it.
  rep.dead.clear();
  auto old_view = std::make_shared<NodeView>(*views.Get());
  old_view->term = 5;
  views.Set(old_view);
  promoter.Promote(6, shard, {b2}, {}, [&](Status s, PromoteStats) { result = s; });
  rep.Pump();
  EXPECT_TRUE(result.Is(Code::kStaleTerm)) << result.ToString();
}

}  // namespace
}  // namespace slip::server

namespace slip::server {
namespace {

// A promotion's pull can be cut short (a replica fails, a newer term). The
// CommitVer record it pulled must not stay behind: it would claim entries
// this node never got, and the next promotion's floor would skip them (the
// simulator lost an acknowledged write this way after a move that never
// finished). The record is applied only once the whole pull is in.
TEST_F(NodeCoreTest, APullCutShortLeavesNoCommitRecord) {
  const uint32_t shard = 0;
  const NodeId old_primary = views.Get()->shards[shard].primary;
  const NodeId b1 = views.Get()->shards[shard].backups[0], b2 = views.Get()->shards[shard].backups[1];
  const std::vector<std::string> keys = KeysOfShard(shard, 20);
  NodeCoreOptions every_version;
  every_version.commit_record_step = 1;
  RewireCores(every_version);
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(Put(keys[i], "v" + std::to_string(i))->code, Code::kOk);
  nodes[old_primary].core->WriteCommitRecords();
  rep.Pump();
  ASSERT_GT(nodes[b1].core->RecordedCommitVersion(shard), 0u);

  // Node 3 holds nothing of the shard; it pulls from b1, then from b2, which is gone.
  const NodeId fresh = 3;
  FailOver(shard, fresh, b1);
  rep.dead.insert(b2);
  PromoterOptions po;
  po.commit_floor = [&](uint32_t s) { return nodes[fresh].core->RecordedCommitVersion(s); };
  Promoter promoter(nodes[fresh].store.get(), 1, &rep, po);
  Status result = Status::Ok();
  promoter.Promote(6, shard, {b1, b2}, {}, [&](Status s, PromoteStats) { result = s; });
  rep.Pump();
  ASSERT_TRUE(result.Is(Code::kUnavailable)) << result.ToString();
  EXPECT_EQ(nodes[fresh].core->RecordedCommitVersion(shard), 0u) << "a cut-short pull left its CommitVer record";

  // The whole pull: everything, and the record last.
  rep.dead.clear();
  PromoteStats st;
  promoter.Promote(6, shard, {b1}, {}, [&](Status s, PromoteStats got) {
    result = s;
    st = got;
  });
  rep.Pump();
  ASSERT_TRUE(result.ok()) << result.ToString();
  EXPECT_EQ(st.floor, 0u);
  EXPECT_EQ(nodes[fresh].core->RecordedCommitVersion(shard), nodes[b1].core->RecordedCommitVersion(shard));
  for (size_t i = 0; i < keys.size(); ++i) {
    auto v = nodes[fresh].store->Get(keys[i]);
    ASSERT_TRUE(v.ok()) << keys[i];
    EXPECT_EQ(*v, "v" + std::to_string(i));
  }
}

TEST_F(NodeCoreTest, ReservedKeysAreRefusedAndChangeNothing) {
  const std::string key = CommitKeys(kShards)[1];
  auto put = Send(PrimaryOf(key), proto::Method::kPut, key, "x");
  rep.Pump();
  EXPECT_EQ(put->code, Code::kInvalidArgument);
  auto get = Send(PrimaryOf(key), proto::Method::kGet, key);
  EXPECT_EQ(get->code, Code::kInvalidArgument);
  for (auto& n : nodes) EXPECT_EQ(n.store->stats().appended_bytes, 0u);
}

// CommitVer (docs/papers/rowan.md §3.5): the primary records how far every backup
// has everything; a promotion then moves only the entries above it, and the
// replicas still agree — including on a tail entry only one backup got.
TEST_F(NodeCoreTest, CommitRecordsLetAPromotionExchangeOnlyTheTail) {
  const uint32_t shard = 0;
  const NodeId old_primary = views.Get()->shards[shard].primary;
  const NodeId b1 = views.Get()->shards[shard].backups[0], b2 = views.Get()->shards[shard].backups[1];
  const std::vector<std::string> keys = KeysOfShard(shard, 40);
  NodeCoreOptions every_version;
  every_version.commit_record_step = 1;
  RewireCores(every_version);
  for (size_t i = 0; i < 36; ++i) ASSERT_EQ(Put(keys[i], "v" + std::to_string(i))->code, Code::kOk);
  nodes[old_primary].core->WriteCommitRecords();
  rep.Pump();
  const uint64_t recorded = nodes[b1].core->RecordedCommitVersion(shard);
  EXPECT_EQ(recorded, 36u) << "every version so far was acknowledged by both backups";
  EXPECT_EQ(nodes[b2].core->RecordedCommitVersion(shard), recorded);
  EXPECT_EQ(nodes[old_primary].core->counters().commit_records, 1u)
      << "only shard 0 had writes: nothing to record for the others";
  for (size_t i = 36; i < 40; ++i) ASSERT_EQ(Put(keys[i], "v" + std::to_string(i))->code, Code::kOk);
  // A write that failed at b1 but reached b2 holds the CommitVer back.
  rep.dead.insert(b1);
  auto lost = Send(old_primary, proto::Method::kPut, keys[0], "partial");
  rep.Pump();
  ASSERT_EQ(lost->code, Code::kUnavailable);
  rep.dead.erase(b1);
  nodes[old_primary].core->WriteCommitRecords();
  rep.Pump();
  EXPECT_EQ(nodes[b1].core->RecordedCommitVersion(shard), 41u) << "up to the record's own version, not past 42";
  ASSERT_TRUE(nodes[b2].store->Apply(0, {log::EntryType::kPut, shard, 42}, keys[0], "partial").ok());
  rep.dead.insert(old_primary);

  FailOver(shard, b1, b2);
  PromoterOptions po;
  po.commit_floor = [&](uint32_t s) { return nodes[b1].core->RecordedCommitVersion(s); };
  Promoter promoter(nodes[b1].store.get(), 1, &rep, std::move(po));
  bool finished = false;
  PromoteStats stats;
  promoter.Promote(6, shard, {b2}, {}, [&](Status s, PromoteStats st) {
    finished = true;
    stats = st;
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
  rep.Pump();
  ASSERT_TRUE(finished);
  EXPECT_EQ(stats.floor, 41u);
  // Above 41 only: the partial write and the second record, pulled from b2
  // and pushed back (a walk does not know what the peer has); the whole
  // shard would be 41 entries each way.
  EXPECT_EQ(stats.pulled_entries, 2u);
  EXPECT_EQ(stats.pushed_entries, 2u);
  EXPECT_EQ(*nodes[b1].store->Get(keys[0]), "partial") << "the tail above the floor was gathered";
  for (const auto& k : keys) EXPECT_EQ(*nodes[b1].store->Get(k), *nodes[b2].store->Get(k)) << k;
}


// A primary's move (docs/papers/rowan.md §3.7), node 0 -> node 3 (which
// holds no replica): the source hands over only once its writes are done;
// the target serves at once, fetching from the source a key it has not
// copied yet (a GET, a DEL's existence check); its writes are numbered above
// the source's, so the copy that lands afterwards never overrides them.
TEST_F(NodeCoreTest, AMovedPrimaryServesAtOnceFetchingWhatItHasNotCopiedAndVersionsOrderTheRace) {
  std::shared_ptr<NodeShared> shared[4];
  NodeCoreOptions o;
  o.peers = &rep;
  for (NodeId n = 0; n < 4; ++n) {
    shared[n] = std::make_shared<NodeShared>();
    nodes[n].core = std::make_unique<NodeCore>(n, nodes[n].store.get(), 0, &replicator, &views, shared[n], o);
    rep.nodes[n] = nodes[n].core.get();
  }
  const uint32_t shard = 0;  // primary 0, backups 1 and 2
  const std::vector<std::string> k = KeysOfShard(shard, 6);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(Put(k[i], "v" + std::to_string(i))->code, Code::kOk);
  auto gone = Send(0, proto::Method::kDel, k[4]);
  rep.Pump();
  ASSERT_EQ(gone->code, Code::kOk);
  // A write of the old term is still in flight when the move is published.
  auto late = Send(0, proto::Method::kPut, k[5], "late");
  auto moved = std::make_shared<NodeView>(*views.Get());
  moved->term = 6;
  moved->shards[shard] = ShardReplicas{3, {1, 2}, {}};
  moved->moves.push_back(PrimaryMove{shard, 0, 3});
  views.Set(moved);

  auto begin = [&](NodeId at, uint64_t term) {
    auto r = std::make_shared<Result3>();
    std::string req = proto::Encode(proto::ShardTailRequest{term, shard, 0, 0});
    nodes[at].core->Handle(static_cast<uint16_t>(proto::Method::kMigrateBegin), proto::AsBytes(req),
                           [r](Code c, std::string p) {
                             r->replied = true;
                             r->code = c;
                             r->payload = std::move(p);
                           });
    return r;
  };
  EXPECT_EQ(begin(0, 6)->code, Code::kBusy) << "a write of the shard is in flight";
  EXPECT_EQ(begin(0, 7)->code, Code::kBusy) << "the source is behind the move's term";
  EXPECT_EQ(begin(1, 6)->code, Code::kStaleTerm) << "not the source";
  rep.Pump();  // the late write ends (its backups moved on: outcome unknown)
  ASSERT_TRUE(late->replied);
  EXPECT_EQ(late->code, Code::kUnavailable);
  // The source no longer serves the shard.
  EXPECT_EQ(Send(0, proto::Method::kGet, k[0])->code, Code::kStaleTerm);

  Promoter target(nodes[3].store.get(), 1, &rep);
  Status handed = Status::Aborted("no answer");
  uint64_t version = 0;
  target.HandOver(6, shard, 0, [&](Status s, uint64_t v, uint64_t) {
    handed = s;
    version = v;
  });
  rep.Pump();
  ASSERT_TRUE(handed.ok()) << handed.ToString();
  EXPECT_EQ(version, nodes[0].store->shard_version(shard)) << "every version the source assigned";
  EXPECT_EQ(nodes[3].store->shard_version(shard), version);
  shared[3]->migrations_in.Copying(shard, 0);

  // Nothing copied yet: a GET fetches from the source (and keeps the entry).
  auto g = Send(3, proto::Method::kGet, k[0]);
  EXPECT_FALSE(g->replied) << "waits for the fetch";
  rep.Pump();
  ASSERT_EQ(g->code, Code::kOk) << g->payload;
  EXPECT_EQ(Decode(*g).value, "v0");
  EXPECT_EQ(*nodes[3].store->Get(k[0]), "v0");
  EXPECT_EQ(nodes[3].core->counters().migration_fetches, 1u);
  EXPECT_EQ(Send(3, proto::Method::kGet, k[0])->code, Code::kOk) << "no second fetch";
  EXPECT_EQ(nodes[3].core->counters().migration_fetches, 1u);
  // Deleted at the source: its tombstone comes over.
  auto g4 = Send(3, proto::Method::kGet, k[4]);
  rep.Pump();
  EXPECT_EQ(g4->code, Code::kNotFound);
  // A DEL must know whether the key exists: fetched first.
  auto d1 = Send(3, proto::Method::kDel, k[1]);
  rep.Pump();
  EXPECT_EQ(d1->code, Code::kOk) << d1->payload;
  // A PUT needs no fetch: its version is above every one of the source's.
  auto p2 = Send(3, proto::Method::kPut, k[2], "new");
  rep.Pump();
  ASSERT_EQ(p2->code, Code::kOk);
  EXPECT_GT(Decode(*p2).version, version);

  // The copy lands after those writes: versions decide, not arrival.
  Status copied = Status::Aborted("no answer");
  PromoteStats st;
  target.Copy(6, shard, 0, [&](Status s, PromoteStats x) {
    copied = s;
    st = x;
  });
  rep.Pump();
  ASSERT_TRUE(copied.ok()) << copied.ToString();
  EXPECT_GE(st.pulled_entries, 5u);
  shared[3]->migrations_in.Done(shard);
  auto get = [&](const std::string& key) -> std::string {
    auto r = Send(3, proto::Method::kGet, key);
    rep.Pump();
    if (r->code != Code::kOk) return std::string(CodeName(r->code));
    return std::string(Decode(*r).value);
  };
  EXPECT_EQ(get(k[0]), "v0");
  EXPECT_EQ(get(k[1]), "NotFound") << "the copied entry is older than the target's delete";
  EXPECT_EQ(get(k[2]), "new") << "the copied entry is older than the target's put";
  EXPECT_EQ(get(k[3]), "v3");
  EXPECT_EQ(get(k[4]), "NotFound");
  for (NodeId b : {1u, 2u}) {
    EXPECT_EQ(*nodes[b].store->Get(k[2]), "new");
    EXPECT_TRUE(nodes[b].store->Get(k[1]).status().Is(Code::kNotFound));
  }

  // A new incarnation of the source did not hand the shard over: it serves
  // no copy and no fetch (the target must get the hand-over again).
  nodes[0].core = std::make_unique<NodeCore>(0, nodes[0].store.get(), 0, &replicator, &views,
                                             std::make_shared<NodeShared>(), o);
  rep.nodes[0] = nodes[0].core.get();
  Status again = Status::Ok();
  target.Copy(6, shard, 0, [&](Status s, PromoteStats) { again = s; });
  rep.Pump();
  EXPECT_TRUE(again.Is(Code::kBusy)) << again.ToString();
  std::string fetch = proto::Encode(proto::KvRequest{6, shard, k[0], {}});
  Code fetched = Code::kOk;
  nodes[0].core->Handle(static_cast<uint16_t>(proto::Method::kMigrateFetch), proto::AsBytes(fetch),
                        [&](Code c, std::string) { fetched = c; });
  EXPECT_EQ(fetched, Code::kBusy);
}

}  // namespace
}  // namespace slip::server
