// The libfabric provider's control path: opening providers and domains,
// endpoints and their address vectors, memory registration, peers; and
// OpenOfiFabric.
#include "fabric/ofi/ofi_internal.h"

#include "common/log.h"

#include <sys/random.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

namespace slip::fabric {
namespace ofi_internal {

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
  key_bytes_ = info->domain_attr->mr_key_size;
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
  if (wait_fd_ < 0 && core_->provider == "shm") {
    // Without one, this endpoint runs as before: its executor polls it
    // every max_park.
    if (auto bell = Doorbell::Create(address_); bell.ok()) {
      bell_ = std::move(*bell);
      wait_fd_ = bell_->fd();
    } else {
      logging::Warn("{}", "shm endpoint without a doorbell (its executor wakes every max_park): " +
                              bell.status().ToString());
    }
  }

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
    if (p.bell >= 0) ::close(p.bell);
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
  // Without FI_MR_PROV_KEY the key is ours to choose: random, so a peer
  // that reaches this endpoint cannot guess the key of memory it was not
  // given (a counter made every region's key a small number). Unique per
  // domain: a collision is refused and another key drawn.
  int ret = 0;
  for (int attempt = 0; attempt < 8; ++attempt) {
    uint64_t key = 0;
    if (!prov_key_) {
      if (::getrandom(&key, sizeof(key), 0) != sizeof(key)) key = next_key_++ * 0x9E3779B97F4A7C15ull;
      if (key_bytes_ > 0 && key_bytes_ < sizeof(key)) key &= (uint64_t{1} << (8 * key_bytes_)) - 1;
      if (key == 0) key = 1;
    }
    ret = fi_mr_reg(domain_, base, len, access, 0, key, 0, &mr, nullptr);
    if (ret != -FI_ENOKEY || prov_key_) break;
  }
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
  if (core_->provider == "shm") {
    peer.bell = OpenDoorbell(address);
    peer.region_lock = RegionLockWatch::Open(address);
  }
  peers_.push_back(std::move(peer));
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


// rxm sends a message above its eager limit (16 KiB by default) by
// segmentation or rendezvous, and in libfabric 1.17 neither places messages
// correctly in a multi-receive buffer once several are in flight on a
// connection: we measured lost and torn messages with back-to-back 64 KiB
// sends (src/rpc/channel_ofi_test.cc, RpcOfiLargeTest), and none with every
// message eager. So every message we may send (at most
// max_multi_recv_message) must be eager. rxm reads the limit from the
// environment once, when libfabric first initialises it: set it before the
// first fi_getinfo, and refuse a later fabric that needs a larger one.
constexpr size_t kRxmHeaderSlack = 256;  // rxm's packet header, with room to spare

Status SetRxmEagerLimit(const ProviderSpec& spec, size_t max_message) {
  static std::mutex mu;
  static size_t limit = 0;  // what rxm was (or will be) initialised with
  std::lock_guard lock(mu);
  if (limit == 0) {
    limit = std::max<size_t>(max_message, 64 << 10);
    if (const char* set = std::getenv("FI_OFI_RXM_EAGER_LIMIT")) {
      limit = std::strtoull(set, nullptr, 10);
    } else {
      ::setenv("FI_OFI_RXM_EAGER_LIMIT", std::to_string(limit).c_str(), 0);
      // An eager message that arrives while no receive is posted (all our
      // multi-receive buffers retired, not yet reposted) waits in one of
      // rxm's bounce buffers; one shorter than the message truncates it and
      // the sender's Send fails with TooLarge (seen with 64 KiB values under
      // load). So the bounce buffers hold a largest message and rxm's
      // header (verbs also requires buffer size = eager limit + header).
      if (std::getenv("FI_OFI_RXM_BUFFER_SIZE") == nullptr) {
        ::setenv("FI_OFI_RXM_BUFFER_SIZE", std::to_string(limit + kRxmHeaderSlack).c_str(), 0);
        // rxm keeps 128 such buffers per connection by default: 64 KiB ones
        // cost a 3-node cluster's node ~250 MB. 32 still cover far more
        // unexpected messages than our few posted buffers ever leave
        // unplaced, and past them tcp applies back-pressure (nothing is
        // lost). Measured: node RSS 615 -> 416 MB.
        if (std::getenv("FI_OFI_RXM_MSG_RX_SIZE") == nullptr) ::setenv("FI_OFI_RXM_MSG_RX_SIZE", "32", 0);
      }
    }
  }
  if (spec.name != "shm" && max_message > limit) {
    return Status::InvalidArgument("max_multi_recv_message of " + std::to_string(max_message) +
                                   " exceeds rxm's eager limit of " + std::to_string(limit) +
                                   " in this process (FI_OFI_RXM_EAGER_LIMIT)");
  }
  return Status::Ok();
}

}  // namespace ofi_internal

using ofi_internal::FabricCore;
using ofi_internal::FiStatus;
using ofi_internal::GetInfo;
using ofi_internal::LookupProvider;
using ofi_internal::OfiFabric;
using ofi_internal::ProviderSpec;

Result<std::unique_ptr<Fabric>> OpenOfiFabric(const FabricOptions& options,
                                              const OfiOptions& ofi) {
  SLIP_ASSIGN_OR_RETURN(ProviderSpec spec, LookupProvider(options.provider));
  if (ofi.max_multi_recv_message == 0 || ofi.max_multi_recv_message % kStride != 0) {
    return Status::InvalidArgument("max_multi_recv_message must be a positive multiple of 64");
  }
  SLIP_RETURN_IF_ERROR(ofi_internal::SetRxmEagerLimit(spec, ofi.max_multi_recv_message));
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
