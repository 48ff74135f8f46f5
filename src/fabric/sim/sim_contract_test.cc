// The fabric contract suite against the simulated provider: once with the
// default (fault-free) network and once with a lossy, jittery one whose
// faults the reliable-connection model must hide completely.
#include <memory>
#include <string>
#include <vector>

#include "fabric/contract/contract_test_suite.h"
#include "fabric/sim/sim_fabric.h"
#include "runtime/sim_runtime.h"

namespace slip::fabric::contract {
namespace {

class SimHarness : public FabricHarness {
 public:
  SimHarness(SimFabricOptions options, LinkFaults faults)
      : rt_(runtime::SimRuntimeOptions{.seed = 0x5EED}), fabric_(rt_, options) {
    fabric_.SetDefaultFaults(faults);
  }

  Status Start(int n, const EndpointOptions& options) override {
    for (int i = 0; i < n; ++i) {
      runtime::Executor* nic = rt_.CreateExecutor("node" + std::to_string(i) + "/nic");
      SLIP_ASSIGN_OR_RETURN(auto ep, fabric_.CreateEndpoint(static_cast<NodeId>(i), nic, options));
      eps_.push_back(std::move(ep));
      nics_.push_back(nic);
      // The node's NIC executor drives its endpoint, as on a real node.
      pollers_.push_back(nic->AddPoller([this, i] { return PollEndpoint(i) > 0; }));
    }
    peers_.assign(n, std::vector<PeerId>(n));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        SLIP_ASSIGN_OR_RETURN(peers_[i][j], eps_[i]->AddPeer(eps_[j]->address()));
      }
    }
    return Status::Ok();
  }

  Endpoint& endpoint(int i) override { return *eps_[i]; }
  PeerId peer(int from, int to) const override { return peers_[from][to]; }

  bool DriveUntil(const std::function<bool()>& done, std::chrono::nanoseconds timeout) override {
    return rt_.RunUntil(done, rt_.Now() + timeout.count());
  }

  Status KillNode(int i) override {
    nics_[i]->RemovePoller(pollers_[i]);
    fabric_.CrashNode(static_cast<NodeId>(i));
    return Status::Ok();
  }

 private:
  runtime::SimRuntime rt_;
  SimFabric fabric_;
  std::vector<std::unique_ptr<Endpoint>> eps_;  // destroyed before the fabric
  std::vector<runtime::Executor*> nics_;
  std::vector<runtime::PollerId> pollers_;
  std::vector<std::vector<PeerId>> peers_;
};

HarnessFactory Ideal() {
  return {"sim", [] { return std::make_unique<SimHarness>(SimFabricOptions{}, LinkFaults{}); }};
}

HarnessFactory Lossy() {
  return {"sim_lossy", [] {
            SimFabricOptions o;
            o.mtu = 1024;  // more packets per message, more interleaving
            o.dma_persist_delay = 3 * runtime::kMicrosecond;
            LinkFaults f;
            f.drop_probability = 0.02;
            f.jitter = 5 * runtime::kMicrosecond;
            return std::make_unique<SimHarness>(o, f);
          }};
}

INSTANTIATE_TEST_SUITE_P(Sim, FabricContractTest, ::testing::Values(Ideal(), Lossy()), HarnessName);

}  // namespace
}  // namespace slip::fabric::contract
