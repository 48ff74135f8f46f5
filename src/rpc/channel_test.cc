#include "rpc/channel.h"

#include <gtest/gtest.h>

#include "fabric/sim/sim_fabric.h"
#include "runtime/sim_runtime.h"

namespace slip::rpc {
namespace {

using runtime::kMicrosecond;
using runtime::kMillisecond;

// Two nodes on the simulated fabric: node 0 calls, node 1 serves.
struct Pair {
  runtime::SimRuntime rt{runtime::SimRuntimeOptions{.seed = 7}};
  fabric::SimFabric fabric{rt};
  runtime::Executor* ex[2];
  std::unique_ptr<RpcChannel> ch[2];
  RpcChannel::Peer server = 0;

  explicit Pair(ChannelOptions o = {}) {
    for (int i = 0; i < 2; ++i) {
      ex[i] = rt.CreateExecutor("node" + std::to_string(i));
      auto ep = fabric.CreateEndpoint(static_cast<fabric::NodeId>(i), ex[i], {});
      EXPECT_TRUE(ep.ok());
      auto c = RpcChannel::Open(ex[i], std::move(*ep), o);
      EXPECT_TRUE(c.ok()) << c.status().ToString();
      ch[i] = std::move(*c);
    }
    server = *ch[0]->Connect(ch[1]->address());
  }
  void Run(runtime::Nanos for_ns) { rt.RunUntil(rt.Now() + for_ns); }
};

TEST(RpcChannelTest, ManyConcurrentCallsAllAnsweredInAnyOrder) {
  Pair p;
  // The handler answers odd requests at once and even ones later.
  p.ch[1]->SetHandler([&](uint16_t method, std::span<const std::byte> payload, RpcChannel::Reply reply) {
    std::string s(reinterpret_cast<const char*>(payload.data()), payload.size());
    if (method % 2) return reply(Code::kOk, "echo:" + s);
    p.ex[1]->After(50 * kMicrosecond, [reply, s] { reply(Code::kNotFound, "later:" + s); });
  });
  int answered = 0;
  for (int i = 0; i < 500; ++i) {
    p.ch[0]->Call(p.server, static_cast<uint16_t>(i % 7), "m" + std::to_string(i), {},
                  [&, i](Result<Response> r) {
                    ASSERT_TRUE(r.ok()) << r.status().ToString();
                    if ((i % 7) % 2) {
                      EXPECT_EQ(r->status, Code::kOk);
                      EXPECT_EQ(r->payload, "echo:m" + std::to_string(i));
                    } else {
                      EXPECT_EQ(r->status, Code::kNotFound);
                      EXPECT_EQ(r->payload, "later:m" + std::to_string(i));
                    }
                    ++answered;
                  });
  }
  p.Run(100 * kMillisecond);
  EXPECT_EQ(answered, 500);
  EXPECT_EQ(p.ch[1]->counters().requests, 500u);
}

TEST(RpcChannelTest, TimeoutThenTheLateAnswerIsDropped) {
  Pair p;
  RpcChannel::Reply held;
  p.ch[1]->SetHandler([&](uint16_t, std::span<const std::byte>, RpcChannel::Reply r) { held = r; });
  Status got = Status::Ok();
  p.ch[0]->Call(p.server, 1, "x", {.timeout = kMillisecond}, [&](Result<Response> r) { got = r.status(); });
  p.Run(5 * kMillisecond);
  EXPECT_TRUE(got.Is(Code::kTimeout)) << got.ToString();
  ASSERT_TRUE(held);
  held(Code::kOk, "too late");
  p.Run(kMillisecond);
  EXPECT_EQ(p.ch[0]->counters().late_responses, 1u);
}

TEST(RpcChannelTest, RetriesReuseTheRequestIdAndTheHandlerRunsOnce) {
  Pair p;
  int runs = 0;
  p.ch[1]->SetHandler([&](uint16_t, std::span<const std::byte>, RpcChannel::Reply r) {
    ++runs;
    // Slower than two client timeouts: the client resends meanwhile.
    p.ex[1]->After(2500 * kMicrosecond, [r] { r(Code::kOk, "done"); });
  });
  std::string answer;
  p.ch[0]->Call(p.server, 3, "once", {.timeout = kMillisecond, .retries = 5}, [&](Result<Response> r) {
    ASSERT_TRUE(r.ok());
    answer = r->payload;
  });
  p.Run(20 * kMillisecond);
  EXPECT_EQ(answer, "done");
  EXPECT_EQ(runs, 1);
  EXPECT_GE(p.ch[0]->counters().retries, 2u);
  EXPECT_GE(p.ch[1]->counters().duplicates, 2u);
}

TEST(RpcChannelTest, BackPressureQueuesThenRefuses) {
  ChannelOptions o;
  o.max_outstanding = 2;
  o.max_queued = 3;
  Pair p(o);
  std::vector<RpcChannel::Reply> held;
  p.ch[1]->SetHandler([&](uint16_t, std::span<const std::byte>, RpcChannel::Reply r) { held.push_back(r); });
  int busy = 0, ok = 0;
  for (int i = 0; i < 10; ++i) {
    p.ch[0]->Call(p.server, 1, "x", {.timeout = runtime::kSecond}, [&](Result<Response> r) {
      if (r.ok()) ++ok;
      if (r.status().Is(Code::kBusy)) ++busy;
    });
  }
  p.Run(kMillisecond);
  EXPECT_EQ(busy, 7);            // 3 queue places; the rest refused at once
  EXPECT_EQ(held.size(), 2u);    // only max_outstanding reach the server
  for (size_t i = 0; i < 3; ++i) {
    for (auto& r : held) r(Code::kOk, "");
    held.clear();
    p.Run(kMillisecond);
  }
  EXPECT_EQ(ok, 3);
}

TEST(RpcChannelTest, MalformedAndOversizedInputNeverCrashes) {
  ChannelOptions o;
  o.max_payload = 1000;
  Pair p(o);
  p.ch[1]->SetHandler([](uint16_t, std::span<const std::byte> payload, RpcChannel::Reply r) {
    r(Code::kOk, std::string(payload.size() * 2, 'y'));  // may not fit a frame
  });
  // Raw garbage straight into the server's receive buffers.
  auto raw = p.fabric.CreateEndpoint(2, nullptr, {});
  ASSERT_TRUE(raw.ok());
  auto to = (*raw)->AddPeer(p.ch[1]->address());
  ASSERT_TRUE(to.ok());
  std::vector<std::byte> junk(256);
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<std::byte>(i * 37);
  ASSERT_TRUE((*raw)->Send(*to, junk.data(), junk.size(), nullptr, 1).ok());
  p.Run(kMillisecond);
  EXPECT_GE(p.ch[1]->counters().malformed, 1u);

  Status big = Status::Ok();
  p.ch[0]->Call(p.server, 1, std::string(1001, 'x'), {}, [&](Result<Response> r) { big = r.status(); });
  Code reply_status = Code::kAborted;
  p.ch[0]->Call(p.server, 1, std::string(600, 'x'), {}, [&](Result<Response> r) {
    ASSERT_TRUE(r.ok());
    reply_status = r->status;  // a 1200-byte answer does not fit: TooLarge, not silence
  });
  std::string fine;
  p.ch[0]->Call(p.server, 1, "ok", {}, [&](Result<Response> r) { fine = r.ok() ? r->payload : "?"; });
  p.Run(5 * kMillisecond);
  EXPECT_TRUE(big.Is(Code::kTooLarge)) << big.ToString();
  EXPECT_EQ(reply_status, Code::kTooLarge);
  EXPECT_EQ(fine, "yyyy");
}

TEST(RpcChannelTest, ADeadServerGivesAnErrorNotAHang) {
  Pair p;
  p.ch[1]->SetHandler([](uint16_t, std::span<const std::byte>, RpcChannel::Reply r) { r(Code::kOk, ""); });
  bool first = false;
  p.ch[0]->Call(p.server, 1, "x", {}, [&](Result<Response> r) { first = r.ok(); });
  p.Run(kMillisecond);
  ASSERT_TRUE(first);
  p.fabric.CrashNode(1);
  Status s = Status::Ok();
  bool done = false;
  p.ch[0]->Call(p.server, 1, "x", {.timeout = 10 * kMillisecond}, [&](Result<Response> r) {
    done = true;
    s = r.status();
  });
  p.Run(100 * kMillisecond);
  ASSERT_TRUE(done);
  EXPECT_TRUE(s.Is(Code::kTimeout) || s.Is(Code::kUnavailable)) << s.ToString();
}

}  // namespace
}  // namespace slip::rpc
