// Background processes of a local cluster: spawn with output to a log file
// and a pid file, check, stop. `slip cluster up|down|status` builds on this;
// DIR/run/<name>.pid and DIR/logs/<name>.log are the whole state, so any
// later `slip` invocation can find and stop what an earlier one started.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace slip::cli {

struct ProcessInfo {
  std::string name;
  pid_t pid = 0;
  bool alive = false;
};

// Starts `argv` detached (own session), stdout and stderr appended to
// DIR/logs/<name>.log, pid in DIR/run/<name>.pid. AlreadyExists-style
// InvalidArgument if a live process already owns that name.
Result<pid_t> SpawnDetached(const std::string& dir, const std::string& name,
                            const std::vector<std::string>& argv);

// Every process with a pid file under DIR/run, alive or not.
std::vector<ProcessInfo> ListProcesses(const std::string& dir);

// SIGTERM, wait up to `grace`, then SIGKILL; removes the pid file.
Status StopProcess(const std::string& dir, const std::string& name,
                   std::chrono::milliseconds grace = std::chrono::seconds(5));

// SIGKILL at once (fault injection in tests); removes the pid file.
Status KillProcess(const std::string& dir, const std::string& name);

// The path of the running `slip` binary, to start more of it.
std::string SelfExecutable();

}  // namespace slip::cli
