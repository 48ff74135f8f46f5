// Clover (dinomo/clover.h), DINOMO's shared-everything baseline, against
// the pool over the simulated fabric: the round trips of each path (a first
// write inserts the chain's head, later ones write and swap, a shortcut to
// the newest version reads once, a stale one hops, a miss reads the bucket
// and walks the chain from its head — shorter once the metadata server's GC
// pass moved the head), writers on several nodes racing on one key, and bad
// input refused with nothing changed.
#include "dinomo/clover.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>

#include "dinomo/testing/sim_pool.h"
#include "proto/kv.h"
#include "proto/pool.h"

namespace slip::dinomo {
namespace {

using runtime::kMillisecond;

class CloverTest : public ::testing::Test {
 protected:
  struct Cn {
    runtime::Executor* exec = nullptr;
    std::unique_ptr<fabric::Endpoint> ep;
    std::unique_ptr<rpc::LocalCaller> calls;
    std::unique_ptr<CloverNode> node;
  };

  void SetUp() override {
    PoolOptions po;
    po.segment_bytes = 64 << 10;
    po.num_buckets = 1024;
    world_ = std::make_unique<testing::SimPool>(rt_, 8 << 20, po);
  }
  void TearDown() override {
    for (auto& c : cns_) {
      c->ep.reset();
      c->node.reset();
    }
  }

  Cn& Add(uint32_t id, uint64_t cache_bytes = 1 << 20) {
    auto c = std::make_unique<Cn>();
    c->exec = rt_.CreateExecutor("cn" + std::to_string(id));
    c->ep = std::move(world_->fabric().CreateEndpoint(id, c->exec, {})).value();
    c->calls = world_->CallerFor(c->exec);
    c->node = std::make_unique<CloverNode>(c->exec, c->ep.get(), c->calls.get(), testing::SimPool::kPoolId,
                                           CloverNodeOptions{.node = id, .epoch = 1, .cache_bytes = cache_bytes, .limits = {}});
    CloverNode* n = c->node.get();
    c->exec->AddPoller([n] { return n->Poll(); });
    std::optional<Status> ready;
    c->exec->Post([&] { n->Start([&](Status s) { ready = s; }); });
    EXPECT_TRUE(rt_.RunUntil([&] { return ready.has_value(); }, rt_.Now() + 100 * kMillisecond));
    EXPECT_TRUE(ready && ready->ok()) << (ready ? ready->ToString() : "no answer");
    cns_.push_back(std::move(c));
    return *cns_.back();
  }
  Status Put(Cn& c, const std::string& key, const std::string& value) {
    std::optional<Status> got;
    c.exec->Post([&] { c.node->Put(key, value, [&](Status s) { got = s; }); });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * kMillisecond));
    return got.value_or(Status::Aborted("no answer"));
  }
  Status Del(Cn& c, const std::string& key) {
    std::optional<Status> got;
    c.exec->Post([&] { c.node->Delete(key, [&](Status s) { got = s; }); });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * kMillisecond));
    return got.value_or(Status::Aborted("no answer"));
  }
  Result<std::string> Get(Cn& c, const std::string& key) {
    std::optional<Result<std::string>> got;
    c.exec->Post([&] { c.node->Get(key, [&](Result<std::string> r) { got = std::move(r); }); });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * kMillisecond));
    return got.value_or(Status::Aborted("no answer"));
  }
  // Round trips of the next call on `c`.
  template <typename F>
  uint64_t Rts(Cn& c, F f) {
    const CloverNodeStats before = c.node->stats();
    f();
    const CloverNodeStats after = c.node->stats();
    return (after.get_round_trips + after.write_round_trips) - (before.get_round_trips + before.write_round_trips);
  }

  runtime::SimRuntime rt_{runtime::SimRuntimeOptions{.seed = 5}};
  std::unique_ptr<testing::SimPool> world_;
  std::vector<std::unique_ptr<Cn>> cns_;
};

TEST_F(CloverTest, EachPathCostsItsRoundTrips) {
  Cn& a = Add(1);
  Cn& b = Add(2);
  // A first write: WRITE, the empty bucket, CLOVER_INSERT.
  EXPECT_EQ(Rts(a, [&] { ASSERT_TRUE(Put(a, "k", "v1").ok()); }), 3u);
  EXPECT_EQ(a.node->stats().inserts, 1u);
  // Later writes through the shortcut: WRITE and swap.
  EXPECT_EQ(Rts(a, [&] { ASSERT_TRUE(Put(a, "k", "v2").ok()); }), 2u);
  EXPECT_EQ(Rts(a, [&] { ASSERT_TRUE(Put(a, "k", "v3").ok()); }), 2u);
  // A shortcut to the newest version: one READ.
  EXPECT_EQ(Rts(a, [&] { EXPECT_EQ(*Get(a, "k"), "v3"); }), 1u);
  // Another node misses: the bucket, then the chain from its head (3 versions).
  EXPECT_EQ(Rts(b, [&] { EXPECT_EQ(*Get(b, "k"), "v3"); }), 4u);
  EXPECT_EQ(Rts(b, [&] { EXPECT_EQ(*Get(b, "k"), "v3"); }), 1u) << "its shortcut names the newest now";
  // Node 1 writes twice more: node 2's shortcut is stale by two versions.
  ASSERT_TRUE(Put(a, "k", "v4").ok());
  ASSERT_TRUE(Put(a, "k", "v5").ok());
  EXPECT_EQ(Rts(b, [&] { EXPECT_EQ(*Get(b, "k"), "v5"); }), 3u);
  // Node 2 writes through its shortcut, which node 1 then makes stale:
  // node 1's swap at its own newest fails and hops once.
  ASSERT_TRUE(Put(b, "k", "v6").ok());
  const uint64_t failures = a.node->stats().swap_failures;
  EXPECT_EQ(Rts(a, [&] { ASSERT_TRUE(Put(a, "k", "v7").ok()); }), 4u);  // WRITE, swap, READ, swap
  EXPECT_EQ(a.node->stats().swap_failures, failures + 1);
  // The metadata server moves the head to the newest: a new node's miss is 2.
  Cn& c = Add(3);
  std::optional<Result<uint64_t>> moved;
  world_->pool_exec()->Post([&] { moved = AdvanceChains(world_->pool(), world_->region()); });
  ASSERT_TRUE(rt_.RunUntil([&] { return moved.has_value(); }, rt_.Now() + kMillisecond));
  ASSERT_TRUE(moved->ok()) << moved->status().ToString();
  EXPECT_EQ(**moved, 1u);
  EXPECT_EQ(Rts(c, [&] { EXPECT_EQ(*Get(c, "k"), "v7"); }), 2u);
  // An absent key: its bucket.
  EXPECT_EQ(Rts(c, [&] { EXPECT_TRUE(Get(c, "nothing").status().Is(Code::kNotFound)); }), 1u);
  // A delete links a tombstone.
  ASSERT_TRUE(Del(b, "k").ok());
  EXPECT_TRUE(Get(a, "k").status().Is(Code::kNotFound));
  EXPECT_TRUE(Get(c, "k").status().Is(Code::kNotFound));
  ASSERT_TRUE(Put(c, "k", "back").ok());
  EXPECT_EQ(*Get(a, "k"), "back");
}

// Writers on three nodes race on a few keys; every acknowledged write is
// linked exactly once, so each key's chain holds every acknowledged version
// and every node reads the last one linked.
TEST_F(CloverTest, WritersOnSeveralNodesRaceOnOneChain) {
  std::vector<Cn*> nodes = {&Add(1, 0), &Add(2, 4096), &Add(3)};
  int left = 0;
  std::map<std::string, int> acked;
  for (int round = 0; round < 50; ++round) {
    for (size_t n = 0; n < nodes.size(); ++n) {
      for (int k = 0; k < 3; ++k) {
        const std::string key = "hot" + std::to_string(k);
        ++left;
        nodes[n]->exec->Post([&, n, key, round] {
          nodes[n]->node->Put(key, "n" + std::to_string(n) + "r" + std::to_string(round), [&, key](Status s) {
            EXPECT_TRUE(s.ok()) << s.ToString();
            ++acked[key];
            --left;
          });
        });
      }
    }
  }
  ASSERT_TRUE(rt_.RunUntil([&] { return left == 0; }, rt_.Now() + 1000 * kMillisecond));
  uint64_t failures = 0;
  for (Cn* c : nodes) failures += c->node->stats().swap_failures;
  EXPECT_GT(failures, 0u) << "the writers did race";
  // Walk every chain locally: one version per acknowledged write.
  for (int k = 0; k < 3; ++k) {
    const std::string key = "hot" + std::to_string(k);
    auto head = world_->pool().index().Find(key);
    ASSERT_TRUE(head.has_value());
    int versions = 1;
    uint64_t at = head->offset - log::kAlign;
    std::string last;
    for (;;) {
      uint64_t link;
      std::memcpy(&link, world_->region().at(at), sizeof link);
      if (link == 0) break;
      const IndexPointer v = IndexPointer::Decode(link);
      at = v.offset;
      ++versions;
    }
    EXPECT_EQ(versions, acked[key]) << key;
    const Result<std::string> a = Get(*nodes[0], key), b = Get(*nodes[1], key), c = Get(*nodes[2], key);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_EQ(*a, *b);
    EXPECT_EQ(*b, *c);
  }
}

TEST_F(CloverTest, BadInputIsRefusedAndChangesNothing) {
  Cn& a = Add(1);
  EXPECT_TRUE(Put(a, "big", std::string(40 << 10, 'x')).Is(Code::kTooLarge));
  EXPECT_TRUE(Put(a, "", "v").Is(Code::kInvalidArgument));
  EXPECT_TRUE(Get(a, "big").status().Is(Code::kNotFound));
  // The metadata server refuses a version that is not in its segments, or
  // not a version, or from a node without its token.
  auto call = [&](const proto::CloverInsertRequest& r) {
    std::optional<Code> code;
    auto caller = world_->CallerFor(a.exec);
    a.exec->Post([&] {
      caller->Call(testing::SimPool::kPoolId, static_cast<uint16_t>(proto::Method::kCloverInsert), proto::Encode(r),
                   [&](Result<rpc::PeerResponse> resp) { code = resp.ok() ? resp->status : resp.status().code(); });
    });
    EXPECT_TRUE(rt_.RunUntil([&] { return code.has_value(); }, rt_.Now() + 10 * kMillisecond));
    return code.value_or(Code::kAborted);
  };
  EXPECT_EQ(call({1, 1, 3, 64}), Code::kInvalidArgument) << "unaligned";
  EXPECT_EQ(call({1, 1, world_->region().size(), 64}), Code::kInvalidArgument) << "outside the pool";
  EXPECT_EQ(call({1, 1, ~uint64_t{0} - 63, 128}), Code::kInvalidArgument) << "past the end, wrapping";
  ASSERT_TRUE(Put(a, "mine", "v").ok());  // node 1 has a segment now; node 2 may not name it
  Cn& b = Add(2);
  (void)b;
  const uint64_t in_a = world_->pool().OpenSegments(1).front() + 64;
  EXPECT_EQ(call({2, 1, in_a, 128}), Code::kInvalidArgument) << "a version in another node's segment";
  EXPECT_EQ(call({1, 1, in_a, 64}), Code::kOk) << "node 1's own first version is its chain's head already";
  EXPECT_NE(call({1, 1, world_->pool().segments_offset() + 4096, 128}), Code::kOk) << "no version there";
  EXPECT_EQ(call({1, 9, world_->pool().segments_offset() + 4096, 128}), Code::kStaleTerm) << "not its token";
  EXPECT_FALSE(world_->pool().index().Find("big").has_value());
}

}  // namespace
}  // namespace slip::dinomo
