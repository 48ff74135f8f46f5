#include "replication/share/shared_logs.h"

namespace slip::replication {

std::optional<uint64_t> SharedRemoteLogs::Buffer::Reserve(uint64_t size) {
  // Count the write before reserving: a buffer seen full with nothing in
  // flight then really has no in-bounds reservation still to be written.
  inflight_.fetch_add(1, std::memory_order_acq_rel);
  const uint64_t at = tail_.fetch_add(size, std::memory_order_acq_rel);
  if (at + size > len) {
    full_.store(true, std::memory_order_release);
    (void)Release();  // the caller is not the one to close: it wrote nothing
    return std::nullopt;
  }
  uint64_t end = end_.load(std::memory_order_relaxed);
  while (end < at + size && !end_.compare_exchange_weak(end, at + size, std::memory_order_acq_rel)) {
  }
  return at;
}

bool SharedRemoteLogs::Buffer::Release() {
  if (inflight_.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
  if (!full()) return false;
  return !closing_.exchange(true, std::memory_order_acq_rel);
}

std::shared_ptr<SharedRemoteLogs::Buffer> SharedRemoteLogs::Current(NodeId backup) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = current_.find(backup);
  return it == current_.end() ? nullptr : it->second;
}

std::shared_ptr<SharedRemoteLogs::Buffer> SharedRemoteLogs::Install(NodeId backup, std::shared_ptr<Buffer> fresh,
                                                                    const Buffer* replaced) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Buffer>& cur = current_[backup];
  if (cur.get() == replaced || cur == nullptr || cur->full()) cur = std::move(fresh);
  return cur;
}

void SharedRemoteLogs::Retire(NodeId backup, const std::shared_ptr<Buffer>& b) {
  b->Retire();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = current_.find(backup);
  if (it != current_.end() && it->second == b) current_.erase(it);
}

}  // namespace slip::replication
