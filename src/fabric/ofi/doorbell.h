// Doorbells for endpoints of libfabric's shm provider, which (1.17) has no
// wait object: without one, a parked executor learns of a message only when
// its park times out (`max_park`, 1 ms), and every hop of a request waited
// about that long (834 ops/s at one thread, a read's median 1.15 ms).
//
// An shm endpoint of ours binds a unix datagram socket named after its
// address, in the directory of its region files, and parks on it. A peer
// that posts to it (a send, or a one-sided operation the target's progress
// serves) sends it a byte after the post. Before blocking, the endpoint
// drains the socket and then looks for work once more, so a byte sent
// after that look wakes it and one sent before was for work the look
// found. (A datagram socket rather than a FIFO: a FIFO whose reader is
// gone raises SIGPIPE in the writer; send(MSG_NOSIGNAL) does not.)
//
// The bytes say only "look": a lost one costs latency, never an event. They
// do not cover everything: the completions of this endpoint's own
// operations come back through its response queue when the *peer* makes
// progress, and the peer cannot ring (shm's per-peer transmit endpoints hide
// the sender's address); nor does a protocol step shm takes without a new
// post (the later pieces of a message segmented when cross-memory attach is
// unavailable). So an executor parked on a doorbell still polls every
// max_park (Endpoint::wait_fd_sees_all() is false).
//
// The socket's name starts with the endpoint's region name, so the sweep of a
// killed process's regions (shm_regions.h) removes it too.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace slip::fabric::ofi_internal {

// The doorbell's path for the shm endpoint `address` (as fi_getname gives
// it, "fi_shm://" or not), in `dir`. InvalidArgument unless the address is
// one of ours (its name claimed by ClaimShmName: "slip-shm.") and holds no
// character that could leave `dir`.
Result<std::string> DoorbellPath(std::string_view address, const std::string& dir);

class Doorbell {
 public:
  // Binds the socket for `address` (removing a stale file of that name),
  // non-blocking.
  static Result<std::unique_ptr<Doorbell>> Create(std::string_view address, const std::string& dir = "/dev/shm");
  ~Doorbell();  // closes and removes the socket
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  // Readable while rung.
  int fd() const { return fd_; }
  // Empties it. Call before the last look for work before blocking.
  void Drain();

 private:
  Doorbell(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

// A peer's doorbell, connected for ringing, or -1 when it has none (not one
// of our shm endpoints, or gone: a socket nobody has bound refuses).
int OpenDoorbell(std::string_view address, const std::string& dir = "/dev/shm");

// Sends one byte to a bell OpenDoorbell gave. A full queue is rung already.
void Ring(int bell);

}  // namespace slip::fabric::ofi_internal
