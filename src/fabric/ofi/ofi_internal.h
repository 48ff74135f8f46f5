// The libfabric provider's internals, shared by its control path
// (ofi_control.cc: providers, domains, endpoints, address vectors, memory
// registration) and its data path (ofi_data.cc: posting, the backlog,
// completions, timeouts, waiting). Private to fabric/ofi/.
#pragma once

#include "fabric/ofi/ofi_fabric.h"

#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/uio.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/intrusive_list.h"
#include "fabric/ofi/doorbell.h"
#include "fabric/ofi/region_lock.h"
#include "fabric/ofi/shm_regions.h"

namespace slip::fabric::ofi_internal {

using Clock = std::chrono::steady_clock;

// Requested API version: the one the behaviour notes in DESIGN.md were
// measured with. Newer libraries honour older versions.
constexpr uint32_t kFiVersion = FI_VERSION(1, 17);

// Completions read from the CQ per fi_cq_read call.
constexpr size_t kCqBatch = 64;
// FI_EAGAIN on post: read the CQ (that is what frees provider resources under
// manual progress) and retry this many times, then defer the operation to the
// endpoint's backlog (see OfiEndpoint::Submit).
constexpr int kPostRetries = 8;
// Pauses (~40-140 cycles each) a post waits for a peer's region lock
// (region_lock.h) before it is put off: a few microseconds.
constexpr int kRegionLockSpins = 128;
// Wait(): how long to keep polling before parking.
constexpr auto kWaitSpin = std::chrono::microseconds(20);
// shm has no wait object (see Wait()); sleep steps grow from the first to the
// last value. The cap bounds the wake-up latency of an idle node's NIC thread
// for incoming one-sided operations.
constexpr auto kFirstSleep = std::chrono::microseconds(50);
constexpr auto kMaxSleep = std::chrono::milliseconds(1);

inline size_t PadLen(size_t n) { return (n + kStride - 1) & ~(kStride - 1); }

inline std::string FiMessage(std::string_view what, int ret) {
  std::string s(what);
  s += ": ";
  s += fi_strerror(ret < 0 ? -ret : ret);
  return s;
}

// Maps a positive libfabric/errno error number from a completion or a post.
inline Code MapFiErr(int err) {
  switch (err) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_EHOSTDOWN:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case FI_EADDRNOTAVAIL:
    case FI_ESHUTDOWN:
    case EPIPE:
    case ESRCH:  // shm's process_vm_* path: the peer process is gone
      return Code::kUnavailable;
    case FI_ETIMEDOUT:
      return Code::kTimeout;
    case FI_ETRUNC:
    case FI_ETOOSMALL:
    case FI_EMSGSIZE:
      return Code::kTooLarge;
    case FI_ECANCELED:
      return Code::kAborted;
    case FI_EACCES:
    case FI_EKEYREJECTED:
    case FI_ENOKEY:
    case FI_EINVAL:
    case FI_EPERM:
    case FI_EFAULT:
      return Code::kInvalidArgument;
    case FI_EOPNOTSUPP:
    case FI_ENOSYS:
      return Code::kNotSupported;
    case FI_EAGAIN:
      return Code::kBusy;
    case FI_ENOMEM:
    case FI_ENOSPC:
    case FI_ENOBUFS:
      return Code::kNoSpace;
    default:
      return Code::kIoError;
  }
}

inline Status FiStatus(std::string_view what, int ret) {
  return Status(MapFiErr(ret < 0 ? -ret : ret), FiMessage(what, ret));
}

struct InfoDeleter {
  void operator()(fi_info* info) const { fi_freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

struct ProviderSpec {
  std::string_view name;      // ours
  const char* prov_name;      // libfabric's
  bool uses_node;             // binds to FabricOptions::node_address
};

inline Result<ProviderSpec> LookupProvider(std::string_view name) {
  if (name == "shm") return ProviderSpec{"shm", "shm", false};
  if (name == "tcp") return ProviderSpec{"tcp", "tcp;ofi_rxm", true};
  if (name == "verbs") return ProviderSpec{"verbs", "verbs;ofi_rxm", true};
  return Status::InvalidArgument("unknown libfabric provider '" + std::string(name) +
                                 "' (want shm, tcp or verbs)");
}

inline Result<InfoPtr> GetInfo(const ProviderSpec& spec, const std::string& node, uint64_t caps,
                        bool remote_completion) {
  InfoPtr hints(fi_allocinfo());
  if (!hints) return Status::NoSpace("fi_allocinfo");
  hints->caps = caps;
  // Every operation carries an OpState whose first member is a fi_context2,
  // so we can honour providers that want context scratch space.
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  // One domain per endpoint, one owner thread per endpoint (fabric.h).
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->fabric_attr->prov_name = strdup(spec.prov_name);  // freed by fi_freeinfo
  if (!hints->fabric_attr->prov_name) return Status::NoSpace("strdup");
  if (spec.name == "tcp") hints->addr_format = FI_SOCKADDR_IN;
  // The contract's per-connection FIFO, as far as libfabric lets us ask for
  // it. With FI_ATOMIC, tcp;ofi_rxm offers only SAS/RAS/WAS plus ordering
  // within RMA and within atomics (RMA_RAW, ATOMIC_RAW, ...), not across
  // them, nor SAW/SAR/WAR (it emulates atomics with messages). Besides
  // ordering, asking for RMA ordering turns off shm's "fast RMA", which
  // otherwise performs RMA directly with process_vm_* from the initiator:
  // bypassing the target's queue (a Read overtakes an earlier Send) and its
  // key check (a forged key succeeds).
  constexpr uint64_t kOrder = FI_ORDER_SAS | FI_ORDER_RAS | FI_ORDER_WAS | FI_ORDER_RMA_RAR |
                              FI_ORDER_RMA_RAW | FI_ORDER_RMA_WAW | FI_ORDER_ATOMIC_RAR |
                              FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAW;
  hints->tx_attr->msg_order = kOrder;
  hints->rx_attr->msg_order = kOrder;
  if (spec.name != "shm" && remote_completion) {
    // rxm passes this through to its core endpoints. tcp then completes a
    // send or write only when the peer acknowledges it, not when the bytes
    // enter the local socket: the contract's "the target accepted the data",
    // and a dead peer turns into an error instead of a silent success. The
    // price on tcp is one acknowledgement message per operation (measured:
    // ~13 us of a ~30 us loopback round trip; OfiOptions::remote_completion).
    hints->tx_attr->op_flags = FI_TRANSMIT_COMPLETE;
  }

  const char* node_arg = nullptr;
  uint64_t flags = 0;
  if (spec.uses_node && !node.empty()) {
    node_arg = node.c_str();
    flags = FI_SOURCE;
  }
  // shm names its endpoints' region files after the source address: ours,
  // so a process killed before shm could unlink them does not leak them
  // (shm_regions.h).
  Result<std::string> shm_name = std::string();
  if (spec.name == "shm") {
    shm_name = ClaimShmName();
    if (!shm_name.ok()) return shm_name.status();
    node_arg = shm_name->c_str();
    flags = FI_SOURCE;
  }
  fi_info* info = nullptr;
  int ret = fi_getinfo(kFiVersion, node_arg, nullptr, flags, hints.get(), &info);
  if (ret != 0) {
    if (ret == -FI_ENODATA || ret == -FI_ENOSYS) {
      std::string msg = "libfabric provider '" + std::string(spec.prov_name) +
                        "' not available";
      if (spec.name == "verbs") msg += " (no RDMA device)";
      if (node_arg) msg += std::string(" for node ") + node_arg;
      return Status::NotSupported(msg);
    }
    return FiStatus("fi_getinfo", ret);
  }
  return InfoPtr(info);
}

// Everything endpoints of one Fabric share. Endpoints keep it alive, so a
// Fabric may be destroyed before its endpoints.
struct FabricCore {
  InfoPtr info;
  fid_fabric* fabric = nullptr;
  OfiOptions ofi;
  std::string provider;
  ~FabricCore() {
    if (fabric) fi_close(&fabric->fid);
  }
};

// A registered copy of a caller's buffer, for providers that need local
// registration (FI_MR_LOCAL) when the caller passed none, and for receives
// into buffers whose length is not a multiple of the stride (the sender pads).
struct Bounce {
  std::byte* buf = nullptr;
  size_t len = 0;
  fid_mr* mr = nullptr;
  void* desc = nullptr;
  Bounce() = default;
  Bounce(const Bounce&) = delete;
  Bounce& operator=(const Bounce&) = delete;
  ~Bounce() {
    if (mr) fi_close(&mr->fid);
    std::free(buf);
  }
};

class OfiEndpoint final : public Endpoint {
 public:
  static Result<std::unique_ptr<Endpoint>> Create(std::shared_ptr<FabricCore> core,
                                                  const EndpointOptions& options);
  ~OfiEndpoint() override;

  std::string address() const override { return address_; }
  Result<PeerId> AddPeer(std::string_view address) override;
  Result<MemoryRegion> Register(void* base, size_t len, uint32_t access) override;
  Status Deregister(const MemoryRegion& mr) override;
  Status Send(PeerId peer, const void* buf, size_t len, const MemoryRegion* mr,
              uint64_t context, uint32_t post) override;
  Status PostRecv(void* buf, size_t len, const MemoryRegion* mr, uint64_t context) override;
  Status PostMultiRecv(void* buf, size_t len, const MemoryRegion* mr,
                       uint64_t context) override;
  Status Write(PeerId peer, const void* src, size_t len, const MemoryRegion* mr,
               const RemoteMemory& remote, uint64_t remote_offset, uint64_t context,
               uint32_t post) override;
  Status Read(PeerId peer, void* dst, size_t len, const MemoryRegion* mr,
              const RemoteMemory& remote, uint64_t remote_offset, uint64_t context,
              uint32_t post) override;
  Status CompareSwap(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset,
                     uint64_t expected, uint64_t desired, uint64_t* old,
                     uint64_t context) override;
  Status FetchAdd(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset, uint64_t add,
                  uint64_t* old, uint64_t context) override;
  size_t Poll(std::span<Completion> out) override;
  void Wait(std::chrono::nanoseconds timeout) override;
  int wait_fd() const override { return wait_fd_; }
  bool wait_fd_sees_all() const override { return bell_ == nullptr; }
  bool CanBlock() override {
    if (wait_fd_ < 0) return false;
    if (bell_) return LookBeforeRingableBlock();
    ProgressToPending();
    if (!pending_.empty()) return false;
    fid* fids[1] = {&cq_->fid};
    return fi_trywait(core_->fabric, fids, 1) == FI_SUCCESS;
  }

 private:
  enum class Phase : uint8_t { kFree, kPosted, kTimedOut };

  // Per posted operation. The provider gets &fi_ctx as the operation context.
  struct OpState {
    fi_context2 fi_ctx;  // first member: FI_CONTEXT(2) scratch space
    ListLink<OpState> by_deadline;  // deadlines_ (initiator operations only)
    Clock::time_point deadline;
    uint64_t user_context = 0;
    void* user_buf = nullptr;  // bounce copy-back target (Read, PostRecv)
    size_t user_len = 0;
    uint64_t* old_out = nullptr;     // atomics
    std::byte* recv_base = nullptr;  // multi-recv buffer start
    std::unique_ptr<Bounce> bounce;
    ListLink<OpState> in_backlog;   // backlog_ (deferred posts)
    // What to post; kept so a deferred operation can be posted later.
    iovec iov[2] = {};
    void* desc[2] = {};
    size_t iov_count = 1;
    fi_addr_t dest = FI_ADDR_UNSPEC;
    uint64_t raddr = 0;
    uint64_t key = 0;
    uint64_t cq_data = 0;
    PeerId peer = 0;
    Op op = Op::kSend;
    Phase phase = Phase::kFree;
    bool multi = false;  // a PostMultiRecv buffer
    bool tracked = false;
    bool deferred = false;
    bool silent = false;       // kSilent: reported only if it fails
    bool silent_open = false;  // in its peer's silent_open (not yet resolved)
    uint64_t seq = 0;          // initiator ops: posting order per peer
    // Atomic operands and result: inside the registered OpState array, so
    // FI_MR_LOCAL providers get a descriptor for them.
    uint64_t operand = 0;
    uint64_t compare = 0;
    uint64_t result = 0;
  };

  struct Peer {
    fi_addr_t addr = FI_ADDR_UNSPEC;
    fid_ep* tx = nullptr;       // its own transmit endpoint (shm), else ep_
    int bell = -1;              // its doorbell (shm, doorbell.h), rung after each post to it
    // Its region's lock (shm, region_lock.h): no post while it is held.
    std::unique_ptr<RegionLockWatch> region_lock;
    uint32_t deferred = 0;     // operations to it in the backlog
    uint64_t blocked_pass = 0;  // DrainBacklog pass in which it hit FI_EAGAIN
    // kSilent (fabric.h): a silent op's failure must be reported before any
    // later op to the peer completes, but the provider may complete them in
    // any order. So completions of ops posted after a still unresolved
    // silent op wait in `held` until it is resolved.
    uint64_t next_seq = 0;
    std::deque<uint64_t> silent_open;  // seqs of unresolved silent ops, ascending
    std::deque<std::pair<uint64_t, Completion>> held;  // (seq, completion), by seq
  };

  OfiEndpoint(std::shared_ptr<FabricCore> core, const EndpointOptions& options)
      : core_(std::move(core)), options_(options) {}

  Status Init();
  Result<fid_ep*> OpenTxEndpoint();
  fid_ep* TxEp(const OpState* st) const {
    fid_ep* tx = st->op == Op::kRecv ? nullptr : peers_[st->peer].tx;
    return tx != nullptr ? tx : ep_;
  }
  Result<fid_mr*> RegisterRaw(void* base, size_t len, uint64_t access);
  Result<std::unique_ptr<Bounce>> MakeBounce(size_t len);

  Result<Peer*> CheckPeer(PeerId peer);
  Status CheckLocal(const void* buf, size_t len, const MemoryRegion* mr) const;
  static Status CheckRemote(const RemoteMemory& remote, uint64_t offset, size_t len);

  // Takes an OpState from the pool; initiator ops get a deadline.
  Result<OpState*> BeginOp(Op op, PeerId peer, uint64_t context, bool initiator);
  void FreeOp(OpState* st);
  void Track(OpState* st);
  void Untrack(OpState* st);
  // kSilent bookkeeping: marks `st` silent; resolves it (its outcome is
  // known) and releases the completions it held back; true when a
  // completion of `st` must wait for an earlier silent op.
  void MarkSilent(OpState* st);
  void ResolveSilent(OpState* st);
  bool MustHold(const OpState* st) const;
  void Hold(PeerId peer, uint64_t seq, const Completion& c);

  // Posts the operation described by `st` once, and rings its peer's
  // doorbell (shm): the peer's progress serves the post, or after
  // FI_EAGAIN first maps this endpoint's name.
  ssize_t PostNow(OpState* st);
  ssize_t PostOnce(OpState* st);
  // With a doorbell: drains it, then progresses once more; true if nothing
  // is pending, so a block on the doorbell misses no ring (a ring after the
  // look wakes it).
  bool LookBeforeRingableBlock() {
    bell_->Drain();
    ProgressToPending();
    return pending_.empty();
  }
  // Posts `st`, or defers it to the backlog when the provider keeps saying
  // FI_EAGAIN or earlier operations of its channel (its peer; or receives)
  // are deferred. On a hard failure the op is released.
  Status Submit(OpState* st, const char* what);
  void Defer(OpState* st);
  void Undefer(OpState* st);
  bool ChannelDeferred(const OpState* st) const;
  // Retries deferred posts in order; a channel that hits FI_EAGAIN keeps its
  // later operations waiting (per-connection FIFO).
  void DrainBacklog();
  // Reports an op that could not be posted and frees it.
  void FailUnposted(OpState* st, Code status);

  // Queues a completion that did not come from the CQ.
  void Synthesize(OpState* st, Code status);

  // Reads up to out.size() CQ entries and maps them into `out`.
  size_t ReadCq(std::span<Completion> out);
  // Progress without a caller buffer: CQ entries go to pending_.
  void ProgressToPending();
  bool MapEntry(const fi_cq_data_entry& e, Completion* c);
  bool MapError(const fi_cq_err_entry& e, Completion* c);
  // Emits Timeout/Unavailable for expired operations into out, then pending_.
  size_t ExpireTimeouts(std::span<Completion> out);

  uint64_t RemoteAddr(const RemoteMemory& remote, uint64_t offset) const {
    return remote.addr + offset;
  }

  std::shared_ptr<FabricCore> core_;
  EndpointOptions options_;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  int wait_fd_ = -1;  // CQ's FI_WAIT_FD, or bell_'s; -1 when neither
  // shm (no wait object): peers ring it after posting here (doorbell.h).
  std::unique_ptr<Doorbell> bell_;

  bool local_mr_ = false;     // FI_MR_LOCAL: local buffers need a descriptor
  bool virt_addr_ = false;    // FI_MR_VIRT_ADDR: remote addresses are virtual
  bool prov_key_ = false;     // FI_MR_PROV_KEY
  bool mr_endpoint_ = false;  // FI_MR_ENDPOINT: bind MRs to the endpoint
  bool cq_data_ = false;      // remote CQ data carries the unpadded length
  uint64_t write_flags_ = 0;  // extra fi_writemsg flags
  uint64_t send_flags_ = 0;   // extra fi_sendmsg flags
  // shm answers reads, atomics and delivery-complete operations through one
  // response queue per endpoint, processed strictly in order: an operation
  // to a dead peer blocks the responses of every later operation, to any
  // peer, for good. So on shm each peer gets its own transmit endpoint
  // (same domain, AV and CQ); a dead peer then stalls only itself.
  bool tx_per_peer_ = false;
  bool cas_ok_ = false;
  bool faa_ok_ = false;
  size_t iov_limit_ = 1;
  uint64_t next_key_ = 1;  // only if the kernel's random source fails
  size_t key_bytes_ = 8;    // the provider's key size (domain_attr->mr_key_size)

  std::string address_;
  std::vector<Peer> peers_;

  std::unique_ptr<OpState[]> ops_;
  size_t ops_cap_ = 0;
  std::vector<OpState*> free_ops_;
  fid_mr* ops_mr_ = nullptr;
  void* ops_desc_ = nullptr;
  // Deadline order == posting order (one timeout for every operation).
  IntrusiveList<OpState, &OpState::by_deadline> deadlines_;
  IntrusiveList<OpState, &OpState::in_backlog> backlog_;  // posting order
  uint32_t deferred_recvs_ = 0;
  uint64_t drain_pass_ = 0;

  alignas(kStride) std::array<std::byte, kStride> zeros_{};
  fid_mr* zeros_mr_ = nullptr;
  void* zeros_desc_ = nullptr;

  std::unordered_map<uint64_t, fid_mr*> mrs_;
  uint64_t next_mr_id_ = 1;

  std::deque<Completion> pending_;
};

}  // namespace slip::fabric::ofi_internal
