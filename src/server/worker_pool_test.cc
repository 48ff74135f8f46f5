#include "server/worker_pool.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "common/hash.h"
#include "pm/region.h"
#include "rpc/peer_caller.h"
#include "runtime/sim_runtime.h"
#include "store/store.h"

namespace slip::server {
namespace {

constexpr uint32_t kShards = 6;
constexpr uint32_t kWorkers = 3;

// A single node (no backups) with three workers on simulated executors.
class WorkerPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    region_ = std::move(pm::PmRegion::Anonymous(8 << 20, {})).value();
    store::StoreOptions o;
    o.geometry.segment_size = 256 << 10;
    o.geometry.num_shards = kShards;
    o.limits.max_key = 1024;
    o.limits.max_value = 64 << 10;
    o.max_block_bytes = 16 << 10;
    o.num_writers = kWorkers;
    auto st = store::Store::Open(region_.get(), o);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    store_ = std::move(*st);
    auto view = std::make_shared<NodeView>();
    view->term = 3;
    view->shards.assign(kShards, ShardReplicas{.primary = 0, .backups = {}, .syncing = {}});
    view->blocked.assign(kShards, false);
    views_.Set(view);
    auto shared = std::make_shared<NodeShared>();
    std::vector<WorkerPool::Worker> workers;
    for (uint32_t i = 0; i < kWorkers; ++i) {
      execs_.push_back(rt_.CreateExecutor("worker" + std::to_string(i)));
      NodeCoreOptions co;
      co.worker_index = i;
      co.worker_count = kWorkers;
      cores_.push_back(std::make_unique<NodeCore>(0, store_.get(), i, nullptr, &views_, shared, co));
      workers.push_back({execs_.back(), cores_.back().get()});
    }
    pool_ = std::make_unique<WorkerPool>(std::move(workers), o.limits, kShards, [this] { return alive_; });
  }

  // The key k<i> of the first i that hashes to `shard`.
  std::string KeyOf(uint32_t shard) const {
    for (int i = 0;; ++i) {
      std::string k = "k" + std::to_string(i);
      if (store_->ShardOf(HashKey(k)) == shard) return k;
    }
  }

  struct Answer {
    Code code = Code::kAborted;
    std::string payload;
    bool on_home = false;  // answered on the executor it arrived at
    bool in_call = false;  // answered inside Handle: nothing hopped
    int replies = 0;
  };
  // Sends a request as worker `at`'s RPC entry does: from its executor.
  std::shared_ptr<Answer> Send(proto::Method m, std::string payload, size_t at = 0) {
    auto a = std::make_shared<Answer>();
    execs_[at]->Post([this, m, a, at, payload = std::move(payload)] {
      auto calling = std::make_shared<bool>(true);
      pool_->Handle(at, static_cast<uint16_t>(m), proto::AsBytes(payload), [this, a, at, calling](Code c, std::string p) {
        a->code = c;
        a->payload = std::move(p);
        a->on_home = execs_[at]->IsCurrent();
        a->in_call = *calling;
        ++a->replies;
      });
      *calling = false;
    });
    rt_.RunUntilIdle();
    return a;
  }

  runtime::SimRuntime rt_;
  std::unique_ptr<pm::PmRegion> region_;
  std::unique_ptr<store::Store> store_;
  ViewHolder views_;
  std::vector<runtime::Executor*> execs_;
  std::vector<std::unique_ptr<NodeCore>> cores_;
  std::unique_ptr<WorkerPool> pool_;
  bool alive_ = true;  // the process the pool belongs to
};

TEST_F(WorkerPoolTest, EachShardsWritesRunOnItsWorkerAndRepliesReturnHome) {
  for (uint32_t s = 0; s < kShards; ++s) {
    const std::string key = KeyOf(s);
    auto put = Send(proto::Method::kPut, proto::Encode(proto::KvRequest{3, s, key, "v" + std::to_string(s)}));
    ASSERT_EQ(put->code, Code::kOk) << put->payload;
    EXPECT_TRUE(put->on_home);
    EXPECT_EQ(put->replies, 1);
    auto get = Send(proto::Method::kGet, proto::Encode(proto::KvRequest{3, s, key, {}}));
    ASSERT_EQ(get->code, Code::kOk);
    auto r = proto::DecodeKvResponse(proto::AsBytes(get->payload), store_->options().limits);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->value, "v" + std::to_string(s));
  }
  // Shard s's writes went to worker s * 3 / 6: a range of two shards each;
  // the GETs ran at worker 0's entry, where they arrived.
  for (uint32_t w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(cores_[w]->counters().puts, kShards / kWorkers) << "worker " << w;
    EXPECT_EQ(cores_[w]->counters().gets, w == 0 ? kShards : 0) << "worker " << w;
  }
  EXPECT_EQ(pool_->hopped(), kShards - kShards / kWorkers);  // the PUTs of workers 1 and 2
}

TEST_F(WorkerPoolTest, AGetRunsWhereverItArrivesAndSeesTheOwnersWrites) {
  const std::string key = KeyOf(4);  // worker 2
  auto put = Send(proto::Method::kPut, proto::Encode(proto::KvRequest{3, 4, key, "v1"}), 2);
  ASSERT_EQ(put->code, Code::kOk) << put->payload;
  for (size_t at = 0; at < kWorkers; ++at) {
    auto get = Send(proto::Method::kGet, proto::Encode(proto::KvRequest{3, 4, key, {}}), at);
    ASSERT_EQ(get->code, Code::kOk) << "at worker " << at;
    EXPECT_TRUE(get->in_call) << "at worker " << at;
    auto r = proto::DecodeKvResponse(proto::AsBytes(get->payload), store_->options().limits);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->value, "v1");
    EXPECT_EQ(cores_[at]->counters().gets, 1u) << "at worker " << at;
  }
  EXPECT_EQ(pool_->hopped(), 0u);
  // Every check the owner makes, a reader at another worker makes too.
  auto stale = Send(proto::Method::kGet, proto::Encode(proto::KvRequest{2, 4, key, {}}), 0);
  EXPECT_EQ(stale->code, Code::kStaleTerm);
  auto wrong_shard = Send(proto::Method::kGet, proto::Encode(proto::KvRequest{3, 2, key, {}}), 0);
  EXPECT_EQ(wrong_shard->code, Code::kStaleTerm);
  auto blocked = std::make_shared<NodeView>(*views_.Get());
  blocked->blocked[4] = true;
  views_.Set(blocked);
  auto busy = Send(proto::Method::kGet, proto::Encode(proto::KvRequest{3, 4, key, {}}), 1);
  EXPECT_EQ(busy->code, Code::kBusy);
}

TEST(EntryOfTest, ReadsTakeEachEntryInTurnAndWritesTheirShardsWorker) {
  uint64_t turn = 0;
  std::vector<uint32_t> reads;
  for (int i = 0; i < 6; ++i) reads.push_back(rpc::EntryOf(rpc::Target::AnyWorker(1, 5), kShards, kWorkers, &turn));
  EXPECT_EQ(reads, (std::vector<uint32_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(rpc::EntryOf(rpc::Target{1, 5}, kShards, kWorkers, &turn), WorkerOfShard(5, kShards, kWorkers));
  EXPECT_EQ(rpc::EntryOf(rpc::Target{1}, kShards, kWorkers, &turn), 0u);
  EXPECT_EQ(turn, 6u);  // only reads advance it
  EXPECT_EQ(rpc::EntryOf(rpc::Target::AnyWorker(1, 5), kShards, 1, &turn), 0u);
}

TEST_F(WorkerPoolTest, AShardNamedFalselyIsRefusedByTheWorkerItReaches) {
  // The request says shard 2 (worker 1), its key hashes to shard 4: the
  // worker that gets it checks and refuses; nothing is written.
  const std::string key = KeyOf(4);
  auto put = Send(proto::Method::kPut, proto::Encode(proto::KvRequest{3, 2, key, "x"}));
  EXPECT_EQ(put->code, Code::kStaleTerm);
  EXPECT_TRUE(put->on_home);
  EXPECT_EQ(cores_[1]->counters().stale, 1u);
  EXPECT_FALSE(store_->Get(key).ok());
}

TEST_F(WorkerPoolTest, MalformedAndShardlessRequestsGoToWorkerZero) {
  auto bad = Send(proto::Method::kPut, "\x01\x02garbage");
  EXPECT_NE(bad->code, Code::kOk);
  EXPECT_TRUE(bad->on_home);
  EXPECT_EQ(cores_[0]->counters().malformed, 1u);
  EXPECT_EQ(pool_->ShardOf(static_cast<uint16_t>(proto::Method::kShardTail), {}), std::nullopt);
  const std::string put = proto::Encode(proto::KvRequest{3, 4, KeyOf(4), "v"});
  EXPECT_EQ(pool_->ShardOf(static_cast<uint16_t>(proto::Method::kPut), proto::AsBytes(put)), 4u);
}

TEST_F(WorkerPoolTest, ARequestAtItsOwnersEntryRunsThereWithoutAHop) {
  const std::string key = KeyOf(4);  // worker 2
  auto put = Send(proto::Method::kPut, proto::Encode(proto::KvRequest{3, 4, key, "v"}), 2);
  ASSERT_EQ(put->code, Code::kOk) << put->payload;
  auto get = Send(proto::Method::kGet, proto::Encode(proto::KvRequest{3, 4, key, {}}), 2);
  ASSERT_EQ(get->code, Code::kOk);
  EXPECT_TRUE(get->on_home);
  EXPECT_TRUE(get->in_call);
  EXPECT_EQ(cores_[2]->counters().puts, 1u);
  EXPECT_EQ(cores_[2]->counters().gets, 1u);
  EXPECT_EQ(cores_[0]->counters().gets, 0u);
  EXPECT_EQ(pool_->hopped(), 0u);
}

TEST_F(WorkerPoolTest, ARequestAtAnotherEntryRunsOnItsOwnerAndIsAnsweredWhereItCameIn) {
  const std::string key = KeyOf(2);  // worker 1, sent to worker 2's entry (an older configuration)
  auto put = Send(proto::Method::kPut, proto::Encode(proto::KvRequest{3, 2, key, "v"}), 2);
  ASSERT_EQ(put->code, Code::kOk) << put->payload;
  EXPECT_TRUE(put->on_home);
  EXPECT_FALSE(put->in_call);
  EXPECT_EQ(cores_[1]->counters().puts, 1u);
  EXPECT_EQ(cores_[2]->counters().puts, 0u);
  EXPECT_EQ(pool_->hopped(), 1u);
  // What is about no shard runs on worker 0, and is answered at worker 2 too.
  auto bad = Send(proto::Method::kShardTail, "\x01garbage", 2);
  EXPECT_NE(bad->code, Code::kOk);
  EXPECT_TRUE(bad->on_home);
  EXPECT_EQ(cores_[0]->counters().malformed, 1u);
}

TEST_F(WorkerPoolTest, ConditionalPutsAndTheErdaCallsGoToTheShardsWorker) {
  // A version is assigned by whoever runs them: only the shard's worker may.
  const std::string key = KeyOf(2);  // worker 1
  auto put_if = Send(proto::Method::kPutIf,
                     proto::Encode(proto::PutIfRequest{proto::PutCondition::kIfAbsent, {3, 2, key, "v"}}));
  ASSERT_EQ(put_if->code, Code::kOk) << put_if->payload;
  EXPECT_EQ(cores_[1]->counters().puts, 1u);
  EXPECT_EQ(cores_[0]->counters().puts, 0u);
  const auto shard_of = [&](proto::Method m, const std::string& p) {
    return pool_->ShardOf(static_cast<uint16_t>(m), proto::AsBytes(p));
  };
  EXPECT_EQ(shard_of(proto::Method::kErdaGrant, proto::Encode(proto::ErdaGrantRequest{3, 5})), 5u);
  EXPECT_EQ(shard_of(proto::Method::kErdaReserve, proto::Encode(proto::ErdaReserveRequest{3, 4, 10, key})), 4u);
  EXPECT_EQ(shard_of(proto::Method::kErdaCommit, proto::Encode(proto::ErdaCommitRequest{3, 2, 7, key})), 2u);
}

TEST_F(WorkerPoolTest, NothingHopsForAProcessThatIsGone) {
  const std::string key = KeyOf(2);  // worker 1
  auto a = std::make_shared<Answer>();
  execs_[0]->Post([&, a] {
    const std::string put = proto::Encode(proto::KvRequest{3, 2, key, "v"});
    pool_->Handle(0, static_cast<uint16_t>(proto::Method::kPut), proto::AsBytes(put),
                  [a](Code c, std::string) { a->code = c, ++a->replies; });
    alive_ = false;  // the process crashes before worker 1 runs the request
  });
  rt_.RunUntilIdle();
  EXPECT_EQ(a->replies, 0);
  EXPECT_EQ(cores_[1]->counters().puts, 0u);
  EXPECT_FALSE(store_->Get(key).ok());
}

// Placement gives node p of n the shards p, p+n, p+2n, ... (cluster::Place):
// each node's shards must spread over all of its workers, whatever n.
TEST(WorkerOfShardTest, EachNodesShardsSpreadOverAllItsWorkers) {
  for (uint32_t n = 1; n <= 8; ++n) {
    for (uint32_t w = 1; w <= 24; ++w) {
      for (uint32_t k : {1u, 2u, 4u}) {
        const uint32_t shards = n * w * k;
        for (uint32_t p = 0; p < n; ++p) {
          std::vector<uint32_t> per_worker(w, 0);
          for (uint32_t s = p; s < shards; s += n) ++per_worker[WorkerOfShard(s, shards, w)];
          for (uint32_t i = 0; i < w; ++i) {
            ASSERT_EQ(per_worker[i], k) << n << " nodes, " << w << " workers, " << shards << " shards: node " << p
                                        << "'s worker " << i;
          }
        }
      }
    }
  }
  // Fewer shards than a node has workers' worth: still within one of even.
  std::vector<uint32_t> per_worker(3, 0);
  for (uint32_t s = 0; s < 12; s += 3) ++per_worker[WorkerOfShard(s, 12, 3)];  // node 0 of 3, 12 shards
  EXPECT_EQ(*std::max_element(per_worker.begin(), per_worker.end()) -
                *std::min_element(per_worker.begin(), per_worker.end()),
            1u);
  EXPECT_EQ(WorkerOfShard(12, 12, 3), 0u);  // no such shard: worker 0, which refuses it
  EXPECT_EQ(WorkerOfShard(11, 12, 3), 2u);
}

TEST_F(WorkerPoolTest, ForEachRunsOnEveryWorkerThenHome) {
  std::vector<bool> ran(kWorkers, false);
  bool done_on_home = false;
  execs_[0]->Post([&] {
    pool_->ForEach([&](size_t i) { ran[i] = execs_[i]->IsCurrent(); },
                   [&] { done_on_home = execs_[0]->IsCurrent(); });
  });
  rt_.RunUntilIdle();
  for (uint32_t i = 0; i < kWorkers; ++i) EXPECT_TRUE(ran[i]) << i;
  EXPECT_TRUE(done_on_home);
}

}  // namespace
}  // namespace slip::server
