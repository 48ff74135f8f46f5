// ClientCore on virtual time against a scripted node: which errors are
// retried (and how the routing is refreshed) and which end a call at once.
#include "client/client_core.h"

#include <gtest/gtest.h>

#include <deque>
#include <utility>
#include <vector>

#include "proto/kv.h"
#include "runtime/sim_runtime.h"

namespace slip::client {
namespace {

using runtime::kMillisecond;

// Answers each call with the next scripted outcome, 100 us later.
class ScriptedNode final : public rpc::PeerCaller {
 public:
  explicit ScriptedNode(runtime::Executor* exec) : exec_(exec) {}
  void Call(rpc::Target to, uint16_t method, std::string, std::function<void(Result<rpc::PeerResponse>)> done) override {
    ++calls;
    targets.emplace_back(method, to);
    Result<rpc::PeerResponse> r = script.empty() ? Result<rpc::PeerResponse>(Ok()) : script.front();
    if (!script.empty()) script.pop_front();
    exec_->After(100 * runtime::kMicrosecond, [done = std::move(done), r = std::move(r)]() mutable { done(r); });
  }
  static rpc::PeerResponse Ok() {
    proto::KvResponse resp;
    resp.term = 1;
    resp.version = 7;
    return rpc::PeerResponse{Code::kOk, proto::Encode(resp)};
  }
  std::deque<Result<rpc::PeerResponse>> script;
  int calls = 0;
  std::vector<std::pair<uint16_t, rpc::Target>> targets;  // every call's method and target

 private:
  runtime::Executor* exec_;
};

class OneShardRouting final : public RoutingSource {
 public:
  explicit OneShardRouting(runtime::Executor* exec) : exec_(exec) {}
  void Fetch(uint64_t, std::function<void(Result<RoutingTable>)> done) override {
    ++fetches;
    exec_->Post([done = std::move(done)] { done(RoutingTable{1, {0}}); });
  }
  int fetches = 0;

 private:
  runtime::Executor* exec_;
};

struct Fixture {
  runtime::SimRuntime rt;
  runtime::Executor* ex = rt.CreateExecutor("client");
  ScriptedNode node{ex};
  OneShardRouting routing{ex};
  ClientCore core{&node, &routing, ex, CoreOptions{}};

  Result<uint64_t> Put() {
    std::optional<Result<uint64_t>> got;
    core.Put("k", "v", [&](Result<uint64_t> r) { got = std::move(r); });
    rt.RunUntil([&] { return got.has_value(); }, rt.Now() + 60 * runtime::kSecond);
    EXPECT_TRUE(got.has_value());
    return got.value_or(Status::Aborted("never finished"));
  }
};

TEST(ClientCoreTest, TransientErrorsAreRetriedUntilTheyClear) {
  Fixture f;
  f.node.script = {Status::Unavailable("node gone"), Status::Timeout("no answer"),
                   rpc::PeerResponse{Code::kBusy, proto::Encode(proto::KvResponse{})}, ScriptedNode::Ok()};
  auto r = f.Put();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 7u);
  EXPECT_EQ(f.node.calls, 4);
}

// A DEL whose first attempt's answer was lost (it may have deleted the
// value) and whose retry finds nothing is OK to its caller — the value is
// gone, perhaps by its own hand — while the history records the retry's
// NotFound. Without a lost attempt, NotFound stays NotFound. (The kill soak
// found the NotFound case: a user-visible history that was not
// linearizable.)
TEST(ClientCoreTest, ADeleteRetriedAfterALostAnswerIsOkNotNotFound) {
  proto::KvResponse none;
  none.term = 1;
  const rpc::PeerResponse not_found{Code::kNotFound, proto::Encode(none)};
  for (bool lost : {true, false}) {
    Fixture f;
    std::vector<OpRecord> recorded;
    f.core.set_recorder([&](const OpRecord& r) { recorded.push_back(r); });
    f.node.script = {not_found};
    if (lost) f.node.script.push_front(Status::Timeout("no answer"));
    std::optional<Status> got;
    f.core.Delete("k", [&](Status s) { got = s; });
    f.rt.RunUntil([&] { return got.has_value(); }, f.rt.Now() + 60 * runtime::kSecond);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->code(), lost ? Code::kOk : Code::kNotFound) << got->ToString();
    ASSERT_FALSE(recorded.empty());
    EXPECT_EQ(recorded.back().result, Code::kNotFound) << "the history keeps what the attempt saw";
    EXPECT_EQ(recorded.size(), lost ? 2u : 1u) << "the lost attempt is recorded as unknown";
  }
}

TEST(ClientCoreTest, ErrorsNoRetryCanFixEndTheCallAtOnce) {
  for (Status why : {Status::TooLarge("rpc payload of 100023 bytes exceeds 65472"),
                     Status::InvalidArgument("fabric address of 19 bytes, want 16"),
                     Status::NotSupported("no such provider")}) {
    Fixture f;
    f.node.script = {why};
    const runtime::Nanos t0 = f.rt.Now();
    auto r = f.Put();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), why.code());
    EXPECT_EQ(r.status().message(), why.message()) << "the reason, unchanged";
    EXPECT_EQ(f.node.calls, 1) << why.ToString();
    EXPECT_LT(f.rt.Now() - t0, 10 * kMillisecond);
  }
}

TEST(ClientCoreTest, AnErrorThatPersistsGivesUpAtTheDeadlineWithItsReason) {
  Fixture f;
  for (int i = 0; i < 100000; ++i) f.node.script.push_back(Status::Unavailable("node gone"));
  auto r = f.Put();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().Is(Code::kUnavailable));
  EXPECT_NE(r.status().message().find("node gone"), std::string::npos);
  EXPECT_GT(f.node.calls, 10);
}

// Any worker of a node may serve a GET (server/worker_pool.h); a write
// goes to its shard's worker, which assigns its version.
TEST(ClientCoreTest, GetsMayGoToAnyWorkerAndWritesToTheirShards) {
  Fixture f;
  ASSERT_TRUE(f.Put().ok());
  bool got = false, deleted = false;
  f.core.Get("k", [&](Result<std::string>) { got = true; });
  f.core.Delete("k", [&](Status) { deleted = true; });
  f.rt.RunUntil([&] { return got && deleted; }, f.rt.Now() + 60 * runtime::kSecond);
  ASSERT_EQ(f.node.targets.size(), 3u);
  for (const auto& [method, to] : f.node.targets) {
    EXPECT_EQ(to.node, 0u);
    EXPECT_EQ(to.shard, std::optional<uint32_t>(0));
    EXPECT_EQ(to.any_worker, method == static_cast<uint16_t>(proto::Method::kGet)) << "method " << method;
  }
}

}  // namespace
}  // namespace slip::client
