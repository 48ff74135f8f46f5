// ZooKeeper backend of ConfigStore (zookeeper_store.h). Uses the C client's
// synchronous calls under one mutex per store (control-plane traffic; no
// need for pipelining), and its asynchronous exists-watch for Watch. User
// callbacks never run on libzookeeper's completion thread: a synchronous
// call made from there would wait for a completion only that thread can
// deliver, so they are handed to our own notifier thread.
#include "cluster/zookeeper_store.h"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include "cluster/config_json.h"

namespace slip::cluster {
namespace {

Status ZkStatus(int rc, const std::string& what) {
  const std::string m = "zookeeper " + what + ": " + zerror(rc);
  switch (rc) {
    case ZOK: return Status::Ok();
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
    case ZCLOSING: return Status::Unavailable(m);
    case ZNONODE: return Status::NotFound(m);
    case ZBADVERSION:
    case ZNODEEXISTS: return Status::Aborted(m);
    case ZBADARGUMENTS: return Status::InvalidArgument(m);
    default: return Status::IoError(m);
  }
}

void DiscardLog(const char*) {}

Status CheckLeaseName(const std::string& name) {
  if (name.empty() || name.size() > 100 || name[0] == '.' ||
      name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
          std::string::npos) {
    return Status::InvalidArgument("lease name \"" + name + "\": use [A-Za-z0-9_.-], 1..100 chars");
  }
  return Status::Ok();
}

// Runs callbacks on one thread of its own, in order. Destruction drops what
// has not run yet.
class Notifier {
 public:
  Notifier() : thread_([this] { Loop(); }) {}
  ~Notifier() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Post(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return;
      queue_.push_back(std::move(fn));
    }
    cv_.notify_all();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      l.unlock();
      fn();
      l.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                         // guarded by mu_
  std::deque<std::function<void()>> queue_;   // guarded by mu_
  std::thread thread_;
};

class ZkStore final : public ConfigStore {
 public:
  explicit ZkStore(ZooKeeperStoreOptions o)
      : opt_(std::move(o)), config_path_(opt_.root + "/config"), lease_dir_(opt_.root + "/leases") {}

  ~ZkStore() override {
    closing_.store(true);
    std::lock_guard<std::mutex> l(mu_);
    if (zh_ != nullptr) zookeeper_close(zh_);  // joins libzookeeper's threads
    zh_ = nullptr;
    // watches_ (their contexts) die after this; nothing refers to them now.
  }

  Status Open() {
    std::lock_guard<std::mutex> l(mu_);
    SLIP_ASSIGN_OR_RETURN(zhandle_t * zh, Connected());
    SLIP_RETURN_IF_ERROR(EnsurePath(zh, opt_.root));
    return EnsurePath(zh, lease_dir_);
  }

  Result<VersionedConfig> Load() override {
    std::lock_guard<std::mutex> l(mu_);
    SLIP_ASSIGN_OR_RETURN(zhandle_t * zh, Connected());
    Stat st;
    SLIP_ASSIGN_OR_RETURN(std::string data, Get(zh, config_path_, &st));
    Result<ClusterConfig> c = DecodeJson(data);
    if (!c.ok()) return Status(c.status().code(), config_path_ + ": " + c.status().message());
    return VersionedConfig{std::move(c).value(), Version(st)};
  }

  Result<uint64_t> CompareAndSwap(uint64_t expected, const ClusterConfig& config) override {
    SLIP_RETURN_IF_ERROR(config.Validate());
    const std::string data = internal::Dump(internal::ToJson(config), -1);
    std::lock_guard<std::mutex> l(mu_);
    SLIP_ASSIGN_OR_RETURN(zhandle_t * zh, Connected());
    if (expected == kNoVersion) {
      Stat st;
      int rc = zoo_create2(zh, config_path_.c_str(), data.data(), static_cast<int>(data.size()),
                           &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0, &st);
      if (rc == ZNONODE) {  // root removed behind our back
        SLIP_RETURN_IF_ERROR(EnsurePath(zh, opt_.root));
        rc = zoo_create2(zh, config_path_.c_str(), data.data(), static_cast<int>(data.size()),
                         &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0, &st);
      }
      if (rc == ZNODEEXISTS) return Status::Aborted("config store: a configuration exists already");
      SLIP_RETURN_IF_ERROR(ZkStatus(rc, "create " + config_path_));
      return Version(st);
    }
    // Read first for the term check; the conditional set below makes the
    // read-check-write atomic (any write in between changes the version).
    Stat st;
    Result<std::string> cur = Get(zh, config_path_, &st);
    if (!cur.ok()) {
      if (cur.status().Is(Code::kNotFound)) {
        return Status::Aborted("config store: nothing stored, expected version " +
                               std::to_string(expected));
      }
      return cur.status();
    }
    if (Version(st) != expected) {
      return Status::Aborted("config store: version is " + std::to_string(Version(st)) +
                             ", expected " + std::to_string(expected));
    }
    Result<ClusterConfig> stored = DecodeJson(*cur);
    if (!stored.ok()) return Status(stored.status().code(), config_path_ + ": " + stored.status().message());
    if (config.term <= stored->term) {
      return Status::InvalidArgument("config store: term " + std::to_string(config.term) +
                                     " does not rise above stored term " +
                                     std::to_string(stored->term));
    }
    const int rc = zoo_set2(zh, config_path_.c_str(), data.data(), static_cast<int>(data.size()),
                            static_cast<int>(expected - 1), &st);
    if (rc == ZBADVERSION || rc == ZNONODE) {
      return Status::Aborted("config store: changed concurrently (expected version " +
                             std::to_string(expected) + ")");
    }
    SLIP_RETURN_IF_ERROR(ZkStatus(rc, "set " + config_path_));
    return Version(st);
  }

  Status Watch(uint64_t known, std::function<void()> changed) override {
    std::lock_guard<std::mutex> l(mu_);
    SLIP_ASSIGN_OR_RETURN(zhandle_t * zh, Connected());
    // Contexts ZooKeeper will not call again can go.
    watches_.remove_if([](const std::unique_ptr<WatchCtx>& w) { return w->done.load(); });
    auto ctx = std::make_unique<WatchCtx>();
    ctx->store = this;
    ctx->known = known;
    ctx->changed = std::move(changed);
    WatchCtx* raw = ctx.get();
    watches_.push_back(std::move(ctx));
    const int rc = zoo_awexists(zh, config_path_.c_str(), &ZkStore::OnWatch, raw,
                                &ZkStore::OnExists, raw);
    if (rc != ZOK) {
      watches_.pop_back();
      return ZkStatus(rc, "exists " + config_path_);
    }
    return Status::Ok();
  }

  Result<Lease> AcquireLease(const std::string& name, const std::string& holder, Nanos ttl,
                             Nanos now) override {
    SLIP_RETURN_IF_ERROR(CheckLeaseName(name));
    if (holder.empty()) return Status::InvalidArgument("lease holder is empty");
    if (ttl <= 0) return Status::InvalidArgument("lease ttl must be positive");
    std::lock_guard<std::mutex> l(mu_);
    SLIP_ASSIGN_OR_RETURN(zhandle_t * zh, Connected());
    const std::string path = lease_dir_ + "/" + name;
    for (int attempt = 0; attempt < 5; attempt++) {
      Stat st;
      int rc = zoo_create2(zh, path.c_str(), holder.data(), static_cast<int>(holder.size()),
                           &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL, nullptr, 0, &st);
      if (rc == ZOK) return Lease{name, holder, static_cast<uint64_t>(st.czxid), Expiry(zh, ttl, now)};
      if (rc == ZNONODE) {
        SLIP_RETURN_IF_ERROR(EnsurePath(zh, lease_dir_));
        continue;
      }
      if (rc != ZNODEEXISTS) return ZkStatus(rc, "create " + path);
      Result<std::string> cur = Get(zh, path, &st);
      if (!cur.ok()) {
        if (cur.status().Is(Code::kNotFound)) continue;  // released meanwhile: try again
        return cur.status();
      }
      if (st.ephemeralOwner == Session(zh) && *cur == holder) {
        return Lease{name, holder, static_cast<uint64_t>(st.czxid), Expiry(zh, ttl, now)};
      }
      return Status::Busy("lease " + name + " held by " + *cur +
                          " (until its ZooKeeper session ends)");
    }
    return Status::Busy("lease " + name + " keeps changing hands");
  }

  Result<Lease> RenewLease(const Lease& lease, Nanos ttl, Nanos now) override {
    SLIP_RETURN_IF_ERROR(CheckLeaseName(lease.name));
    if (ttl <= 0) return Status::InvalidArgument("lease ttl must be positive");
    std::lock_guard<std::mutex> l(mu_);
    SLIP_ASSIGN_OR_RETURN(zhandle_t * zh, Connected());
    Stat st;
    SLIP_ASSIGN_OR_RETURN(bool ours, Owned(zh, lease, &st));
    if (!ours) return Status::Aborted("lease " + lease.name + " lost (session ended or taken over)");
    Lease renewed = lease;
    renewed.expiry = Expiry(zh, ttl, now);
    return renewed;
  }

  Status ReleaseLease(const Lease& lease) override {
    SLIP_RETURN_IF_ERROR(CheckLeaseName(lease.name));
    std::lock_guard<std::mutex> l(mu_);
    SLIP_ASSIGN_OR_RETURN(zhandle_t * zh, Connected());
    Stat st;
    SLIP_ASSIGN_OR_RETURN(bool ours, Owned(zh, lease, &st));
    if (!ours) return Status::Ok();
    const std::string path = lease_dir_ + "/" + lease.name;
    const int rc = zoo_delete(zh, path.c_str(), st.version);
    if (rc == ZNONODE) return Status::Ok();
    return ZkStatus(rc, "delete " + path);
  }

 private:
  struct WatchCtx {
    ZkStore* store = nullptr;
    uint64_t known = kNoVersion;
    std::function<void()> changed;
    std::atomic<bool> fired{false};
    std::atomic<bool> done{false};  // ZooKeeper holds no reference any more
  };

  static uint64_t Version(const Stat& st) { return static_cast<uint64_t>(st.version) + 1; }
  static int64_t Session(zhandle_t* zh) { return zoo_client_id(zh)->client_id; }

  static Nanos Expiry(zhandle_t* zh, Nanos ttl, Nanos now) {
    const Nanos session = static_cast<Nanos>(zoo_recv_timeout(zh)) * runtime::kMillisecond;
    return now + std::min(ttl, session);
  }

  // REQUIRES mu_. The handle, connected; a new session if the old one
  // expired. Unavailable when no server answers within connect_timeout.
  Result<zhandle_t*> Connected() {
    // A watch callback calling in while the store is destroyed must not
    // open a new session on a dying object.
    if (closing_.load()) return Status::Aborted("zookeeper store is closing");
    if (zh_ != nullptr) {
      const int state = zoo_state(zh_);
      if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
        zookeeper_close(zh_);
        zh_ = nullptr;
      }
    }
    if (zh_ == nullptr) {
      const int timeout_ms =
          static_cast<int>(std::max<Nanos>(opt_.session_timeout / runtime::kMillisecond, 1));
      zh_ = zookeeper_init2(opt_.connect.c_str(), &ZkStore::OnSession, timeout_ms, nullptr, this, 0,
                            opt_.client_log ? nullptr : &DiscardLog);
      if (zh_ == nullptr) {
        return Status::InvalidArgument("zookeeper: cannot start a client for \"" + opt_.connect +
                                       "\": " + std::strerror(errno));
      }
    }
    std::unique_lock<std::mutex> l(state_mu_);
    const bool up = state_cv_.wait_for(l, std::chrono::nanoseconds(opt_.connect_timeout), [&] {
      return zoo_state(zh_) == ZOO_CONNECTED_STATE;
    });
    if (!up) {
      return Status::Unavailable("zookeeper at " + opt_.connect + " not reachable within " +
                                 std::to_string(opt_.connect_timeout / runtime::kMillisecond) +
                                 " ms");
    }
    return zh_;
  }

  // Data of `path` (NotFound if it does not exist), whatever its size.
  static Result<std::string> Get(zhandle_t* zh, const std::string& path, Stat* st) {
    std::string buf(64 * 1024, '\0');
    for (int attempt = 0; attempt < 5; attempt++) {
      int len = static_cast<int>(buf.size());
      const int rc = zoo_get(zh, path.c_str(), 0, buf.data(), &len, st);
      SLIP_RETURN_IF_ERROR(ZkStatus(rc, "get " + path));
      if (st->dataLength <= static_cast<int32_t>(buf.size())) {
        buf.resize(static_cast<size_t>(std::max(len, 0)));
        return buf;
      }
      buf.resize(static_cast<size_t>(st->dataLength));  // grew meanwhile: read again
    }
    return Status::Aborted("zookeeper get " + path + ": keeps growing");
  }

  // Whether `lease` is still this session's (and holder's) ephemeral node.
  Result<bool> Owned(zhandle_t* zh, const Lease& lease, Stat* st) {
    Result<std::string> cur = Get(zh, lease_dir_ + "/" + lease.name, st);
    if (!cur.ok()) {
      if (cur.status().Is(Code::kNotFound)) return false;
      return cur.status();
    }
    return st->ephemeralOwner == Session(zh) && static_cast<uint64_t>(st->czxid) == lease.epoch &&
           *cur == lease.holder;
  }

  static Status EnsurePath(zhandle_t* zh, const std::string& path) {
    if (path.empty() || path[0] != '/' || path.back() == '/') {
      return Status::InvalidArgument("zookeeper path \"" + path + "\" must be absolute, no trailing /");
    }
    for (size_t pos = 1;; pos++) {
      pos = path.find('/', pos);
      const std::string prefix = path.substr(0, pos);
      const int rc = zoo_create(zh, prefix.c_str(), nullptr, -1, &ZOO_OPEN_ACL_UNSAFE, 0, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return ZkStatus(rc, "create " + prefix);
      if (pos == std::string::npos) return Status::Ok();
    }
  }

  // libzookeeper's threads call these.
  static void OnSession(zhandle_t*, int type, int, const char*, void* ctx) {
    if (type != ZOO_SESSION_EVENT) return;
    auto* self = static_cast<ZkStore*>(ctx);
    { std::lock_guard<std::mutex> l(self->state_mu_); }
    self->state_cv_.notify_all();
  }

  static void OnExists(int rc, const Stat* st, const void* data) {
    auto* w = static_cast<WatchCtx*>(const_cast<void*>(data));
    if (w->store->closing_.load()) return;
    uint64_t version = kNoVersion;
    if (rc == ZOK) {
      version = Version(*st);
    } else if (rc != ZNONODE) {
      w->store->Fire(w);  // cannot tell: say "maybe changed"
      return;
    }
    if (version != w->known) w->store->Fire(w);
  }

  static void OnWatch(zhandle_t*, int type, int state, const char*, void* ctx) {
    auto* w = static_cast<WatchCtx*>(ctx);
    if (w->store->closing_.load()) return;
    if (type == ZOO_SESSION_EVENT) {
      // Disconnects are survived (the client re-arms watches on the same
      // session); an expired session loses them.
      if (state == ZOO_EXPIRED_SESSION_STATE) w->store->Fire(w);
      return;
    }
    w->store->Fire(w);
    w->done.store(true);  // last touch: a real event removes the ZooKeeper watch
  }

  void Fire(WatchCtx* w) {
    if (w->fired.exchange(true)) return;
    notifier_.Post(std::move(w->changed));
  }

  const ZooKeeperStoreOptions opt_;
  const std::string config_path_, lease_dir_;
  std::atomic<bool> closing_{false};
  std::mutex mu_;  // serialises calls; guards zh_ and watches_
  zhandle_t* zh_ = nullptr;
  std::list<std::unique_ptr<WatchCtx>> watches_;
  std::mutex state_mu_;  // with state_cv_: wakes Connected() on session events
  std::condition_variable state_cv_;
  Notifier notifier_;
};

}  // namespace

Result<std::unique_ptr<ConfigStore>> OpenZooKeeperStore(const ZooKeeperStoreOptions& options) {
  if (options.connect.empty()) return Status::InvalidArgument("zookeeper: no connect string");
  if (options.root.empty() || options.root[0] != '/' || options.root.back() == '/') {
    return Status::InvalidArgument("zookeeper root \"" + options.root +
                                   "\" must be absolute, no trailing /");
  }
  if (options.session_timeout <= 0 || options.connect_timeout <= 0) {
    return Status::InvalidArgument("zookeeper: timeouts must be positive");
  }
  auto store = std::make_unique<ZkStore>(options);
  SLIP_RETURN_IF_ERROR(store->Open());
  return std::unique_ptr<ConfigStore>(std::move(store));
}

}  // namespace slip::cluster
