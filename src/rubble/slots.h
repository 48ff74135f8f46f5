// RubbleDB's pre-allocated SST slots (docs/formats/rubble_slots.md): each
// follower of a chain keeps one image file of `count` slots of `slot_bytes`
// each, written with real zeros before the chain starts. The head writes a
// finished table into a slot one-sidedly — it opens the follower's image
// itself, with O_DIRECT and O_DSYNC, standing in for NVMe-oF with target
// offload: the follower's CPU does nothing for it — and the follower reads
// the slot through its own read-only descriptor once the edit naming the
// table arrives. Nothing is ever created, extended or renamed: only data
// blocks of the image change.
//
// A slot is free when no follower holds a table in it. Only followers free
// slots (after applying the edit that deletes a table and after its last
// reader lets go): the head may not reuse a slot a follower still reads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "lsm/file_system.h"
#include "lsm/posix_file.h"
#include "lsm/version.h"

namespace slip::rubble {

struct SlotGeometry {
  uint32_t count = 256;
  uint64_t slot_bytes = (17ull << 20) / 4;  // a 4 MB table's slot, padded by 1/16 (the paper's 17 MB for 16 MB)
  uint64_t image_bytes() const { return count * slot_bytes; }
};

// Writes the image: count x slot_bytes of zeros, synced. InvalidArgument
// unless slot_bytes is a multiple of 4096.
Status CreateSlotImage(const std::string& path, const SlotGeometry& geometry);

// The head's side of one follower's image.
class SlotWriter {
 public:
  static Result<std::unique_ptr<SlotWriter>> Open(const std::string& image, const SlotGeometry& geometry,
                                                  lsm::IoCounters* counters = nullptr);
  ~SlotWriter();
  // Writes `table` at the start of `slot` and zeros after it to the slot's
  // end (a reused slot keeps nothing of its last table); durable when it
  // returns. TooLarge when the table does not fit. Thread-safe.
  Status Write(uint32_t slot, std::string_view table);

 private:
  SlotWriter(int fd, SlotGeometry g, lsm::IoCounters* counters) : fd_(fd), geometry_(g), counters_(counters) {}
  const int fd_;
  const SlotGeometry geometry_;
  lsm::IoCounters* const counters_;
  std::mutex mu_;
  // Slot buffers (aligned) not in use, each with how much of it is not
  // zero (nothing past that was written).
  std::vector<std::pair<char*, size_t>> free_;
};

// The head's record of which follower holds which slot: a bit per follower
// per slot. Acquire takes every slot a job needs or waits (a full pool
// stalls the head, it corrupts nothing).
class SlotMap {
 public:
  SlotMap(uint32_t count, int followers);
  // `n` free slots, marked held by every live follower; waits while fewer
  // are free (NoSpace after `timeout_ms`, or at once when n > count).
  Result<std::vector<uint32_t>> Acquire(size_t n, int timeout_ms = 60000);
  // Follower `f` no longer holds `slot`.
  void Release(int follower, uint32_t slot);
  // Follower `f` is gone: it holds nothing, now or later.
  void RemoveFollower(int follower);
  // A head taking over from its predecessor: exactly `held` (the slots its
  // version's tables are in) are held, by every live follower.
  void Reconcile(const std::vector<uint32_t>& held);
  size_t free_slots() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::vector<uint64_t> holders_;  // per slot, a bit per follower
  uint64_t live_ = 0;              // the followers' bits
  uint32_t cursor_ = 0;            // circular scan start
};

// A follower's file system: its MANIFEST in `dir`, its tables in the slots
// of its image, read-only. `Adopt` maps a table's name to the slot the
// head shipped it into (before the edit naming it is applied); removing a
// table frees its slot and tells `released`.
class SlotFileSystem final : public lsm::FileSystem {
 public:
  static Result<std::unique_ptr<SlotFileSystem>> Open(const std::string& dir, const std::string& image,
                                                      const SlotGeometry& geometry,
                                                      std::function<void(uint32_t slot)> released,
                                                      lsm::IoCounters* counters = nullptr);

  Status Adopt(const lsm::FileMeta& meta);
  // The follower became its chain's head: from now on it writes tables of
  // its own, as files in its directory (its slots keep the ones it has).
  void TakeTables();

  Result<std::unique_ptr<lsm::WritableFile>> Create(const std::string& path, Kind kind) override;
  Result<std::unique_ptr<lsm::RandomAccessFile>> Open(const std::string& path, Kind kind) override;
  Status Remove(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Result<std::vector<std::string>> List(const std::string& dir) override;
  Status CreateDir(const std::string& dir) override;
  bool direct_io() const override { return true; }

  size_t tables() const;
  // The slots its tables are in (what a follower reports to its head).
  std::vector<uint32_t> held_slots() const;

 private:
  SlotFileSystem(std::string dir, SlotGeometry g, std::shared_ptr<lsm::RandomAccessFile> image,
                 std::unique_ptr<lsm::FileSystem> logs, std::function<void(uint32_t)> released)
      : dir_(std::move(dir)), geometry_(g), image_(std::move(image)), logs_(std::move(logs)),
        released_(std::move(released)) {}
  // The table number a path names, if it is a table in dir_.
  std::optional<uint64_t> TableNumber(const std::string& path) const;

  const std::string dir_;
  const SlotGeometry geometry_;
  const std::shared_ptr<lsm::RandomAccessFile> image_;
  const std::unique_ptr<lsm::FileSystem> logs_;
  const std::function<void(uint32_t)> released_;
  mutable std::mutex mu_;
  struct Place {
    uint32_t slot = 0;
    uint64_t size = 0;
  };
  std::map<uint64_t, Place> tables_;
  bool own_tables_ = false;
};

}  // namespace slip::rubble
