// The embedded ConfigStore backend (config_store.h): one directory, one
// machine. Every read-modify-write holds an exclusive flock, taken on a
// fresh open() each time, so it serialises threads of one process as well
// as separate processes (flock locks belong to the open file description):
// DIR/cluster.lock for the configuration, DIR/lease-<name>.lock for each
// lease, so a renewal never queues behind a configuration change's fsyncs.
// Readers need no lock: files are only ever replaced by rename(2), which is
// atomic, so a reader sees the old or the new file, never a mix; fsync of
// the temp file before the rename and of the directory after it makes the
// replacement survive a crash.
//
// Renewals alone are not fsync'd. They come from every holder every quarter
// ttl, and on a loaded disk an fsync waits for the journal's commit of
// everyone's dirty data: renewals of 1.3 s were seen, and holders lost
// leases of 1 s while alive. A renewal only moves the expiry, into its own
// file (lease-<name>.renewal, tagged with the epoch); the epoch, which must
// never be granted twice, stays in the durable lease file. A crash of the
// machine that loses or tears a renewal file leaves an earlier expiry — and
// a crash of the machine has ended every holder on it anyway.
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "cluster/config_json.h"
#include "cluster/lease_rules.h"
#include "cluster/config_store.h"
#include "common/log.h"

namespace slip::cluster {
namespace {

using nlohmann::json;

constexpr const char* kConfigFile = "cluster.json";
constexpr const char* kLockFile = "cluster.lock";
constexpr const char* kStoreFormat = "slipstream.config_store";
constexpr uint64_t kStoreFormatVersion = 1;

Status Errno(const std::string& what) {
  return Status::IoError(what + ": " + std::strerror(errno));
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

Status WriteAll(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("write " + path);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// NotFound if the file does not exist.
Result<std::string> ReadFile(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return Status::NotFound(path);
    return Errno("open " + path);
  }
  std::string out;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// inotify on the store's directory, reporting whether one file in it may
// have changed. The file is only ever replaced by rename(2) into the
// directory, which inotify reports on any local filesystem (a hand edit in
// place is reported at its close); other files (lease renewals, temp files)
// come and go there too and are ignored.
class DirWatch {
 public:
  DirWatch(std::string dir, std::string file) : dir_(std::move(dir)), file_(std::move(file)) {}
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;
  ~DirWatch() { Drop(); }

  // Starts watching; false (errno set) where the directory cannot be
  // watched: no inotify, the limit of watches reached, no directory.
  bool Open() {
    Drop();
    fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    // Not IN_CREATE or IN_MODIFY: a file is complete only at its close or
    // rename. Lock files are opened read-only, so taking a lock is silent.
    constexpr uint32_t kMask =
        IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF;
    if (fd_ >= 0 && ::inotify_add_watch(fd_, dir_.c_str(), kMask) < 0) {
      const int e = errno;
      Drop();
      errno = e;
    }
    return ok();
  }

  // False before Open, where it failed, or once the directory was moved or
  // removed (a watch on a path would not follow a new directory there).
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // Reads every queued event: true if one may concern the file — it names
  // it, the queue overflowed, or the directory itself went (which ends the
  // watch: ok() turns false).
  bool Drain() {
    bool hit = false;
    alignas(inotify_event) char buf[4096];
    while (fd_ >= 0) {
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) {
        if (n < 0 && errno == EINTR) continue;
        break;  // EAGAIN: drained
      }
      for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
        const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
        off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
        if (ev->mask & IN_Q_OVERFLOW) hit = true;
        if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
          hit = true;
          Drop();
          break;
        }
        if (ev->len > 0 && file_ == ev->name) hit = true;
      }
    }
    return hit;
  }

 private:
  void Drop() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  const std::string dir_;
  const std::string file_;
  int fd_ = -1;
};

class EmbeddedStore final : public ConfigStore {
 public:
  explicit EmbeddedStore(EmbeddedStoreOptions o) : opt_(std::move(o)) {}
  ~EmbeddedStore() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    Notify();
    if (watcher_.joinable()) watcher_.join();
  }

  Result<VersionedConfig> Load() override { return ReadConfig(); }

  Result<uint64_t> CompareAndSwap(uint64_t expected, const ClusterConfig& config) override {
    SLIP_RETURN_IF_ERROR(config.Validate());
    SLIP_ASSIGN_OR_RETURN(Fd lock, Lock());
    uint64_t current = kNoVersion;
    uint64_t term = 0;
    Result<VersionedConfig> stored = ReadConfig();
    if (stored.ok()) {
      current = stored->version;
      term = stored->config.term;
    } else if (!stored.status().Is(Code::kNotFound)) {
      return stored.status();  // never overwrite what we cannot read
    }
    if (current != expected) {
      return Status::Aborted("config store: version is " + std::to_string(current) +
                             ", expected " + std::to_string(expected));
    }
    if (config.term <= term) {
      return Status::InvalidArgument("config store: term " + std::to_string(config.term) +
                                     " does not rise above stored term " + std::to_string(term));
    }
    const uint64_t next = current + 1;
    json doc{{"format", kStoreFormat},
             {"format_version", kStoreFormatVersion},
             {"version", next},
             {"config", internal::ToJson(config)}};
    SLIP_RETURN_IF_ERROR(ReplaceFile(kConfigFile, internal::Dump(doc, 2) + "\n"));
    Notify();  // a local watcher need not wait for its next look
    return next;
  }

  Status Watch(uint64_t known, std::function<void()> changed) override {
    std::lock_guard<std::mutex> l(mu_);
    watches_.push_back({known, std::move(changed)});
    if (!watcher_.joinable()) watcher_ = std::thread([this] { WatchLoop(); });
    Notify();
    return Status::Ok();
  }

  Result<Lease> AcquireLease(const std::string& name, const std::string& holder, Nanos ttl,
                             Nanos now) override {
    SLIP_RETURN_IF_ERROR(CheckLeaseArgs(name, holder, ttl, now));
    SLIP_ASSIGN_OR_RETURN(Fd lock, Lock(LeaseLockFile(name)));
    SLIP_ASSIGN_OR_RETURN(LeaseFile cur, ReadLease(name));
    const bool live = !cur.holder.empty() && !Expired(cur, now);
    if (live && cur.holder != holder) {
      return Status::Busy("lease " + name + " held by " + cur.holder + " until " +
                          std::to_string(cur.expiry));
    }
    LeaseFile next{holder, live ? cur.epoch : cur.epoch + 1, now + ttl, ttl};
    SLIP_RETURN_IF_ERROR(WriteLease(name, next));
    return Lease{name, holder, next.epoch, next.expiry};
  }

  Result<Lease> RenewLease(const Lease& lease, Nanos ttl, Nanos now) override {
    SLIP_RETURN_IF_ERROR(CheckLeaseArgs(lease.name, lease.holder, ttl, now));
    SLIP_ASSIGN_OR_RETURN(Fd lock, Lock(LeaseLockFile(lease.name)));
    SLIP_ASSIGN_OR_RETURN(LeaseFile cur, ReadLease(lease.name));
    if (cur.holder != lease.holder || cur.epoch != lease.epoch) {
      return Status::Aborted("lease " + lease.name + " lost: now held by " +
                             (cur.holder.empty() ? std::string("nobody") : cur.holder) +
                             " (epoch " + std::to_string(cur.epoch) + ")");
    }
    if (Expired(cur, now)) {
      // Nobody took it yet, but the holder cannot know what happened while
      // it was expired; it must Acquire again (new epoch).
      return Status::Aborted("lease " + lease.name + " expired at " + std::to_string(cur.expiry));
    }
    SLIP_RETURN_IF_ERROR(WriteRenewal(lease.name, cur.epoch, now + ttl));
    return Lease{lease.name, lease.holder, cur.epoch, now + ttl};
  }

  Status ReleaseLease(const Lease& lease) override {
    SLIP_RETURN_IF_ERROR(CheckName(lease.name));
    SLIP_ASSIGN_OR_RETURN(Fd lock, Lock(LeaseLockFile(lease.name)));
    SLIP_ASSIGN_OR_RETURN(LeaseFile cur, ReadLease(lease.name));
    if (cur.holder != lease.holder || cur.epoch != lease.epoch) return Status::Ok();
    // Keep the epoch: the next holder must get a higher one.
    return WriteLease(lease.name, LeaseFile{"", cur.epoch, 0, 0});
  }

  Status Init() {
    if (wake_.get() < 0) return Errno("eventfd");
    if (::mkdir(opt_.dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return Errno("mkdir " + opt_.dir);
    }
    struct stat st;
    if (::stat(opt_.dir.c_str(), &st) != 0) return Errno("stat " + opt_.dir);
    if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(opt_.dir + " is not a directory");
    SLIP_ASSIGN_OR_RETURN(Fd lock, Lock());  // proves we can create and lock it
    return Status::Ok();
  }

 private:
  struct LeaseFile {
    std::string holder;  // "" = free (released, or never held)
    uint64_t epoch = 0;
    Nanos expiry = 0;
    Nanos ttl = 0;
  };
  struct PendingWatch {
    uint64_t known;
    std::function<void()> changed;
  };

  std::string Path(const std::string& name) const { return opt_.dir + "/" + name; }

  Result<Fd> Lock(const std::string& file = kLockFile) const {
    const std::string path = Path(file);
    // Read-only: flock needs no more, and closing it raises no inotify event
    // (a watcher is not woken by every lock taken).
    Fd fd(::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644));
    if (fd.get() < 0) return Errno("open " + path);
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return Errno("flock " + path);
    }
    return fd;
  }

  // Atomic replace of DIR/name, crash-safe when `durable`. Caller holds the
  // file's lock, so the temp name is ours alone; a temp file left by a crash
  // is simply overwritten.
  Status ReplaceFile(const std::string& name, std::string_view data, bool durable = true) const {
    const std::string path = Path(name), tmp = path + ".tmp";
    {
      Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (fd.get() < 0) return Errno("open " + tmp);
      SLIP_RETURN_IF_ERROR(WriteAll(fd.get(), data, tmp));
      if (durable && ::fsync(fd.get()) != 0) return Errno("fsync " + tmp);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("rename " + tmp);
    if (!durable) return Status::Ok();
    Fd dir(::open(opt_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() < 0 || ::fsync(dir.get()) != 0) return Errno("fsync " + opt_.dir);
    return Status::Ok();
  }

  Result<VersionedConfig> ReadConfig() const {
    const std::string path = Path(kConfigFile);
    SLIP_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    auto bad = [&](const std::string& m) { return Status::Corruption(path + ": " + m); };
    json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) return bad("not a JSON object");
    SLIP_ASSIGN_OR_RETURN(std::string format, internal::GetString(doc, "format"));
    if (format != kStoreFormat) return bad("format is \"" + format + "\"");
    SLIP_ASSIGN_OR_RETURN(uint64_t fv, internal::GetUint(doc, "format_version", UINT32_MAX));
    if (fv != kStoreFormatVersion) {
      return Status::NotSupported(path + ": format_version " + std::to_string(fv));
    }
    SLIP_RETURN_IF_ERROR(
        internal::OnlyFields(doc, {"format", "format_version", "version", "config"}, "store"));
    VersionedConfig vc;
    SLIP_ASSIGN_OR_RETURN(vc.version,
                          internal::GetUint(doc, "version", std::numeric_limits<uint64_t>::max()));
    if (vc.version == kNoVersion) return bad("version 0");
    auto it = doc.find("config");
    if (it == doc.end()) return bad("missing \"config\"");
    Result<ClusterConfig> c = internal::FromJson(*it);
    if (!c.ok()) return Status(c.status().code(), path + ": " + c.status().message());
    vc.config = std::move(c).value();
    return vc;
  }

  static Status CheckName(const std::string& name) { return internal::CheckLeaseName(name); }
  static Status CheckLeaseArgs(const std::string& name, const std::string& holder, Nanos ttl, Nanos now) {
    return internal::CheckLeaseArgs(name, holder, ttl, now);
  }
  static bool Expired(const LeaseFile& l, Nanos now) { return internal::LeaseExpired(l.expiry, l.ttl, now); }

  static std::string LeaseLockFile(const std::string& name) { return "lease-" + name + ".lock"; }

  // The durable lease file, its expiry moved on by the renewal file when
  // that is of the same epoch. A renewal file that does not decode is one a
  // crash of the machine tore (it is replaced atomically otherwise): its
  // holder died with the machine, so the earlier expiry stands. A file that
  // cannot be read is an error: taking the earlier expiry then could grant
  // a live holder's lease to another.
  Result<LeaseFile> ReadLease(const std::string& name) const {
    SLIP_ASSIGN_OR_RETURN(LeaseFile l, ReadDurableLease(name));
    Result<std::string> text = ReadFile(Path("lease-" + name + ".renewal"));
    if (text.status().Is(Code::kNotFound)) return l;
    SLIP_RETURN_IF_ERROR(text.status());
    json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) return l;
    const auto kMax = static_cast<uint64_t>(std::numeric_limits<Nanos>::max());
    Result<uint64_t> epoch = internal::GetUint(doc, "epoch", UINT64_MAX);
    Result<uint64_t> expiry = internal::GetUint(doc, "expiry_ns", kMax);
    if (epoch.ok() && expiry.ok() && *epoch == l.epoch) l.expiry = std::max(l.expiry, static_cast<Nanos>(*expiry));
    return l;
  }

  Result<LeaseFile> ReadDurableLease(const std::string& name) const {
    const std::string path = Path("lease-" + name + ".json");
    Result<std::string> text = ReadFile(path);
    if (!text.ok()) {
      if (text.status().Is(Code::kNotFound)) return LeaseFile{};
      return text.status();
    }
    json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
      return Status::Corruption(path + ": not a JSON object");
    }
    LeaseFile l;
    SLIP_ASSIGN_OR_RETURN(l.holder, internal::GetString(doc, "holder"));
    SLIP_ASSIGN_OR_RETURN(l.epoch, internal::GetUint(doc, "epoch", UINT64_MAX));
    const uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<Nanos>::max());
    SLIP_ASSIGN_OR_RETURN(uint64_t expiry, internal::GetUint(doc, "expiry_ns", kMax));
    SLIP_ASSIGN_OR_RETURN(uint64_t ttl, internal::GetUint(doc, "ttl_ns", kMax));
    l.expiry = static_cast<Nanos>(expiry);
    l.ttl = static_cast<Nanos>(ttl);
    return l;
  }

  Status WriteLease(const std::string& name, const LeaseFile& l) const {
    json doc{{"holder", l.holder}, {"epoch", l.epoch}, {"expiry_ns", l.expiry}, {"ttl_ns", l.ttl}};
    // Lease state must survive a crash of the machine too: a holder that
    // acted under a lease must not see it granted again with the same epoch.
    return ReplaceFile("lease-" + name + ".json", internal::Dump(doc, -1) + "\n");
  }

  Status WriteRenewal(const std::string& name, uint64_t epoch, Nanos expiry) const {
    json doc{{"epoch", epoch}, {"expiry_ns", expiry}};
    return ReplaceFile("lease-" + name + ".renewal", internal::Dump(doc, -1) + "\n", /*durable=*/false);
  }

  // Looks at the file while watches are pending: whenever inotify reports
  // it may have changed, and every recheck_interval anyway; where the
  // directory cannot be watched, every watch_interval, trying to watch it
  // again at each look. A version that cannot be read (missing, corrupt)
  // counts as kNoVersion. (Until 2026-11-28 it always polled, every 2 ms:
  // 500 wake-ups a second in every server, ~3% of a 2-core machine under
  // load.)
  void WatchLoop() {
    // Watching starts before the first look, so no change falls between.
    DirWatch dir(opt_.dir, kConfigFile);
    bool polling = opt_.inotify && !dir.Open();
    if (polling) WarnPolling();
    bool changed = true;
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      if (!watches_.empty()) {
        l.unlock();
        if (opt_.inotify && !dir.ok()) {
          // The directory went (moved, removed) or could never be watched.
          // Again: before the look, so a change after it is reported.
          if (dir.Open()) {
            logging::Info("config store {}: watching the directory again", opt_.dir);
            polling = false;
            changed = true;
          } else if (!polling) {
            polling = true;
            WarnPolling();
          }
        }
        // The file is replaced, never rewritten in place: a changed identity
        // (inode, size, modification time) means a new version, so a look
        // costs a stat, not a parse. An inode reused within the clock's
        // granularity could hide a change: a look inotify did not ask for
        // reads the file every tenth time whatever its identity says.
        struct stat st {};
        const bool seen = ::stat(Path(kConfigFile).c_str(), &st) == 0;
        const FileId id{seen ? st.st_ino : 0, seen ? st.st_size : -1, seen ? st.st_mtim.tv_sec : 0,
                        seen ? st.st_mtim.tv_nsec : 0};
        if (changed || !seen || !(id == last_id_) || ++polls_since_read_ >= 10) {
          polls_since_read_ = 0;
          Result<VersionedConfig> vc = ReadConfig();
          last_version_ = vc.ok() ? vc->version : kNoVersion;
          last_id_ = id;
        }
        changed = false;
        const uint64_t version = last_version_;
        l.lock();
        std::vector<std::function<void()>> fire;
        for (size_t i = 0; i < watches_.size();) {
          if (watches_[i].known != version) {
            fire.push_back(std::move(watches_[i].changed));
            watches_.erase(watches_.begin() + static_cast<ptrdiff_t>(i));
          } else {
            i++;
          }
        }
        if (!fire.empty()) {
          l.unlock();
          for (auto& f : fire) f();
          l.lock();
          continue;
        }
      }
      if (stop_) break;
      const Nanos wait = watches_.empty() ? -1 : dir.ok() ? opt_.recheck_interval : opt_.watch_interval;
      l.unlock();
      // A hit while no watch was pending still counts at the next look.
      changed = WaitForChange(dir, wait) || changed;
      l.lock();
    }
  }

  void WarnPolling() const {
    logging::Warn("config store {}: cannot watch the directory ({}); looking every {} us instead", opt_.dir,
                  std::strerror(errno), opt_.watch_interval / runtime::kMicrosecond);
  }

  // Waits up to `timeout` (negative: no limit) for Notify() or, with the
  // directory watched, an event. True if the file may have changed.
  bool WaitForChange(DirWatch& dir, Nanos timeout) {
    pollfd fds[2] = {{wake_.get(), POLLIN, 0}, {dir.fd(), POLLIN, 0}};
    const nfds_t n = dir.ok() ? 2 : 1;
    timespec ts{static_cast<time_t>(timeout / runtime::kSecond), static_cast<long>(timeout % runtime::kSecond)};
    if (::ppoll(fds, n, timeout < 0 ? nullptr : &ts, nullptr) <= 0) return false;
    if (fds[0].revents != 0) {
      uint64_t count;
      while (::read(wake_.get(), &count, sizeof count) < 0 && errno == EINTR) {
      }
    }
    return n == 2 && fds[1].revents != 0 && dir.Drain();
  }

  // Wakes the watcher: a watch added, the store stopping, a local change.
  void Notify() {
    const uint64_t one = 1;
    while (::write(wake_.get(), &one, sizeof one) < 0 && errno == EINTR) {
    }
  }

  struct FileId {
    ino_t ino;
    off_t size;
    time_t sec;
    long nsec;
    bool operator==(const FileId&) const = default;
  };

  const EmbeddedStoreOptions opt_;
  // The watcher thread's last read of the file (watcher thread only).
  FileId last_id_{0, -1, 0, 0};
  uint64_t last_version_ = kNoVersion;
  int polls_since_read_ = 0;
  // Counts Notify()s until the watcher reads it: a wake-up is never lost.
  Fd wake_{::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  std::mutex mu_;
  bool stop_ = false;                  // guarded by mu_
  std::vector<PendingWatch> watches_;  // guarded by mu_
  std::thread watcher_;                // started by the first Watch
};

}  // namespace

Result<std::unique_ptr<ConfigStore>> OpenEmbeddedStore(const EmbeddedStoreOptions& options) {
  if (options.dir.empty()) return Status::InvalidArgument("embedded store: no directory");
  if (options.watch_interval <= 0 || options.recheck_interval <= 0) {
    return Status::InvalidArgument("embedded store: watch_interval and recheck_interval must be positive");
  }
  auto store = std::make_unique<EmbeddedStore>(options);
  SLIP_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<ConfigStore>(std::move(store));
}

}  // namespace slip::cluster
