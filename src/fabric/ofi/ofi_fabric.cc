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

namespace slip::fabric {
namespace {

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
// Wait(): how long to keep polling before parking.
constexpr auto kWaitSpin = std::chrono::microseconds(20);
// shm has no wait object (see Wait()); sleep steps grow from the first to the
// last value. The cap bounds the wake-up latency of an idle node's NIC thread
// for incoming one-sided operations.
constexpr auto kFirstSleep = std::chrono::microseconds(50);
constexpr auto kMaxSleep = std::chrono::milliseconds(1);

size_t PadLen(size_t n) { return (n + kStride - 1) & ~(kStride - 1); }

std::string FiMessage(std::string_view what, int ret) {
  std::string s(what);
  s += ": ";
  s += fi_strerror(ret < 0 ? -ret : ret);
  return s;
}

// Maps a positive libfabric/errno error number from a completion or a post.
Code MapFiErr(int err) {
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

Status FiStatus(std::string_view what, int ret) {
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

Result<ProviderSpec> LookupProvider(std::string_view name) {
  if (name == "shm") return ProviderSpec{"shm", "shm", false};
  if (name == "tcp") return ProviderSpec{"tcp", "tcp;ofi_rxm", true};
  if (name == "verbs") return ProviderSpec{"verbs", "verbs;ofi_rxm", true};
  return Status::InvalidArgument("unknown libfabric provider '" + std::string(name) +
                                 "' (want shm, tcp or verbs)");
}

Result<InfoPtr> GetInfo(const ProviderSpec& spec, const std::string& node, uint64_t caps,
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
              uint64_t context) override;
  Status PostRecv(void* buf, size_t len, const MemoryRegion* mr, uint64_t context) override;
  Status PostMultiRecv(void* buf, size_t len, const MemoryRegion* mr,
                       uint64_t context) override;
  Status Write(PeerId peer, const void* src, size_t len, const MemoryRegion* mr,
               const RemoteMemory& remote, uint64_t remote_offset, uint64_t context) override;
  Status Read(PeerId peer, void* dst, size_t len, const MemoryRegion* mr,
              const RemoteMemory& remote, uint64_t remote_offset, uint64_t context) override;
  Status CompareSwap(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset,
                     uint64_t expected, uint64_t desired, uint64_t* old,
                     uint64_t context) override;
  Status FetchAdd(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset, uint64_t add,
                  uint64_t* old, uint64_t context) override;
  size_t Poll(std::span<Completion> out) override;
  void Wait(std::chrono::nanoseconds timeout) override;
  int wait_fd() const override { return wait_fd_; }
  bool CanBlock() override {
    if (wait_fd_ < 0) return false;
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
    OpState* prev = nullptr;  // deadline list (initiator operations only)
    OpState* next = nullptr;
    Clock::time_point deadline;
    uint64_t user_context = 0;
    void* user_buf = nullptr;  // bounce copy-back target (Read, PostRecv)
    size_t user_len = 0;
    uint64_t* old_out = nullptr;     // atomics
    std::byte* recv_base = nullptr;  // multi-recv buffer start
    std::unique_ptr<Bounce> bounce;
    OpState* bprev = nullptr;  // backlog (deferred posts)
    OpState* bnext = nullptr;
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
    // Atomic operands and result: inside the registered OpState array, so
    // FI_MR_LOCAL providers get a descriptor for them.
    uint64_t operand = 0;
    uint64_t compare = 0;
    uint64_t result = 0;
  };

  struct Peer {
    fi_addr_t addr = FI_ADDR_UNSPEC;
    fid_ep* tx = nullptr;       // its own transmit endpoint (shm), else ep_
    uint32_t deferred = 0;     // operations to it in the backlog
    uint64_t blocked_pass = 0;  // DrainBacklog pass in which it hit FI_EAGAIN
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

  // Posts the operation described by `st` once.
  ssize_t PostNow(OpState* st);
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
  int wait_fd_ = -1;  // CQ's FI_WAIT_FD, -1 when the provider has none

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
  uint64_t next_key_ = 1;

  std::string address_;
  std::vector<Peer> peers_;

  std::unique_ptr<OpState[]> ops_;
  size_t ops_cap_ = 0;
  std::vector<OpState*> free_ops_;
  fid_mr* ops_mr_ = nullptr;
  void* ops_desc_ = nullptr;
  OpState* head_ = nullptr;  // deadline order == posting order (one timeout)
  OpState* tail_ = nullptr;
  OpState* bhead_ = nullptr;  // backlog, posting order
  OpState* btail_ = nullptr;
  uint32_t deferred_recvs_ = 0;
  uint64_t drain_pass_ = 0;

  alignas(kStride) std::array<std::byte, kStride> zeros_{};
  fid_mr* zeros_mr_ = nullptr;
  void* zeros_desc_ = nullptr;

  std::unordered_map<uint64_t, fid_mr*> mrs_;
  uint64_t next_mr_id_ = 1;

  std::deque<Completion> pending_;
};

Result<std::unique_ptr<Endpoint>> OfiEndpoint::Create(std::shared_ptr<FabricCore> core,
                                                      const EndpointOptions& options) {
  std::unique_ptr<OfiEndpoint> ep(new OfiEndpoint(std::move(core), options));
  // On failure the destructor closes whatever Init opened.
  SLIP_RETURN_IF_ERROR(ep->Init());
  return std::unique_ptr<Endpoint>(std::move(ep));
}

Status OfiEndpoint::Init() {
  fi_info* info = core_->info.get();
  const uint64_t mr_mode = info->domain_attr->mr_mode;
  local_mr_ = mr_mode & FI_MR_LOCAL;
  virt_addr_ = mr_mode & FI_MR_VIRT_ADDR;
  prov_key_ = mr_mode & FI_MR_PROV_KEY;
  mr_endpoint_ = mr_mode & FI_MR_ENDPOINT;
  cq_data_ = info->domain_attr->cq_data_size >= sizeof(uint32_t);
  iov_limit_ = info->tx_attr->iov_limit;
  // shm completes a small send or write as soon as it sits in the target's
  // queue: a dead target looks like a live one, and a write the target then
  // refuses (key, range) fails silently. Delivery-complete makes the target
  // answer (shm switches to its SAR protocol), so such operations end in an
  // error or Timeout, and a send to a receiver without a posted buffer
  // completes once it is placed: the contract's receiver-not-ready. The
  // price is a later completion, not later placement.
  if (core_->provider == "shm") {
    write_flags_ = send_flags_ = FI_DELIVERY_COMPLETE;
    tx_per_peer_ = true;
  }

  int ret = fi_domain(core_->fabric, info, &domain_, nullptr);
  if (ret) return FiStatus("fi_domain", ret);

  fi_cq_attr cq_attr{};
  cq_attr.size = options_.cq_depth;
  cq_attr.format = FI_CQ_FORMAT_DATA;
  cq_attr.wait_obj = FI_WAIT_FD;
  ret = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
  if (ret) {
    // shm (1.17) does not implement FI_WAIT_FD; Wait() backs off instead.
    cq_attr.wait_obj = FI_WAIT_NONE;
    ret = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
    if (ret) return FiStatus("fi_cq_open", ret);
  } else {
    ret = fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_);
    if (ret) wait_fd_ = -1;
  }

  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = 64;
  ret = fi_av_open(domain_, &av_attr, &av_, nullptr);
  if (ret) return FiStatus("fi_av_open", ret);

  ret = fi_endpoint(domain_, info, &ep_, nullptr);
  if (ret) return FiStatus("fi_endpoint", ret);
  ret = fi_ep_bind(ep_, &av_->fid, 0);
  if (ret) return FiStatus("fi_ep_bind(av)", ret);
  ret = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV);
  if (ret) return FiStatus("fi_ep_bind(cq)", ret);
  ret = fi_enable(ep_);
  if (ret) return FiStatus("fi_enable", ret);

  // After fi_enable: shm creates the receive context that holds this option
  // only when the endpoint is enabled.
  size_t min_multi = core_->ofi.max_multi_recv_message;
  ret = fi_setopt(&ep_->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min_multi,
                  sizeof(min_multi));
  if (ret) return FiStatus("fi_setopt(FI_OPT_MIN_MULTI_RECV)", ret);

  std::array<char, 256> name{};
  size_t name_len = name.size();
  ret = fi_getname(&ep_->fid, name.data(), &name_len);
  if (ret) return FiStatus("fi_getname", ret);
  address_.assign(name.data(), name_len);

  ops_cap_ = std::max<size_t>(options_.cq_depth, 64);
  ops_ = std::make_unique<OpState[]>(ops_cap_);
  free_ops_.reserve(ops_cap_);
  for (size_t i = ops_cap_; i > 0; --i) free_ops_.push_back(&ops_[i - 1]);
  if (local_mr_) {
    const uint64_t local = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
    SLIP_ASSIGN_OR_RETURN(ops_mr_, RegisterRaw(ops_.get(), ops_cap_ * sizeof(OpState), local));
    ops_desc_ = fi_mr_desc(ops_mr_);
    SLIP_ASSIGN_OR_RETURN(zeros_mr_, RegisterRaw(zeros_.data(), zeros_.size(), local));
    zeros_desc_ = fi_mr_desc(zeros_mr_);
  }

  if (info->caps & FI_ATOMIC) {
    fi_atomic_attr attr{};
    cas_ok_ = fi_query_atomic(domain_, FI_UINT64, FI_CSWAP, &attr, FI_COMPARE_ATOMIC) == 0;
    faa_ok_ = fi_query_atomic(domain_, FI_UINT64, FI_SUM, &attr, FI_FETCH_ATOMIC) == 0;
  }
  return Status::Ok();
}

OfiEndpoint::~OfiEndpoint() {
  // FI_MR_ENDPOINT registrations are bound to the endpoint: close them first.
  // Otherwise close the endpoint first so no transfer touches memory we are
  // about to release.
  auto close_mrs = [this] {
    for (auto& [id, mr] : mrs_) fi_close(&mr->fid);
    mrs_.clear();
    if (ops_) {
      for (size_t i = 0; i < ops_cap_; ++i) ops_[i].bounce.reset();
    }
    if (ops_mr_) fi_close(&ops_mr_->fid);
    if (zeros_mr_) fi_close(&zeros_mr_->fid);
    ops_mr_ = zeros_mr_ = nullptr;
  };
  if (mr_endpoint_) close_mrs();
  for (Peer& p : peers_) {
    if (p.tx) fi_close(&p.tx->fid);
  }
  if (ep_) fi_close(&ep_->fid);
  close_mrs();
  if (av_) fi_close(&av_->fid);
  if (cq_) fi_close(&cq_->fid);
  if (domain_) fi_close(&domain_->fid);
}

Result<fid_ep*> OfiEndpoint::OpenTxEndpoint() {
  fid_ep* tx = nullptr;
  int ret = fi_endpoint(domain_, core_->info.get(), &tx, nullptr);
  if (ret) return FiStatus("fi_endpoint(tx)", ret);
  ret = fi_ep_bind(tx, &av_->fid, 0);
  if (ret == 0) ret = fi_ep_bind(tx, &cq_->fid, FI_TRANSMIT | FI_RECV);
  if (ret == 0) ret = fi_enable(tx);
  if (ret) {
    fi_close(&tx->fid);
    return FiStatus("tx endpoint setup", ret);
  }
  return tx;
}

Result<fid_mr*> OfiEndpoint::RegisterRaw(void* base, size_t len, uint64_t access) {
  fid_mr* mr = nullptr;
  // Without FI_MR_PROV_KEY the key is ours to choose, unique per domain.
  int ret = fi_mr_reg(domain_, base, len, access, 0, prov_key_ ? 0 : next_key_++, 0, &mr,
                      nullptr);
  if (ret) return FiStatus("fi_mr_reg", ret);
  if (mr_endpoint_) {
    ret = fi_mr_bind(mr, &ep_->fid, 0);
    if (ret == 0) ret = fi_mr_enable(mr);
    if (ret) {
      fi_close(&mr->fid);
      return FiStatus("fi_mr_bind/enable", ret);
    }
  }
  return mr;
}

Result<std::unique_ptr<Bounce>> OfiEndpoint::MakeBounce(size_t len) {
  auto b = std::make_unique<Bounce>();
  b->len = PadLen(std::max<size_t>(len, 1));
  b->buf = static_cast<std::byte*>(std::aligned_alloc(kStride, b->len));
  if (!b->buf) return Status::NoSpace("bounce buffer");
  if (local_mr_) {
    SLIP_ASSIGN_OR_RETURN(b->mr, RegisterRaw(b->buf, b->len, FI_SEND | FI_RECV | FI_READ |
                                                                 FI_WRITE));
    b->desc = fi_mr_desc(b->mr);
  }
  return b;
}

Result<PeerId> OfiEndpoint::AddPeer(std::string_view address) {
  if (address.empty()) return Status::InvalidArgument("empty fabric address");
  // tcp addresses are fixed-size sockaddrs (FI_SOCKADDR_IN) that
  // fi_av_insert reads without a length: a short one would be read past its
  // end. (verbs' format is not checked here: no device to verify it on.)
  const size_t addrlen = core_->info->src_addrlen;
  if (core_->provider == "tcp" && addrlen > 0 && address.size() != addrlen) {
    return Status::InvalidArgument("fabric address of " + std::to_string(address.size()) +
                                   " bytes, want " + std::to_string(addrlen));
  }
  // fi_av_insert takes no length (the format implies it); a NUL-terminated
  // copy keeps string formats (shm) from running past the caller's bytes.
  std::string copy(address);
  copy.push_back('\0');
  fi_addr_t addr = FI_ADDR_UNSPEC;
  int ret = fi_av_insert(av_, copy.data(), 1, &addr, 0, nullptr);
  if (ret != 1) {
    return Status::InvalidArgument(ret < 0 ? FiMessage("fi_av_insert", ret)
                                           : std::string("fi_av_insert: address rejected"));
  }
  Peer peer;
  peer.addr = addr;
  if (tx_per_peer_) {
    SLIP_ASSIGN_OR_RETURN(peer.tx, OpenTxEndpoint());
  }
  peers_.push_back(peer);
  return static_cast<PeerId>(peers_.size() - 1);
}

Result<MemoryRegion> OfiEndpoint::Register(void* base, size_t len, uint32_t access) {
  if (base == nullptr || len == 0) return Status::InvalidArgument("empty registration");
  uint64_t fi_access = FI_SEND | FI_RECV | FI_READ | FI_WRITE;
  if (access & kRemoteRead) fi_access |= FI_REMOTE_READ;
  if (access & kRemoteWrite) fi_access |= FI_REMOTE_WRITE;
  // libfabric has no separate atomic permission: atomics read and write.
  if (access & kRemoteAtomic) fi_access |= FI_REMOTE_READ | FI_REMOTE_WRITE;
  SLIP_ASSIGN_OR_RETURN(fid_mr * mr, RegisterRaw(base, len, fi_access));
  MemoryRegion out;
  out.base = static_cast<std::byte*>(base);
  out.len = len;
  out.desc = fi_mr_desc(mr);
  out.remote.addr = virt_addr_ ? reinterpret_cast<uint64_t>(base) : 0;
  out.remote.key = fi_mr_key(mr);
  out.remote.len = len;
  if (out.remote.key == FI_KEY_NOTAVAIL) {
    fi_close(&mr->fid);
    return Status::NotSupported("fi_mr_key: key not available (raw keys unsupported)");
  }
  out.id = next_mr_id_++;
  mrs_.emplace(out.id, mr);
  return out;
}

Status OfiEndpoint::Deregister(const MemoryRegion& mr) {
  auto it = mrs_.find(mr.id);
  if (it == mrs_.end()) return Status::NotFound("unknown memory region");
  int ret = fi_close(&it->second->fid);
  mrs_.erase(it);
  if (ret) return FiStatus("fi_close(mr)", ret);
  return Status::Ok();
}

Result<OfiEndpoint::Peer*> OfiEndpoint::CheckPeer(PeerId peer) {
  if (peer >= peers_.size()) return Status::InvalidArgument("unknown peer");
  return &peers_[peer];
}

Status OfiEndpoint::CheckLocal(const void* buf, size_t len, const MemoryRegion* mr) const {
  if (mr == nullptr) return Status::Ok();
  auto* p = static_cast<const std::byte*>(buf);
  if (p < mr->base || len > mr->len || static_cast<size_t>(p - mr->base) > mr->len - len) {
    return Status::InvalidArgument("local buffer outside its memory region");
  }
  return Status::Ok();
}

Status OfiEndpoint::CheckRemote(const RemoteMemory& remote, uint64_t offset, size_t len) {
  if (offset > remote.len || len > remote.len - offset) {
    return Status::InvalidArgument("remote range [" + std::to_string(offset) + ", +" +
                                   std::to_string(len) + ") outside registration of " +
                                   std::to_string(remote.len) + " bytes");
  }
  return Status::Ok();
}

Result<OfiEndpoint::OpState*> OfiEndpoint::BeginOp(Op op, PeerId peer, uint64_t context,
                                                   bool initiator) {
  if (free_ops_.empty()) {
    ProgressToPending();
    if (free_ops_.empty()) return Status::Busy("too many outstanding operations");
  }
  OpState* st = free_ops_.back();
  free_ops_.pop_back();
  st->user_context = context;
  st->op = op;
  st->peer = peer;
  st->phase = Phase::kPosted;
  st->multi = false;
  st->user_buf = nullptr;
  st->user_len = 0;
  st->old_out = nullptr;
  st->recv_base = nullptr;
  st->iov_count = 1;
  st->desc[0] = st->desc[1] = nullptr;
  st->deferred = false;
  if (initiator) {
    st->deadline = Clock::now() + options_.op_timeout;
    Track(st);
  }
  return st;
}

void OfiEndpoint::FreeOp(OpState* st) {
  if (st->tracked) Untrack(st);
  if (st->deferred) Undefer(st);
  st->bounce.reset();
  st->phase = Phase::kFree;
  free_ops_.push_back(st);
}

void OfiEndpoint::Track(OpState* st) {
  st->prev = tail_;
  st->next = nullptr;
  if (tail_) {
    tail_->next = st;
  } else {
    head_ = st;
  }
  tail_ = st;
  st->tracked = true;
}

void OfiEndpoint::Untrack(OpState* st) {
  if (st->prev) {
    st->prev->next = st->next;
  } else {
    head_ = st->next;
  }
  if (st->next) {
    st->next->prev = st->prev;
  } else {
    tail_ = st->prev;
  }
  st->prev = st->next = nullptr;
  st->tracked = false;
}

void OfiEndpoint::Synthesize(OpState* st, Code status) {
  Completion c;
  c.context = st->user_context;
  c.op = st->op;
  c.status = status;
  pending_.push_back(c);
}

void OfiEndpoint::FailUnposted(OpState* st, Code status) {
  if (st->tracked) Untrack(st);
  Synthesize(st, status);
  FreeOp(st);
}

ssize_t OfiEndpoint::PostNow(OpState* st) {
  void* ctx = &st->fi_ctx;
  fid_ep* ep = TxEp(st);
  switch (st->op) {
    case Op::kSend: {
      if (st->iov_count == 1 && send_flags_ == 0) {
        return cq_data_ ? fi_senddata(ep, st->iov[0].iov_base, st->iov[0].iov_len,
                                      st->desc[0], st->cq_data, st->dest, ctx)
                        : fi_send(ep, st->iov[0].iov_base, st->iov[0].iov_len, st->desc[0],
                                  st->dest, ctx);
      }
      fi_msg msg{};
      msg.msg_iov = st->iov;
      msg.desc = st->desc;
      msg.iov_count = st->iov_count;
      msg.addr = st->dest;
      msg.context = ctx;
      msg.data = st->cq_data;
      return fi_sendmsg(ep, &msg,
                        FI_COMPLETION | send_flags_ | (cq_data_ ? FI_REMOTE_CQ_DATA : 0));
    }
    case Op::kRecv: {
      if (!st->multi) {
        return fi_recv(ep, st->iov[0].iov_base, st->iov[0].iov_len, st->desc[0],
                       FI_ADDR_UNSPEC, ctx);
      }
      fi_msg msg{};
      msg.msg_iov = st->iov;
      msg.desc = st->desc;
      msg.iov_count = 1;
      msg.addr = FI_ADDR_UNSPEC;
      msg.context = ctx;
      return fi_recvmsg(ep, &msg, FI_MULTI_RECV | FI_COMPLETION);
    }
    case Op::kWrite: {
      if (write_flags_ == 0) {
        return fi_write(ep, st->iov[0].iov_base, st->iov[0].iov_len, st->desc[0], st->dest,
                        st->raddr, st->key, ctx);
      }
      fi_rma_iov rma{st->raddr, st->iov[0].iov_len, st->key};
      fi_msg_rma msg{};
      msg.msg_iov = st->iov;
      msg.desc = st->desc;
      msg.iov_count = 1;
      msg.addr = st->dest;
      msg.rma_iov = &rma;
      msg.rma_iov_count = 1;
      msg.context = ctx;
      return fi_writemsg(ep, &msg, FI_COMPLETION | write_flags_);
    }
    case Op::kRead:
      return fi_read(ep, st->iov[0].iov_base, st->iov[0].iov_len, st->desc[0], st->dest,
                     st->raddr, st->key, ctx);
    case Op::kCompareSwap:
      return fi_compare_atomic(ep, &st->operand, 1, ops_desc_, &st->compare, ops_desc_,
                               &st->result, ops_desc_, st->dest, st->raddr, st->key, FI_UINT64,
                               FI_CSWAP, ctx);
    case Op::kFetchAdd:
      return fi_fetch_atomic(ep, &st->operand, 1, ops_desc_, &st->result, ops_desc_, st->dest,
                             st->raddr, st->key, FI_UINT64, FI_SUM, ctx);
  }
  return -FI_EINVAL;
}

bool OfiEndpoint::ChannelDeferred(const OpState* st) const {
  return st->op == Op::kRecv ? deferred_recvs_ > 0 : peers_[st->peer].deferred > 0;
}

void OfiEndpoint::Defer(OpState* st) {
  st->bprev = btail_;
  st->bnext = nullptr;
  if (btail_) {
    btail_->bnext = st;
  } else {
    bhead_ = st;
  }
  btail_ = st;
  st->deferred = true;
  if (st->op == Op::kRecv) {
    ++deferred_recvs_;
  } else {
    ++peers_[st->peer].deferred;
  }
}

void OfiEndpoint::Undefer(OpState* st) {
  if (st->bprev) {
    st->bprev->bnext = st->bnext;
  } else {
    bhead_ = st->bnext;
  }
  if (st->bnext) {
    st->bnext->bprev = st->bprev;
  } else {
    btail_ = st->bprev;
  }
  st->bprev = st->bnext = nullptr;
  st->deferred = false;
  if (st->op == Op::kRecv) {
    --deferred_recvs_;
  } else {
    --peers_[st->peer].deferred;
  }
}

Status OfiEndpoint::Submit(OpState* st, const char* what) {
  // Later operations of a channel must not overtake its deferred ones.
  if (ChannelDeferred(st)) {
    Defer(st);
    return Status::Ok();
  }
  for (int attempt = 0;; ++attempt) {
    ssize_t ret = PostNow(st);
    if (ret == 0) return Status::Ok();
    if (ret != -FI_EAGAIN) {
      FreeOp(st);
      return FiStatus(what, static_cast<int>(ret));
    }
    // FI_EAGAIN also means "the peer has not answered yet": shm's first
    // operation to a peer waits for the peer to map our name, rxm's for the
    // connection to be accepted, both driven by the *peer's* progress. The
    // peer may be polled by this very thread (tests, simulations of several
    // nodes), so do not spin on it: defer and retry from Poll(). Its deadline
    // keeps running, so a dead peer still ends in Timeout.
    if (attempt == kPostRetries) {
      Defer(st);
      return Status::Ok();
    }
    ProgressToPending();
  }
}

void OfiEndpoint::DrainBacklog() {
  if (bhead_ == nullptr) return;
  const uint64_t pass = ++drain_pass_;
  bool recv_blocked = false;
  for (OpState* st = bhead_; st != nullptr;) {
    OpState* next = st->bnext;
    const bool is_recv = st->op == Op::kRecv;
    if (is_recv ? recv_blocked : peers_[st->peer].blocked_pass == pass) {
      st = next;
      continue;
    }
    ssize_t ret = PostNow(st);
    if (ret == -FI_EAGAIN) {
      if (is_recv) {
        recv_blocked = true;
      } else {
        peers_[st->peer].blocked_pass = pass;
      }
    } else {
      Undefer(st);
      if (ret != 0) FailUnposted(st, MapFiErr(static_cast<int>(-ret)));
    }
    st = next;
  }
}

Status OfiEndpoint::Send(PeerId peer, const void* buf, size_t len, const MemoryRegion* mr,
                         uint64_t context) {
  SLIP_ASSIGN_OR_RETURN(Peer * p, CheckPeer(peer));
  if (buf == nullptr && len > 0) return Status::InvalidArgument("null send buffer");
  // Any message may land in a multi-receive buffer, and libfabric cannot
  // skip a buffer whose free tail (>= max_multi_recv_message) is too short:
  // rxm would truncate the message and shm 1.17 corrupt its bookkeeping.
  // Refuse here, where the sender still gets a clean error.
  const size_t padded = PadLen(len);
  if (padded > core_->ofi.max_multi_recv_message || len > UINT32_MAX) {
    return Status::TooLarge("message of " + std::to_string(len) +
                            " bytes exceeds max_multi_recv_message (" +
                            std::to_string(core_->ofi.max_multi_recv_message) + ")");
  }
  SLIP_RETURN_IF_ERROR(CheckLocal(buf, len, mr));
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kSend, peer, context, true));
  st->dest = p->addr;
  st->cq_data = len;
  st->iov_count = 1;
  st->iov[0] = {const_cast<void*>(buf), len};
  st->desc[0] = mr ? mr->desc : nullptr;
  if ((local_mr_ && mr == nullptr && len > 0) || (padded != len && iov_limit_ < 2)) {
    auto b = MakeBounce(padded);
    if (!b.ok()) {
      FreeOp(st);
      return b.status();
    }
    st->bounce = std::move(*b);
    std::memcpy(st->bounce->buf, buf, len);
    std::memset(st->bounce->buf + len, 0, padded - len);
    st->iov[0] = {st->bounce->buf, padded};
    st->desc[0] = st->bounce->desc;
  } else if (padded != len) {
    // Pad with a second iov entry instead of copying the message.
    st->iov[1] = {zeros_.data(), padded - len};
    st->desc[1] = zeros_desc_;
    st->iov_count = 2;
  }
  return Submit(st, "fi_sendmsg");
}

Status OfiEndpoint::PostRecv(void* buf, size_t len, const MemoryRegion* mr, uint64_t context) {
  if (buf == nullptr || len == 0) return Status::InvalidArgument("empty receive buffer");
  SLIP_RETURN_IF_ERROR(CheckLocal(buf, len, mr));
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kRecv, 0, context, false));
  st->user_buf = buf;
  st->user_len = len;
  st->iov[0] = {buf, len};
  st->desc[0] = mr ? mr->desc : nullptr;
  // Senders pad to the stride, so a buffer of unaligned length would truncate
  // a message that fits it: receive into a padded bounce buffer and copy.
  if (len % kStride != 0 || (local_mr_ && mr == nullptr)) {
    auto b = MakeBounce(len);
    if (!b.ok()) {
      FreeOp(st);
      return b.status();
    }
    st->bounce = std::move(*b);
    st->iov[0] = {st->bounce->buf, st->bounce->len};
    st->desc[0] = st->bounce->desc;
  }
  return Submit(st, "fi_recv");
}

Status OfiEndpoint::PostMultiRecv(void* buf, size_t len, const MemoryRegion* mr,
                                  uint64_t context) {
  if (buf == nullptr || reinterpret_cast<uintptr_t>(buf) % kStride != 0 ||
      len % kStride != 0) {
    return Status::InvalidArgument("multi-recv buffer must be 64-byte aligned and sized");
  }
  // A message is placed at the buffer's current offset without regard to its
  // size, and the buffer retires once its free tail is below the limit; so
  // only buffers of at least the limit are guaranteed to fit any message.
  if (len < core_->ofi.max_multi_recv_message) {
    return Status::InvalidArgument("multi-recv buffer of " + std::to_string(len) +
                                   " bytes is below max_multi_recv_message (" +
                                   std::to_string(core_->ofi.max_multi_recv_message) + ")");
  }
  if (local_mr_ && mr == nullptr) {
    return Status::InvalidArgument("multi-recv buffer must be registered on this provider");
  }
  SLIP_RETURN_IF_ERROR(CheckLocal(buf, len, mr));
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kRecv, 0, context, false));
  st->multi = true;
  st->recv_base = static_cast<std::byte*>(buf);
  st->iov[0] = {buf, len};
  st->desc[0] = mr ? mr->desc : nullptr;
  return Submit(st, "fi_recvmsg(FI_MULTI_RECV)");
}

Status OfiEndpoint::Write(PeerId peer, const void* src, size_t len, const MemoryRegion* mr,
                          const RemoteMemory& remote, uint64_t remote_offset,
                          uint64_t context) {
  SLIP_ASSIGN_OR_RETURN(Peer * p, CheckPeer(peer));
  if (src == nullptr && len > 0) return Status::InvalidArgument("null write source");
  SLIP_RETURN_IF_ERROR(CheckRemote(remote, remote_offset, len));
  SLIP_RETURN_IF_ERROR(CheckLocal(src, len, mr));
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kWrite, peer, context, true));
  st->dest = p->addr;
  st->raddr = RemoteAddr(remote, remote_offset);
  st->key = remote.key;
  st->iov[0] = {const_cast<void*>(src), len};
  st->desc[0] = mr ? mr->desc : nullptr;
  if (local_mr_ && mr == nullptr && len > 0) {
    auto b = MakeBounce(len);
    if (!b.ok()) {
      FreeOp(st);
      return b.status();
    }
    st->bounce = std::move(*b);
    std::memcpy(st->bounce->buf, src, len);
    st->iov[0] = {st->bounce->buf, len};
    st->desc[0] = st->bounce->desc;
  }
  return Submit(st, "fi_write");
}

Status OfiEndpoint::Read(PeerId peer, void* dst, size_t len, const MemoryRegion* mr,
                         const RemoteMemory& remote, uint64_t remote_offset, uint64_t context) {
  SLIP_ASSIGN_OR_RETURN(Peer * p, CheckPeer(peer));
  if (dst == nullptr && len > 0) return Status::InvalidArgument("null read destination");
  SLIP_RETURN_IF_ERROR(CheckRemote(remote, remote_offset, len));
  SLIP_RETURN_IF_ERROR(CheckLocal(dst, len, mr));
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kRead, peer, context, true));
  st->dest = p->addr;
  st->raddr = RemoteAddr(remote, remote_offset);
  st->key = remote.key;
  st->iov[0] = {dst, len};
  st->desc[0] = mr ? mr->desc : nullptr;
  if (local_mr_ && mr == nullptr && len > 0) {
    auto b = MakeBounce(len);
    if (!b.ok()) {
      FreeOp(st);
      return b.status();
    }
    st->bounce = std::move(*b);
    st->user_buf = dst;
    st->user_len = len;
    st->iov[0] = {st->bounce->buf, len};
    st->desc[0] = st->bounce->desc;
  }
  return Submit(st, "fi_read");
}

Status OfiEndpoint::CompareSwap(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset,
                                uint64_t expected, uint64_t desired, uint64_t* old,
                                uint64_t context) {
  if (!cas_ok_) {
    return Status::NotSupported(core_->provider + ": no 64-bit compare-and-swap");
  }
  SLIP_ASSIGN_OR_RETURN(Peer * p, CheckPeer(peer));
  SLIP_RETURN_IF_ERROR(CheckRemote(remote, remote_offset, sizeof(uint64_t)));
  const uint64_t raddr = RemoteAddr(remote, remote_offset);
  if (raddr % sizeof(uint64_t) != 0) return Status::InvalidArgument("unaligned atomic");
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kCompareSwap, peer, context, true));
  st->dest = p->addr;
  st->raddr = raddr;
  st->key = remote.key;
  st->operand = desired;
  st->compare = expected;
  st->old_out = old;
  return Submit(st, "fi_compare_atomic");
}

Status OfiEndpoint::FetchAdd(PeerId peer, const RemoteMemory& remote, uint64_t remote_offset,
                             uint64_t add, uint64_t* old, uint64_t context) {
  if (!faa_ok_) return Status::NotSupported(core_->provider + ": no 64-bit fetch-and-add");
  SLIP_ASSIGN_OR_RETURN(Peer * p, CheckPeer(peer));
  SLIP_RETURN_IF_ERROR(CheckRemote(remote, remote_offset, sizeof(uint64_t)));
  const uint64_t raddr = RemoteAddr(remote, remote_offset);
  if (raddr % sizeof(uint64_t) != 0) return Status::InvalidArgument("unaligned atomic");
  SLIP_ASSIGN_OR_RETURN(OpState * st, BeginOp(Op::kFetchAdd, peer, context, true));
  st->dest = p->addr;
  st->raddr = raddr;
  st->key = remote.key;
  st->operand = add;
  st->old_out = old;
  return Submit(st, "fi_fetch_atomic");
}

bool OfiEndpoint::MapEntry(const fi_cq_data_entry& e, Completion* c) {
  auto* st = static_cast<OpState*>(e.op_context);
  if (st == nullptr) return false;
  const bool released = st->multi && (e.flags & FI_MULTI_RECV);
  if (st->phase == Phase::kTimedOut) {
    // Its Timeout was reported already; the late completion only frees it.
    FreeOp(st);
    return false;
  }
  c->context = st->user_context;
  c->op = st->op;
  c->status = Code::kOk;
  c->len = 0;
  c->data = nullptr;
  c->buffer_released = false;
  switch (st->op) {
    case Op::kRecv:
      if (st->multi) {
        c->buffer_released = released;
        if (e.buf != nullptr && e.len > 0) {
          c->data = static_cast<std::byte*>(e.buf);
          c->len = static_cast<uint32_t>(e.len);
          // Senders pad to the stride; a message at an unaligned offset means
          // a peer that does not, and the rest of the buffer is unparseable.
          if ((c->data - st->recv_base) % kStride != 0 || e.len % kStride != 0) {
            c->status = Code::kCorruption;
          }
        }
        if (released) FreeOp(st);
        return true;
      }
      {
        const size_t placed = e.len;
        const size_t real = (cq_data_ && (e.flags & FI_REMOTE_CQ_DATA)) ? e.data : placed;
        if (real > placed || real > st->user_len) {
          c->status = Code::kTooLarge;
        } else if (st->bounce) {
          std::memcpy(st->user_buf, st->bounce->buf, real);
        }
        c->data = static_cast<std::byte*>(st->user_buf);
        c->len = static_cast<uint32_t>(std::min(real, st->user_len));
      }
      break;
    case Op::kRead:
      if (st->bounce) std::memcpy(st->user_buf, st->bounce->buf, st->user_len);
      break;
    case Op::kCompareSwap:
    case Op::kFetchAdd:
      if (st->old_out) *st->old_out = st->result;
      break;
    case Op::kSend:
    case Op::kWrite:
      break;
  }
  FreeOp(st);
  return true;
}

bool OfiEndpoint::MapError(const fi_cq_err_entry& e, Completion* c) {
  auto* st = static_cast<OpState*>(e.op_context);
  if (st == nullptr) return false;
  // A multi-recv buffer stays posted after a failed message unless the
  // provider says it is retired.
  const bool retire = !st->multi || (e.flags & FI_MULTI_RECV);
  if (st->phase == Phase::kTimedOut) {
    if (retire) FreeOp(st);
    return false;
  }
  c->context = st->user_context;
  c->op = st->op;
  c->status = MapFiErr(e.err);
  if (c->status == Code::kOk) c->status = Code::kIoError;
  // We never fi_cancel an initiator operation: rxm cancels them when it
  // tears down the connection to a peer that went away.
  if (c->status == Code::kAborted && st->op != Op::kRecv) c->status = Code::kUnavailable;
  c->len = 0;
  c->data = nullptr;
  c->buffer_released = st->multi && retire;
  if (retire) FreeOp(st);
  return true;
}

size_t OfiEndpoint::ReadCq(std::span<Completion> out) {
  size_t produced = 0;
  fi_cq_data_entry entries[kCqBatch];
  while (produced < out.size()) {
    const size_t want = std::min(kCqBatch, out.size() - produced);
    ssize_t n = fi_cq_read(cq_, entries, want);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if (MapEntry(entries[i], &out[produced])) ++produced;
      }
      if (static_cast<size_t>(n) < want) break;
      continue;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) == 1 && MapError(err, &out[produced])) ++produced;
      continue;
    }
    break;  // -FI_EAGAIN: empty
  }
  return produced;
}

void OfiEndpoint::ProgressToPending() {
  std::array<Completion, kCqBatch> buf;
  size_t n;
  do {
    n = ReadCq(buf);
    pending_.insert(pending_.end(), buf.begin(), buf.begin() + n);
  } while (n == buf.size());
  DrainBacklog();
}

size_t OfiEndpoint::ExpireTimeouts(std::span<Completion> out) {
  if (head_ == nullptr) return 0;
  const auto now = Clock::now();
  size_t n = 0;
  auto emit = [&](OpState* st, Code code) {
    Untrack(st);
    Completion c;
    c.context = st->user_context;
    c.op = st->op;
    c.status = code;
    if (n < out.size()) {
      out[n++] = c;
    } else {
      pending_.push_back(c);
    }
    if (st->deferred) {
      FreeOp(st);  // never posted: no late completion will come
    } else {
      st->phase = Phase::kTimedOut;  // freed when the provider completes it
    }
  };
  while (head_ != nullptr && head_->deadline <= now) {
    OpState* st = head_;
    const PeerId peer = st->peer;
    emit(st, Code::kTimeout);
    // The peer stopped answering: the connection is considered reset, so
    // everything else in flight to it fails now rather than one op_timeout at
    // a time. Later operations start afresh (and time out too if the peer is
    // really gone).
    for (OpState* o = head_; o != nullptr;) {
      OpState* next = o->next;
      if (o->peer == peer) emit(o, Code::kUnavailable);
      o = next;
    }
  }
  return n;
}

size_t OfiEndpoint::Poll(std::span<Completion> out) {
  size_t n = 0;
  while (n < out.size() && !pending_.empty()) {
    out[n++] = pending_.front();
    pending_.pop_front();
  }
  if (n < out.size()) {
    n += ReadCq(out.subspan(n));
    DrainBacklog();
  } else if (out.empty()) {
    // Still drive progress: a target's NIC thread may poll only to serve
    // peers' one-sided operations.
    ProgressToPending();
  }
  n += ExpireTimeouts(out.subspan(n));
  return n;
}

void OfiEndpoint::Wait(std::chrono::nanoseconds timeout) {
  if (!pending_.empty()) return;
  const auto start = Clock::now();
  auto deadline = start + timeout;
  // Wake up in time to report an operation's timeout.
  if (head_ != nullptr && head_->deadline < deadline) deadline = head_->deadline;
  // Deferred posts wait for the peer, which signals nothing on our wait
  // object: retry them at least every kMaxSleep.
  if (bhead_ != nullptr) deadline = std::min(deadline, start + kMaxSleep);

  const auto spin_end = std::min(deadline, start + kWaitSpin);
  do {
    ProgressToPending();
    if (!pending_.empty()) return;
  } while (Clock::now() < spin_end);

  if (wait_fd_ >= 0) {
    fid* fids[1] = {&cq_->fid};
    for (;;) {
      const auto now = Clock::now();
      if (now >= deadline) return;
      // fi_trywait fails when the provider has queued events or must make
      // progress before the fd can be trusted; only then may we block.
      if (fi_trywait(core_->fabric, fids, 1) == FI_SUCCESS) {
        const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
        timespec ts{static_cast<time_t>(left.count() / 1000000000),
                    static_cast<long>(left.count() % 1000000000)};
        pollfd pfd{wait_fd_, POLLIN, 0};
        ppoll(&pfd, 1, &ts, nullptr);
        ProgressToPending();
        return;
      }
      ProgressToPending();
      if (!pending_.empty()) return;
    }
  }

  // No wait object (shm): fi_cq_sread with a timeout does not return in
  // libfabric 1.17 (DESIGN.md), so sleep in growing steps and progress in
  // between. Incoming one-sided operations wait at most kMaxSleep.
  auto step = std::chrono::duration_cast<std::chrono::nanoseconds>(kFirstSleep);
  for (;;) {
    const auto now = Clock::now();
    if (now >= deadline) return;
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now);
    const auto nap = std::min(step, left);
    timespec ts{static_cast<time_t>(nap.count() / 1000000000),
                static_cast<long>(nap.count() % 1000000000)};
    nanosleep(&ts, nullptr);
    ProgressToPending();
    if (!pending_.empty()) return;
    step = std::min<std::chrono::nanoseconds>(step * 2, kMaxSleep);
  }
}

class OfiFabric final : public Fabric {
 public:
  explicit OfiFabric(std::shared_ptr<FabricCore> core) : core_(std::move(core)) {}
  std::string_view provider() const override { return core_->provider; }
  Result<std::unique_ptr<Endpoint>> CreateEndpoint(const EndpointOptions& options) override {
    if (options.cq_depth == 0) return Status::InvalidArgument("cq_depth must be positive");
    return OfiEndpoint::Create(core_, options);
  }

 private:
  std::shared_ptr<FabricCore> core_;
};

}  // namespace

Result<std::unique_ptr<Fabric>> OpenOfiFabric(const FabricOptions& options,
                                              const OfiOptions& ofi) {
  SLIP_ASSIGN_OR_RETURN(ProviderSpec spec, LookupProvider(options.provider));
  if (ofi.max_multi_recv_message == 0 || ofi.max_multi_recv_message % kStride != 0) {
    return Status::InvalidArgument("max_multi_recv_message must be a positive multiple of 64");
  }
  std::string node = options.node_address;
  if (node.empty() && spec.name == "tcp") node = "127.0.0.1";

  auto core = std::make_shared<FabricCore>();
  core->ofi = ofi;
  core->provider = std::string(spec.name);
  auto info = GetInfo(spec, node, FI_MSG | FI_RMA | FI_ATOMIC | FI_MULTI_RECV,
                      ofi.remote_completion);
  if (!info.ok() && info.status().code() == Code::kNotSupported) {
    // A provider without atomics is still useful; CompareSwap/FetchAdd then
    // report NotSupported.
    info = GetInfo(spec, node, FI_MSG | FI_RMA | FI_MULTI_RECV, ofi.remote_completion);
  }
  if (!info.ok()) return info.status();
  core->info = std::move(*info);
  int ret = fi_fabric(core->info->fabric_attr, &core->fabric, nullptr);
  if (ret) return FiStatus("fi_fabric", ret);
  return std::unique_ptr<Fabric>(new OfiFabric(std::move(core)));
}

Result<std::unique_ptr<Fabric>> OpenOfiFabric(const FabricOptions& options) {
  return OpenOfiFabric(options, OfiOptions{});
}

}  // namespace slip::fabric
