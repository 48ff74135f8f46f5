// Outcome: how a process's life ends. The first Finish — a fatal error (a
// lost lease, a store failure) or Stop's OK — is kept and the rest ignored;
// Wait blocks until there is one. Thread-safe.
#pragma once

#include <condition_variable>
#include <mutex>

#include "common/status.h"

namespace slip::node {

class Outcome {
 public:
  void Finish(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    result_ = std::move(s);
    cv_.notify_all();
  }
  Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status result_;
};

}  // namespace slip::node
