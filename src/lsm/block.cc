#include "lsm/block.h"

#include <algorithm>
#include <cassert>

#include "common/crc32c.h"
#include "lsm/format.h"

namespace slip::lsm {

int BytewiseOrder(std::string_view a, std::string_view b) { return a.compare(b); }

BlockBuilder::BlockBuilder(int restart_interval) : restart_interval_(std::max(restart_interval, 1)) { Reset(); }

void BlockBuilder::Reset() {
  buffer_.clear();
  restarts_.assign(1, 0);
  since_restart_ = 0;
  entries_ = 0;
  last_key_.clear();
}

void BlockBuilder::Add(std::string_view key, std::string_view value) {
  size_t shared = 0;
  if (since_restart_ == restart_interval_) {
    restarts_.push_back(static_cast<uint32_t>(buffer_.size()));
    since_restart_ = 0;
  } else {
    const size_t limit = std::min(last_key_.size(), key.size());
    while (shared < limit && last_key_[shared] == key[shared]) ++shared;
  }
  PutVarint32(&buffer_, static_cast<uint32_t>(shared));
  PutVarint32(&buffer_, static_cast<uint32_t>(key.size() - shared));
  PutVarint32(&buffer_, static_cast<uint32_t>(value.size()));
  buffer_.append(key.substr(shared));
  buffer_.append(value);
  last_key_.assign(key);
  ++since_restart_;
  ++entries_;
}

std::string BlockBuilder::Finish() {
  std::string out = std::move(buffer_);
  for (uint32_t r : restarts_) PutFixed32(&out, r);
  PutFixed32(&out, static_cast<uint32_t>(restarts_.size()));
  Reset();
  return out;
}

std::string SealBlock(std::string contents) {
  contents.push_back(0);  // no compression
  const uint32_t crc = Crc32c(0, contents.data(), contents.size());
  PutFixed32(&contents, crc);
  return contents;
}

Result<std::string_view> OpenBlock(std::string_view stored) {
  if (stored.size() < kBlockTrailerBytes) return Status::Corruption("a block shorter than its trailer");
  const size_t n = stored.size() - 4;
  if (Crc32c(0, stored.data(), n) != DecodeFixed32(stored.data() + n)) {
    return Status::Corruption("a block's checksum does not match");
  }
  if (stored[n - 1] != 0) return Status::Corruption("a block of an unknown compression type");
  return stored.substr(0, n - 1);
}

Result<Block> Block::Parse(std::string_view contents) {
  if (contents.size() < 4) return Status::Corruption("a block too short for its restart count");
  const uint32_t n = DecodeFixed32(contents.data() + contents.size() - 4);
  const uint64_t array = uint64_t{n} * 4 + 4;
  if (n == 0 || array > contents.size()) return Status::Corruption("a block's restart array does not fit");
  const auto restarts_at = static_cast<uint32_t>(contents.size() - array);
  Block b(contents, restarts_at, n);
  for (uint32_t i = 0; i < n; ++i) {
    if (b.RestartPoint(i) > restarts_at || (i > 0 && b.RestartPoint(i) <= b.RestartPoint(i - 1))) {
      return Status::Corruption("a block's restart points are out of order");
    }
  }
  return b;
}

uint32_t Block::RestartPoint(uint32_t index) const { return DecodeFixed32(data_.data() + restarts_at_ + 4 * index); }

void Block::Iterator::Fail(const std::string& why) {
  valid_ = false;
  status_ = Status::Corruption(why);
}

bool Block::Iterator::ParseEntry() {
  offset_ = next_;
  if (offset_ >= block_->restarts_at_) {
    valid_ = false;  // the end
    return false;
  }
  std::string_view in = block_->data_.substr(offset_, block_->restarts_at_ - offset_);
  auto shared = GetVarint32(&in), unshared = GetVarint32(&in), len = GetVarint32(&in);
  if (!shared || !unshared || !len || *shared > key_.size() || uint64_t{*unshared} + *len > in.size()) {
    Fail("a block entry does not decode at offset " + std::to_string(offset_));
    return false;
  }
  key_.resize(*shared);
  key_.append(in.substr(0, *unshared));
  value_ = in.substr(*unshared, *len);
  next_ = static_cast<uint32_t>(value_.data() + value_.size() - block_->data_.data());
  valid_ = true;
  return true;
}

void Block::Iterator::SeekToRestart(uint32_t index) {
  key_.clear();
  next_ = block_->RestartPoint(index);
}

void Block::Iterator::SeekToFirst() {
  status_ = Status::Ok();
  SeekToRestart(0);
  ParseEntry();
}

void Block::Iterator::Next() {
  assert(valid_);
  ParseEntry();
}

void Block::Iterator::Seek(std::string_view target) {
  status_ = Status::Ok();
  // The last restart whose key is before `target`: its key is stored whole.
  uint32_t lo = 0, hi = block_->num_restarts_ - 1;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    SeekToRestart(mid);
    if (!ParseEntry()) {
      if (!status_.ok()) return;
      hi = mid - 1;
      continue;
    }
    if (order_(key_, target) < 0) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  SeekToRestart(lo);
  while (ParseEntry()) {
    if (order_(key_, target) >= 0) return;
  }
}

}  // namespace slip::lsm
