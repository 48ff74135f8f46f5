#include "fabric/ofi/region_lock.h"

#include <fcntl.h>
#include <pthread.h>
#include <rdma/fabric.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "fabric/ofi/shm_regions.h"

namespace slip::fabric::ofi_internal {
namespace {

constexpr uint8_t kRegionVersion = 4;  // libfabric 1.17's SMR_VERSION
constexpr size_t kPidOffset = 4;
constexpr size_t kTotalSizeOffset = 0x28;
constexpr size_t kHeaderBytes = 4096;

template <typename T>
T Field(const void* page, size_t offset) {
  T v;
  std::memcpy(&v, static_cast<const char*>(page) + offset, sizeof v);
  return v;
}

// Whether what this file assumes holds in this process: libfabric 1.17
// (1.18 keeps the header, but its completion path also spins on a peer's
// lock, which no look before a post can guard), and glibc's spinlock word
// reading 1 free and 0 or less held.
bool Applies() {
  static const bool applies = [] {
    const uint32_t v = fi_version();
    if (FI_MAJOR(v) != 1 || FI_MINOR(v) != 17) return false;
    pthread_spinlock_t lock;
    if (pthread_spin_init(&lock, PTHREAD_PROCESS_SHARED) != 0) return false;
    static_assert(sizeof(pthread_spinlock_t) == sizeof(int));  // glibc: a volatile int
    const bool free_is_one = lock == 1;
    pthread_spin_lock(&lock);
    const bool held_is_not_positive = lock <= 0;
    pthread_spin_unlock(&lock);
    pthread_spin_destroy(&lock);
    return free_is_one && held_is_not_positive;
  }();
  return applies;
}

}  // namespace

std::unique_ptr<RegionLockWatch> RegionLockWatch::Open(std::string_view address, const std::string& dir) {
  if (!Applies()) return nullptr;
  auto name = OurRegionName(address);
  if (!name.ok()) return nullptr;
  const std::string path = dir + "/" + *name;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st{};
  void* page = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kHeaderBytes) {
    page = ::mmap(nullptr, kHeaderBytes, PROT_READ, MAP_SHARED, fd, 0);
  }
  ::close(fd);
  if (page == MAP_FAILED) return nullptr;
  std::unique_ptr<RegionLockWatch> watch(new RegionLockWatch(page));
  const bool known = Field<uint8_t>(page, 0) == kRegionVersion && Field<int32_t>(page, kPidOffset) > 0 &&
                     Field<uint64_t>(page, kTotalSizeOffset) == static_cast<uint64_t>(st.st_size) &&
                     Field<int32_t>(page, kShmRegionLockOffset) <= 1;
  if (!known) return nullptr;
  return watch;
}

RegionLockWatch::~RegionLockWatch() { ::munmap(page_, kHeaderBytes); }

}  // namespace slip::fabric::ofi_internal
