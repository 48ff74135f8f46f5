#include <algorithm>

#include "lsm/file_system.h"

namespace slip::lsm {

// A file being written: appends go to the shared Data until it is removed
// or a crash passes it (then they go nowhere, as to a file whose name the
// crash took).
class MemWritable final : public WritableFile {
 public:
  MemWritable(MemFileSystem* fs, std::shared_ptr<MemFileSystem::Data> data) : fs_(fs), data_(std::move(data)) {}
  Status Append(std::string_view bytes) override {
    std::lock_guard<std::mutex> l(fs_->mu_);
    SLIP_RETURN_IF_ERROR(fs_->Mutate());
    if (!data_->orphaned) data_->bytes.append(bytes);
    size_ += bytes.size();
    return Status::Ok();
  }
  Status Sync() override {
    std::lock_guard<std::mutex> l(fs_->mu_);
    SLIP_RETURN_IF_ERROR(fs_->Mutate());
    if (!data_->orphaned) data_->synced = data_->bytes.size();
    return Status::Ok();
  }
  uint64_t size() const override { return size_; }

 private:
  MemFileSystem* const fs_;
  const std::shared_ptr<MemFileSystem::Data> data_;
  uint64_t size_ = 0;
};

namespace {

// Reads see the file as it is now (a snapshot would hide a crash's loss
// from a reader that should have been reopened).
class MemReadable final : public RandomAccessFile {
 public:
  MemReadable(std::mutex* mu, std::shared_ptr<MemFileSystem::Data> data) : mu_(mu), data_(std::move(data)) {}
  Result<std::string_view> Read(uint64_t offset, size_t n, std::string* scratch) const override {
    std::lock_guard<std::mutex> l(*mu_);
    const std::string& b = data_->bytes;
    if (offset > b.size() || n > b.size() - offset) return Status::Corruption("a read past the end of the file");
    scratch->assign(b, offset, n);
    return std::string_view(*scratch);
  }
  uint64_t size() const override {
    std::lock_guard<std::mutex> l(*mu_);
    return data_->bytes.size();
  }

 private:
  std::mutex* const mu_;
  const std::shared_ptr<MemFileSystem::Data> data_;
};

}  // namespace

Status MemFileSystem::Mutate() {
  if (fail_after_ == 0) return Status::IoError("injected: the disk is gone");
  if (fail_after_ > 0) --fail_after_;
  ++mutations_;
  return Status::Ok();
}

Result<std::unique_ptr<WritableFile>> MemFileSystem::Create(const std::string& path, Kind) {
  std::lock_guard<std::mutex> l(mu_);
  SLIP_RETURN_IF_ERROR(Mutate());
  auto& slot = files_[path];
  if (slot) slot->orphaned = true;
  slot = std::make_shared<Data>();
  return std::unique_ptr<WritableFile>(new MemWritable(this, slot));
}

Result<std::unique_ptr<RandomAccessFile>> MemFileSystem::Open(const std::string& path, Kind) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound(path);
  return std::unique_ptr<RandomAccessFile>(new MemReadable(&mu_, it->second));
}

Status MemFileSystem::Remove(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  SLIP_RETURN_IF_ERROR(Mutate());
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound(path);
  it->second->orphaned = true;
  files_.erase(it);
  return Status::Ok();
}

Status MemFileSystem::Rename(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> l(mu_);
  SLIP_RETURN_IF_ERROR(Mutate());
  auto it = files_.find(from);
  if (it == files_.end()) return Status::NotFound(from);
  auto data = it->second;
  files_.erase(it);
  auto& slot = files_[to];
  if (slot) slot->orphaned = true;
  slot = std::move(data);
  return Status::Ok();
}

Result<std::vector<std::string>> MemFileSystem::List(const std::string& dir) {
  std::lock_guard<std::mutex> l(mu_);
  const std::string prefix = dir + "/";
  std::vector<std::string> names;
  for (const auto& [path, data] : files_) {
    if (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
        path.find('/', prefix.size()) == std::string::npos) {
      names.push_back(path.substr(prefix.size()));
    }
  }
  return names;
}

Status MemFileSystem::CreateDir(const std::string&) { return Status::Ok(); }

void MemFileSystem::FailAfter(int64_t ops) {
  std::lock_guard<std::mutex> l(mu_);
  fail_after_ = ops;
}

uint64_t MemFileSystem::mutations() const {
  std::lock_guard<std::mutex> l(mu_);
  return mutations_;
}

void MemFileSystem::Crash(Random* random) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto& [path, data] : files_) {
    size_t keep = data->synced;
    if (random != nullptr && data->bytes.size() > keep) keep += random->Uniform(data->bytes.size() - keep + 1);
    // The survivors become a new Data: writers still holding the old one
    // write into nothing.
    auto fresh = std::make_shared<Data>();
    fresh->bytes = data->bytes.substr(0, keep);
    fresh->synced = keep;
    data->orphaned = true;
    data = std::move(fresh);
  }
  fail_after_ = -1;
}

}  // namespace slip::lsm
