// The engine's files on disk (lsm/file.h's interfaces over POSIX). Writes
// are buffered in user space because the engine appends in small pieces
// (WAL records, table entries) and a syscall per piece costs more than the
// copy. O_DIRECT is offered so that benchmarks measure the device, not the
// page cache, and so that SSTs read through the block cache are not cached
// twice; it needs 4 KB-aligned buffers, offsets and lengths, which is why a
// direct file rewrites its partial tail block after each Sync and trims the
// padding off with ftruncate. Where a filesystem refuses O_DIRECT (tmpfs
// before Linux 6.6) a file quietly falls back to buffered I/O and says so in
// direct(): a benchmark can report it, a server need not fail over it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "lsm/file.h"

namespace slip::lsm {

// Bytes that crossed the syscall boundary, for per-role I/O accounting
// (WAL, flush, compaction, reads). With O_DIRECT they include the alignment
// padding and the tail block each Sync rewrites: what the device sees.
struct IoCounters {
  std::atomic<uint64_t> bytes_read{0}, bytes_written{0}, syncs{0};
};

struct FileOptions {
  bool direct_io = false;
  // Where the file's I/O is counted (null: nowhere); must outlive the file.
  IoCounters* counters = nullptr;
};

// O_DIRECT's alignment of buffers, offsets and lengths.
constexpr size_t kDirectIoAlignment = 4096;

// Creates or truncates `path`. Creating a file is durable once its
// directory is synced (SyncDir, RenameFile).
Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, const FileOptions& options = {});
// Opens `path` (creating it if missing) to append after its current size:
// a MANIFEST or WAL reopened.
Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path, const FileOptions& options = {});
// For an immutable file: its size is read once, at open.
Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path, const FileOptions& options = {});

// The concrete files, for direct() and Close(); NewWritableFile and
// NewAppendableFile return a PosixWritableFile, NewRandomAccessFile a
// PosixRandomAccessFile (a static_cast from their results is safe).
class PosixWritableFile final : public WritableFile {
 public:
  ~PosixWritableFile() override;  // Close(), its error dropped
  Status Append(std::string_view data) override;
  // Writes the buffer and fdatasyncs; with O_DIRECT the partial tail block
  // is written padded and the file trimmed back to size() first, so a crash
  // never leaves padding as data.
  Status Sync() override;
  uint64_t size() const override { return offset_ + len_; }
  // Writes what is buffered (without Sync) and closes; later Appends and
  // Syncs fail, a second Close is OK.
  Status Close();
  // O_DIRECT in effect (false when not asked for or refused).
  bool direct() const { return direct_; }

 private:
  friend Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string&, const FileOptions&);
  friend Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string&, const FileOptions&);
  static Result<std::unique_ptr<WritableFile>> Open(const std::string& path, const FileOptions& options, bool append);
  PosixWritableFile(std::string path, int fd, bool direct, IoCounters* counters);
  // Writes the buffer's first round-up(len_) bytes at offset_ (padded when
  // direct) and keeps the unwritten or partial-block tail buffered.
  Status Flush();
  Status WriteAt(const char* p, size_t n, uint64_t at);

  const std::string path_;
  int fd_;
  const bool direct_;
  IoCounters* const counters_;
  char* buf_;            // kBufferBytes, aligned
  size_t len_ = 0;       // bytes buffered
  size_t written_ = 0;   // of them, already in the file (a direct file's partial tail block)
  bool padded_ = false;  // the file ends in zero padding past size()
  uint64_t offset_ = 0;  // where buf_[0] goes in the file (aligned when direct)
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  ~PosixRandomAccessFile() override;
  // Safe to call from several threads at once. The result is in `scratch`.
  Result<std::string_view> Read(uint64_t offset, size_t n, std::string* scratch) const override;
  uint64_t size() const override { return size_; }
  bool direct() const { return direct_; }

 private:
  friend Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string&, const FileOptions&);
  PosixRandomAccessFile(std::string path, int fd, bool direct, uint64_t size, IoCounters* counters)
      : path_(std::move(path)), fd_(fd), direct_(direct), size_(size), counters_(counters) {}

  const std::string path_;
  const int fd_;
  const bool direct_;
  const uint64_t size_;
  IoCounters* const counters_;
};

// Whether a file in `dir` can be opened with O_DIRECT (probes with a
// temporary file it removes).
bool DirectIoSupported(const std::string& dir);
// Tests: act as if every filesystem refused O_DIRECT, to exercise the
// fallback on a kernel whose tmpfs supports it.
void SimulateDirectIoRefusedForTesting(bool refuse);

// NotFound when `path` does not exist; IoError (with the path and the OS's
// reason) for any other failure.
Status RemoveFile(const std::string& path);
// Atomically replaces `to`, then syncs the directories of both, so the
// rename survives a crash.
Status RenameFile(const std::string& from, const std::string& to);
Status SyncDir(const std::string& dir);
// The names in `dir` (not "." or ".."), sorted.
Result<std::vector<std::string>> ListDir(const std::string& dir);
// OK when it exists already as a directory.
Status CreateDir(const std::string& dir);
Result<uint64_t> FileSize(const std::string& path);

}  // namespace slip::lsm
