// Where the LSM engine keeps its files: a small file-system interface the
// engine (`Db`) does all its I/O through, so that the same engine runs over
// a POSIX directory (direct I/O for tables where the file system allows it)
// and over `MemFileSystem`, which keeps files in memory and models a crash:
// what was not synced is lost, or survives only in part. Tests drive the
// engine through every failure point with it (`FailAfter`).
//
// The contract the engine relies on: bytes appended are durable once Sync
// returns; a name made by Create, Rename or Remove is durable once the call
// returns (a POSIX file system syncs the directory).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/random.h"
#include "common/status.h"
#include "lsm/file.h"

namespace slip::lsm {

struct IoCounters;  // lsm/posix_file.h

class FileSystem {
 public:
  // How a file is used: tables are written once and read at random (direct
  // I/O where allowed); logs (WAL, MANIFEST) are appended and synced.
  enum class Kind { kTable, kLog };

  virtual ~FileSystem() = default;
  // Creates `path` empty (truncating one that exists).
  virtual Result<std::unique_ptr<WritableFile>> Create(const std::string& path, Kind kind) = 0;
  // NotFound when there is no such file.
  virtual Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path, Kind kind) = 0;
  virtual Status Remove(const std::string& path) = 0;
  // Atomically replaces `to` by `from`.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // The names in `dir` (no "." or "..").
  virtual Result<std::vector<std::string>> List(const std::string& dir) = 0;
  // OK when it exists already.
  virtual Status CreateDir(const std::string& dir) = 0;
  // Whether tables bypass the page cache (then the engine's block cache is
  // the only cache of their blocks).
  virtual bool direct_io() const { return false; }
};

struct PosixFileSystemOptions {
  bool direct_io = true;  // for tables, where the file system allows it
  IoCounters* counters = nullptr;
};
// Over the real file system. `dir` is probed for O_DIRECT (tmpfs refuses
// it): where it is refused, tables are buffered and synced with fdatasync.
std::unique_ptr<FileSystem> NewPosixFileSystem(const std::string& dir, const PosixFileSystemOptions& options = {});

// Files in memory with a crash model.
class MemFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, Kind kind) override;
  Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path, Kind kind) override;
  Status Remove(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Result<std::vector<std::string>> List(const std::string& dir) override;
  Status CreateDir(const std::string& dir) override;

  // After `ops` more mutating calls (Create, Append, Sync, Remove, Rename)
  // succeed, every mutating call fails with IoError — a disk gone at that
  // point. Negative: never.
  void FailAfter(int64_t ops);
  // Mutating calls so far (to enumerate failure points).
  uint64_t mutations() const;
  // The power goes: every file keeps what was synced; with `random`, also
  // a random prefix of what was not (a torn write). Failing stops. Files
  // still open stay usable objects but write into nothing.
  void Crash(Random* random = nullptr);

  struct Data {
    std::string bytes;
    size_t synced = 0;
    bool orphaned = false;  // removed or crashed past: writes go nowhere
  };

 private:
  friend class MemWritable;
  Status Mutate();  // counts a mutating call; IoError once failing; REQUIRES: mu_ held

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Data>> files_;
  int64_t fail_after_ = -1;
  uint64_t mutations_ = 0;
};

}  // namespace slip::lsm
