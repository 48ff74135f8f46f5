// share-kv's shared remote logs (docs/papers/rowan.md §5, the Share-KV baseline):
// all workers of a node write into ONE remote log per backup, each
// reserving its bytes with a local atomic increment and then writing them
// one-sidedly over its own connection. Reservation order is not arrival
// order — the network reorders writes to adjacent addresses, which is what
// costs Share-KV its DLWA — and a failed write leaves a hole that the
// backup's digest walks past (Store::ReceiveWalk).
//
// A buffer is full once a reservation would cross its end; it is closed
// (REPL_CLOSE) by whichever worker finishes the last write into it, and the
// first worker that needs space afterwards opens the next one for all.
// Thread-safe: workers on different threads share one SharedRemoteLogs.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "fabric/fabric.h"
#include "replication/replicator.h"

namespace slip::replication {

class SharedRemoteLogs {
 public:
  struct Buffer {
    uint32_t id = 0;                // the backup's segment (REPL_OPEN's buffer_id)
    std::string address;            // the backup's replication endpoint
    fabric::RemoteMemory mem;
    uint64_t flush_offset = 0, offset = 0, len = 0;
    bool persist_by_request = false;  // ReplOpenResponse::persist_by_request
    uint64_t incarnation = 0;         // ReplOpenResponse::incarnation

    // Reserves `size` bytes and counts a write in flight until Release().
    // nullopt when they do not fit: the buffer is then full.
    std::optional<uint64_t> Reserve(uint64_t size);
    // A write into a reservation completed (or failed). True exactly once,
    // for the caller that must close the buffer: it is full and nothing is
    // in flight. `used()` is then what to report.
    bool Release();
    bool full() const { return full_.load(std::memory_order_acquire); }
    // Takes no more reservations (a write into it failed: the backup may be
    // gone, or the buffer hold a tear); the last write in flight closes it.
    void Retire() { full_.store(true, std::memory_order_release); }
    uint64_t used() const { return end_.load(std::memory_order_acquire); }

   private:
    std::atomic<uint64_t> tail_{0};     // next reservation (may pass len)
    std::atomic<uint64_t> end_{0};      // furthest in-bounds reservation end
    std::atomic<uint32_t> inflight_{0};
    std::atomic<bool> full_{false};
    std::atomic<bool> closing_{false};
  };

  // The buffer workers write into now for `backup`, if any.
  std::shared_ptr<Buffer> Current(NodeId backup) const;
  // A worker opened `fresh` because `replaced` (maybe null) was full or
  // missing. Returns the buffer to use: `fresh`, unless another worker
  // installed one meanwhile — then the caller closes `fresh` unused.
  std::shared_ptr<Buffer> Install(NodeId backup, std::shared_ptr<Buffer> fresh, const Buffer* replaced);
  // A write into `b` failed: no worker uses it any more, and the next one
  // that needs space opens a fresh buffer (at a restarted backup, say).
  void Retire(NodeId backup, const std::shared_ptr<Buffer>& b);

 private:
  mutable std::mutex mu_;
  std::map<NodeId, std::shared_ptr<Buffer>> current_;
};

}  // namespace slip::replication
