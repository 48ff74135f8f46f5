// Messages between the executors of a performance run whose machines talk
// by RPC and nothing else (sim/pool_perf.cc, sim/chain_perf.cc): the
// transport's and the RPC layer's CPU at both ends, then the flight — as
// sim/network.cc charges a message, but one message per frame.
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/cost.h"
#include "runtime/sim_runtime.h"
#include "sim/cluster_sim.h"

namespace slip::sim::detail {

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
