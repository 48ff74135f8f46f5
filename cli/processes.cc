#include "cli/processes.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/subprocess.h"

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
  if (subprocess::Alive(ReadPid(pid_path))) {
    return Status::InvalidArgument(name + " is already running (pid " +
                                   std::to_string(ReadPid(pid_path)) + ")");
  }
  SLIP_ASSIGN_OR_RETURN(pid_t pid, subprocess::Spawn({.argv = argv,
                                                      .output = dir + "/logs/" + name + ".log",
                                                      .lifetime = subprocess::Lifetime::kDetached}));
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
    p.alive = subprocess::Alive(p.pid);
    out.push_back(p);
  }
  std::sort(out.begin(), out.end(), [](const ProcessInfo& a, const ProcessInfo& b) { return a.name < b.name; });
  return out;
}

Status StopProcess(const std::string& dir, const std::string& name, std::chrono::milliseconds grace) {
  const std::string path = PidPath(dir, name);
  const pid_t pid = ReadPid(path);
  SLIP_RETURN_IF_ERROR(subprocess::Stop(pid, grace));
  std::error_code ec;
  fs::remove(path, ec);
  return Status::Ok();
}

Status KillProcess(const std::string& dir, const std::string& name) {
  const std::string path = PidPath(dir, name);
  const pid_t pid = ReadPid(path);
  if (!subprocess::Kill(pid).ok()) return Status::NotFound(name + " is not running");
  std::error_code ec;
  fs::remove(path, ec);
  return Status::Ok();
}

}  // namespace slip::cli
