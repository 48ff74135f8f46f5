#include "fabric/ofi/region_lock.h"

#include <fcntl.h>
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

}  // namespace

std::unique_ptr<RegionLockWatch> RegionLockWatch::Open(std::string_view address, const std::string& dir) {
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
  std::unique_ptr<RegionLockWatch> watch(new RegionLockWatch(page, kHeaderBytes));
  const bool known = Field<uint8_t>(page, 0) == kRegionVersion && Field<int32_t>(page, kPidOffset) > 0 &&
                     Field<uint64_t>(page, kTotalSizeOffset) == static_cast<uint64_t>(st.st_size) &&
                     Field<int32_t>(page, kShmRegionLockOffset) <= 1;
  if (!known) return nullptr;
  return watch;
}

RegionLockWatch::~RegionLockWatch() { ::munmap(page_, len_); }

}  // namespace slip::fabric::ofi_internal
