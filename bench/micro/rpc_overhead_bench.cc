// CPU cost of the RPC layer itself, without a fabric or a scheduler: a
// client and a server RpcChannel on ONE hand-driven executor, over an
// in-process endpoint pair whose Send is a memcpy into the peer's
// multi-receive buffer (loop_fabric.h). One round trip = client Call +
// encode + server decode + dedup + handler + reply encode + client decode +
// callback, plus two 128 B copies and the executor loop. On a loaded 2-core
// machine this is the number that stays put (min of runs), unlike
// cross-thread ping-pongs; bench/results/2026-11-23-rpc-latency.md puts it
// next to those.
//
//   rpc_overhead_bench [--calls N] [--inflight K] [--runs R] [--payload B] [--auth 0|1]
//
// --auth 1: both channels hold a cluster secret — the session is
// authenticated and every frame carries a SipHash tag instead of a CRC
// (docs/security.md); the difference is authentication's cost per call.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "loop_fabric.h"

using namespace slip;

int main(int argc, char** argv) {
  int calls = 1000000, inflight = 1, runs = 5;
  size_t payload = 64;
  bool auth = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--calls")) calls = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--inflight")) inflight = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--runs")) runs = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--payload")) payload = static_cast<size_t>(std::atoi(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--auth")) auth = std::atoi(argv[i + 1]) != 0;
    else {
      std::fprintf(stderr, "usage: rpc_overhead_bench [--calls N] [--inflight K] [--runs R] [--payload B] [--auth 0|1]\n");
      return 2;
    }
  }
  rpc::ChannelOptions options;
  if (auth) options.keys = auth::KeySource::Fixed(auth::Keyring::Generate());
  const bench::RpcLayerCost cost = bench::MeasureRpcLayer(payload, inflight, calls, runs, options);
  if (!cost.ok) {
    std::fprintf(stderr, "rpc_overhead_bench: %s\n", cost.error.c_str());
    return 1;
  }
  std::printf("rpc layer, client+server on one thread, payload %zu B, %d in flight%s: %.0f ns per call (min of %d runs; median %.0f)\n",
              payload, inflight, auth ? ", authenticated" : "", cost.min_ns, runs, cost.median_ns);
  return 0;
}
