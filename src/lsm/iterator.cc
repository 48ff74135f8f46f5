#include "lsm/iterator.h"

#include <algorithm>

namespace slip::lsm {

namespace {

class MemTableIterator final : public InternalIterator {
 public:
  explicit MemTableIterator(std::shared_ptr<const MemTable> mem) : mem_(std::move(mem)), it_(mem_.get()) {}
  bool Valid() const override { return it_.Valid(); }
  std::string_view key() const override { return it_.key(); }
  std::string_view value() const override { return it_.value(); }
  void Next() override { it_.Next(); }
  Status status() const override { return Status::Ok(); }
  void Seek(std::string_view target) override { it_.Seek(target); }
  void SeekToFirst() override { it_.SeekToFirst(); }

 private:
  const std::shared_ptr<const MemTable> mem_;
  MemTable::Iterator it_;
};

class TableIterator final : public InternalIterator {
 public:
  explicit TableIterator(std::shared_ptr<const Table> table) : table_(std::move(table)), it_(table_->NewIterator()) {}
  bool Valid() const override { return it_->Valid(); }
  std::string_view key() const override { return it_->key(); }
  std::string_view value() const override { return it_->value(); }
  void Next() override { it_->Next(); }
  Status status() const override { return it_->status(); }
  void Seek(std::string_view target) override { it_->Seek(target); }
  void SeekToFirst() override { it_->SeekToFirst(); }

 private:
  const std::shared_ptr<const Table> table_;
  const std::unique_ptr<Table::Iterator> it_;
};

// One table open at a time: a scan of a few entries reads one table's
// index, not the level's.
class ConcatenatingIterator final : public InternalIterator {
 public:
  ConcatenatingIterator(std::vector<std::shared_ptr<const Table>> tables, std::vector<std::string> largest)
      : tables_(std::move(tables)), largest_(std::move(largest)) {}
  bool Valid() const override { return current_ && current_->Valid(); }
  std::string_view key() const override { return current_->key(); }
  std::string_view value() const override { return current_->value(); }
  void Next() override {
    current_->Next();
    SkipEmpty();
  }
  Status status() const override { return status_; }
  void Seek(std::string_view target) override {
    const auto it = std::lower_bound(largest_.begin(), largest_.end(), target, [](const std::string& l, std::string_view t) {
      return CompareInternalKeys(l, t) < 0;
    });
    Open(static_cast<size_t>(it - largest_.begin()));
    if (current_) current_->Seek(target);
    SkipEmpty();
  }
  void SeekToFirst() override {
    Open(0);
    if (current_) current_->SeekToFirst();
    SkipEmpty();
  }

 private:
  void Open(size_t i) {
    at_ = i;
    current_.reset();
    if (i < tables_.size()) current_ = NewTableIterator(tables_[i]);
  }
  // Moves to the next table's first entry while the current one is done.
  void SkipEmpty() {
    while (current_ && !current_->Valid()) {
      if (Status s = current_->status(); !s.ok()) {
        status_ = s;
        current_.reset();
        return;
      }
      Open(at_ + 1);
      if (current_) current_->SeekToFirst();
    }
  }

  const std::vector<std::shared_ptr<const Table>> tables_;
  const std::vector<std::string> largest_;
  size_t at_ = 0;
  std::unique_ptr<InternalIterator> current_;
  Status status_;
};

// A linear pick of the smallest child: a scan merges a handful of sources
// (MemTables, level 0, one per deeper level), where a heap buys nothing.
class MergingIterator final : public InternalIterator {
 public:
  explicit MergingIterator(std::vector<std::unique_ptr<InternalIterator>> children) : children_(std::move(children)) {}
  bool Valid() const override { return current_ != nullptr; }
  std::string_view key() const override { return current_->key(); }
  std::string_view value() const override { return current_->value(); }
  void Next() override {
    current_->Next();
    Pick();
  }
  Status status() const override {
    for (const auto& c : children_) {
      if (Status s = c->status(); !s.ok()) return s;
    }
    return Status::Ok();
  }
  void Seek(std::string_view target) override {
    for (auto& c : children_) c->Seek(target);
    Pick();
  }
  void SeekToFirst() override {
    for (auto& c : children_) c->SeekToFirst();
    Pick();
  }

 private:
  void Pick() {
    current_ = nullptr;
    for (auto& c : children_) {
      if (!c->Valid()) {
        if (!c->status().ok()) {
          current_ = nullptr;  // damage ends the scan (status() says why)
          return;
        }
        continue;
      }
      if (current_ == nullptr || CompareInternalKeys(c->key(), current_->key()) < 0) current_ = c.get();
    }
  }

  std::vector<std::unique_ptr<InternalIterator>> children_;
  InternalIterator* current_ = nullptr;
};

}  // namespace

std::unique_ptr<InternalIterator> NewMemTableIterator(std::shared_ptr<const MemTable> mem) {
  return std::make_unique<MemTableIterator>(std::move(mem));
}
std::unique_ptr<InternalIterator> NewTableIterator(std::shared_ptr<const Table> table) {
  return std::make_unique<TableIterator>(std::move(table));
}
std::unique_ptr<InternalIterator> NewConcatenatingIterator(std::vector<std::shared_ptr<const Table>> tables,
                                                           std::vector<std::string> largest) {
  return std::make_unique<ConcatenatingIterator>(std::move(tables), std::move(largest));
}
std::unique_ptr<InternalIterator> NewMergingIterator(std::vector<std::unique_ptr<InternalIterator>> children) {
  return std::make_unique<MergingIterator>(std::move(children));
}

}  // namespace slip::lsm
