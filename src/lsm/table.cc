#include "lsm/table.h"

#include "lsm/cache.h"

namespace slip::lsm {

void BlockHandle::EncodeTo(std::string* out) const {
  PutVarint64(out, offset);
  PutVarint64(out, size);
}

std::optional<BlockHandle> BlockHandle::DecodeFrom(std::string_view* in) {
  auto o = GetVarint64(in);
  auto s = o ? GetVarint64(in) : std::nullopt;
  if (!o || !s) return std::nullopt;
  return BlockHandle{*o, *s};
}

TableBuilder::TableBuilder(const TableOptions& options, WritableFile* file)
    : options_(options), file_(file), data_(options.restart_interval), index_(1) {}

Status TableBuilder::Add(std::string_view internal_key, std::string_view value) {
  if (finished_) return Status::InvalidArgument("the table is finished");
  const auto parsed = ParseInternalKey(internal_key);
  if (!parsed) return Status::InvalidArgument("not an internal key");
  if (entries_ > 0 && CompareInternalKeys(last_key_, internal_key) >= 0) {
    return Status::InvalidArgument("keys added out of order");
  }
  if (user_keys_.empty() || user_keys_.back() != parsed->user_key) user_keys_.emplace_back(parsed->user_key);
  data_.Add(internal_key, value);
  last_key_.assign(internal_key);
  ++entries_;
  if (data_.EstimatedSize() >= options_.block_bytes) return FlushDataBlock();
  return Status::Ok();
}

Status TableBuilder::WriteBlock(std::string contents, BlockHandle* handle) {
  handle->offset = file_->size();
  handle->size = contents.size();
  return file_->Append(SealBlock(std::move(contents)));
}

Status TableBuilder::FlushDataBlock() {
  if (data_.empty()) return Status::Ok();
  BlockHandle h;
  SLIP_RETURN_IF_ERROR(WriteBlock(data_.Finish(), &h));
  // The block's last key names it: a seek's target at or before it is in
  // this block or an earlier one.
  std::string handle;
  h.EncodeTo(&handle);
  index_.Add(last_key_, handle);
  return Status::Ok();
}

Status TableBuilder::Finish() {
  if (finished_) return Status::InvalidArgument("the table is finished");
  finished_ = true;
  SLIP_RETURN_IF_ERROR(FlushDataBlock());
  const std::vector<std::string_view> keys(user_keys_.begin(), user_keys_.end());
  BlockHandle filter, index;
  SLIP_RETURN_IF_ERROR(WriteBlock(BloomFilterPolicy(options_.bloom_bits_per_key).Create(keys), &filter));
  SLIP_RETURN_IF_ERROR(WriteBlock(index_.Finish(), &index));
  std::string footer;
  filter.EncodeTo(&footer);
  index.EncodeTo(&footer);
  footer.resize(kFooterBytes - 8, '\0');
  PutFixed64(&footer, kTableMagic);
  return file_->Append(footer);
}

Result<std::unique_ptr<Table>> Table::Open(const RandomAccessFile* file, const TableOptions& options,
                                           uint64_t file_number) {
  if (file->size() < kFooterBytes) return Status::Corruption("a table shorter than its footer");
  std::string scratch;
  SLIP_ASSIGN_OR_RETURN(std::string_view footer, file->Read(file->size() - kFooterBytes, kFooterBytes, &scratch));
  if (DecodeFixed64(footer.data() + kFooterBytes - 8) != kTableMagic) return Status::Corruption("no table footer");
  std::string_view in = footer.substr(0, kFooterBytes - 8);
  auto filter = BlockHandle::DecodeFrom(&in);
  auto index = filter ? BlockHandle::DecodeFrom(&in) : std::nullopt;
  if (!filter || !index) return Status::Corruption("a table footer that does not decode");
  std::unique_ptr<Table> t(new Table(file, options, file_number));
  SLIP_ASSIGN_OR_RETURN(t->filter_, t->ReadBlock(*filter));
  SLIP_ASSIGN_OR_RETURN(t->index_contents_, t->ReadBlock(*index));
  SLIP_ASSIGN_OR_RETURN(Block ib, Block::Parse(t->index_contents_));
  auto it = ib.NewIterator(CompareInternalKeys);
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    std::string_view v = it.value();
    if (!ParseInternalKey(it.key()) || !BlockHandle::DecodeFrom(&v)) {
      return Status::Corruption("a table index entry that does not decode");
    }
    ++t->index_entries_;
  }
  SLIP_RETURN_IF_ERROR(it.status());
  t->index_.emplace(ib);  // its view of index_contents_ stays valid: the Table does not move
  return t;
}

Result<std::string> Table::ReadBlock(const BlockHandle& h) const {
  if (h.offset > file_->size() || h.size > file_->size() - h.offset ||
      kBlockTrailerBytes > file_->size() - h.offset - h.size) {
    return Status::Corruption("a block handle past the end of the table");
  }
  std::string scratch;
  SLIP_ASSIGN_OR_RETURN(std::string_view stored, file_->Read(h.offset, h.size + kBlockTrailerBytes, &scratch));
  SLIP_ASSIGN_OR_RETURN(std::string_view contents, OpenBlock(stored));
  return std::string(contents);
}

Result<std::optional<Table::Found>> Table::Get(std::string_view user_key, uint64_t snapshot) const {
  if (!policy_.MayContain(filter_, user_key)) {
    ++filtered_;
    return std::optional<Found>();
  }
  // The newest version at or before `snapshot` is the first entry at or
  // after (key, snapshot, value) in internal-key order.
  const std::string target = InternalKey(user_key, std::min(snapshot, kMaxSequence), ValueType::kValue);
  auto ii = index_->NewIterator(CompareInternalKeys);
  ii.Seek(target);
  SLIP_RETURN_IF_ERROR(ii.status());
  if (!ii.Valid()) return std::optional<Found>();
  SLIP_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> contents, ReadDataBlock(ii.value()));
  SLIP_ASSIGN_OR_RETURN(Block db, Block::Parse(*contents));
  auto di = db.NewIterator(CompareInternalKeys);
  di.Seek(target);
  SLIP_RETURN_IF_ERROR(di.status());
  if (!di.Valid()) return std::optional<Found>();
  auto parsed = ParseInternalKey(di.key());
  if (!parsed) return Status::Corruption("a table entry whose key does not decode");
  if (parsed->user_key != user_key) return std::optional<Found>();
  return std::optional<Found>(Found{parsed->sequence, parsed->type, std::string(di.value())});
}

Result<std::shared_ptr<const std::string>> Table::ReadDataBlock(std::string_view index_value) const {
  auto handle = BlockHandle::DecodeFrom(&index_value);
  if (!handle) return Status::Corruption("a table index entry that does not decode");
  if (cache_ != nullptr) {
    if (auto cached = cache_->Lookup(file_number_, handle->offset)) return cached;
  }
  // Only what ReadBlock checked is cached: a damaged block fails every read.
  SLIP_ASSIGN_OR_RETURN(std::string contents, ReadBlock(*handle));
  auto block = std::make_shared<const std::string>(std::move(contents));
  if (cache_ != nullptr) cache_->Insert(file_number_, handle->offset, block, block->size());
  return block;
}

Table::Iterator::Iterator(const Table* table)
    : table_(table),
      index_(*table->index_),
      index_it_(index_.NewIterator(CompareInternalKeys)) {}

std::unique_ptr<Table::Iterator> Table::NewIterator() const { return std::unique_ptr<Iterator>(new Iterator(this)); }

void Table::Iterator::LoadBlocks(const std::string* target) {
  for (; index_it_.Valid(); index_it_.Next()) {
    data_it_.reset();
    data_.reset();
    auto contents = table_->ReadDataBlock(index_it_.value());
    if (!contents.ok()) {
      status_ = contents.status();
      return;
    }
    contents_ = std::move(*contents);
    auto block = Block::Parse(*contents_);  // a view of the contents it keeps
    if (!block.ok()) {
      status_ = block.status();
      return;
    }
    data_.emplace(*block);
    data_it_.emplace(data_->NewIterator(CompareInternalKeys));
    if (target != nullptr) {
      data_it_->Seek(*target);
      target = nullptr;  // later blocks are after it: from their first entry
    } else {
      data_it_->SeekToFirst();
    }
    if (data_it_->Valid() || !data_it_->status().ok()) break;
  }
  if (data_it_ && !data_it_->status().ok()) {
    status_ = data_it_->status();
    data_it_.reset();
  }
  if (!index_it_.Valid() && status_.ok()) status_ = index_it_.status();
}

void Table::Iterator::SeekToFirst() {
  status_ = Status::Ok();
  data_it_.reset();
  index_it_.SeekToFirst();
  LoadBlocks();
}

void Table::Iterator::Seek(std::string_view internal_key) {
  // A copy: the target may be this iterator's own key(), which the seek
  // overwrites.
  const std::string target(internal_key);
  status_ = Status::Ok();
  data_it_.reset();
  if (target.size() < 8) {
    status_ = Status::InvalidArgument("a seek to a key shorter than an internal key's trailer");
    return;
  }
  // Each index entry is its block's last key: the first at or after the
  // target names the block holding the target's successor.
  index_it_.Seek(target);
  LoadBlocks(&target);
}

void Table::Iterator::Next() {
  data_it_->Next();
  if (data_it_->Valid()) return;
  if (!data_it_->status().ok()) {
    status_ = data_it_->status();
    data_it_.reset();
    return;
  }
  index_it_.Next();
  LoadBlocks();
}

Status Table::ForEach(const std::function<void(std::string_view, std::string_view)>& fn) const {
  auto it = NewIterator();
  for (it->SeekToFirst(); it->Valid(); it->Next()) fn(it->key(), it->value());
  return it->status();
}

}  // namespace slip::lsm
