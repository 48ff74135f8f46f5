// Region files of libfabric's shm provider that outlive their process.
//
// shm keeps each endpoint's receive region in a file of /dev/shm named after
// the endpoint: its source address without "fi_shm://", then ":<uid>:<n>"
// (16 MiB each in libfabric 1.17; a slip server has a dozen). It unlinks
// them at exit and from its handlers of catchable signals, so a process
// killed with SIGKILL (a crash test, the OOM killer, `kill -9` of a node)
// leaves them behind for good: /dev/shm filled by ~190 MiB per killed node.
//
// So each process claims a source name of its own, "slip-shm.<pid>.<nonce>",
// and holds an flock on "<dir>/<name>.lock" for its life: the kernel drops
// the lock however the process ends, even in another pid namespace, which a
// liveness check by pid would get wrong. A lock file nobody holds marks the
// regions of a process that is gone, and the next process to claim a name
// removes them. Names without a lock file (other programs', or ours from
// before) are never touched.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace slip::fabric::ofi_internal {

// This process's shm source name for regions in `dir`, claimed on the
// first call (which also sweeps `dir`, as below); the same name after.
// IoError if the lock file cannot be made (then shm endpoints cannot be
// opened either). A process killed between creating its lock file (as
// "<name>.claim") and locking it leaves that empty file: never swept.
Result<std::string> ClaimShmName(const std::string& dir = "/dev/shm");

// The region file name of the shm endpoint `address` (as fi_getname gives
// it, with "fi_shm://" or not): InvalidArgument unless the name is one of
// ours (claimed by ClaimShmName: "slip-shm.") and holds no character that
// could leave a directory.
Result<std::string> OurRegionName(std::string_view address);

// Removes, in `dir`, the region files and the lock file of every claimed
// name whose lock nobody holds. Returns how many files it removed.
size_t SweepOrphanShmRegions(const std::string& dir);

}  // namespace slip::fabric::ofi_internal
