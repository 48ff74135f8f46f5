// PmRegion: a byte-addressable persistent-memory region and its persistence
// domain.
//
// Stores into base() are ordinary CPU stores; they become durable only once
// Persist() covers them (clwb/clflushopt + sfence on DAX, msync of the
// covering pages on an ordinary file, nothing for a volatile region). Callers
// must treat any byte they stored but did not Persist as possibly lost or
// torn after a crash: that is exactly what the crash model reproduces.
//
// Crash model (tests only, RegionOptions::crash_model): the region keeps a
// shadow "durable image". Persist() copies the covered 64 B lines into it.
// SimulateCrash(seed) then decides, for every line whose working bytes differ
// from the durable image, to keep it, drop it, or tear it at 8-byte
// granularity, and makes the working image equal the result, as a machine
// would see its PM after power loss and restart.
//
// Thread-safety: Persist() may run concurrently on disjoint lines. The crash
// model's SimulateCrash/FreezePersistence must not race with writers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace slip::pm {

constexpr size_t kCacheLine = 64;

enum class PersistMode : uint8_t {
  kAuto,   // kFlush on a DAX mapping (MAP_SYNC accepted), else kMsync
  kFlush,  // cache-line write-back (clwb > clflushopt > clflush) + sfence
  kMsync,  // msync(MS_SYNC) of the pages covering the range
  kNone,   // volatile: Persist() only orders (a compiler/CPU fence)
};

struct RegionOptions {
  PersistMode mode = PersistMode::kAuto;
  // Keep a shadow durable image for SimulateCrash(). Doubles memory; tests only.
  bool crash_model = false;
  // Fault the whole mapping in now (MAP_POPULATE) rather than on
  // first touch in the write path. A node's log writes fresh pages at the
  // rate it takes data; with 1 MiB values page faults were a third of its
  // time (perf, bench/results/2026-11-25-datapath-large-values.md).
  bool populate = false;
};

struct CrashStats {
  size_t dirty_lines = 0;  // lines that differed from the durable image
  size_t kept = 0;
  size_t dropped = 0;
  size_t torn = 0;
};

// Whether `path` (or, if it does not exist yet, its nearest existing
// ancestor) lies on a filesystem held in memory (tmpfs, ramfs): a PM file
// there survives process crashes but not power loss, and msync adds nothing.
bool OnMemoryFilesystem(const std::string& path);

class PmRegion {
 public:
  // Maps `path`, creating it zero-filled with `size` bytes if absent. An
  // existing file must have exactly `size` bytes (else InvalidArgument), or
  // pass size = 0 to adopt the file's size.
  static Result<std::unique_ptr<PmRegion>> OpenFile(const std::string& path, size_t size,
                                                    const RegionOptions& options);
  // Anonymous zero-filled memory: for tests and the simulator. kAuto means kNone.
  static Result<std::unique_ptr<PmRegion>> Anonymous(size_t size, const RegionOptions& options);

  ~PmRegion();
  PmRegion(const PmRegion&) = delete;
  PmRegion& operator=(const PmRegion&) = delete;

  std::byte* base() const { return base_; }
  size_t size() const { return size_; }
  std::byte* at(uint64_t offset) const { return base_ + offset; }
  uint64_t offset_of(const void* p) const {
    return static_cast<uint64_t>(static_cast<const std::byte*>(p) - base_);
  }
  bool contains(const void* p, size_t len) const;

  // Makes [addr, addr+len) durable. REQUIRES: the range lies inside the region.
  void Persist(const void* addr, size_t len);

  // The mode actually in use after kAuto was resolved.
  PersistMode mode() const { return mode_; }
  bool is_dax() const { return dax_; }
  bool crash_model() const { return durable_ != nullptr; }
  // Which flush instruction kFlush uses: "clwb", "clflushopt" or "clflush".
  static const char* FlushInstruction();

  // --- crash model (REQUIRES: options.crash_model) ---

  // Resolves every dirty, unpersisted line as kept / dropped / torn (each
  // 8-byte word from the new or the old contents), seeded; afterwards the
  // working image equals the durable image.
  CrashStats SimulateCrash(uint64_t seed);
  // After `n` more Persist() calls, further calls make nothing durable: models
  // power failing part-way through an operation while the code keeps running.
  void FreezePersistenceAfter(uint64_t n);
  bool persistence_frozen() const;
  // Whether a Persist() call was refused since the last SimulateCrash: power
  // has failed at that call. An operation that returned before it is durable.
  bool power_failed() const;
  uint64_t persist_calls() const { return persist_calls_.load(std::memory_order_relaxed); }

 private:
  PmRegion() = default;

  std::byte* base_ = nullptr;
  size_t size_ = 0;
  PersistMode mode_ = PersistMode::kNone;
  bool dax_ = false;
  bool mapped_file_ = false;
  int fd_ = -1;
  std::unique_ptr<std::byte[]> durable_;  // crash model shadow image, else null
  std::atomic<uint64_t> persist_calls_{0};
  std::atomic<uint64_t> persist_budget_{UINT64_MAX};  // calls still allowed to persist
  std::atomic<bool> power_failed_{false};
  std::unique_ptr<std::byte[]> at_failure_;  // working image when power failed
};

}  // namespace slip::pm
