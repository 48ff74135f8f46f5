// The lock of a region of libfabric's shm provider, watched from outside.
//
// shm (1.17) keeps a process-shared spinlock in each endpoint's region. A
// sender takes it in the *receiver's* region to post there, and the owner
// holds it in its own region while its progress works through the commands
// queued there. A process killed while it holds one leaves it held for
// good: every later post to that region spins in pthread_spin_lock for
// ever, inside libfabric, where no timeout of ours can end it. Seen here:
// one SIGKILLed node stopped the whole cluster (the rowan-kv@shm kill test
// timed out in CI; `slip soak --provider shm` wedged after ten kills, its
// client's executor spinning in fi_sendmsg on the dead node's region, whose
// lock word read -1).
//
// So before posting to a peer, an shm endpoint looks at the lock word of
// the peer's region through a read-only mapping of its header, and treats
// a held lock as FI_EAGAIN (ofi_data.cc): the op waits in the backlog, and
// if the holder is dead its deadline fails it as any op to a dead peer
// fails. The look and libfabric's own acquisition are not one atomic step:
// a holder that dies in the nanoseconds between them still wedges the
// sender. Nor does it cover a sender killed while it holds *our* region's
// lock (a short hold, per post): our own progress would then spin.
//
// The header's layout is libfabric's, not an API: region version 4 (1.17),
// the owner's pid at 4, the spinlock at 0x18 (glibc on x86: 1 free, 0 or
// less held), the region's total size at 0x28. Nothing is watched unless
// the running libfabric is 1.17 (1.18 keeps this header but also spins on
// a peer's lock in its completion path, which no look before a post can
// guard) and a spinlock of this process reads as above; nor is a region
// whose header does not read that way.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace slip::fabric::ofi_internal {

inline constexpr size_t kShmRegionLockOffset = 0x18;

class RegionLockWatch {
 public:
  // Maps the header of the region of the shm endpoint `address` (one of
  // ours, shm_regions.h) in `dir`. Null when there is nothing to watch: not
  // libfabric 1.17, the address is not ours, the region file is gone (its
  // owner died and was swept), or its header is not the layout above.
  static std::unique_ptr<RegionLockWatch> Open(std::string_view address, const std::string& dir = "/dev/shm");
  ~RegionLockWatch();
  RegionLockWatch(const RegionLockWatch&) = delete;
  RegionLockWatch& operator=(const RegionLockWatch&) = delete;

  // Whether some process holds the region's lock at this instant.
  bool Held() const { return __atomic_load_n(lock_, __ATOMIC_ACQUIRE) <= 0; }

 private:
  explicit RegionLockWatch(void* page)
      : page_(page), lock_(reinterpret_cast<const int*>(static_cast<const char*>(page) + kShmRegionLockOffset)) {}
  void* page_;  // the header page, mapped read-only
  const int* lock_;
};

}  // namespace slip::fabric::ofi_internal
