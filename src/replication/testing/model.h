// What the replication tests and campaigns check against: the newest
// acknowledged state of each key (Model), and a primary's write load that
// records acknowledgements into it (Workload).
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/random.h"
#include "replication/testing/world.h"

namespace slip::replication::testing {

// The newest acknowledged state of each key, by version.
struct Model {
  struct State {
    uint64_t version = 0;
    std::optional<std::string> value;  // nullopt: deleted
  };
  std::map<std::string, State> acked;

  void Ack(const std::string& key, uint64_t version, std::optional<std::string> value) {
    State& s = acked[key];
    if (version > s.version) s = State{version, std::move(value)};
  }

  // Every acknowledged write is on `store`: its version there is at least
  // the newest acknowledged one, with that value when equal.
  static std::string Check(const store::Store& store, const std::map<std::string, State>& acked) {
    for (const auto& [key, want] : acked) {
      log::EntryMeta meta;
      meta.version = 0;
      auto got = store.Get(key, &meta);
      if (!got.ok() && !got.status().Is(Code::kNotFound)) return key + ": " + got.status().ToString();
      if (got.status().Is(Code::kNotFound) && meta.version == 0 && want.value) return key + ": missing";
      if (meta.version < want.version) {
        return key + ": version " + std::to_string(meta.version) + " < acknowledged " + std::to_string(want.version);
      }
      if (meta.version == want.version && (got.ok() ? std::optional<std::string>(*got) : std::nullopt) != want.value) {
        return key + ": wrong value at version " + std::to_string(meta.version) + " (got " +
               (got.ok() ? std::to_string(got->size()) + " bytes" : got.status().ToString()) + ", want " +
               (want.value ? std::to_string(want.value->size()) + " bytes" : "deleted") + ")";
      }
    }
    return "";
  }
};

class Workload {
 public:
  Workload(ReplicationWorld& w, int primary, std::vector<NodeId> backups, uint64_t seed)
      : w_(w), primary_(primary), backups_(std::move(backups)), rng_(seed) {}

  // Issues `n` writes with up to `window` in flight; records acknowledgements.
  void Start(int n, int window) {
    left_ = n;
    for (int i = 0; i < window; ++i) Next();
  }
  bool done() const { return left_ == 0 && in_flight_ == 0; }
  Model model;
  int acked = 0, failed = 0;
  bool stopped = false;  // the primary crashed: nothing more is issued

 private:
  // Round robin over the primary's senders (its workers).
  int NextSender() {
    const int n = static_cast<int>(w_.node(primary_).senders.size());
    sender_ = (sender_ + 1) % std::max(n, 1);
    return sender_;
  }
  void Next() {
    if (left_ == 0 || stopped) return;
    --left_;
    const std::string key = "key" + std::to_string(rng_.Uniform(64));
    const bool del = rng_.Bernoulli(0.15) && w_.node(primary_).store->Get(key).ok();
    const size_t len = rng_.Bernoulli(0.05) ? 5000 + rng_.Uniform(4000) : 1 + rng_.Uniform(300);
    std::string value(len, '\0');
    for (auto& c : value) c = static_cast<char>('a' + rng_.Uniform(26));
    ++in_flight_;
    w_.Write(primary_, NextSender(), del ? log::EntryType::kDel : log::EntryType::kPut, key, value, backups_,
             [this, key, value, del](Status s, uint64_t version) {
               --in_flight_;
               if (s.ok()) {
                 ++acked;
                 model.Ack(key, version, del ? std::nullopt : std::optional<std::string>(value));
               } else {
                 ++failed;
               }
               Next();
             });
  }

  ReplicationWorld& w_;
  int primary_;
  std::vector<NodeId> backups_;
  Random rng_;
  int left_ = 0, in_flight_ = 0, sender_ = 0;
};

}  // namespace slip::replication::testing
