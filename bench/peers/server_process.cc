#include "bench/peers/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/subprocess.h"

namespace slip::bench {
namespace fs = std::filesystem;

Result<std::string> FindBinary(const std::string& name, const std::string& debian_package) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return Status::NotFound(name + " not found on PATH (Debian package " + debian_package +
                          "; scripts/install-deps installs it)");
}

Result<std::unique_ptr<TempDir>> TempDir::Create(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + prefix + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    return Status::IoError("mkdtemp " + tmpl + ": " + std::strerror(errno));
  return std::unique_ptr<TempDir>(new TempDir(tmpl));
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

Result<std::vector<uint16_t>> FreeLoopbackPorts(int n) {
  // Hold every socket open until all are chosen, so the ports are distinct.
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  Status err;
  for (int i = 0; i < n && err.ok(); ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
      err = Status::IoError(std::string("socket: ") + std::strerror(errno));
      break;
    }
    fds.push_back(fd);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      err = Status::IoError(std::string("bind 127.0.0.1:0: ") + std::strerror(errno));
      break;
    }
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds) ::close(fd);
  if (!err.ok()) return err;
  return ports;
}

Status WaitForPort(uint16_t port, double timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  while (true) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (ok) return Status::Ok();
    if (std::chrono::steady_clock::now() > deadline)
      return Status::Timeout("nothing listens on 127.0.0.1:" + std::to_string(port) + " after " +
                             std::to_string(timeout_seconds) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Result<std::unique_ptr<ServerProcess>> ServerProcess::Start(const std::vector<std::string>& argv,
                                                            const std::string& log_path) {
  if (argv.empty()) return Status::InvalidArgument("no command");
  SLIP_ASSIGN_OR_RETURN(pid_t pid, subprocess::Spawn({.argv = argv, .output = log_path}));
  return std::unique_ptr<ServerProcess>(new ServerProcess(pid, fs::path(argv[0]).filename(), log_path));
}

bool ServerProcess::Alive() {
  if (!reaped_ && !subprocess::Alive(pid_)) reaped_ = true;
  return !reaped_;
}

ServerProcess::~ServerProcess() {
  if (!reaped_) (void)subprocess::Stop(pid_, std::chrono::seconds(3));
}

namespace {

// Sum of the first field of /proc/<pid>/task/*/schedstat (ns on CPU),
// for threads whose comm starts with `prefix`.
Result<double> TasksCpuUs(const std::string& proc_dir, const std::string& prefix) {
  std::error_code ec;
  fs::directory_iterator it(proc_dir + "/task", ec);
  if (ec) return Status::IoError("read " + proc_dir + "/task: " + ec.message());
  double ns = 0;
  for (const auto& task : it) {
    if (!prefix.empty()) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name.rfind(prefix, 0) != 0) continue;
    }
    std::ifstream f(task.path() / "schedstat");
    double run_ns = 0;
    if (f >> run_ns) ns += run_ns;
  }
  return ns / 1e3;
}

}  // namespace

Result<double> ServerProcess::CpuUs() const { return TasksCpuUs("/proc/" + std::to_string(pid_), ""); }

double OwnThreadsCpuUs(const std::string& prefix) {
  auto r = TasksCpuUs("/proc/self", prefix);
  return r.ok() ? *r : 0;
}

std::string ServerProcess::LogTail() const {
  std::ifstream f(log_);
  std::string line, last;
  std::vector<std::string> lines;
  while (std::getline(f, line)) {
    lines.push_back(line);
    if (lines.size() > 3) lines.erase(lines.begin());
  }
  for (auto& l : lines) last += (last.empty() ? "" : " | ") + l;
  return last.empty() ? "(empty log " + log_ + ")" : last;
}

Result<std::string> FreshDatabaseDir(const std::string& dir, const std::string& name, std::unique_ptr<TempDir>* tmp) {
  if (dir.empty()) {
    SLIP_ASSIGN_OR_RETURN(*tmp, TempDir::Create("slip-bench-" + name + "-"));
    return (*tmp)->path();
  }
  // A fresh database per run, so results do not depend on earlier runs.
  const std::string fresh = dir + "/" + name;
  std::error_code ec;
  std::filesystem::remove_all(fresh, ec);
  return fresh;
}

}  // namespace slip::bench
