// Starting and stopping other programs: the one place that forks.
//
//   auto pid = subprocess::Spawn({.argv = {"/usr/bin/redis-server", ...},
//                                 .output = dir + "/redis.log"});
//   ...
//   subprocess::Stop(*pid, std::chrono::seconds(3));   // SIGTERM, then SIGKILL; reaped
//
// Two lifetimes:
//   kChild     the child gets SIGKILL from the kernel when the thread that
//              spawned it exits (PR_SET_PDEATHSIG): servers a benchmark or a
//              test starts for itself never outlive it, on any path out.
//              Spawn from a thread that outlives the child (main, the test).
//   kDetached  double fork: the child's parent becomes init (or the nearest
//              subreaper) and it has its own session, so it survives the
//              caller — cluster processes started by `slip cluster up`. A
//              long-lived caller need not reap it, and any process can see
//              it die.
// Everything the child needs is prepared before fork: between fork and exec
// the child of a multi-threaded parent makes only async-signal-safe calls.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace slip::subprocess {

enum class Lifetime : uint8_t { kChild, kDetached };

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0]: the program's path (no PATH search)
  // stdout and stderr go to this file (appended, or truncated first) ...
  std::string output;
  bool truncate_output = false;
  // ... or to this descriptor (e.g. a pipe's write end); -1: inherited.
  int output_fd = -1;
  Lifetime lifetime = Lifetime::kChild;
};

// The child's pid. stdin is /dev/null. InvalidArgument for an empty argv,
// IoError if the output file cannot be opened or fork fails. An exec
// failure shows as the child exiting with status 127 (kChild) or as a
// process that is soon not Alive (kDetached).
Result<pid_t> Spawn(const SpawnOptions& options);

// Whether `pid` still runs. Reaps it if it is an exited child of this
// process; a zombie nobody reaps (a container's pid 1 may not) counts as dead.
bool Alive(pid_t pid);

// Waits for this process's child `pid` to exit, up to `timeout`; its wait
// status (as waitpid gives it). Timeout if it still runs.
Result<int> Wait(pid_t pid, std::chrono::milliseconds timeout);

// SIGTERM, up to `grace` for it to exit, then SIGKILL; returns once it is
// gone (reaped if it is our child). OK if it was not running.
Status Stop(pid_t pid, std::chrono::milliseconds grace);

// SIGKILL now; returns once it is gone (reaped if it is our child).
// NotFound if it was not running.
Status Kill(pid_t pid);

}  // namespace slip::subprocess
