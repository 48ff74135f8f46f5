#include "lsm/posix_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace slip::lsm {
namespace {

// Big enough that a table's flush or a compaction's output writes in
// large requests; a multiple of kDirectIoAlignment.
constexpr size_t kBufferBytes = 64 * 1024;
static_assert(kBufferBytes % kDirectIoAlignment == 0);
// Reads up to this size reuse a per-thread bounce buffer.
constexpr size_t kBounceKeepBytes = 256 * 1024;

std::atomic<bool> refuse_direct{false};
std::atomic<uint64_t> probe_counter{0};

Status PathError(const char* what, const std::string& path, int err) {
  std::string m = std::string(what) + " " + path + ": " + std::error_code(err, std::generic_category()).message();
  return err == ENOENT ? Status::NotFound(std::move(m)) : Status::IoError(std::move(m));
}

uint64_t RoundDown(uint64_t x) { return x & ~uint64_t{kDirectIoAlignment - 1}; }
uint64_t RoundUp(uint64_t x) { return RoundDown(x + kDirectIoAlignment - 1); }

void Add(IoCounters* c, std::atomic<uint64_t> IoCounters::*field, uint64_t n) {
  if (c != nullptr) (c->*field).fetch_add(n, std::memory_order_relaxed);
}

char* AllocAligned(size_t n) { return static_cast<char*>(std::aligned_alloc(kDirectIoAlignment, RoundUp(n))); }

// Opens with O_DIRECT when asked for and the filesystem takes it (tmpfs
// before Linux 6.6 answers EINVAL); *direct says which.
int OpenMaybeDirect(const std::string& path, int flags, bool want_direct, bool* direct) {
  *direct = false;
  if (want_direct && !refuse_direct.load(std::memory_order_relaxed)) {
    const int fd = ::open(path.c_str(), flags | O_DIRECT | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EINVAL) {
      *direct = fd >= 0;
      return fd;
    }
  }
  return ::open(path.c_str(), flags | O_CLOEXEC, 0644);
}

// Up to `n` bytes at `at`, fewer only at the end of the file.
Result<size_t> PreadUpTo(int fd, char* p, size_t n, uint64_t at, const std::string& path, IoCounters* c) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, p + got, n - got, static_cast<off_t>(at + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return PathError("read", path, errno);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
    Add(c, &IoCounters::bytes_read, static_cast<uint64_t>(r));
  }
  return got;
}

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

// ---- PosixWritableFile

PosixWritableFile::PosixWritableFile(std::string path, int fd, bool direct, IoCounters* counters)
    : path_(std::move(path)), fd_(fd), direct_(direct), counters_(counters), buf_(AllocAligned(kBufferBytes)) {}

PosixWritableFile::~PosixWritableFile() {
  (void)Close();
  std::free(buf_);
}

Result<std::unique_ptr<WritableFile>> PosixWritableFile::Open(const std::string& path, const FileOptions& options,
                                                              bool append) {
  // Appending directly reads back the partial last block: O_RDWR.
  const int flags = append ? O_RDWR | O_CREAT : O_WRONLY | O_CREAT | O_TRUNC;
  bool direct = false;
  const int fd = OpenMaybeDirect(path, flags, options.direct_io, &direct);
  if (fd < 0) return PathError("open", path, errno);
  std::unique_ptr<PosixWritableFile> f(new PosixWritableFile(path, fd, direct, options.counters));
  if (append) {
    struct stat st;
    if (::fstat(fd, &st) != 0) return PathError("stat", path, errno);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const uint64_t start = direct ? RoundDown(size) : size;
    if (size > start) {
      // O_DIRECT writes whole blocks, so the partial last one is rewritten
      // with what follows it: it must be in the buffer.
      SLIP_ASSIGN_OR_RETURN(size_t got, PreadUpTo(fd, f->buf_, kDirectIoAlignment, start, path, options.counters));
      if (got < size - start) return Status::IoError("a short read of the last block of " + path);
    }
    f->offset_ = start;
    f->len_ = f->written_ = size - start;
  }
  return std::unique_ptr<WritableFile>(std::move(f));
}

Status PosixWritableFile::WriteAt(const char* p, size_t n, uint64_t at) {
  while (n > 0) {
    const ssize_t r = ::pwrite(fd_, p, n, static_cast<off_t>(at));
    if (r < 0) {
      if (errno == EINTR) continue;
      return PathError("write", path_, errno);
    }
    Add(counters_, &IoCounters::bytes_written, static_cast<uint64_t>(r));
    p += r;
    n -= static_cast<size_t>(r);
    at += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

Status PosixWritableFile::Append(std::string_view data) {
  if (fd_ < 0) return Status::IoError("an append to " + path_ + " after Close");
  while (!data.empty()) {
    if (!direct_ && len_ == 0 && data.size() >= kBufferBytes) {
      // A big append gains nothing from the copy.
      SLIP_RETURN_IF_ERROR(WriteAt(data.data(), data.size(), offset_));
      offset_ += data.size();
      return Status::Ok();
    }
    const size_t n = std::min(data.size(), kBufferBytes - len_);
    std::memcpy(buf_ + len_, data.data(), n);
    len_ += n;
    data.remove_prefix(n);
    if (len_ == kBufferBytes) SLIP_RETURN_IF_ERROR(Flush());
  }
  return Status::Ok();
}

Status PosixWritableFile::Flush() {
  if (len_ == written_) return Status::Ok();
  if (!direct_) {
    SLIP_RETURN_IF_ERROR(WriteAt(buf_, len_, offset_));
    offset_ += len_;
    len_ = 0;
    return Status::Ok();
  }
  const size_t padded = RoundUp(len_);
  std::memset(buf_ + len_, 0, padded - len_);
  SLIP_RETURN_IF_ERROR(WriteAt(buf_, padded, offset_));
  const size_t whole = RoundDown(len_);
  const size_t tail = len_ - whole;
  if (tail > 0 && whole > 0) std::memmove(buf_, buf_ + whole, tail);
  offset_ += whole;
  len_ = written_ = tail;
  padded_ = tail > 0;
  return Status::Ok();
}

Status PosixWritableFile::Sync() {
  if (fd_ < 0) return Status::IoError("a sync of " + path_ + " after Close");
  SLIP_RETURN_IF_ERROR(Flush());
  // A partial tail went out padded: trim it before the sync makes it durable.
  if (padded_) {
    if (::ftruncate(fd_, static_cast<off_t>(size())) != 0) return PathError("truncate", path_, errno);
    padded_ = false;
  }
  if (::fdatasync(fd_) != 0) return PathError("sync", path_, errno);
  Add(counters_, &IoCounters::syncs, 1);
  return Status::Ok();
}

Status PosixWritableFile::Close() {
  if (fd_ < 0) return Status::Ok();
  Status s = Flush();
  if (s.ok() && padded_ && ::ftruncate(fd_, static_cast<off_t>(size())) != 0) s = PathError("truncate", path_, errno);
  if (::close(fd_) != 0 && s.ok()) s = PathError("close", path_, errno);
  fd_ = -1;
  return s;
}

Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, const FileOptions& options) {
  return PosixWritableFile::Open(path, options, /*append=*/false);
}

Result<std::unique_ptr<WritableFile>> NewAppendableFile(const std::string& path, const FileOptions& options) {
  return PosixWritableFile::Open(path, options, /*append=*/true);
}

// ---- PosixRandomAccessFile

PosixRandomAccessFile::~PosixRandomAccessFile() { ::close(fd_); }

Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path, const FileOptions& options) {
  bool direct = false;
  const int fd = OpenMaybeDirect(path, O_RDONLY, options.direct_io, &direct);
  if (fd < 0) return PathError("open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return PathError("stat", path, err);
  }
  return std::unique_ptr<RandomAccessFile>(
      new PosixRandomAccessFile(path, fd, direct, static_cast<uint64_t>(st.st_size), options.counters));
}

Result<std::string_view> PosixRandomAccessFile::Read(uint64_t offset, size_t n, std::string* scratch) const {
  if (offset > size_ || n > size_ - offset) return Status::Corruption("a read past the end of " + path_);
  if (n == 0) return std::string_view();
  if (!direct_) {
    scratch->resize(n);
    SLIP_ASSIGN_OR_RETURN(size_t got, PreadUpTo(fd_, scratch->data(), n, offset, path_, counters_));
    if (got < n) return Status::IoError("a short read of " + path_ + " (truncated since it was opened?)");
    return std::string_view(*scratch);
  }
  // O_DIRECT reads whole aligned blocks into an aligned buffer.
  struct Bounce {
    char* p = nullptr;
    size_t cap = 0;
    ~Bounce() { std::free(p); }
  };
  thread_local Bounce kept;
  const uint64_t start = RoundDown(offset);
  const size_t span = RoundUp(offset + n) - start;
  std::unique_ptr<char, decltype(&std::free)> once(nullptr, &std::free);
  char* buf;
  if (span <= kBounceKeepBytes) {
    if (kept.cap < span) {
      std::free(kept.p);
      kept.p = AllocAligned(kBounceKeepBytes);
      kept.cap = kBounceKeepBytes;
    }
    buf = kept.p;
  } else {
    once.reset(AllocAligned(span));
    buf = once.get();
  }
  SLIP_ASSIGN_OR_RETURN(size_t got, PreadUpTo(fd_, buf, span, start, path_, counters_));
  if (got < offset + n - start)
    return Status::IoError("a short read of " + path_ + " (truncated since it was opened?)");
  scratch->assign(buf + (offset - start), n);
  return std::string_view(*scratch);
}

// ---- Directories and names

bool DirectIoSupported(const std::string& dir) {
  if (refuse_direct.load(std::memory_order_relaxed)) return false;
  const std::string probe = dir + "/.direct_io_probe." + std::to_string(::getpid()) + "." +
                            std::to_string(probe_counter.fetch_add(1, std::memory_order_relaxed));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0644);
  if (fd < 0) {
    ::unlink(probe.c_str());  // in case the refusal came after creating it
    return false;
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return true;
}

void SimulateDirectIoRefusedForTesting(bool refuse) { refuse_direct.store(refuse); }

Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return PathError("remove", path, errno);
  return Status::Ok();
}

Status RenameFile(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return PathError("rename", from + " to " + to, errno);
  SLIP_RETURN_IF_ERROR(SyncDir(Parent(to)));
  if (Parent(from) != Parent(to)) SLIP_RETURN_IF_ERROR(SyncDir(Parent(from)));
  return Status::Ok();
}

Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PathError("open", dir, errno);
  Status s;
  if (::fsync(fd) != 0) s = PathError("sync", dir, errno);
  ::close(fd);
  return s;
}

Result<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return PathError("list", dir, errno);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view name(e->d_name);
    if (name != "." && name != "..") names.emplace_back(name);
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) return PathError("list", dir, err);
  std::sort(names.begin(), names.end());
  return names;
}

Status CreateDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return Status::Ok();
  const int err = errno;
  struct stat st;
  if (err == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return Status::Ok();
  return PathError("create directory", dir, err);
}

Result<uint64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return PathError("stat", path, errno);
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace slip::lsm
