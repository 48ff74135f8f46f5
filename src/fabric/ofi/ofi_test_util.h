// Test helpers for the libfabric provider: a completion pump over several
// endpoints of one process, and a target process that only drives its
// endpoint (a node's "NIC thread" with no worker).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "fabric/fabric.h"

namespace slip::fabric::testing {

using namespace std::chrono_literals;

// Bound for anything that normally takes microseconds; only a broken
// provider comes near it.
constexpr auto kGenerous = std::chrono::seconds(10);

// Polls every added endpoint (software providers progress only when polled,
// also on the target side) and keeps each endpoint's completions in order.
class Pump {
 public:
  void Add(Endpoint* ep) { eps_.push_back(ep); }
  void PollAll();
  // First completion of `ep` with `context`, polling until `timeout`.
  std::optional<Completion> Take(Endpoint* ep, uint64_t context,
                                 std::chrono::nanoseconds timeout = kGenerous);
  // Polls for `d` and returns how many completions `ep` has collected.
  size_t Idle(Endpoint* ep, std::chrono::nanoseconds d);
  std::vector<Completion>& collected(Endpoint* ep) { return done_[ep]; }

 private:
  std::vector<Endpoint*> eps_;
  std::map<Endpoint*, std::vector<Completion>> done_;
};

// A process that opens `provider`, registers kChildRegionBytes (remote read,
// write and atomic; byte i initialised to i % 251) and then only calls
// Wait/Poll on its endpoint until killed. Started with fork+exec of this test
// binary so the child is a fresh process (libfabric state is not fork-safe).
constexpr size_t kChildRegionBytes = 64 * 1024;

class ChildTarget {
 public:
  static Result<ChildTarget> Spawn(const std::string& provider);
  ChildTarget(ChildTarget&& o) noexcept;
  ChildTarget& operator=(ChildTarget&&) = delete;
  ~ChildTarget();

  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  const RemoteMemory& remote() const { return remote_; }
  // kill -9 and reap; removes the shm regions the provider could not clean.
  void Kill();

 private:
  ChildTarget() = default;
  pid_t pid_ = -1;
  std::string provider_;
  std::string address_;
  RemoteMemory remote_;
};

}  // namespace slip::fabric::testing
