// OpTracker: one-sided operations posted on an endpoint, each with the
// function to call when it completes — the bookkeeping every user of Read
// and Write on the client side repeats (erda's clients, DINOMO's KVS nodes).
//
// Poll() drains the endpoint's completions and calls each operation's
// function with its status, on the polling thread. Single-threaded: post and
// poll from one executor. Completions of operations this tracker did not
// post are dropped (an endpoint polled by one tracker only).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

#include "fabric/fabric.h"

namespace slip::fabric {

class OpTracker {
 public:
  using Done = std::function<void(Code)>;
  explicit OpTracker(Endpoint* ep) : ep_(ep) {}

  Status Read(PeerId peer, void* dst, size_t len, const RemoteMemory& remote, uint64_t offset, Done done) {
    const uint64_t ctx = next_++;
    Status s = ep_->Read(peer, dst, len, nullptr, remote, offset, ctx);
    if (s.ok()) in_flight_.emplace(ctx, std::move(done));
    return s;
  }
  Status Write(PeerId peer, const void* src, size_t len, const RemoteMemory& remote, uint64_t offset, Done done) {
    const uint64_t ctx = next_++;
    Status s = ep_->Write(peer, src, len, nullptr, remote, offset, ctx);
    if (s.ok()) in_flight_.emplace(ctx, std::move(done));
    return s;
  }
  // `*old` receives the word's prior value when `done` runs.
  Status CompareSwap(PeerId peer, const RemoteMemory& remote, uint64_t offset, uint64_t expected, uint64_t desired,
                     uint64_t* old, Done done) {
    const uint64_t ctx = next_++;
    Status s = ep_->CompareSwap(peer, remote, offset, expected, desired, old, ctx);
    if (s.ok()) in_flight_.emplace(ctx, std::move(done));
    return s;
  }
  // Calls the functions of the operations that completed; true if any did.
  bool Poll() {
    Completion c[16];
    const size_t n = ep_->Poll(c);
    for (size_t i = 0; i < n; ++i) {
      auto it = in_flight_.find(c[i].context);
      if (it == in_flight_.end()) continue;
      Done fn = std::move(it->second);
      in_flight_.erase(it);
      fn(c[i].status);
    }
    return n > 0;
  }
  size_t in_flight() const { return in_flight_.size(); }
  Endpoint* endpoint() const { return ep_; }

 private:
  Endpoint* ep_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, Done> in_flight_;
};

}  // namespace slip::fabric
