#include "auth/key_source.h"

#include <sys/stat.h>

#include "common/log.h"
#include "runtime/runtime.h"

namespace slip::auth {
namespace {

bool Stat(const std::string& path, int64_t* mtime_ns, int64_t* size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  *mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  *size = st.st_size;
  return true;
}

}  // namespace

KeySource::KeySource(std::string path, Keyring keys)
    : path_(std::move(path)), keys_(std::make_shared<const Keyring>(std::move(keys))) {}

Result<std::shared_ptr<KeySource>> KeySource::Open(const std::string& path) {
  int64_t mtime = 0, size = -1;
  Stat(path, &mtime, &size);
  SLIP_ASSIGN_OR_RETURN(Keyring keys, ReadKeyringFile(path));
  std::shared_ptr<KeySource> s(new KeySource(path, std::move(keys)));
  s->mtime_ns_ = mtime;
  s->size_ = size;
  return s;
}

std::shared_ptr<KeySource> KeySource::Fixed(Keyring keys) {
  return std::shared_ptr<KeySource>(new KeySource("", std::move(keys)));
}

std::shared_ptr<const Keyring> KeySource::keys() const {
  std::lock_guard<std::mutex> l(mu_);
  return keys_;
}

void KeySource::Set(Keyring keys) {
  {
    std::lock_guard<std::mutex> l(mu_);
    keys_ = std::make_shared<const Keyring>(std::move(keys));
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

Status KeySource::Reload() {
  if (path_.empty()) return Status::Ok();
  int64_t mtime = 0, size = -1;
  if (!Stat(path_, &mtime, &size)) return Status::IoError("cannot stat the secret file " + path_);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (mtime == mtime_ns_ && size == size_) return Status::Ok();
  }
  auto keys = ReadKeyringFile(path_);
  if (!keys.ok()) return keys.status();
  {
    std::lock_guard<std::mutex> l(mu_);
    mtime_ns_ = mtime;
    size_ = size;
  }
  Set(std::move(*keys));
  logging::Info("auth: reloaded {} (current key {})", path_, this->keys()->current().id);
  return Status::Ok();
}

void KeySource::Watch(const std::shared_ptr<KeySource>& source, runtime::Executor* exec,
                      std::chrono::milliseconds period) {
  if (source == nullptr || source->path_.empty()) return;
  const runtime::Nanos every = std::chrono::duration_cast<std::chrono::nanoseconds>(period).count();
  // Re-arms itself; holds the source only weakly, so it stops with it.
  struct Tick {
    std::weak_ptr<KeySource> source;
    runtime::Executor* exec;
    runtime::Nanos every;
    void operator()() const {
      auto s = source.lock();
      if (s == nullptr) return;
      if (Status st = s->Reload(); !st.ok()) logging::Warn("auth: keeping the keyring in use: {}", st.ToString());
      exec->After(every, *this);
    }
  };
  exec->After(every, Tick{source, exec, every});
}

Result<std::shared_ptr<KeySource>> OpenClusterKeys(const std::string& cluster_dir, const std::string& secret_file) {
  if (!secret_file.empty()) return KeySource::Open(secret_file);
  if (cluster_dir.empty()) return std::shared_ptr<KeySource>();
  const std::string path = SecretPath(cluster_dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::shared_ptr<KeySource>();
  return KeySource::Open(path);
}

}  // namespace slip::auth
