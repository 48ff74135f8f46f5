// 64 B RPC round trips through RpcChannel over libfabric (shm or tcp), one
// process, two endpoints each driven by its own executor thread — the
// numbers to put next to fi_pingpong's on the same provider.
//
//   rpc_bench --provider shm|tcp [--calls N] [--inflight K] [--payload B]
//
// Prints: latency p50/p99/p99.9 with one call in flight (a ping-pong), then
// the call rate with K in flight.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/histogram.h"
#include "fabric/fabric.h"
#include "fabric/ofi/ofi_fabric.h"
#include "rpc/channel.h"
#include "runtime/thread_runtime.h"

using namespace slip;

int main(int argc, char** argv) {
  std::string provider = "shm";
  int calls = 20000, inflight = 32;
  size_t payload = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--provider")) provider = argv[i + 1];
    else if (!std::strcmp(argv[i], "--calls")) calls = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--inflight")) inflight = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--payload")) payload = static_cast<size_t>(std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: rpc_bench --provider shm|tcp [--calls N] [--inflight K] [--payload B]\n");
      return 2;
    }
  }
  auto fab = fabric::OpenOfiFabric(fabric::FabricOptions{.provider = provider, .node_address = ""},
                                   fabric::OfiOptions{});
  if (!fab.ok()) {
    std::fprintf(stderr, "rpc_bench: %s\n", fab.status().ToString().c_str());
    return 1;
  }
  runtime::ThreadRuntime rt;
  runtime::Executor* ex[2] = {rt.CreateExecutor("server"), rt.CreateExecutor("client")};
  std::unique_ptr<rpc::RpcChannel> ch[2];
  for (int i = 0; i < 2; ++i) {
    auto ep = (*fab)->CreateEndpoint(fabric::EndpointOptions{.name = i ? "client" : "server"});
    if (!ep.ok()) {
      std::fprintf(stderr, "rpc_bench: endpoint: %s\n", ep.status().ToString().c_str());
      return 1;
    }
    auto c = rpc::RpcChannel::Open(ex[i], std::move(*ep));
    if (!c.ok()) {
      std::fprintf(stderr, "rpc_bench: channel: %s\n", c.status().ToString().c_str());
      return 1;
    }
    ch[i] = std::move(*c);
  }
  ch[0]->SetHandler([](uint16_t, std::span<const std::byte> p, rpc::RpcChannel::Reply r) {
    r(Code::kOk, std::string(reinterpret_cast<const char*>(p.data()), p.size()));
  });
  auto server = ch[1]->Connect(ch[0]->address());
  if (!server.ok()) {
    std::fprintf(stderr, "rpc_bench: connect: %s\n", server.status().ToString().c_str());
    return 1;
  }
  if (!rt.Start().ok()) return 1;

  const std::string body(payload, 'p');
  Histogram lat;
  std::atomic<int> done{0};
  std::atomic<bool> failed{false};
  using Clock = std::chrono::steady_clock;
  // Phase 1: ping-pong (one in flight), after 1000 warm-up calls.
  std::function<void(int)> one = [&](int i) {
    const auto t0 = Clock::now();
    ch[1]->Call(*server, 1, body, {}, [&, i, t0](Result<rpc::Response> r) {
      if (!r.ok()) failed = true;
      if (i >= 1000) lat.Record(static_cast<uint64_t>((Clock::now() - t0).count()));
      if (i + 1 < calls + 1000 && !failed) {
        one(i + 1);
      } else {
        done = 1;
      }
    });
  };
  ex[1]->Post([&] { one(0); });
  while (!done && !failed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (failed) {
    std::fprintf(stderr, "rpc_bench: a call failed\n");
    return 1;
  }
  std::printf("provider %s payload %zu B: round trip p50 %.2f us  p99 %.2f us  p99.9 %.2f us  (%d calls, 1 in flight)\n",
              provider.c_str(), payload, static_cast<double>(lat.Percentile(0.5)) / 1e3,
              static_cast<double>(lat.Percentile(0.99)) / 1e3, static_cast<double>(lat.Percentile(0.999)) / 1e3, calls);

  // Phase 2: rate with `inflight` calls outstanding.
  std::atomic<int> completed{0};
  int issued = 0;
  const auto t0 = Clock::now();
  std::function<void()> issue = [&] {
    if (issued >= calls) return;
    ++issued;
    ch[1]->Call(*server, 1, body, {}, [&](Result<rpc::Response> r) {
      if (!r.ok()) failed = true;
      ++completed;
      issue();
    });
  };
  ex[1]->Post([&] {
    for (int k = 0; k < inflight; ++k) issue();
  });
  while (completed < calls && !failed) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("provider %s payload %zu B: %.0f calls/s with %d in flight\n", provider.c_str(), payload,
              calls / secs, inflight);
  rt.Stop();
  return failed ? 1 : 0;
}
