// The in-memory ConfigStore (config_store.h): the simulator's and the
// tests' configuration store. Same rules as the embedded backend — CAS on
// a version, terms only rise, named leases with fencing epochs — with one
// mutex where the embedded store has flock.
#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "cluster/config_store.h"
#include "cluster/lease_rules.h"

namespace slip::cluster {

class MemoryStoreState {
 public:
  struct LeaseRecord {
    std::string holder;  // "" = free
    uint64_t epoch = 0;
    Nanos expiry = 0;
    Nanos ttl = 0;
  };
  struct PendingWatch {
    uint64_t owner;  // the store instance that asked
    uint64_t known;
    std::function<void()> changed;
  };

  std::mutex mu;
  VersionedConfig stored;  // version kNoVersion: nothing stored
  std::map<std::string, LeaseRecord> leases;
  std::vector<PendingWatch> watches;
  uint64_t next_owner = 1;

  // Removes and returns the watches `version` makes due. Caller holds mu.
  std::vector<std::function<void()>> TakeDue() {
    std::vector<std::function<void()>> due;
    auto keep = std::partition(watches.begin(), watches.end(),
                               [&](const PendingWatch& w) { return w.known == stored.version; });
    for (auto it = keep; it != watches.end(); ++it) due.push_back(std::move(it->changed));
    watches.erase(keep, watches.end());
    return due;
  }
};

namespace {

class MemoryStore final : public ConfigStore {
 public:
  explicit MemoryStore(std::shared_ptr<MemoryStoreState> state) : s_(std::move(state)) {
    std::lock_guard<std::mutex> l(s_->mu);
    me_ = s_->next_owner++;
  }
  ~MemoryStore() override {
    std::lock_guard<std::mutex> l(s_->mu);
    std::erase_if(s_->watches, [&](const MemoryStoreState::PendingWatch& w) { return w.owner == me_; });
  }

  Result<VersionedConfig> Load() override {
    std::lock_guard<std::mutex> l(s_->mu);
    if (s_->stored.version == kNoVersion) return Status::NotFound("no cluster configuration stored");
    return s_->stored;
  }

  Result<uint64_t> CompareAndSwap(uint64_t expected, const ClusterConfig& config) override {
    SLIP_RETURN_IF_ERROR(config.Validate());
    std::vector<std::function<void()>> due;
    uint64_t next;
    {
      std::lock_guard<std::mutex> l(s_->mu);
      const uint64_t current = s_->stored.version;
      if (current != expected) {
        return Status::Aborted("config store: version is " + std::to_string(current) + ", expected " +
                               std::to_string(expected));
      }
      const uint64_t term = current == kNoVersion ? 0 : s_->stored.config.term;
      if (config.term <= term) {
        return Status::InvalidArgument("config store: term " + std::to_string(config.term) +
                                       " does not rise above stored term " + std::to_string(term));
      }
      next = current + 1;
      s_->stored = VersionedConfig{config, next};
      due = s_->TakeDue();
    }
    for (auto& fn : due) fn();
    return next;
  }

  Status Watch(uint64_t known, std::function<void()> changed) override {
    std::vector<std::function<void()>> due;
    {
      std::lock_guard<std::mutex> l(s_->mu);
      s_->watches.push_back({me_, known, std::move(changed)});
      due = s_->TakeDue();
    }
    for (auto& fn : due) fn();
    return Status::Ok();
  }

  Result<Lease> AcquireLease(const std::string& name, const std::string& holder, Nanos ttl,
                             Nanos now) override {
    SLIP_RETURN_IF_ERROR(internal::CheckLeaseArgs(name, holder, ttl, now));
    std::lock_guard<std::mutex> l(s_->mu);
    MemoryStoreState::LeaseRecord& cur = s_->leases[name];
    const bool live = !cur.holder.empty() && !internal::LeaseExpired(cur.expiry, cur.ttl, now);
    if (live && cur.holder != holder) {
      return Status::Busy("lease " + name + " held by " + cur.holder + " until " + std::to_string(cur.expiry));
    }
    cur = {holder, live ? cur.epoch : cur.epoch + 1, now + ttl, ttl};
    return Lease{name, holder, cur.epoch, cur.expiry};
  }

  Result<Lease> RenewLease(const Lease& lease, Nanos ttl, Nanos now) override {
    SLIP_RETURN_IF_ERROR(internal::CheckLeaseArgs(lease.name, lease.holder, ttl, now));
    std::lock_guard<std::mutex> l(s_->mu);
    MemoryStoreState::LeaseRecord& cur = s_->leases[lease.name];
    if (cur.holder != lease.holder || cur.epoch != lease.epoch) {
      return Status::Aborted("lease " + lease.name + " lost: now held by " +
                             (cur.holder.empty() ? std::string("nobody") : cur.holder) + " (epoch " +
                             std::to_string(cur.epoch) + ")");
    }
    if (internal::LeaseExpired(cur.expiry, cur.ttl, now)) {
      return Status::Aborted("lease " + lease.name + " expired at " + std::to_string(cur.expiry));
    }
    cur.expiry = now + ttl;
    cur.ttl = ttl;
    return Lease{lease.name, lease.holder, cur.epoch, cur.expiry};
  }

  Status ReleaseLease(const Lease& lease) override {
    SLIP_RETURN_IF_ERROR(internal::CheckLeaseName(lease.name));
    std::lock_guard<std::mutex> l(s_->mu);
    auto it = s_->leases.find(lease.name);
    if (it == s_->leases.end() || it->second.holder != lease.holder || it->second.epoch != lease.epoch) {
      return Status::Ok();
    }
    it->second = {"", it->second.epoch, 0, 0};  // keep the epoch: the next holder gets a higher one
    return Status::Ok();
  }

 private:
  std::shared_ptr<MemoryStoreState> s_;
  uint64_t me_ = 0;
};

}  // namespace

std::shared_ptr<MemoryStoreState> NewMemoryStoreState() { return std::make_shared<MemoryStoreState>(); }

std::unique_ptr<ConfigStore> OpenMemoryStore(std::shared_ptr<MemoryStoreState> state) {
  return std::make_unique<MemoryStore>(std::move(state));
}

}  // namespace slip::cluster
