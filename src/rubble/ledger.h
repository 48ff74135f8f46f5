// The head's ledger of its followers' slots, in a cluster (docs/papers/
// rubbledb.md "In the cluster"). In one process the followers free slots
// by calling the head (SlotMap); across processes they report instead:
// each follower sends, now and then, the full set of slots its tables are
// in and the last edit it has applied (its watermark). A slot is free only
// when no follower can still read it — held by follower f when
//   - f has not yet sent a report the ledger can trust (a head that took
//     over, or a follower just joined, knows nothing of it yet), or
//   - f's last report lists it, or
//   - the slot was handed out for an edit f has not applied by its report
//     (or one not yet logged at all: shipped, its edit on the way).
// And a slot a table of the head's own version is in is never free: a
// follower seeded later gets that table in that slot.
// A report is trusted once its watermark reaches the edit the head was at
// when it took f on: before that, f may yet apply edits of the previous
// head that name slots this head never saw handed out.
//
// Thread-safe; Acquire waits (a full pool stalls the head's job, it
// corrupts nothing).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "common/status.h"
#include "lsm/version.h"

namespace slip::rubble {

class SlotLedger {
 public:
  using Follower = uint32_t;
  explicit SlotLedger(uint32_t count) : count_(count), edit_of_(count + 1, 0), pending_(count + 1, false) {}

  // `f` reads slots from now on; its reports count from watermark
  // `required` on. A follower taken on again starts over.
  void AddFollower(Follower f, uint64_t required);
  // `f` is gone: it holds nothing, now or later.
  void RemoveFollower(Follower f);
  bool HasFollower(Follower f) const;
  // Follower `f`'s report number `number`: its tables are in exactly
  // `slots` with every edit up to `watermark` applied. Older reports than
  // the last taken are ignored.
  void Report(Follower f, uint64_t number, const std::vector<uint32_t>& slots, uint64_t watermark);

  // `n` free slots (1..count), held by every follower until their reports
  // say otherwise; waits while fewer are free. NoSpace after `timeout_ms`
  // (at once when n > count); Aborted once Close was called.
  Result<std::vector<uint32_t>> Acquire(size_t n, int timeout_ms = 60000);
  // `edit` is logged: the slots of the tables it adds belong to it.
  void Logged(const lsm::VersionEdit& edit);
  // The slots of the head's own version's tables.
  void SetOwn(std::set<uint32_t> slots);
  // The head stops: Acquire fails from now on.
  void Close();

  size_t free_slots() const;
  uint32_t count() const { return count_; }

 private:
  struct Known {
    uint64_t required = 0;
    bool trusted = false;
    uint64_t number = 0, watermark = 0;
    std::set<uint32_t> slots;
  };
  bool Free(uint32_t slot) const;  // REQUIRES: mu_ held

  const uint32_t count_;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::map<Follower, Known> followers_;
  std::set<uint32_t> own_;
  std::vector<uint64_t> edit_of_;  // per slot: the edit that added its table (0: before this head's time)
  std::vector<bool> pending_;      // per slot: handed out, its edit not logged yet
  uint32_t cursor_ = 0;
  bool closed_ = false;
};

}  // namespace slip::rubble
