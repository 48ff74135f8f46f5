#include "cli/processes.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

namespace slip::cli {
namespace {

namespace fs = std::filesystem;

std::string PidPath(const std::string& dir, const std::string& name) {
  return dir + "/run/" + name + ".pid";
}

pid_t ReadPid(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

bool Alive(pid_t pid) {
  if (pid <= 0) return false;
  // Reap it if it is our own exited child, so it does not linger as a zombie.
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == pid) return false;
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  // A zombie whose parent does not reap it (a container's pid 1 may not) is
  // dead all the same: /proc/<pid>/stat says "Z" after the name.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t close_paren = line.rfind(')');
  return close_paren == std::string::npos || close_paren + 2 >= line.size() || line[close_paren + 2] != 'Z';
}

}  // namespace

std::string SelfExecutable() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("slip") : p.string();
}

Result<pid_t> SpawnDetached(const std::string& dir, const std::string& name,
                            const std::vector<std::string>& argv) {
  std::error_code ec;
  fs::create_directories(dir + "/run", ec);
  fs::create_directories(dir + "/logs", ec);
  if (ec) return Status::IoError("cannot create " + dir + "/run and /logs: " + ec.message());
  const std::string pid_path = PidPath(dir, name);
  if (Alive(ReadPid(pid_path))) {
    return Status::InvalidArgument(name + " is already running (pid " +
                                   std::to_string(ReadPid(pid_path)) + ")");
  }
  const std::string log_path = dir + "/logs/" + name + ".log";
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return Status::IoError("cannot open " + log_path + ": " + std::strerror(errno));

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Double fork: the server's parent is then init (or the nearest
  // subreaper), never the caller, so a long-lived caller — a test, a
  // supervisor — need not reap it, and `slip cluster kill` from any process
  // sees it go. The middle process reports the server's pid on a pipe.
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) {
    ::close(log);
    return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t middle = fork();
  if (middle < 0) {
    ::close(log);
    ::close(report[0]);
    ::close(report[1]);
    return Status::IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (middle == 0) {
    setsid();  // survives the terminal and the `slip cluster up` that started it
    const pid_t server = fork();
    if (server != 0) {
      (void)!write(report[1], &server, sizeof(server));
      _exit(server < 0 ? 1 : 0);
    }
    const int null = ::open("/dev/null", O_RDONLY);
    dup2(null, 0);
    dup2(log, 1);
    dup2(log, 2);
    execv(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  ::close(report[1]);
  pid_t pid = -1;
  const ssize_t got = read(report[0], &pid, sizeof(pid));
  ::close(report[0]);
  int status = 0;
  while (waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  if (got != static_cast<ssize_t>(sizeof(pid)) || pid <= 0) {
    ::close(log);
    return Status::IoError("could not start " + name);
  }
  ::close(log);
  std::ofstream out(pid_path, std::ios::trunc);
  out << pid << "\n";
  if (!out) return Status::IoError("cannot write " + pid_path);
  return pid;
}

std::vector<ProcessInfo> ListProcesses(const std::string& dir) {
  std::vector<ProcessInfo> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir + "/run", ec)) {
    if (e.path().extension() != ".pid") continue;
    ProcessInfo p;
    p.name = e.path().stem().string();
    p.pid = ReadPid(e.path().string());
    p.alive = Alive(p.pid);
    out.push_back(p);
  }
  std::sort(out.begin(), out.end(), [](const ProcessInfo& a, const ProcessInfo& b) { return a.name < b.name; });
  return out;
}

Status StopProcess(const std::string& dir, const std::string& name, std::chrono::milliseconds grace) {
  const std::string path = PidPath(dir, name);
  const pid_t pid = ReadPid(path);
  if (Alive(pid)) {
    kill(pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (Alive(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (Alive(pid)) kill(pid, SIGKILL);
    while (Alive(pid)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::error_code ec;
  fs::remove(path, ec);
  return Status::Ok();
}

Status KillProcess(const std::string& dir, const std::string& name) {
  const std::string path = PidPath(dir, name);
  const pid_t pid = ReadPid(path);
  if (!Alive(pid)) return Status::NotFound(name + " is not running");
  kill(pid, SIGKILL);
  while (Alive(pid)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::error_code ec;
  fs::remove(path, ec);
  return Status::Ok();
}

}  // namespace slip::cli
