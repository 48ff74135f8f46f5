#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace slip::subprocess {
namespace {

Status Errno(const std::string& what) { return Status::IoError(what + ": " + std::strerror(errno)); }

// In the child, before exec: stdin from /dev/null, stdout/stderr to `out`
// (if any). Async-signal-safe calls only.
void RedirectAndExec(char* const* args, int out) {
  const int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, STDIN_FILENO);
  if (out >= 0) {
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
  }
  ::execv(args[0], args);
  static constexpr char kMsg[] = "exec failed\n";
  (void)!::write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  ::_exit(127);
}

struct ProcState {
  char state = '?';
  pid_t parent = 0;
};

ProcState ReadState(pid_t pid) {
  // /proc/<pid>/stat: "pid (comm) S ppid ...": the state follows the last ')'.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  ProcState s;
  if (!std::getline(stat, line)) return s;
  const size_t close_paren = line.rfind(')');
  if (close_paren == std::string::npos || close_paren + 2 >= line.size()) return s;
  std::istringstream rest(line.substr(close_paren + 2));
  rest >> s.state >> s.parent;
  return s;
}

void WaitGone(pid_t pid) {
  while (Alive(pid)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace

Result<pid_t> Spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return Status::InvalidArgument("no command to run");
  std::vector<char*> args;
  for (const auto& a : o.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  int out = o.output_fd;
  bool own_out = false;
  if (!o.output.empty()) {
    out = ::open(o.output.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (o.truncate_output ? O_TRUNC : O_APPEND), 0644);
    if (out < 0) return Errno("cannot open " + o.output);
    own_out = true;
  }
  auto close_out = [&] {
    if (own_out) ::close(out);
  };

  if (o.lifetime == Lifetime::kChild) {
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      close_out();
      return Errno("fork");
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
      RedirectAndExec(args.data(), out);
    }
    close_out();
    return pid;
  }

  // Detached: a middle process starts a new session, forks the real child,
  // reports its pid on a pipe and exits at once, so the child's parent is
  // init (or the nearest subreaper), never the caller.
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    close_out();
    return Errno("pipe");
  }
  const pid_t middle = ::fork();
  if (middle < 0) {
    close_out();
    ::close(report[0]);
    ::close(report[1]);
    return Errno("fork");
  }
  if (middle == 0) {
    ::setsid();  // survives the terminal and the command that started it
    const pid_t child = ::fork();
    if (child != 0) {
      (void)!::write(report[1], &child, sizeof(child));
      ::_exit(child < 0 ? 1 : 0);
    }
    RedirectAndExec(args.data(), out);
  }
  ::close(report[1]);
  pid_t pid = -1;
  ssize_t got;
  do {
    got = ::read(report[0], &pid, sizeof(pid));
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  int status = 0;
  while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  close_out();
  if (got != static_cast<ssize_t>(sizeof(pid)) || pid <= 0) {
    return Status::IoError("could not start " + o.argv[0]);
  }
  return pid;
}

bool Alive(pid_t pid) {
  if (pid <= 0) return false;
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) == pid) return false;  // our child, now reaped
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  const ProcState st = ReadState(pid);
  if (st.state != 'Z') return true;
  // It exited. If it is ours, reap it now: a multi-threaded process shows
  // "Z" while its other threads still exit, before waitpid can take it, so
  // wait for it (it is on its way out) rather than leave a zombie behind.
  if (st.parent == ::getpid()) {
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return false;
}

Result<int> Wait(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return Errno("waitpid " + std::to_string(pid));
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Timeout("process " + std::to_string(pid) + " still runs");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

Status Stop(pid_t pid, std::chrono::milliseconds grace) {
  if (!Alive(pid)) return Status::Ok();
  ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (Alive(pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (Alive(pid)) ::kill(pid, SIGKILL);
  WaitGone(pid);
  return Status::Ok();
}

Status Kill(pid_t pid) {
  if (!Alive(pid)) return Status::NotFound("process " + std::to_string(pid) + " is not running");
  ::kill(pid, SIGKILL);
  WaitGone(pid);
  return Status::Ok();
}

}  // namespace slip::subprocess
