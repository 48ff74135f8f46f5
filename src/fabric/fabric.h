// fabric/: the one verbs-shaped API every Slipstream protocol is written
// against, so the same replication code runs over RDMA NICs, TCP, shared
// memory (libfabric providers) and the deterministic simulator.
//
// Model (deliberately close to libfabric FI_EP_RDM and to RDMA RC verbs):
//   * A Fabric is a provider instance ("sim", "shm", "tcp", "verbs").
//   * An Endpoint is an addressable, reliable, connectionless port with one
//     completion queue. A "connection" is the ordered pair (local endpoint,
//     PeerId): operations on one connection are placed at the target in the
//     order they were posted (FIFO); there is no order across connections.
//   * Memory is registered with an endpoint; Register() returns a
//     RemoteMemory descriptor (address + key + length) that a peer uses to
//     target it with one-sided Write/Read/CompareSwap/FetchAdd. These
//     operations involve no handler on the target: no receiver worker thread
//     runs (software providers need the target's NIC thread to poll its
//     endpoint; see Endpoint::Poll).
//   * Two-sided Send lands in a receive buffer posted by the target:
//       - PostRecv: one message per buffer.
//       - PostMultiRecv: a *multi-receive buffer*. Messages from any number
//         of senders are placed back to back, each at the next 64-byte
//         aligned offset (the stride), in the order the target processes
//         them; a message is never split across buffers. A buffer retires
//         when the next message MAY not fit: at the latest when one does not
//         fit, possibly earlier, once its free tail is below the provider's
//         largest multi-receive message (ofi: OfiOptions::
//         max_multi_recv_message; sim: exactly when the next one does not
//         fit). The next posted buffer is used, none is skipped, and the old
//         tail stays unwritten. (Contract: fabric/contract/contract_test_suite.h.)
//         Each placed message produces one completion whose `data` points
//         at it; `len` is the *padded* length (a multiple of 64). When a
//         buffer can take no more, a completion with `buffer_released` set
//         reports it (it may coincide with the last message's completion).
//       - No buffer posted: the message is not lost; it is placed once a
//         buffer is posted (verbs/sim: receiver-not-ready retry by the
//         sender; shm/tcp: the provider holds it). The sender's completion
//         may be delayed until then.
//   * Completion semantics:
//       - Send/Write complete when the target NIC has accepted the data. This
//         is NOT durability: as on RDMA, a Write's completion can precede the
//         data reaching the target's persistence domain.
//       - Read completes after all earlier Send/Write on the same connection
//         have been placed *and persisted* at the target (DDIO-off + ADR
//         semantics). "Write then Read" is therefore the remote-persist idiom
//         (docs/papers/rowan.md §2.2). On software providers the persistence
//         domain is the target process's mapping of its PmRegion; a target
//         power loss is modelled only by the simulator.
//       - A failed operation completes with a non-OK status; an operation to a
//         dead or unreachable peer completes with Unavailable or Timeout
//         within EndpointOptions::op_timeout, never hangs.
//
// Threading: an Endpoint is used by one thread at a time (its owner); the
// runtime makes sure of that. Nothing here blocks except Wait().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

namespace slip::fabric {

constexpr size_t kStride = 64;  // multi-receive placement granularity

using PeerId = uint32_t;

// What a peer needs to target registered memory. Plain data: it is sent to
// peers inside messages (docs/formats/wire.md), so keep it fixed-size.
struct RemoteMemory {
  uint64_t addr = 0;  // provider address of byte 0 of the region
  uint64_t key = 0;
  uint64_t len = 0;
};

// A local registration; pass it as the descriptor of local buffers inside the
// registered range. Owned by the endpoint that made it.
struct MemoryRegion {
  std::byte* base = nullptr;
  size_t len = 0;
  RemoteMemory remote;  // give this to peers
  void* desc = nullptr;  // provider's local descriptor (fi_mr_desc), may be null
  uint64_t id = 0;       // provider-internal handle
};

enum class Op : uint8_t { kSend, kRecv, kWrite, kRead, kCompareSwap, kFetchAdd };

struct Completion {
  uint64_t context = 0;  // the caller's, from the posting call
  Op op = Op::kSend;
  Code status = Code::kOk;
  uint32_t len = 0;                // kRecv: bytes placed (padded in multi-recv buffers)
  std::byte* data = nullptr;       // kRecv: where the message landed
  bool buffer_released = false;    // kRecv on a multi-recv buffer: buffer retired
};

// How Send, Write and Read are posted: bits, combined with |. The default
// posts one signalled operation, doorbell rung.
enum Post : uint32_t {
  kSignalled = 0,
  // More posts follow at once: the provider may hold the doorbell until a
  // post without this bit, so a chain of work requests costs one (one
  // ibv_post_send of a linked list). A hint: nothing visible changes.
  kMore = 1,
  // Unsignalled: no completion when the operation succeeds (an unsignalled
  // work request; FI_SELECTIVE_COMPLETION). A failure still completes, and
  // is reported before any later operation on the same connection
  // completes, so a later operation's successful completion also vouches for
  // every silent one posted before it on that connection. The caller keeps
  // a silent operation's memory until such a completion (or the silent
  // operation's failure) and must follow silent operations with a signalled
  // one on the connection (the replicator's flush Read).
  kSilent = 2,
};

struct EndpointOptions {
  std::string name;          // for logs and traces
  size_t cq_depth = 4096;
  // Bound on any one operation; past it the op completes with Timeout and the
  // peer is reported unreachable. A timed-out (or reset) operation may still
  // be under way at the provider, which can read its source bytes or write
  // its destination until it is done with it, and reports nothing more:
  // keep that memory alive well past the failure (the one-sided replicator
  // keeps it a minute).
  std::chrono::nanoseconds op_timeout = std::chrono::seconds(2);
};

class Endpoint {
 public:
  virtual ~Endpoint() = default;

  // This endpoint's address: opaque bytes a peer passes to AddPeer.
  virtual std::string address() const = 0;
  virtual Result<PeerId> AddPeer(std::string_view address) = 0;

  enum Access : uint32_t { kLocal = 0, kRemoteRead = 1, kRemoteWrite = 2, kRemoteAtomic = 4 };
  virtual Result<MemoryRegion> Register(void* base, size_t len, uint32_t access) = 0;
  virtual Status Deregister(const MemoryRegion& mr) = 0;

  // Two-sided. `mr` may be null when the buffer is not in registered memory
  // (providers that need registration copy through a bounce buffer).
  // `post` (Send, Write, Read): see Post. Overrides take it without a
  // default; callers go through Endpoint, whose default applies.
  virtual Status Send(PeerId peer, const void* buf, size_t len, const MemoryRegion* mr,
                      uint64_t context, uint32_t post = kSignalled) = 0;
  virtual Status PostRecv(void* buf, size_t len, const MemoryRegion* mr, uint64_t context) = 0;
  // REQUIRES: buf 64-byte aligned, len a multiple of 64.
  virtual Status PostMultiRecv(void* buf, size_t len, const MemoryRegion* mr,
                               uint64_t context) = 0;

  // One-sided. `remote_offset` is relative to `remote.addr`; the range must
  // lie inside the remote registration (checked, InvalidArgument).
  virtual Status Write(PeerId peer, const void* src, size_t len, const MemoryRegion* mr,
                       const RemoteMemory& remote, uint64_t remote_offset, uint64_t context,
                       uint32_t post = kSignalled) = 0;
  virtual Status Read(PeerId peer, void* dst, size_t len, const MemoryRegion* mr,
                      const RemoteMemory& remote, uint64_t remote_offset, uint64_t context,
                      uint32_t post = kSignalled) = 0;
  // 8-byte atomics on an 8-byte aligned remote word; `*old` receives the prior
  // value when the operation completes.
  virtual Status CompareSwap(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset,
                             uint64_t expected, uint64_t desired, uint64_t* old,
                             uint64_t context) = 0;
  virtual Status FetchAdd(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset,
                          uint64_t add, uint64_t* old, uint64_t context) = 0;

  // Drives progress (including the target side of peers' one-sided ops on
  // software providers) and returns up to out.size() completions.
  virtual size_t Poll(std::span<Completion> out) = 0;

  // Blocks until a completion may be ready or `timeout` passes: spin
  // briefly, then park on the provider's wait object (so many idle nodes can
  // share 2 cores). Real runtime only; the simulator never blocks.
  virtual void Wait(std::chrono::nanoseconds timeout) = 0;

  // For an executor that parks on several sources (Executor::AddWaitFd): a
  // descriptor that becomes readable when completions may be ready, or -1
  // when the provider has none (then the executor must poll). CanBlock() must
  // be called right before blocking on it: false means events may already be
  // pending (fi_trywait's contract) and the executor must poll instead.
  virtual int wait_fd() const { return -1; }
  virtual bool CanBlock() { return false; }
  // False when wait_fd() signals only some events (shm's doorbell: peers'
  // posts, not this endpoint's own completions): an executor parked on it
  // must still poll now and then (Executor::AddWaitFd's `sees_all`).
  virtual bool wait_fd_sees_all() const { return true; }
};

struct FabricOptions {
  std::string provider = "sim";  // "sim" | "shm" | "tcp" | "verbs"
  std::string node_address;      // tcp/verbs: local IP to bind (default 127.0.0.1)
};

class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual std::string_view provider() const = 0;
  virtual Result<std::unique_ptr<Endpoint>> CreateEndpoint(const EndpointOptions& options) = 0;
};

// Opens a libfabric provider ("shm", "tcp", "verbs"). NotSupported when the
// provider is absent on this machine (e.g. verbs without an RDMA device).
// The simulator's fabric is created from sim/ with its world (see
// fabric/sim_fabric.h), because it shares virtual time with the runtime.
Result<std::unique_ptr<Fabric>> OpenOfiFabric(const FabricOptions& options);

}  // namespace slip::fabric
