#include "fabric/ofi/ofi_test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "fabric/ofi/ofi_fabric.h"
#include "fabric/ofi/shm_regions.h"

extern char** environ;

namespace slip::fabric::testing {
namespace {

constexpr char kChildEnv[] = "SLIP_OFI_CHILD_PROVIDER";
constexpr char kChildFdEnv[] = "SLIP_OFI_CHILD_FD";

bool WriteAll(int fd, const void* p, size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    b += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* p, size_t n, std::chrono::steady_clock::time_point deadline) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    ssize_t r = read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// The child's whole life: serve one-sided operations until killed.
int ChildMain(const char* provider, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 1;
  auto fabric = OpenOfiFabric(FabricOptions{.provider = provider, .node_address = ""});
  if (!fabric.ok()) return 2;
  auto ep = (*fabric)->CreateEndpoint(EndpointOptions{.name = "child"});
  if (!ep.ok()) return 3;
  void* mem = mmap(nullptr, kChildRegionBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return 4;
  auto* bytes = static_cast<uint8_t*>(mem);
  for (size_t i = 0; i < kChildRegionBytes; ++i) bytes[i] = static_cast<uint8_t>(i % 251);
  auto mr = (*ep)->Register(mem, kChildRegionBytes,
                            Endpoint::kRemoteRead | Endpoint::kRemoteWrite |
                                Endpoint::kRemoteAtomic);
  if (!mr.ok()) return 5;
  const std::string addr = (*ep)->address();
  const uint32_t len = static_cast<uint32_t>(addr.size());
  if (!WriteAll(fd, &len, sizeof(len)) || !WriteAll(fd, addr.data(), addr.size()) ||
      !WriteAll(fd, &mr->remote, sizeof(mr->remote))) {
    return 6;
  }
  close(fd);
  // Long waits on purpose: operations must wake the endpoint (tcp: its wait
  // fd; shm: the back-off cap), not the end of this timeout.
  std::array<Completion, 16> out;
  for (;;) {
    (*ep)->Wait(std::chrono::seconds(1));
    (void)(*ep)->Poll(out);
  }
}

// Runs before main() in the exec'd child.
[[maybe_unused]] const bool kChildHook = [] {
  const char* provider = std::getenv(kChildEnv);
  const char* fd = std::getenv(kChildFdEnv);
  if (provider != nullptr && fd != nullptr) _exit(ChildMain(provider, std::atoi(fd)));
  return true;
}();

}  // namespace

void Pump::PollAll() {
  std::array<Completion, 32> out;
  for (Endpoint* ep : eps_) {
    size_t n = ep->Poll(out);
    auto& v = done_[ep];
    v.insert(v.end(), out.begin(), out.begin() + n);
  }
}

std::optional<Completion> Pump::Take(Endpoint* ep, uint64_t context,
                                     std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto& v = done_[ep];
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it->context == context) {
        Completion c = *it;
        v.erase(it);
        return c;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    PollAll();
  }
}

size_t Pump::Idle(Endpoint* ep, std::chrono::nanoseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
    PollAll();
    std::this_thread::sleep_for(100us);
  }
  return done_[ep].size();
}

Result<ChildTarget> ChildTarget::Spawn(const std::string& provider) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::IoError("pipe2");
  // Everything the child needs is prepared before fork: between fork and
  // exec only async-signal-safe calls are allowed.
  constexpr int kChildFd = 99;
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.push_back(std::string(kChildEnv) + "=" + provider);
  env_strings.push_back(std::string(kChildFdEnv) + "=" + std::to_string(kChildFd));
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  char self[] = "/proc/self/exe";
  char* argv[] = {self, nullptr};

  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Status::IoError("fork");
  }
  if (pid == 0) {
    if (dup2(fds[1], kChildFd) < 0) _exit(120);  // dup2 clears O_CLOEXEC
    execve(self, argv, envp.data());
    _exit(121);
  }
  close(fds[1]);
  ChildTarget t;
  t.pid_ = pid;
  t.provider_ = provider;
  const auto deadline = std::chrono::steady_clock::now() + kGenerous;
  uint32_t len = 0;
  bool ok = ReadAll(fds[0], &len, sizeof(len), deadline) && len > 0 && len < 4096;
  if (ok) {
    t.address_.resize(len);
    ok = ReadAll(fds[0], t.address_.data(), len, deadline) &&
         ReadAll(fds[0], &t.remote_, sizeof(t.remote_), deadline);
  }
  close(fds[0]);
  if (!ok) return Status::IoError("child target did not publish its address");
  return t;
}

ChildTarget::ChildTarget(ChildTarget&& o) noexcept
    : pid_(o.pid_),
      provider_(std::move(o.provider_)),
      address_(std::move(o.address_)),
      remote_(o.remote_) {
  o.pid_ = -1;
}

ChildTarget::~ChildTarget() { Kill(); }

void ChildTarget::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  // SIGKILL skips shm's cleanup handlers: its region files stay in
  // /dev/shm until a sweep (reaped, the child holds no lock any more).
  if (provider_ == "shm") ofi_internal::SweepOrphanShmRegions("/dev/shm");
}

}  // namespace slip::fabric::testing
