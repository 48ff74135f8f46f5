#include "fabric/ofi/shm_regions.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <vector>

namespace slip::fabric::ofi_internal {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "slip-shm.";
constexpr std::string_view kLockSuffix = ".lock";

// This process's claims by directory; their locks' fds stay open until
// exit. Built on first use: a test's child process claims from a static
// initializer (ofi_test_util.cc), maybe before this file's would run.
struct Claims {
  std::mutex mu;
  std::map<std::string, std::string> by_dir;
  pid_t owner = 0;  // set with the exit handler; a forked child that exits must not drop its parent's claims
};
Claims& TheClaims() {
  static Claims* c = new Claims();  // never destroyed: the exit handler reads it
  return *c;
}

// Removes the regions and the lock file of the claim `stem` if nobody holds its lock.
size_t RemoveIfOrphan(const fs::path& dir, const std::string& stem) {
  const fs::path lock = dir / (stem + std::string(kLockSuffix));
  const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t removed = 0;
  struct stat held{}, named{};
  // Holding the lock, the file must still be the one of that name: another
  // sweeper may have removed it (and its owner's regions) meanwhile.
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::fstat(fd, &held) == 0 && ::stat(lock.c_str(), &named) == 0 &&
      held.st_ino == named.st_ino && held.st_dev == named.st_dev) {
    const std::string regions = stem + ":";
    std::error_code ec;
    std::vector<fs::path> doomed;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.path().filename().string().starts_with(regions)) doomed.push_back(e.path());
    }
    for (const fs::path& p : doomed) removed += ::unlink(p.c_str()) == 0 ? 1 : 0;
    removed += ::unlink(lock.c_str()) == 0 ? 1 : 0;  // last: a crash here leaves it to the next sweep
  }
  ::close(fd);
  return removed;
}

}  // namespace

Result<std::string> OurRegionName(std::string_view address) {
  while (!address.empty() && address.back() == '\0') address.remove_suffix(1);
  for (std::string_view scheme : {"fi_shm://", "fi_ns://"}) {
    if (address.starts_with(scheme)) address.remove_prefix(scheme.size());
  }
  if (!address.starts_with(kPrefix) ||
      address.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") !=
          std::string_view::npos) {
    return Status::InvalidArgument("not an shm endpoint of ours");
  }
  return std::string(address);
}

size_t SweepOrphanShmRegions(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> stems;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(kPrefix) && name.ends_with(kLockSuffix)) {
      stems.push_back(name.substr(0, name.size() - kLockSuffix.size()));
    }
  }
  size_t removed = 0;
  for (const std::string& stem : stems) removed += RemoveIfOrphan(dir, stem);
  return removed;
}

Result<std::string> ClaimShmName(const std::string& dir) {
  Claims& claims = TheClaims();
  std::lock_guard lock(claims.mu);
  if (auto it = claims.by_dir.find(dir); it != claims.by_dir.end()) return it->second;
  SweepOrphanShmRegions(dir);
  // The nonce keeps a recycled pid from taking over a dead process's name.
  const std::string stem = std::string(kPrefix) + std::to_string(::getpid()) + "." +
                           std::to_string(std::random_device{}() & 0xFFFFFFu);
  // Locked before it is visible under its .lock name (rename is atomic), so
  // a sweeper never sees this claim unheld.
  const std::string tmp = dir + "/" + stem + ".claim";
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("shm: cannot create " + tmp + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX) != 0 || ::rename(tmp.c_str(), (dir + "/" + stem + std::string(kLockSuffix)).c_str()) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::IoError("shm: cannot claim " + stem + " in " + dir + ": " + std::strerror(err));
  }
  // A clean exit leaves nothing: by then the provider has unlinked the
  // regions (it does when an endpoint closes, and at exit); the doorbells
  // (doorbell.h) of endpoints still open go here, before the lock that
  // would let a sweep find them.
  if (claims.owner == 0) {
    claims.owner = ::getpid();
    std::atexit([] {
      const Claims& c = TheClaims();
      if (c.owner != ::getpid()) return;
      for (const auto& [d, s] : c.by_dir) {
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(d, ec)) {
          const std::string name = e.path().filename().string();
          if (name.starts_with(s + ":") && name.ends_with(".bell")) ::unlink(e.path().c_str());
        }
        ::unlink((d + "/" + s + std::string(kLockSuffix)).c_str());
      }
    });
  }
  claims.by_dir[dir] = stem;
  return stem;
}

}  // namespace slip::fabric::ofi_internal
