// SST files (docs/formats/lsm_sst.md "Tables"): sorted internal keys in
// data blocks of about `block_bytes`, a Bloom filter over their user keys,
// an index block naming each data block by its last key, and a fixed-size
// footer locating the filter and the index. Every block carries its CRC.
//
// A reader keeps the index and the filter in memory and reads one data
// block per lookup; a lookup of a user key the filter rules out reads
// nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "lsm/block.h"
#include "lsm/bloom.h"
#include "lsm/file.h"
#include "lsm/format.h"

namespace slip::lsm {

class BlockCache;

struct TableOptions {
  size_t block_bytes = 4096;
  int restart_interval = 16;
  int bloom_bits_per_key = 10;
  // Where a reader keeps data blocks it verified (null: none); keyed by the
  // file number given to Table::Open.
  BlockCache* cache = nullptr;
};

// Where a block is in its file: offset and the contents' size (the 5-byte
// trailer follows).
struct BlockHandle {
  uint64_t offset = 0, size = 0;
  void EncodeTo(std::string* out) const;
  static std::optional<BlockHandle> DecodeFrom(std::string_view* in);
};

constexpr uint64_t kTableMagic = 0x3142415450494c53ull;  // "SLIPTAB1"
constexpr size_t kFooterBytes = 48;

class TableBuilder {
 public:
  TableBuilder(const TableOptions& options, WritableFile* file);
  // REQUIRES: internal keys in CompareInternalKeys order, each after the last.
  Status Add(std::string_view internal_key, std::string_view value);
  // Writes the filter, the index and the footer (it does not Sync).
  Status Finish();
  uint64_t entries() const { return entries_; }
  uint64_t file_size() const { return file_->size(); }

 private:
  Status FlushDataBlock();
  Status WriteBlock(std::string contents, BlockHandle* handle);

  const TableOptions options_;
  WritableFile* const file_;
  BlockBuilder data_, index_;
  std::string last_key_;
  std::vector<std::string> user_keys_;  // for the filter
  uint64_t entries_ = 0;
  bool finished_ = false;
};

class Table {
 public:
  // Reads the footer, index and filter; Corruption when any does not check.
  // `file_number` names the table in options.cache.
  static Result<std::unique_ptr<Table>> Open(const RandomAccessFile* file, const TableOptions& options = {},
                                             uint64_t file_number = 0);

  struct Found {
    uint64_t sequence = 0;
    ValueType type = ValueType::kValue;
    std::string value;
  };
  // The newest version of `user_key` at or before `snapshot`; nullopt when
  // the table has none. Corruption when a block it reads does not check.
  Result<std::optional<Found>> Get(std::string_view user_key, uint64_t snapshot = kMaxSequence) const;

  // Every entry in order, one data block in memory at a time. It stops
  // (!Valid(), status() Corruption) at the first block that does not check.
  // The table must outlive it.
  class Iterator {
   public:
    bool Valid() const { return data_it_ && data_it_->Valid(); }
    std::string_view key() const { return data_it_->key(); }
    std::string_view value() const { return data_it_->value(); }
    void SeekToFirst();
    // The first entry at or after `internal_key` in CompareInternalKeys order.
    void Seek(std::string_view internal_key);
    // REQUIRES: Valid().
    void Next();
    const Status& status() const { return status_; }

   private:
    friend class Table;
    explicit Iterator(const Table* table);
    // Opens the data block the index iterator is at (or ends), skipping
    // empty ones; positioned at `target` in the first block when given.
    void LoadBlocks(const std::string* target = nullptr);

    const Table* const table_;
    Block index_;
    Block::Iterator index_it_;
    std::shared_ptr<const std::string> contents_;
    std::optional<Block> data_;
    std::optional<Block::Iterator> data_it_;
    Status status_;
  };
  // Not movable once iterating (its iterators point into it): held by pointer.
  std::unique_ptr<Iterator> NewIterator() const;

  // Every entry in order, calling `fn(internal_key, value)`; stops at the
  // first block that does not check (its Corruption).
  Status ForEach(const std::function<void(std::string_view, std::string_view)>& fn) const;

  uint64_t data_blocks() const { return index_entries_; }
  // Lookups the filter answered without reading a block.
  uint64_t filtered() const { return filtered_; }

 private:
  Table(const RandomAccessFile* file, const TableOptions& options, uint64_t file_number)
      : file_(file), policy_(options.bloom_bits_per_key), cache_(options.cache), file_number_(file_number) {}
  Result<std::string> ReadBlock(const BlockHandle& h) const;
  // The data block an index entry's value names, from the cache or read,
  // checked and cached.
  Result<std::shared_ptr<const std::string>> ReadDataBlock(std::string_view index_value) const;

  const RandomAccessFile* file_;
  BloomFilterPolicy policy_;
  BlockCache* const cache_;
  const uint64_t file_number_;
  std::string index_contents_;
  // Parsed once by Open (Parse checks every restart point: a lookup that
  // parsed the index again spent ~40% of its time there).
  std::optional<Block> index_;
  std::string filter_;
  uint64_t index_entries_ = 0;
  mutable uint64_t filtered_ = 0;
};

}  // namespace slip::lsm
