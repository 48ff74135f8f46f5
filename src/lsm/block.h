// SST data and index blocks (docs/formats/lsm_sst.md): sorted key/value
// entries, each key stored as the bytes it does not share with the one
// before; every `restart_interval`-th entry stores its key whole (a restart
// point), and the block ends with the restart points' offsets, so a reader
// binary-searches the restarts and scans at most an interval.
//
// On disk a block is followed by a 5-byte trailer — its compression type
// (0: none) and the CRC32C of the contents and that byte — so every block is
// checked when read: a flipped bit is Corruption, never a wrong key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace slip::lsm {

// Key order for a block: bytewise for user keys, CompareInternalKeys for
// the engine's internal keys.
using KeyOrder = int (*)(std::string_view a, std::string_view b);
int BytewiseOrder(std::string_view a, std::string_view b);

class BlockBuilder {
 public:
  explicit BlockBuilder(int restart_interval = 16);
  // REQUIRES: `key` after every key added since the last Reset, in the
  // order the block will be read with.
  void Add(std::string_view key, std::string_view value);
  // The block's contents (entries, restarts, their count); then Reset.
  std::string Finish();
  void Reset();
  bool empty() const { return entries_ == 0; }
  // What Finish would return's size.
  size_t EstimatedSize() const { return buffer_.size() + 4 * (restarts_.size() + 1); }

 private:
  const int restart_interval_;
  std::string buffer_;
  std::vector<uint32_t> restarts_;
  int since_restart_ = 0;
  size_t entries_ = 0;
  std::string last_key_;
};

constexpr size_t kBlockTrailerBytes = 5;
// `contents` with its trailer appended (no compression).
std::string SealBlock(std::string contents);
// The contents of a block read with its trailer; Corruption when the CRC
// or the type does not check.
Result<std::string_view> OpenBlock(std::string_view stored);

// A parsed block's contents (not owned: they must outlive it and its
// iterators).
class Block {
 public:
  // Corruption when the restart array does not fit.
  static Result<Block> Parse(std::string_view contents);

  class Iterator {
   public:
    bool Valid() const { return valid_; }
    // First entry / first entry with key >= target.
    void SeekToFirst();
    void Seek(std::string_view target);
    // REQUIRES: Valid().
    void Next();
    const std::string& key() const { return key_; }
    std::string_view value() const { return value_; }
    // Corruption once an entry did not decode (then !Valid()).
    const Status& status() const { return status_; }

   private:
    friend class Block;
    Iterator(const Block* block, KeyOrder order) : block_(block), order_(order) {}
    // Decodes the entry at `offset_` given `key_` holds its predecessor's key.
    bool ParseEntry();
    void SeekToRestart(uint32_t index);
    void Fail(const std::string& why);

    const Block* block_;
    KeyOrder order_;
    uint32_t offset_ = 0;  // of the entry decoded (valid_) or to decode
    uint32_t next_ = 0;    // of the entry after it
    std::string key_;
    std::string_view value_;
    bool valid_ = false;
    Status status_;
  };
  Iterator NewIterator(KeyOrder order = BytewiseOrder) const { return Iterator(this, order); }

 private:
  Block(std::string_view contents, uint32_t restarts_at, uint32_t num_restarts)
      : data_(contents), restarts_at_(restarts_at), num_restarts_(num_restarts) {}
  uint32_t RestartPoint(uint32_t index) const;

  std::string_view data_;
  uint32_t restarts_at_ = 0;  // where the restart array starts (the entries' end)
  uint32_t num_restarts_ = 0;
};

}  // namespace slip::lsm
