// KeySource: the keyring a process authenticates with, shared by its
// channels, and kept current when the file changes (rotation without a
// restart). Thread-safe: channels on different executors read it; one timer
// (Watch) reloads it.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "auth/keyring.h"
#include "common/status.h"

namespace slip::runtime {
class Executor;
}

namespace slip::auth {

class KeySource {
 public:
  // Reads `path` now (an error if it is missing or unsafe); Reload re-reads it.
  static Result<std::shared_ptr<KeySource>> Open(const std::string& path);
  // A fixed keyring (tests, the simulator): Reload changes nothing.
  static std::shared_ptr<KeySource> Fixed(Keyring keys);

  std::shared_ptr<const Keyring> keys() const;
  // Bumped on every change of keyring: a channel compares it on its data
  // path (one relaxed load) and refreshes only when it moved.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // Re-reads the file if its size or modification time changed. A file that
  // fails to read or parse leaves the keyring as it was (and says why).
  Status Reload();
  // Replaces the keyring (what Reload does with the file's contents).
  void Set(Keyring keys);

  // Calls Reload every `period` on `exec`, for as long as the executor runs.
  static void Watch(const std::shared_ptr<KeySource>& source, runtime::Executor* exec,
                    std::chrono::milliseconds period = std::chrono::milliseconds(500));

  const std::string& path() const { return path_; }

 private:
  KeySource(std::string path, Keyring keys);

  const std::string path_;  // empty: fixed
  mutable std::mutex mu_;
  std::shared_ptr<const Keyring> keys_;
  int64_t mtime_ns_ = 0;
  int64_t size_ = -1;
  std::atomic<uint64_t> generation_{1};
};

// The keys a process of the cluster in `cluster_dir` authenticates with:
// `secret_file`'s if given (it must exist), else the cluster directory's
// `secret` if there is one; null — no authentication — when neither.
Result<std::shared_ptr<KeySource>> OpenClusterKeys(const std::string& cluster_dir, const std::string& secret_file);

}  // namespace slip::auth
