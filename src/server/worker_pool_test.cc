#include "server/worker_pool.h"

#include <gtest/gtest.h>

#include "common/hash.h"
#include "pm/region.h"
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
    pool_ = std::make_unique<WorkerPool>(std::move(workers), o.limits, [this] { return alive_; });
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
    bool on_home = false;
    int replies = 0;
  };
  // Sends a request from worker 0's executor, as the RPC channel does.
  std::shared_ptr<Answer> Send(proto::Method m, std::string payload) {
    auto a = std::make_shared<Answer>();
    execs_[0]->Post([this, m, a, payload = std::move(payload)] {
      pool_->Handle(static_cast<uint16_t>(m), proto::AsBytes(payload), [this, a](Code c, std::string p) {
        a->code = c;
        a->payload = std::move(p);
        a->on_home = execs_[0]->IsCurrent();
        ++a->replies;
      });
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
  // Shard s went to worker s % 3: two shards each.
  for (uint32_t w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(cores_[w]->counters().puts, kShards / kWorkers) << "worker " << w;
    EXPECT_EQ(cores_[w]->counters().gets, kShards / kWorkers) << "worker " << w;
  }
}

TEST_F(WorkerPoolTest, AShardNamedFalselyIsRefusedByTheWorkerItReaches) {
  // The request says shard 1 (worker 1), its key hashes to shard 2: the
  // worker that gets it checks and refuses; nothing is written.
  const std::string key = KeyOf(2);
  auto put = Send(proto::Method::kPut, proto::Encode(proto::KvRequest{3, 1, key, "x"}));
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

TEST_F(WorkerPoolTest, NothingHopsForAProcessThatIsGone) {
  const std::string key = KeyOf(1);  // worker 1
  auto a = std::make_shared<Answer>();
  execs_[0]->Post([&, a] {
    const std::string put = proto::Encode(proto::KvRequest{3, 1, key, "v"});
    pool_->Handle(static_cast<uint16_t>(proto::Method::kPut), proto::AsBytes(put),
                  [a](Code c, std::string) { a->code = c, ++a->replies; });
    alive_ = false;  // the process crashes before worker 1 runs the request
  });
  rt_.RunUntilIdle();
  EXPECT_EQ(a->replies, 0);
  EXPECT_EQ(cores_[1]->counters().puts, 0u);
  EXPECT_FALSE(store_->Get(key).ok());
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
