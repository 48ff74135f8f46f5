// The fabric contract test suite: the behaviour fabric/fabric.h promises,
// written once and run UNCHANGED against every provider (sim, shm, tcp,
// verbs). A provider passes when its harness passes every test here.
//
// How to instantiate it for a provider (one .cc in the provider's test
// binary, linked with slip_fabric_contract):
//
//   class MyHarness : public slip::fabric::contract::FabricHarness { ... };
//
//   INSTANTIATE_TEST_SUITE_P(
//       Shm, FabricContractTest,
//       ::testing::Values(slip::fabric::contract::HarnessFactory{
//           "shm", [] { return std::make_unique<MyHarness>(); }}),
//       slip::fabric::contract::HarnessName);
//
// (inside namespace slip::fabric::contract, or qualify FabricContractTest).
// src/fabric/sim/sim_contract_test.cc is a complete example. For a real
// provider, DriveUntil is a polling loop on the wall clock:
//
//   bool DriveUntil(const std::function<bool()>& done,
//                   std::chrono::nanoseconds timeout) override {
//     const auto end = std::chrono::steady_clock::now() + timeout;
//     while (!done()) {
//       if (std::chrono::steady_clock::now() >= end) return false;
//       for (int i = 0; i < n_; ++i) if (!killed_[i]) PollEndpoint(i);
//     }
//     return true;
//   }
//
// and KillNode(i) closes endpoint i (and anything else of node i) so that
// peers see it as gone.
// A provider that is absent on this machine (e.g. verbs without a device)
// returns NotSupported from Start(); the suite then skips, not fails.
//
// The tests never assert on wall-clock performance: every wait is a generous
// bound that only matters when something hangs.
//
// Multi-receive buffers: what every provider honours, and so what protocol
// code may rely on ("a message goes to the next buffer iff it does not fit"
// is only the simulator's stricter behaviour; libfabric cannot implement
// it, see src/fabric/ofi/ofi_fabric.h):
//   * Messages are never split, truncated or lost: each lies entirely in one
//     posted buffer, at a 64 B-aligned offset, with its length padded to the
//     stride; the completion's context is that buffer's.
//   * In one buffer, messages are placed back to back from offset 0 in the
//     order the target processes them (per-connection FIFO holds).
//   * A buffer retires when the next message MAY not fit: the provider may
//     retire it once its free tail is below the provider's multi-receive
//     limit (the largest message it places into such buffers: ofi's
//     OfiOptions::max_multi_recv_message, 8 KiB by default; the simulator
//     retires exactly when the next message does not fit). So the unwritten
//     tail of a retired buffer is shorter than that limit, which this suite
//     assumes is below kMaxRetiredTail, and it stays untouched. A buffer
//     with at least kMaxRetiredTail free does not retire.
//   * Retirement is reported by a kRecv completion with buffer_released set
//     (alone, or on the buffer's last message) before any message placed in
//     a later buffer is reported. Later messages go to the next posted
//     buffer; no posted buffer is skipped.
//   * Providers may refuse (InvalidArgument) multi-receive buffers shorter
//     than their limit, and refuse (TooLarge) sends longer than it; the
//     suite's buffers are kMultiRecvBuffer or larger and its messages at
//     most 4160 B.
//   * No buffer posted: the message waits (not lost) until one is posted.
//     This holds under sustained pressure too: many senders with many
//     sends in flight into a receiver that keeps only a few buffers posted
//     and reposts each as it is consumed (single or multi-receive) get every
//     message delivered exactly once, intact, in posting order per sender,
//     and every send completes OK.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "fabric/fabric.h"

namespace slip::fabric::contract {

// What the suite needs from a provider: N endpoints on N distinct "nodes",
// all connected pairwise, a way to make progress, and a way to kill a node.
//
// Implementations must poll endpoint i ONLY through PollEndpoint(i), so the
// suite sees every completion (and can check that the target of one-sided
// operations gets none).
class FabricHarness {
 public:
  virtual ~FabricHarness() = default;

  // Creates `n` endpoints with `options`, endpoint i on its own node i, and
  // makes every endpoint a peer of every other. Called once per test, first.
  // NotSupported: the provider is not available here (the test is skipped).
  virtual Status Start(int n, const EndpointOptions& options) = 0;

  // REQUIRES: Start() succeeded, 0 <= i < n, node i not killed.
  virtual Endpoint& endpoint(int i) = 0;
  // The PeerId endpoint `from` uses to address endpoint `to`.
  virtual PeerId peer(int from, int to) const = 0;

  // Progresses every live endpoint (the simulator runs virtual time; a real
  // provider polls all endpoints in a loop) until done() returns true or
  // `timeout` passes (virtual time for the simulator, wall clock otherwise).
  // Returns done(). A simulator with nothing left to do may return early.
  virtual bool DriveUntil(const std::function<bool()>& done,
                          std::chrono::nanoseconds timeout) = 0;

  // Node i dies as a machine would: its endpoint stops progressing and
  // answering, its memory is no longer reachable. Peers' operations to it
  // must then complete with an error within their op_timeout. The suite
  // never touches endpoint(i) afterwards.
  virtual Status KillNode(int i) = 0;

  // --- completion bookkeeping shared by all harnesses ---

  // Every completion polled from endpoint i so far, in poll order.
  const std::vector<Completion>& completions(int i) const;
  // The first completion of endpoint i with this context and op, if any.
  std::optional<Completion> Find(int i, uint64_t context, Op op) const;
  bool Has(int i, uint64_t context, Op op) const { return Find(i, context, op).has_value(); }
  // Received messages (kRecv completions carrying data) of endpoint i.
  std::vector<Completion> Messages(int i) const;

 protected:
  // Polls endpoint(i) once and records what it returns. Returns how many
  // completions it got (a poller's "did work").
  size_t PollEndpoint(int i);

 private:
  std::vector<std::vector<Completion>> completions_;  // grows on demand
};

// One provider under test: a name (the test-name suffix) and a factory that
// makes a fresh harness per test.
struct HarnessFactory {
  std::string name;
  std::function<std::unique_ptr<FabricHarness>()> make;
};

// For INSTANTIATE_TEST_SUITE_P's name generator.
std::string HarnessName(const ::testing::TestParamInfo<HarnessFactory>& info);
// So failure messages name the provider instead of dumping bytes.
void PrintTo(const HarnessFactory& factory, std::ostream* os);

// A 64-byte aligned, zero-filled heap buffer (multi-receive buffers must be
// stride-aligned; atomics need 8-byte alignment).
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t len);
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return len_; }
  std::span<std::byte> span() const { return {data_, len_}; }

 private:
  std::byte* data_;
  size_t len_;
};

// The fixture. Tests use the helpers below; all of them drive progress
// through the harness only.
class FabricContractTest : public ::testing::TestWithParam<HarnessFactory> {
 protected:
  void SetUp() override;

  // Starts the harness with n endpoints; skips the test if NotSupported.
  // Returns false (after recording a failure or skip) when the test must stop.
  bool StartNodes(int n, EndpointOptions options = DefaultOptions());
  static EndpointOptions DefaultOptions();

  FabricHarness& h() { return *harness_; }
  Endpoint& ep(int i) { return harness_->endpoint(i); }
  PeerId peer(int from, int to) const { return harness_->peer(from, to); }

  // Posts with `post`; while the provider says Busy (queue full), drives
  // progress a little and retries. Returns the final posting status.
  Status PostRetrying(const std::function<Status()>& post);
  // Drives until endpoint i has a completion (context, op); returns it.
  std::optional<Completion> Await(int i, uint64_t context, Op op);
  // Drives until cond() or the generous suite bound passes.
  bool DriveUntil(const std::function<bool()>& cond);
  // Lets `d` of (virtual or wall) time pass while driving progress.
  void DriveFor(std::chrono::nanoseconds d);
  // A zero-filled 64 B-aligned buffer owned by the fixture: it outlives the
  // endpoints, so no in-flight operation can touch freed memory.
  AlignedBuffer& Buffer(size_t len);
  // Registers `buf` on endpoint i for local use and every remote access.
  MemoryRegion Register(int i, const AlignedBuffer& buf);
  // Kills node i through the harness and stops touching its endpoint.
  Status Kill(int i);
  // Several senders stream many messages, each keeping a window in flight,
  // into a receiver with far fewer posted buffers (receiver-not-ready
  // pressure), which reposts each buffer as soon as it is done with it: one
  // PostRecv buffer per message, or multi-receive buffers reposted on
  // release. Checks that every message arrives exactly once, intact, in
  // posting order per sender, and that every send completes OK.
  void StreamIntoFewReceiveBuffers(bool multi_recv);

  // Multi-receive buffer sizes the suite relies on (see the file comment).
  static constexpr size_t kMultiRecvBuffer = 32 * 1024;
  static constexpr size_t kMaxRetiredTail = 16 * 1024;

  // Bound on any single wait in the suite: only reached when something hangs.
  static constexpr std::chrono::nanoseconds kPatience = std::chrono::seconds(20);

  std::unique_ptr<FabricHarness> harness_;
  // Registrations made through Register(), deregistered before the harness
  // is destroyed (endpoints must outlive their registrations).
  std::vector<std::pair<int, MemoryRegion>> registrations_;
  std::vector<int> killed_;
  std::vector<std::unique_ptr<AlignedBuffer>> buffers_;

  void TearDown() override;
};

}  // namespace slip::fabric::contract
