#include "pm/region.h"

#include <cpuid.h>
#include <fcntl.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <cassert>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/coding.h"
#include "common/log.h"
#include "common/random.h"

#if !defined(__x86_64__)
#error "pm/region.cc: kFlush is written for x86-64 (clwb/clflushopt/clflush)"
#endif

// Older libc headers predate MAP_SYNC; the values are the kernel ABI.
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif

namespace slip::pm {

bool OnMemoryFilesystem(const std::string& path) {
  constexpr long kTmpfsMagic = 0x01021994, kRamfsMagic = 0x858458f6;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  while (!p.empty() && !std::filesystem::exists(p, ec) && p != p.root_path()) p = p.parent_path();
  struct statfs fs {};
  if (::statfs(p.c_str(), &fs) != 0) return false;
  const long type = static_cast<long>(fs.f_type);
  return type == kTmpfsMagic || type == kRamfsMagic;
}
namespace {

constexpr size_t kWord = 8;
constexpr size_t kWordsPerLine = kCacheLine / kWord;

std::string ErrnoText(int err) { return std::string(std::strerror(err)); }

Status IoErrorFor(const std::string& what, const std::string& path, int err) {
  return Status::IoError(what + " " + path + ": " + ErrnoText(err));
}

// --- cache-line write-back -------------------------------------------------
//
// Each flavour lives in its own function compiled for just that instruction,
// so the file builds without global -m flags and a binary built on a clwb
// machine still runs (with clflush) on one that lacks it.

using FlushFn = void (*)(const std::byte* first_line, const std::byte* end);

__attribute__((target("clwb"))) void FlushClwb(const std::byte* p, const std::byte* end) {
  for (; p < end; p += kCacheLine) _mm_clwb(const_cast<std::byte*>(p));
}

__attribute__((target("clflushopt"))) void FlushClflushopt(const std::byte* p,
                                                           const std::byte* end) {
  for (; p < end; p += kCacheLine) _mm_clflushopt(const_cast<std::byte*>(p));
}

void FlushClflush(const std::byte* p, const std::byte* end) {
  for (; p < end; p += kCacheLine) _mm_clflush(p);
}

struct FlushImpl {
  FlushFn fn;
  const char* name;
};

FlushImpl DetectFlush() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // __get_cpuid_count fails when leaf 7 is beyond the CPU's maximum leaf.
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    if (ebx & (1u << 24)) return {FlushClwb, "clwb"};
    if (ebx & (1u << 23)) return {FlushClflushopt, "clflushopt"};
  }
  return {FlushClflush, "clflush"};
}

const FlushImpl& Flush() {
  static const FlushImpl impl = DetectFlush();
  return impl;
}

size_t PageSize() {
  static const size_t page = [] {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

}  // namespace

const char* PmRegion::FlushInstruction() { return Flush().name; }

Result<std::unique_ptr<PmRegion>> PmRegion::OpenFile(const std::string& path, size_t size,
                                                     const RegionOptions& options) {
  if (path.empty()) return Status::InvalidArgument("PM file path is empty");
  if (size > static_cast<uint64_t>(INT64_MAX)) {
    return Status::InvalidArgument("PM region size " + std::to_string(size) + " is too large");
  }

  // O_EXCL tells us whether we made the file, so a failure below removes
  // only a file we created and never a caller's data.
  bool created = false;
  int fd = -1;
  if (size > 0) {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      created = true;
    } else if (errno != EEXIST) {
      return IoErrorFor("cannot create", path, errno);
    }
  }
  if (fd < 0) {
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT && size == 0) {
        return Status::InvalidArgument("size 0 means adopt an existing file, but " + path +
                                       " does not exist");
      }
      return IoErrorFor("cannot open", path, errno);
    }
  }

  auto fail = [&](Status s) -> Status {
    ::close(fd);
    if (created) ::unlink(path.c_str());
    return s;
  };

  struct stat st {};
  if (::fstat(fd, &st) != 0) return fail(IoErrorFor("cannot stat", path, errno));
  if (!S_ISREG(st.st_mode)) {
    return fail(Status::InvalidArgument(path + " is not a regular file"));
  }
  const size_t file_size = static_cast<size_t>(st.st_size);
  // An existing empty file is treated as new: it is what a crash between
  // create and ftruncate leaves behind, and it holds no data to protect.
  const bool fresh = created || (file_size == 0 && size > 0);
  if (fresh) {
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
      return fail(IoErrorFor("cannot size", path, errno));
    }
  } else if (size == 0) {
    if (file_size == 0) return fail(Status::InvalidArgument(path + " is empty: nothing to map"));
    size = file_size;
  } else if (file_size != size) {
    return fail(Status::InvalidArgument(path + " has " + std::to_string(file_size) +
                                        " bytes, expected " + std::to_string(size)));
  }

  // MAP_SYNC is the kernel's promise that no page-cache metadata stands
  // between our stores and the media, which is what makes cache-line flushes
  // sufficient. Only DAX filesystems grant it; elsewhere msync is required.
  bool dax = true;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
  if (p == MAP_FAILED && (errno == EOPNOTSUPP || errno == EINVAL)) {
    dax = false;
    p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | (options.populate ? MAP_POPULATE : 0), fd, 0);
  }
  if (p == MAP_FAILED) return fail(IoErrorFor("cannot mmap", path, errno));

  std::unique_ptr<PmRegion> r(new PmRegion());
  r->base_ = static_cast<std::byte*>(p);
  r->size_ = size;
  r->dax_ = dax;
  r->mapped_file_ = true;
  r->fd_ = fd;
  r->mode_ = options.mode == PersistMode::kAuto ? (dax ? PersistMode::kFlush : PersistMode::kMsync)
                                                : options.mode;
  if (options.crash_model) {
    // What is in the file now is by definition what survived so far.
    r->durable_ = std::make_unique_for_overwrite<std::byte[]>(size);
    std::memcpy(r->durable_.get(), r->base_, size);
  }
  return r;
}

Result<std::unique_ptr<PmRegion>> PmRegion::Anonymous(size_t size, const RegionOptions& options) {
  if (size == 0) return Status::InvalidArgument("anonymous PM region of size 0");
  const int populate = options.populate ? MAP_POPULATE : 0;
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | populate, -1, 0);
  if (p == MAP_FAILED) {
    return Status::IoError("cannot mmap " + std::to_string(size) +
                           " anonymous bytes: " + ErrnoText(errno));
  }
  std::unique_ptr<PmRegion> r(new PmRegion());
  r->base_ = static_cast<std::byte*>(p);
  r->size_ = size;
  r->mode_ = options.mode == PersistMode::kAuto ? PersistMode::kNone : options.mode;
  if (options.crash_model) {
    // value-initialised: matches the zero-filled mapping
    r->durable_ = std::make_unique<std::byte[]>(size);
  }
  return r;
}

PmRegion::~PmRegion() {
  if (base_ != nullptr) ::munmap(base_, size_);
  if (fd_ >= 0) ::close(fd_);
}

bool PmRegion::contains(const void* p, size_t len) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto b = reinterpret_cast<uintptr_t>(base_);
  return a >= b && a - b <= size_ && len <= size_ - (a - b);
}

void PmRegion::Persist(const void* addr, size_t len) {
  assert(contains(addr, len));
  if (durable_ != nullptr) {
    persist_calls_.fetch_add(1, std::memory_order_relaxed);
    // Claim one unit of budget; UINT64_MAX means unlimited and is never
    // decremented. A frozen region skips the real write-back too, so the
    // code under test keeps running exactly as if power had already gone.
    uint64_t budget = persist_budget_.load(std::memory_order_relaxed);
    while (budget != UINT64_MAX) {
      if (budget == 0) {
        // Power fails at the first refused call. Stores made after it never
        // happened, so SimulateCrash resolves dirty lines against the image
        // as it stood now, not against what the code writes afterwards.
        if (!power_failed_.exchange(true)) {
          at_failure_.reset(new std::byte[size_]);
          std::memcpy(at_failure_.get(), base_, size_);
        }
        return;
      }
      if (persist_budget_.compare_exchange_weak(budget, budget - 1, std::memory_order_relaxed)) {
        break;
      }
    }
    // Whole lines, as hardware writes back: neighbours stored earlier in
    // the same line become durable too. Clamped so a caller's bad range
    // cannot scribble past the shadow image in release builds.
    const uint64_t off = offset_of(addr);
    if (off < size_) {
      const uint64_t first = off / kCacheLine * kCacheLine;
      const uint64_t last = std::min<uint64_t>(AlignUp(off + len, kCacheLine), size_);
      std::memcpy(durable_.get() + first, base_ + first, last - first);
    }
  }

  switch (mode_) {
    case PersistMode::kFlush: {
      if (len == 0) {
        _mm_sfence();
        break;
      }
      const auto a = reinterpret_cast<uintptr_t>(addr);
      const auto* first = reinterpret_cast<const std::byte*>(a & ~uintptr_t{kCacheLine - 1});
      Flush().fn(first, static_cast<const std::byte*>(addr) + len);
      _mm_sfence();
      break;
    }
    case PersistMode::kMsync: {
      const size_t page = PageSize();
      const auto a = reinterpret_cast<uintptr_t>(addr);
      const uintptr_t first = a & ~(uintptr_t{page} - 1);
      const uintptr_t end = AlignUp(a + len, page);
      if (len > 0 && ::msync(reinterpret_cast<void*>(first), end - first, MS_SYNC) != 0) {
        // Persist has no error channel and the caller cannot repair a
        // failed write-back; say so loudly instead of losing it silently.
        logging::Error("pm: msync({}, {}) failed: {}", reinterpret_cast<void*>(first),
                       static_cast<size_t>(end - first), std::strerror(errno));
      }
      break;
    }
    case PersistMode::kNone:
    case PersistMode::kAuto:  // resolved at open; kept for -Wswitch
      std::atomic_thread_fence(std::memory_order_seq_cst);
      break;
  }
}

CrashStats PmRegion::SimulateCrash(uint64_t seed) {
  assert(durable_ != nullptr && "SimulateCrash requires RegionOptions::crash_model");
  CrashStats stats;
  if (durable_ == nullptr) return stats;

  Random rng(seed);
  std::byte* durable = durable_.get();
  // What the media could have seen: the working image when power failed.
  const std::byte* img = at_failure_ ? at_failure_.get() : base_;
  for (size_t line = 0; line < size_; line += kCacheLine) {
    const size_t line_end = std::min(line + kCacheLine, size_);
    if (std::memcmp(img + line, durable + line, line_end - line) == 0) continue;
    ++stats.dirty_lines;

    // Offsets of the words that actually differ; only they can tear.
    size_t diff[kWordsPerLine];
    size_t ndiff = 0;
    for (size_t w = line; w < line_end; w += kWord) {
      const size_t n = std::min(kWord, line_end - w);
      if (std::memcmp(img + w, durable + w, n) != 0) diff[ndiff++] = w;
    }

    // A line with one differing word cannot be torn at word granularity:
    // any outcome is simply the old or the new line.
    const uint64_t choice = ndiff >= 2 ? rng.Uniform(3) : rng.Uniform(2);
    if (choice == 0) {
      ++stats.kept;
      std::memcpy(durable + line, img + line, line_end - line);
    } else if (choice == 1) {
      ++stats.dropped;
    } else {
      ++stats.torn;
      // Redraw until both old and new words appear: a "torn" line that
      // happened to be all-new or all-old would just be a keep or a drop.
      const uint64_t all = (uint64_t{1} << ndiff) - 1;
      uint64_t take_new;
      do {
        take_new = rng.Next() & all;
      } while (take_new == 0 || take_new == all);
      for (size_t i = 0; i < ndiff; ++i) {
        if (take_new & (uint64_t{1} << i)) {
          std::memcpy(durable + diff[i], img + diff[i], std::min(kWord, line_end - diff[i]));
        }
      }
    }
  }
  // Lines written after the failure revert too, not only the dirty ones.
  std::memcpy(base_, durable, size_);
  at_failure_.reset();
  power_failed_.store(false);

  // The restarted machine sees the resolved image on its media, so a later
  // reopen of the file must read the same thing.
  if (mapped_file_ && stats.dirty_lines > 0 && ::msync(base_, size_, MS_SYNC) != 0) {
    logging::Error("pm: msync after simulated crash failed: {}", std::strerror(errno));
  }
  persist_budget_.store(UINT64_MAX, std::memory_order_relaxed);
  return stats;
}

void PmRegion::FreezePersistenceAfter(uint64_t n) {
  assert(durable_ != nullptr && "FreezePersistenceAfter requires RegionOptions::crash_model");
  // UINT64_MAX is the "unlimited" sentinel; n that large cannot be reached anyway.
  persist_budget_.store(n, std::memory_order_relaxed);
}

bool PmRegion::power_failed() const { return power_failed_.load(); }

bool PmRegion::persistence_frozen() const {
  return persist_budget_.load(std::memory_order_relaxed) == 0;
}

}  // namespace slip::pm
