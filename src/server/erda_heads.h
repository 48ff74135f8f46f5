// ErdaHeads: where one worker's erda clients write their entries — the
// worker's head segments (store receive segments) and the reservations in
// them (docs/papers/erda.md §6.4).
//
// RESERVE bumps the head's tail: the place is the client's alone. An entry
// never spans segments; when one does not fit, the head retires and a new
// receive segment becomes the head. A reservation ends one of three ways:
//
//   committed   the client's entry checked out (Store::AdoptReceived) and
//               went the way of any write: replicated, committed or
//               abandoned, and stays in the log either way;
//   copied      (erda-raw, erda-redo) the entry checked out and was written
//               again into a t-log; the staged place is then given up as a
//               failed one is;
//   failed      COMMIT found no whole entry there (torn, not landed);
//   expired     no COMMIT within `reservation_ttl` (the client died, or
//               gave up).
//
// A failed or expired place may still receive the client's bytes later, so
// it counts as an abandoned entry of its key (Store::AbandonReceived: the
// cleaner keeps the key's tombstones) until the head is sealed. A retired
// head is sealed once no reservation in it is open and every client that
// could still write there is past its deadline (`write_within` after its
// reservation, plus `landing_grace` for bytes in flight): then the failed
// and expired places are zeroed (Store::KillReceived) and the segment is
// handed to the cleaner like any digested receive segment.
//
// Single-threaded: owned by one worker (the shard's, server/worker_pool.h);
// Tick() runs on that worker's executor.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "runtime/runtime.h"
#include "store/store.h"

namespace slip::server {

struct ErdaHeadsOptions {
  // A client posts its write within this long after it sent RESERVE, or
  // never (it checks its own clock; ErdaReserveResponse::write_within_ns).
  runtime::Nanos write_within = 50 * runtime::kMillisecond;
  // A reservation with no COMMIT after this long is dropped.
  runtime::Nanos reservation_ttl = 1 * runtime::kSecond;
  // How long a posted write may still be on its way (the fabric's bound on
  // an operation: EndpointOptions::op_timeout).
  runtime::Nanos landing_grace = 2 * runtime::kSecond;
};

class ErdaHeads {
 public:
  ErdaHeads(store::Store* store, ErdaHeadsOptions options = {});

  struct Reservation {
    uint64_t id = 0;
    uint64_t term = 0;
    uint32_t shard = 0;
    uint64_t version = 0;
    std::string key;
    uint64_t offset = 0;  // region offset
    uint32_t bytes = 0;   // the entry's padded block size
    uint32_t segment = 0;
    runtime::Nanos made_at = 0;
  };

  // A place for an entry of `bytes` (one log block). NoSpace when the store
  // has no free segment for a new head; InvalidArgument when it can never fit.
  Result<const Reservation*> Reserve(runtime::Nanos now, uint64_t term, uint32_t shard, uint64_t version,
                                     std::string_view key, uint32_t bytes);
  // Takes an open reservation out to commit it; nullopt when `id` is unknown
  // (expired, or never made) or names another key.
  std::optional<Reservation> Take(uint64_t id, std::string_view key);
  // A taken reservation was committed (Store::AdoptReceived succeeded).
  void Committed(const Reservation& r);
  // A taken reservation whose entry did not check out.
  void Failed(const Reservation& r);
  // A taken reservation whose entry was copied into the log (the copying
  // baselines): the staged bytes are never adopted, so the place is given
  // up as a failed one is.
  void Copied(const Reservation& r);

  // Expires old reservations and seals heads that can be sealed. Returns
  // the versions of the reservations it expired, by shard (the caller tells
  // its commit tracker they will never commit).
  std::vector<std::pair<uint32_t, uint64_t>> Tick(runtime::Nanos now);

  size_t open_reservations() const { return open_.size(); }
  const ErdaHeadsOptions& options() const { return options_; }
  struct Stats {
    uint64_t reserved = 0, committed = 0, copied = 0, failed = 0, expired = 0;
    uint64_t heads = 0, heads_sealed = 0, places_killed = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Head {
    uint32_t segment = 0;
    uint64_t tail = 0;               // bytes reserved from the segment's start
    uint32_t open = 0;               // reservations neither committed nor dead
    runtime::Nanos last_reserved = 0;
    std::vector<std::pair<uint64_t, uint32_t>> dead;  // failed / expired places
  };
  Head* HeadOf(uint32_t segment);
  void Dead(const Reservation& r);
  Status SealIfDone(Head& h, runtime::Nanos now);

  store::Store* const store_;
  const ErdaHeadsOptions options_;
  std::optional<Head> current_;
  std::deque<Head> retired_;
  std::unordered_map<uint64_t, Reservation> open_;
  uint64_t next_id_ = 1;
  Stats stats_;
};

}  // namespace slip::server
