// A RubbleDB replication group in one process (docs/papers/rubbledb.md):
// a chain of R engines — the head takes writes, each follower applies them
// in turn, the tail answers reads and acknowledges writes. In `rubble`
// mode only the head flushes and compacts; its tables are written into
// pre-allocated slots of each follower's image (rubble/slots.h) before the
// version edit naming them goes down the chain, and followers drop a
// MemTable unflushed when the edit holding it arrives. In `all-compact`
// mode (the paper's baseline) every replica flushes and compacts for
// itself: the chain carries writes only.
//
// Each follower applies on its own thread, so the CPU of each role can be
// told apart: the head's requests run on the callers' threads, a
// follower's on its thread, flushes and compactions on each engine's own.
// The chain's transport is a queue per follower; the cluster's (processes,
// the fabric) replaces it without changing the roles' code.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "common/status.h"
#include "lsm/db.h"
#include "lsm/posix_file.h"
#include "rubble/slots.h"

namespace slip::rubble {

enum class Mode { kRubble, kAllCompact };

struct ChainOptions {
  std::string dir;  // head/, follower-N/, and the followers' slot images
  int replicas = 3;
  Mode mode = Mode::kRubble;
  lsm::DbOptions db;  // each replica's shape (its fs, follower and hooks are set here)
  SlotGeometry slots;
};

class Chain {
 public:
  static Result<std::unique_ptr<Chain>> Open(const ChainOptions& options);
  ~Chain();

  // Acknowledged once the tail applied it.
  Status Put(std::string_view key, std::string_view value);
  Status Delete(std::string_view key);
  Status Write(lsm::WriteBatch batch);
  // At the tail.
  Result<std::string> Get(std::string_view key);
  Status Scan(std::string_view start, size_t count, std::vector<std::pair<std::string, std::string>>* out);

  // The head dies (a crash: a job it was running is lost, and what was on
  // its way to its successor); the successor becomes the head: it drops
  // what it held, flushes its MemTables into tables of its own, ships them,
  // and rebuilds the slot map from its version (a slot shipped into for an
  // edit nobody applied is free again). Writes in flight fail (Unavailable);
  // none acknowledged is lost.
  Status KillHead();
  // Waits until every follower applied everything sent so far and no
  // engine has a flush or compaction due.
  Status Drain();
  // The tail stops (a crash: what was queued for it is lost); its
  // predecessor becomes the tail and acknowledges what it applied. Its
  // slots are released.
  Status KillTail();

  struct Replica {
    bool head = false, alive = true;
    uint64_t request_cpu_ns = 0;  // applying writes (followers' threads; the head's is its callers')
    lsm::Db::Stats db;
    uint64_t read_bytes = 0, write_bytes = 0;  // its device: its own files, and for a follower the slots shipped to it
  };
  std::vector<Replica> replicas();
  lsm::Version head_version() const { return head_db_->version(); }
  // Follower r (1: the head's successor).
  lsm::Version follower_version(int r) const { return followers_.at(static_cast<size_t>(r - 1))->db->version(); }
  uint64_t shipped_bytes() const { return shipped_bytes_.load(); }
  // The head's CPU spent shipping (waiting for slots, writing them): part
  // of its flush and compaction CPU.
  uint64_t ship_cpu_ns() const { return ship_cpu_ns_.load(); }
  size_t free_slots() const { return slot_map_ ? slot_map_->free_slots() : 0; }
  int live_replicas() const;

 private:
  struct Ack;
  struct Item {
    std::variant<std::pair<lsm::WriteBatch, lsm::WriteTicket>, lsm::VersionEdit> what;
    std::shared_ptr<Ack> ack;  // writes only
  };
  struct Follower {
    int index = 0;  // in the chain after the head (0: the head's successor)
    std::unique_ptr<SlotFileSystem> fs;       // rubble: its tables in its slots
    std::unique_ptr<lsm::FileSystem> own_fs;  // all-compact: its own files
    std::unique_ptr<lsm::Db> db;
    lsm::IoCounters io;
    std::unique_ptr<SlotWriter> writer;  // the head's descriptor on its image
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Item> queue;
    std::deque<std::shared_ptr<Ack>> unacked;  // applied and passed on, not yet acknowledged by the tail
    std::map<uint64_t, Item> held;             // writes the engine holds for a later MemTable (its thread only)
    std::map<uint64_t, Item> held_edits;       // edits it holds for their turn (its thread only)
    bool stop = false, busy = false, alive = true;
    std::atomic<uint64_t> cpu_ns{0};
    std::thread thread;
  };

  explicit Chain(const ChainOptions& o) : options_(o) {}
  Status Start();
  void Run(Follower* f);
  // Passes `item` to the follower after `from` (-1: the first head), or
  // acknowledges it when `from` is the tail; nothing when `generation` is
  // given and a head failed since.
  void Forward(int from, Item item, std::optional<uint64_t> generation = std::nullopt);
  Status Ship(lsm::VersionEdit* edit, const std::vector<std::string_view>& contents);
  // The head's hooks, inert once that head failed (`generation` passed).
  lsm::DbOptions::ShipTables ShipHook(uint64_t generation);
  lsm::DbOptions::EditLogged LoggedHook(uint64_t generation, int from);
  Follower* Next(int from);  // REQUIRES: chain_mu_ held
  lsm::Db* Tail();

  const ChainOptions options_;
  lsm::IoCounters head_io_;
  std::unique_ptr<lsm::FileSystem> head_fs_;
  std::unique_ptr<lsm::Db> head_;  // the first head, until it fails
  lsm::Db* head_db_ = nullptr;     // the head now: head_, or a promoted follower's
  int head_pos_ = -1;              // -1: head_; else the follower promoted
  std::atomic<uint64_t> head_generation_{0};
  std::shared_mutex head_mu_;  // writes hold it shared; a head failing, alone
  std::vector<std::unique_ptr<Follower>> followers_;
  std::unique_ptr<SlotMap> slot_map_;
  std::atomic<uint64_t> shipped_bytes_{0}, ship_cpu_ns_{0};
  // Writes pass to the followers in the head's sequence order, whatever
  // order their callers return in: same-key updates keep their order.
  std::mutex order_mu_;
  std::map<uint64_t, Item> out_of_order_;
  uint64_t next_sequence_ = 1;
  std::mutex chain_mu_;  // who is alive, what is unacknowledged
  std::deque<std::shared_ptr<Ack>> head_unacked_;
};

}  // namespace slip::rubble
