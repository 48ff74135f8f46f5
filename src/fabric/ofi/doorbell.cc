#include "fabric/ofi/doorbell.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fabric/ofi/shm_regions.h"

namespace slip::fabric::ofi_internal {
namespace {

Result<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof(sa.sun_path)) return Status::InvalidArgument("shm doorbell path too long: " + path);
  std::memcpy(sa.sun_path, path.data(), path.size());
  return sa;
}

}  // namespace

Result<std::string> DoorbellPath(std::string_view address, const std::string& dir) {
  auto name = OurRegionName(address);
  if (!name.ok()) return Status::InvalidArgument(name.status().message() + ": no doorbell");
  return dir + "/" + *name + ".bell";
}

Result<std::unique_ptr<Doorbell>> Doorbell::Create(std::string_view address, const std::string& dir) {
  SLIP_ASSIGN_OR_RETURN(std::string path, DoorbellPath(address, dir));
  SLIP_ASSIGN_OR_RETURN(sockaddr_un sa, SocketAddress(path));
  // A file of that name is a dead endpoint's: the address, and so the
  // name, belongs to this endpoint now.
  ::unlink(path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("shm doorbell: socket: ") + std::strerror(errno));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IoError("shm doorbell: bind " + path + ": " + std::strerror(err));
  }
  return std::unique_ptr<Doorbell>(new Doorbell(std::move(path), fd));
}

Doorbell::~Doorbell() {
  ::close(fd_);
  ::unlink(path_.c_str());
}

void Doorbell::Drain() {
  // Each ring is a datagram: up to 64 a call. Peers ring on every post,
  // busy receiver or not, so a queue can hold hundreds.
  constexpr unsigned kBatch = 64;
  char bytes[kBatch];
  iovec iov[kBatch];
  mmsghdr msgs[kBatch] = {};
  for (unsigned i = 0; i < kBatch; ++i) {
    iov[i] = {&bytes[i], 1};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  // Bounded: peers ringing all along cannot keep it here.
  for (int round = 0; round < 64; ++round) {
    if (::recvmmsg(fd_, msgs, kBatch, MSG_DONTWAIT, nullptr) < static_cast<int>(kBatch)) return;
  }
}

int OpenDoorbell(std::string_view address, const std::string& dir) {
  auto path = DoorbellPath(address, dir);
  if (!path.ok()) return -1;
  auto sa = SocketAddress(*path);
  if (!sa.ok()) return -1;
  // Connected once: a ring is then one send. Connecting to a path that is
  // no socket, or one nobody has bound (a dead endpoint's leftover), fails.
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*sa), sizeof(*sa)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void Ring(int bell) {
  const char one = 1;
  // EAGAIN: its queue is full, so it is rung already. ECONNREFUSED: its
  // endpoint is gone. Neither matters; MSG_NOSIGNAL: no SIGPIPE either.
  [[maybe_unused]] ssize_t n = ::send(bell, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace slip::fabric::ofi_internal
