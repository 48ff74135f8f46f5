// The one-sided GET over libfabric (tcp, shm; verbs where a NIC exists):
// two endpoints of one process, the server's only polled, never handling
// anything.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include "common/random.h"
#include "erda/reader.h"
#include "fabric/ofi/ofi_fabric.h"

namespace slip::erda {
namespace {

class ErdaReaderOfiTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ErdaReaderOfiTest, ReadsValuesOneSidedly) {
  auto fab = fabric::OpenOfiFabric(fabric::FabricOptions{.provider = GetParam(), .node_address = ""});
  if (!fab.ok()) GTEST_SKIP() << "provider " << GetParam() << " unavailable: " << fab.status().ToString();
  auto server_ep = (*fab)->CreateEndpoint({.name = "server"});
  auto client_ep = (*fab)->CreateEndpoint({.name = "client"});
  ASSERT_TRUE(server_ep.ok() && client_ep.ok());

  auto region = std::move(pm::PmRegion::Anonymous(4 << 20, {})).value();
  EngineOptions eo;
  eo.num_buckets = 1024;
  eo.segment_bytes = 1 << 20;
  eo.limits.max_key = 256;
  eo.limits.max_value = 200 << 10;
  auto engine = std::move(Engine::Open(region.get(), eo)).value();
  auto mr = (*server_ep)->Register(region->base(), region->size(), fabric::Endpoint::kRemoteRead);
  ASSERT_TRUE(mr.ok()) << mr.status().ToString();
  auto peer = (*client_ep)->AddPeer((*server_ep)->address());
  ASSERT_TRUE(peer.ok());
  OneSidedReader reader(client_ep->get(), *peer, mr->remote, engine->layout(), engine->limits());

  Random rng(11);
  std::vector<std::pair<std::string, std::string>> kv;
  for (int i = 0; i < 40; ++i) {
    std::string v(i % 10 == 0 ? 100000 + rng.Uniform(50000) : rng.Uniform(2000), '\0');
    for (auto& c : v) c = static_cast<char>(rng.Next());
    kv.emplace_back("key" + std::to_string(i), v);
    ASSERT_TRUE(engine->Put(kv.back().first, v).ok());
  }
  uint64_t server_completions = 0;
  auto get = [&](const std::string& key) -> Result<std::string> {
    std::optional<Result<std::string>> got;
    reader.Get(key, [&](Result<std::string> r) { got = std::move(r); });
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    fabric::Completion c[16];
    while (!got && std::chrono::steady_clock::now() < end) {
      server_completions += (*server_ep)->Poll(c);  // the target side's progress only
      const size_t n = (*client_ep)->Poll(c);
      for (size_t i = 0; i < n; ++i) EXPECT_TRUE(reader.OnCompletion(c[i]));
    }
    return got.value_or(Status::Timeout("no answer"));
  };
  for (const auto& [k, v] : kv) {
    auto r = get(k);
    ASSERT_TRUE(r.ok()) << k << ": " << r.status().ToString();
    EXPECT_EQ(*r, v) << k;
  }
  EXPECT_TRUE(get("absent").status().Is(Code::kNotFound));
  EXPECT_EQ(server_completions, 0u) << "a one-sided read made work for the server";
}

INSTANTIATE_TEST_SUITE_P(Providers, ErdaReaderOfiTest, ::testing::Values("tcp", "shm", "verbs"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace slip::erda
