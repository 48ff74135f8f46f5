#include "rubble/slots.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "runtime/cost.h"

namespace slip::rubble {

namespace {

constexpr size_t kAlign = lsm::kDirectIoAlignment;

Status Errno(const std::string& what, const std::string& path) {
  return Status::IoError(what + " " + path + ": " + std::strerror(errno));
}

Status CheckGeometry(const SlotGeometry& g) {
  if (g.count == 0 || g.slot_bytes == 0 || g.slot_bytes % kAlign != 0) {
    return Status::InvalidArgument("slots must be a positive multiple of 4096 bytes, and at least one");
  }
  return Status::Ok();
}

// Writes all of [p, p+n) at `at`.
Status PwriteAll(int fd, const char* p, size_t n, uint64_t at, const std::string& what) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(at));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Errno("writing", what);
    }
    p += w;
    n -= static_cast<size_t>(w);
    at += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

// A slot as a file of its table's size: reads past the table are refused,
// whatever the slot holds beyond it (zeros, or nothing yet).
class SlotFile final : public lsm::RandomAccessFile {
 public:
  SlotFile(std::shared_ptr<lsm::RandomAccessFile> image, uint64_t base, uint64_t size)
      : image_(std::move(image)), base_(base), size_(size) {}
  Result<std::string_view> Read(uint64_t offset, size_t n, std::string* scratch) const override {
    if (offset > size_ || n > size_ - offset) return Status::Corruption("a read past the end of a slot's table");
    return image_->Read(base_ + offset, n, scratch);
  }
  uint64_t size() const override { return size_; }

 private:
  const std::shared_ptr<lsm::RandomAccessFile> image_;
  const uint64_t base_, size_;
};

}  // namespace

Status CreateSlotImage(const std::string& path, const SlotGeometry& g) {
  SLIP_RETURN_IF_ERROR(CheckGeometry(g));
  // Real zeros, not fallocate: a first write into an unwritten extent
  // would change the file system's metadata under a follower that has the
  // image open read-only.
  SLIP_ASSIGN_OR_RETURN(auto file, lsm::NewWritableFile(path));
  const std::string zeros(1 << 20, '\0');
  for (uint64_t left = g.image_bytes(); left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, zeros.size()));
    SLIP_RETURN_IF_ERROR(file->Append(std::string_view(zeros.data(), n)));
    left -= n;
  }
  SLIP_RETURN_IF_ERROR(file->Sync());
  const size_t slash = path.rfind('/');
  return lsm::SyncDir(slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1)));
}

Result<std::unique_ptr<SlotWriter>> SlotWriter::Open(const std::string& image, const SlotGeometry& g,
                                                     lsm::IoCounters* counters) {
  SLIP_RETURN_IF_ERROR(CheckGeometry(g));
  // O_DSYNC: a write is durable when it completes, as an NVMe write is
  // once its completion arrives.
  int fd = ::open(image.c_str(), O_WRONLY | O_DIRECT | O_DSYNC | O_CLOEXEC);
  if (fd < 0 && errno == EINVAL) fd = ::open(image.c_str(), O_WRONLY | O_DSYNC | O_CLOEXEC);
  if (fd < 0) return Errno("opening the slot image", image);
  struct stat;
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 0 || static_cast<uint64_t>(size) != g.image_bytes()) {
    ::close(fd);
    return Status::InvalidArgument("slot image " + image + " is not " + std::to_string(g.count) + " slots of " +
                                   std::to_string(g.slot_bytes) + " bytes");
  }
  return std::unique_ptr<SlotWriter>(new SlotWriter(fd, g, counters));
}

SlotWriter::~SlotWriter() {
  ::close(fd_);
  for (auto& [buf, dirty] : free_) std::free(buf);
}

Status SlotWriter::Write(uint32_t slot, std::string_view table) {
  if (slot == 0 || slot > geometry_.count) return Status::InvalidArgument("no slot " + std::to_string(slot));
  if (table.size() > geometry_.slot_bytes) {
    return Status::TooLarge("a table of " + std::to_string(table.size()) + " bytes for a slot of " +
                            std::to_string(geometry_.slot_bytes));
  }
  // In the simulator, the write the paper's NVMe-oF target offload makes of
  // it: one request posted by the head, placed without the follower's CPU,
  // over the table's bytes — the paper's direct I/O writes only those; the
  // zeros this one writes after them are not priced.
  runtime::Charge(runtime::Cost::kFabricPost, table.size());
  // The whole slot in one aligned buffer: the table, then zeros. Buffers
  // are kept between writes (a fresh 4 MB allocation costs its page
  // faults), one per write in flight: a flush ships while a compaction does.
  char* buf = nullptr;
  size_t dirty = geometry_.slot_bytes;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!free_.empty()) {
      buf = free_.back().first;
      dirty = free_.back().second;
      free_.pop_back();
    }
  }
  if (buf == nullptr) {
    buf = static_cast<char*>(std::aligned_alloc(kAlign, geometry_.slot_bytes));
    if (buf == nullptr) return Status::NoSpace("no memory for a slot's buffer");
  }
  std::memcpy(buf, table.data(), table.size());
  if (dirty > table.size()) std::memset(buf + table.size(), 0, dirty - table.size());
  struct Return {
    SlotWriter* w;
    char* buf;
    size_t dirty;
    ~Return() {
      std::lock_guard<std::mutex> l(w->mu_);
      w->free_.emplace_back(buf, dirty);
    }
  } give_back{this, buf, table.size()};
  SLIP_RETURN_IF_ERROR(
      PwriteAll(fd_, buf, geometry_.slot_bytes, (slot - 1) * geometry_.slot_bytes, "slot " + std::to_string(slot)));
  if (counters_ != nullptr) {
    counters_->bytes_written += geometry_.slot_bytes;
    counters_->syncs += 1;
  }
  return Status::Ok();
}

// --- SlotMap ------------------------------------------------------------------

SlotMap::SlotMap(uint32_t count, int followers) : holders_(count, 0) {
  live_ = followers >= 64 ? ~uint64_t{0} : (uint64_t{1} << followers) - 1;
}

Result<std::vector<uint32_t>> SlotMap::Acquire(size_t n, int timeout_ms) {
  std::unique_lock<std::mutex> l(mu_);
  if (n > holders_.size()) return Status::NoSpace("a job needs more slots than the pool has");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    std::vector<uint32_t> got;
    for (size_t i = 0; i < holders_.size() && got.size() < n; ++i) {
      const uint32_t s = static_cast<uint32_t>((cursor_ + i) % holders_.size());
      if (holders_[s] == 0) got.push_back(s);
    }
    if (got.size() == n) {
      // All or nothing, so two jobs waiting for slots cannot each hold
      // part of what the other needs.
      for (uint32_t s : got) holders_[s] = live_ == 0 ? 0 : live_;
      if (!got.empty()) cursor_ = static_cast<uint32_t>((got.back() + 1) % holders_.size());
      for (uint32_t& s : got) s += 1;  // slots are numbered from 1 (0: a file of one's own)
      return got;
    }
    if (freed_.wait_until(l, deadline) == std::cv_status::timeout) {
      return Status::NoSpace("no free slots for " + std::to_string(n) + " tables");
    }
  }
}

void SlotMap::Release(int follower, uint32_t slot) {
  std::lock_guard<std::mutex> l(mu_);
  if (slot == 0 || slot > holders_.size()) return;
  holders_[slot - 1] &= ~(uint64_t{1} << follower);
  if (holders_[slot - 1] == 0) freed_.notify_all();
}

void SlotMap::RemoveFollower(int follower) {
  std::lock_guard<std::mutex> l(mu_);
  const uint64_t bit = uint64_t{1} << follower;
  live_ &= ~bit;
  for (auto& h : holders_) h &= ~bit;
  freed_.notify_all();
}

void SlotMap::Reconcile(const std::vector<uint32_t>& held) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& h : holders_) h = 0;
  for (uint32_t slot : held) {
    if (slot != 0 && slot <= holders_.size()) holders_[slot - 1] = live_;
  }
  freed_.notify_all();
}

size_t SlotMap::free_slots() const {
  std::lock_guard<std::mutex> l(mu_);
  size_t n = 0;
  for (uint64_t h : holders_) n += h == 0;
  return n;
}

// --- SlotFileSystem -------------------------------------------------------------

Result<std::unique_ptr<SlotFileSystem>> SlotFileSystem::Open(const std::string& dir, const std::string& image,
                                                             const SlotGeometry& g,
                                                             std::function<void(uint32_t)> released,
                                                             lsm::IoCounters* counters) {
  SLIP_RETURN_IF_ERROR(CheckGeometry(g));
  // Read-only, as the paper's follower mounts its slot partition: its code
  // path cannot write a slot.
  SLIP_ASSIGN_OR_RETURN(auto file, lsm::NewRandomAccessFile(image, {.direct_io = true, .counters = counters}));
  if (file->size() != g.image_bytes()) {
    return Status::InvalidArgument("slot image " + image + " is not the geometry's size");
  }
  SLIP_RETURN_IF_ERROR(lsm::CreateDir(dir));
  auto logs = lsm::NewPosixFileSystem(dir, {.direct_io = false, .counters = counters});
  return std::unique_ptr<SlotFileSystem>(new SlotFileSystem(dir, g, std::shared_ptr<lsm::RandomAccessFile>(std::move(file)),
                                                            std::move(logs), std::move(released)));
}

std::optional<uint64_t> SlotFileSystem::TableNumber(const std::string& path) const {
  if (path.size() <= dir_.size() + 5 || path.compare(0, dir_.size() + 1, dir_ + "/") != 0 || !path.ends_with(".sst")) {
    return std::nullopt;
  }
  const std::string digits = path.substr(dir_.size() + 1, path.size() - dir_.size() - 5);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoull(digits);
}

Status SlotFileSystem::Adopt(const lsm::FileMeta& meta) {
  if (meta.slot == 0 || meta.slot > geometry_.count || meta.size > geometry_.slot_bytes) {
    return Status::Corruption("table " + std::to_string(meta.number) + " names slot " + std::to_string(meta.slot) +
                              " with " + std::to_string(meta.size) + " bytes: not in the pool");
  }
  std::lock_guard<std::mutex> l(mu_);
  if (own_tables_) {
    // A head's own table (written since it took over) names the slot its
    // followers hold it in; the file is in this replica's directory.
    char name[32];
    std::snprintf(name, sizeof name, "/%06llu.sst", static_cast<unsigned long long>(meta.number));
    if (logs_->Open(dir_ + name, Kind::kTable).ok()) return Status::Ok();
  }
  for (const auto& [number, place] : tables_) {
    if (place.slot == meta.slot && number != meta.number) {
      return Status::Corruption("slot " + std::to_string(meta.slot) + " holds table " + std::to_string(number) +
                                " still; the head shipped table " + std::to_string(meta.number) + " into it");
    }
  }
  tables_[meta.number] = {meta.slot, meta.size};
  return Status::Ok();
}

void SlotFileSystem::TakeTables() {
  std::lock_guard<std::mutex> l(mu_);
  own_tables_ = true;
}

Result<std::unique_ptr<lsm::WritableFile>> SlotFileSystem::Create(const std::string& path, Kind kind) {
  bool own;
  {
    std::lock_guard<std::mutex> l(mu_);
    own = own_tables_;
  }
  if (!own && (kind == Kind::kTable || TableNumber(path))) {
    return Status::NotSupported("a follower writes no table (" + path + "): its slots are the head's to write");
  }
  return logs_->Create(path, kind);
}

Result<std::unique_ptr<lsm::RandomAccessFile>> SlotFileSystem::Open(const std::string& path, Kind kind) {
  if (auto n = TableNumber(path)) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = tables_.find(*n);
    if (it == tables_.end() && own_tables_) return logs_->Open(path, kind);
    if (it == tables_.end()) return Status::NotFound(path + ": in no slot");
    return std::unique_ptr<lsm::RandomAccessFile>(
        new SlotFile(image_, (it->second.slot - 1) * geometry_.slot_bytes, it->second.size));
  }
  return logs_->Open(path, kind);
}

Status SlotFileSystem::Remove(const std::string& path) {
  if (auto n = TableNumber(path)) {
    uint32_t slot = 0;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = tables_.find(*n);
      if (it == tables_.end() && own_tables_) return logs_->Remove(path);
      if (it == tables_.end()) return Status::NotFound(path + ": in no slot");
      slot = it->second.slot;
      tables_.erase(it);
    }
    // The engine removes a table once no reader holds it: the slot is free
    // for the head to write again.
    if (released_) released_(slot);
    return Status::Ok();
  }
  return logs_->Remove(path);
}

Status SlotFileSystem::Rename(const std::string& from, const std::string& to) { return logs_->Rename(from, to); }

Result<std::vector<std::string>> SlotFileSystem::List(const std::string& dir) {
  SLIP_ASSIGN_OR_RETURN(auto names, logs_->List(dir));
  if (dir == dir_) {
    std::lock_guard<std::mutex> l(mu_);
    for (const auto& [number, place] : tables_) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%06llu.sst", static_cast<unsigned long long>(number));
      names.push_back(buf);
    }
  }
  return names;
}

Status SlotFileSystem::CreateDir(const std::string& dir) { return logs_->CreateDir(dir); }

std::vector<uint32_t> SlotFileSystem::held_slots() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<uint32_t> out;
  for (const auto& [number, place] : tables_) out.push_back(place.slot);
  return out;
}

size_t SlotFileSystem::tables() const {
  std::lock_guard<std::mutex> l(mu_);
  return tables_.size();
}

}  // namespace slip::rubble
