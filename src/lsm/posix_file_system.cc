#include "lsm/file_system.h"
#include "lsm/posix_file.h"

namespace slip::lsm {

namespace {

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

class PosixFileSystem final : public FileSystem {
 public:
  PosixFileSystem(bool direct, IoCounters* counters) : direct_(direct), counters_(counters) {}

  Result<std::unique_ptr<WritableFile>> Create(const std::string& path, Kind kind) override {
    SLIP_ASSIGN_OR_RETURN(auto file, NewWritableFile(path, Options(kind)));
    // The file's name must outlive a crash before anything names it.
    SLIP_RETURN_IF_ERROR(SyncDir(DirOf(path)));
    return file;
  }
  Result<std::unique_ptr<RandomAccessFile>> Open(const std::string& path, Kind kind) override {
    return NewRandomAccessFile(path, Options(kind));
  }
  Status Remove(const std::string& path) override { return RemoveFile(path); }
  Status Rename(const std::string& from, const std::string& to) override { return RenameFile(from, to); }
  Result<std::vector<std::string>> List(const std::string& dir) override { return ListDir(dir); }
  Status CreateDir(const std::string& dir) override { return lsm::CreateDir(dir); }
  bool direct_io() const override { return direct_; }

 private:
  FileOptions Options(Kind kind) const {
    // Logs are appended in small records and synced: the page cache costs
    // them nothing, and O_DIRECT would rewrite the tail block per sync.
    return FileOptions{.direct_io = direct_ && kind == Kind::kTable, .counters = counters_};
  }

  const bool direct_;
  IoCounters* const counters_;
};

}  // namespace

std::unique_ptr<FileSystem> NewPosixFileSystem(const std::string& dir, const PosixFileSystemOptions& options) {
  bool direct = false;
  if (options.direct_io) {
    (void)CreateDir(dir);
    direct = DirectIoSupported(dir);
  }
  return std::make_unique<PosixFileSystem>(direct, options.counters);
}

}  // namespace slip::lsm
