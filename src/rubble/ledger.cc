#include "rubble/ledger.h"

#include <chrono>
#include <string>

namespace slip::rubble {

void SlotLedger::AddFollower(Follower f, uint64_t required) {
  std::lock_guard<std::mutex> l(mu_);
  Known k;
  k.required = required;
  followers_[f] = std::move(k);
}

void SlotLedger::RemoveFollower(Follower f) {
  {
    std::lock_guard<std::mutex> l(mu_);
    followers_.erase(f);
  }
  freed_.notify_all();
}

bool SlotLedger::HasFollower(Follower f) const {
  std::lock_guard<std::mutex> l(mu_);
  return followers_.contains(f);
}

void SlotLedger::Report(Follower f, uint64_t number, const std::vector<uint32_t>& slots, uint64_t watermark) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = followers_.find(f);
    if (it == followers_.end()) return;
    Known& k = it->second;
    if (watermark < k.required || (k.trusted && number <= k.number)) return;
    k.trusted = true;
    k.number = number;
    k.watermark = watermark;
    k.slots = std::set<uint32_t>(slots.begin(), slots.end());
  }
  freed_.notify_all();
}

bool SlotLedger::Free(uint32_t slot) const {
  if (pending_[slot] || own_.contains(slot)) return false;
  for (const auto& [f, k] : followers_) {
    if (!k.trusted || k.slots.contains(slot) || edit_of_[slot] > k.watermark) return false;
  }
  return true;
}

Result<std::vector<uint32_t>> SlotLedger::Acquire(size_t n, int timeout_ms) {
  if (n > count_) {
    return Status::NoSpace("a job needs " + std::to_string(n) + " slots; the pool has " + std::to_string(count_));
  }
  std::unique_lock<std::mutex> l(mu_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (closed_) return Status::Aborted("this head stopped");
    std::vector<uint32_t> out;
    for (uint32_t i = 0; i < count_ && out.size() < n; ++i) {
      const uint32_t slot = (cursor_ + i) % count_ + 1;
      if (Free(slot)) out.push_back(slot);
    }
    if (out.size() == n) {
      for (uint32_t s : out) pending_[s] = true;
      cursor_ = out.empty() ? cursor_ : out.back() % count_;
      return out;
    }
    if (freed_.wait_until(l, deadline) == std::cv_status::timeout) {
      return Status::NoSpace("no free slot for " + std::to_string(timeout_ms) + " ms: followers still read them");
    }
  }
}

void SlotLedger::Logged(const lsm::VersionEdit& edit) {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [level, f] : edit.added) {
    if (f.slot == 0 || f.slot > count_) continue;
    pending_[f.slot] = false;
    edit_of_[f.slot] = edit.id;
  }
}

void SlotLedger::SetOwn(std::set<uint32_t> slots) {
  {
    std::lock_guard<std::mutex> l(mu_);
    own_ = std::move(slots);
  }
  freed_.notify_all();
}

void SlotLedger::Close() {
  {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
  }
  freed_.notify_all();
}

size_t SlotLedger::free_slots() const {
  std::lock_guard<std::mutex> l(mu_);
  size_t n = 0;
  for (uint32_t s = 1; s <= count_; ++s) n += Free(s);
  return n;
}

}  // namespace slip::rubble
