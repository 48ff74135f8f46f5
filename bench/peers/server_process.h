// Servers the benchmark starts for itself (redis-server, memcached): a child
// process that is stopped when its owner goes away, on every path out —
// normal end, error return, or the harness itself dying (the child gets
// SIGKILL from the kernel via PR_SET_PDEATHSIG).
//
// Also the small pieces around it: a scratch directory removed on
// destruction, free loopback ports, and a process's CPU time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace slip::bench {

// `name` on PATH, or NotFound with a one-line hint on how to install it.
Result<std::string> FindBinary(const std::string& name, const std::string& debian_package);

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  static Result<std::unique_ptr<TempDir>> Create(const std::string& prefix);
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

// A database directory of a fresh run: `<dir>/<name>` emptied, or (no
// `dir`) a new temporary directory kept alive by `*tmp`.
Result<std::string> FreshDatabaseDir(const std::string& dir, const std::string& name, std::unique_ptr<TempDir>* tmp);

// `n` distinct TCP ports that were free on 127.0.0.1 a moment ago (the
// kernel's choice for port 0). Another process may still take one before
// the server binds it; starting then fails with a clear error.
Result<std::vector<uint16_t>> FreeLoopbackPorts(int n);

// Waits until something accepts TCP connections on 127.0.0.1:port.
Status WaitForPort(uint16_t port, double timeout_seconds);

class ServerProcess {
 public:
  // Runs argv (argv[0] an absolute path) with stdout and stderr appended to
  // `log_path`. The child dies with the thread that started it (PDEATHSIG),
  // so start servers from a thread that outlives them (main, or the test).
  static Result<std::unique_ptr<ServerProcess>> Start(const std::vector<std::string>& argv,
                                                      const std::string& log_path);
  // SIGTERM, then SIGKILL if it has not exited after 3 s; always reaped.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  // Still running (not exited or killed)?
  bool Alive();
  // CPU time of all its live threads so far, in microseconds, from
  // /proc/PID/task/*/schedstat (nanosecond run time). Threads that already
  // exited are not included; servers keep theirs for their lifetime.
  Result<double> CpuUs() const;
  // The last lines of its log, for error messages.
  std::string LogTail() const;

 private:
  ServerProcess(pid_t pid, std::string name, std::string log) : pid_(pid), name_(std::move(name)), log_(std::move(log)) {}
  pid_t pid_;
  std::string name_, log_;
  bool reaped_ = false;
};

// CPU of every thread of this process whose name starts with `prefix`
// (e.g. "rocksdb:" for RocksDB's background threads), microseconds.
double OwnThreadsCpuUs(const std::string& prefix);

}  // namespace slip::bench
