// The files the LSM engine reads and writes, behind two small interfaces so
// that tables are built and read the same way over a POSIX file, a slot of
// a pre-allocated image (RubbleDB's shipped SSTs), or memory in tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace slip::lsm {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;
  // Everything appended is durable once it returns OK.
  virtual Status Sync() = 0;
  virtual uint64_t size() const = 0;
};

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // [offset, offset + n), in `scratch` or the file's own memory; Corruption
  // when the range is past the end.
  virtual Result<std::string_view> Read(uint64_t offset, size_t n, std::string* scratch) const = 0;
  virtual uint64_t size() const = 0;
};

// Reads `file` through a window of `window` bytes: a compaction reads its
// inputs front to back, and one read of 1 MB costs the device (and, on a
// virtual disk, the hypervisor) what 256 reads of a block each would. The
// window holds at most one chunk; not for concurrent readers.
class ReadaheadFile final : public RandomAccessFile {
 public:
  ReadaheadFile(const RandomAccessFile* file, size_t window) : file_(file), window_(window) {}
  Result<std::string_view> Read(uint64_t offset, size_t n, std::string* scratch) const override {
    if (offset > file_->size() || n > file_->size() - offset) {
      return Status::Corruption("a read past the end of the file");
    }
    if (n > window_) return file_->Read(offset, n, scratch);
    if (offset < start_ || offset + n > start_ + buffer_.size()) {
      const size_t len = static_cast<size_t>(std::min<uint64_t>(window_, file_->size() - offset));
      std::string into;
      auto got = file_->Read(offset, len, &into);
      if (!got.ok()) return got.status();
      if (got->data() != into.data()) into.assign(got->data(), got->size());
      buffer_ = std::move(into);
      start_ = offset;
    }
    return std::string_view(buffer_).substr(offset - start_, n);
  }
  uint64_t size() const override { return file_->size(); }

 private:
  const RandomAccessFile* const file_;
  const size_t window_;
  mutable std::string buffer_;
  mutable uint64_t start_ = 0;
};

// A file in memory: written as a WritableFile, read as a RandomAccessFile.
class MemoryFile final : public WritableFile, public RandomAccessFile {
 public:
  Status Append(std::string_view data) override {
    data_.append(data);
    return Status::Ok();
  }
  Status Sync() override { return Status::Ok(); }
  Result<std::string_view> Read(uint64_t offset, size_t n, std::string*) const override {
    if (offset > data_.size() || n > data_.size() - offset) {
      return Status::Corruption("a read past the end of the file");
    }
    return std::string_view(data_).substr(offset, n);
  }
  uint64_t size() const override { return data_.size(); }
  std::string& contents() { return data_; }

 private:
  std::string data_;
};

}  // namespace slip::lsm
