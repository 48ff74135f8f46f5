// The fabric contract suite against the libfabric providers shm and
// tcp;ofi_rxm (and verbs;ofi_rxm, which skips without an RDMA device). All
// endpoints live in this process; DriveUntil polls every live endpoint in a
// loop, standing in for each node's NIC thread.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fabric/contract/contract_test_suite.h"
#include "fabric/ofi/ofi_fabric.h"

namespace slip::fabric::contract {
namespace {

class OfiHarness : public FabricHarness {
 public:
  explicit OfiHarness(std::string provider) : provider_(std::move(provider)) {}

  ~OfiHarness() override {
    // Endpoints before the fabric (they share its core either way).
    eps_.clear();
  }

  Status Start(int n, const EndpointOptions& options) override {
    SLIP_ASSIGN_OR_RETURN(fabric_,
                          OpenOfiFabric(FabricOptions{.provider = provider_, .node_address = ""}));
    for (int i = 0; i < n; ++i) {
      SLIP_ASSIGN_OR_RETURN(auto ep, fabric_->CreateEndpoint(options));
      eps_.push_back(std::move(ep));
    }
    live_.assign(n, true);
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
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (done()) return true;
      if (std::chrono::steady_clock::now() >= deadline) return false;
      size_t work = 0;
      for (size_t i = 0; i < eps_.size(); ++i) {
        if (live_[i]) work += PollEndpoint(static_cast<int>(i));
      }
      // Other engineers share these 2 cores: do not spin flat out while idle.
      if (work == 0) std::this_thread::yield();
    }
  }

  Status KillNode(int i) override {
    // A hung or crashed node: nobody drives its endpoint any more, so nothing
    // reaches its memory (RMA is served by the target's progress, see
    // ofi_fabric.cc). The endpoint itself must stay open: shm maps the region
    // of a peer in the same process only once, and closing it would unmap it
    // under the other endpoints. Killing a real process is covered by
    // ofi_fabric_test (DeadPeerFailsWithinOpTimeout).
    live_[i] = false;
    return Status::Ok();
  }

 private:
  std::string provider_;
  std::unique_ptr<Fabric> fabric_;
  std::vector<std::unique_ptr<Endpoint>> eps_;
  std::vector<bool> live_;
  std::vector<std::vector<PeerId>> peers_;
};

HarnessFactory Provider(const char* name) {
  return {name, [name] { return std::make_unique<OfiHarness>(name); }};
}

INSTANTIATE_TEST_SUITE_P(Ofi, FabricContractTest,
                         ::testing::Values(Provider("shm"), Provider("tcp"), Provider("verbs")),
                         HarnessName);

}  // namespace
}  // namespace slip::fabric::contract
