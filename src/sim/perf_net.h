// The client machines of a performance run on separate machines
// (sim/perf.cc, sim/pool_perf.cc, sim/chain_perf.cc), and the messages
// between the executors of a run whose machines talk by RPC and nothing
// else (pool_perf, chain_perf): the transport's and the RPC layer's CPU at
// both ends, then the flight — as sim/network.cc charges a message, but
// one message per frame.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/cost.h"
#include "runtime/sim_runtime.h"
#include "sim/cluster_sim.h"

namespace slip::sim::detail {

// PerfOptions::client_hosts machines (at least one) of client_cores each:
// their host ids, client c going on [c % size()].
inline std::vector<uint32_t> AddClientHosts(runtime::SimRuntime& rt, const PerfOptions& p) {
  std::vector<uint32_t> hosts;
  for (uint32_t h = 0; h < std::max<uint32_t>(p.client_hosts, 1); ++h) {
    hosts.push_back(rt.AddHost(p.client_cores, p.park_after, p.migration_cost));
  }
  return hosts;
}

class PerfNet {
 public:
  static constexpr uint16_t kEventMessage = runtime::kFirstDeviceKind + 50;

  PerfNet(runtime::SimRuntime& rt, const PerfOptions& p) : rt_(rt), p_(p) {}

  // From the running executor to `to`: `fn` runs there once the message
  // arrived, charged its receipt.
  void Send(runtime::Executor* to, size_t bytes, const char* label, std::function<void()> fn) {
    using runtime::Charge;
    using runtime::Cost;
    rt_.ChargeWake(to);
    Charge(Cost::kMessageSend, bytes);
    Charge(Cost::kRpcCall);
    const runtime::Nanos wire =
        p_.bandwidth > 0 ? static_cast<runtime::Nanos>(static_cast<double>(bytes) / p_.bandwidth) : 0;
    rt_.Schedule(rt_.Now() + p_.one_way + wire, to, kEventMessage, label, bytes, [bytes, fn = std::move(fn)] {
      Charge(Cost::kMessageReceive, bytes);
      Charge(Cost::kRpcCall);
      fn();
    });
  }

 private:
  runtime::SimRuntime& rt_;
  const PerfOptions& p_;
};

}  // namespace slip::sim::detail
