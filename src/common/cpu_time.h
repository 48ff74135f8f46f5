// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID: user and system),
// in nanoseconds: what a job's cost is measured in when its thread is
// shared with nothing else for its duration.
#pragma once

#include <time.h>

#include <cstdint>

namespace slip {

inline uint64_t ThreadCpuNanos() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace slip
