#include "store/store.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "common/coding.h"
#include "common/hash.h"
#include "runtime/cost.h"
#include "store/store_internal.h"

namespace slip::store {

using internal::EntryType;
using internal::IsData;
using internal::kDelValue;
using internal::kNoSegment;
using internal::SegmentOwner;
using internal::SegmentState;
using internal::SkipInvalid;

Store::Store(pm::PmRegion* region, StoreOptions options, std::unique_ptr<log::SegmentTable> table)
    : region_(region),
      options_(std::move(options)),
      table_(std::move(table)),
      shards_(table_->geometry().num_shards),
      dropped_below_(table_->geometry().num_shards, 0),
      dropped_regions_(table_->geometry().num_shards),
      writers_(options_.num_writers),
      live_(new std::atomic<int64_t>[table_->num_segments()]) {
  for (auto& s : shards_) s.index = std::make_unique<index::ShardIndex>(static_cast<index::EntryReader*>(this));
  for (uint32_t i = 0; i < table_->num_segments(); ++i) live_[i] = 0;
}

Store::~Store() = default;

Result<std::unique_ptr<Store>> Store::Open(pm::PmRegion* region, const StoreOptions& options) {
  const auto& o = options;
  if (o.num_writers == 0 || o.num_writers > 4096) {
    return Status::InvalidArgument("writer count must be 1..4096");
  }
  if (o.max_block_bytes < 128 || o.max_block_bytes % log::kAlign != 0) {
    return Status::InvalidArgument("max_block_bytes must be a multiple of 64, at least 128");
  }
  if (uint64_t{o.limits.max_key} + log::kHeaderSize + log::kAlign > o.max_block_bytes) {
    return Status::InvalidArgument("max_block_bytes " + std::to_string(o.max_block_bytes) +
                                   " cannot hold a maximal key of " +
                                   std::to_string(o.limits.max_key) + " bytes in one block");
  }
  if (!(o.clean_threshold > 0 && o.clean_threshold <= 1)) {
    return Status::InvalidArgument("clean_threshold must be in (0, 1]");
  }
  std::unique_ptr<log::SegmentTable> table;
  if (log::SegmentTable::IsBlank(*region)) {
    SLIP_ASSIGN_OR_RETURN(table, log::SegmentTable::Format(region, o.geometry));
  } else {
    SLIP_ASSIGN_OR_RETURN(table, log::SegmentTable::Open(region));
  }
  if (o.max_block_bytes > table->segment_size()) {
    return Status::InvalidArgument("max_block_bytes exceeds the segment size " +
                                   std::to_string(table->segment_size()));
  }
  if (table->num_segments() < o.cleaner_reserve + 2) {
    return Status::InvalidArgument("region holds only " + std::to_string(table->num_segments()) +
                                   " segments; need at least " +
                                   std::to_string(o.cleaner_reserve + 2));
  }
  std::unique_ptr<Store> store(new Store(region, o, std::move(table)));
  SLIP_RETURN_IF_ERROR(store->Recover());
  return store;
}

uint32_t Store::ShardOf(uint64_t hash) const {
  return ShardOfHash(hash, static_cast<uint32_t>(shards_.size()));
}

index::EntryInfo Store::Read(uint64_t offset) const {
  const std::byte* p = region_->at(offset);
  const log::BlockHeader h = log::PeekHeader(p);
  return {std::string_view(reinterpret_cast<const char*>(p + log::kHeaderSize), h.key_len),
          h.version};
}

// ---------------------------------------------------------------------------
// Write path

void Store::PersistTail(Writer& w) {
  if (w.segment == Writer::kNone || w.tail <= w.synced) return;
  region_->Persist(region_->at(table_->SegmentOffset(w.segment) + w.synced), w.tail - w.synced);
  w.synced = w.tail;
}

bool Store::Unpersisted(const Writer& w, uint64_t end) const {
  // Only the writer's current segment holds unpersisted bytes (Advance
  // persists before it moves on).
  return w.segment != Writer::kNone && table_->SegmentOf(end - 1) == w.segment &&
         end > table_->SegmentOffset(w.segment) + w.synced;
}

void Store::FlushWriter(Writer& w) {
  PersistTail(w);
  // Indexed in write order, so the newest of a key written twice in one
  // batch wins either way (indexing is version-conditional too).
  for (const Unindexed& u : w.unindexed) Index(u.meta, u.hash, u.key, u.blocks);
  w.unindexed.clear();
}

void Store::Flush(uint32_t writer) {
  if (writer < writers_.size()) FlushWriter(writers_[writer]);
}

bool Store::HasDeferred(uint32_t writer) const {
  if (writer >= writers_.size()) return false;
  const Writer& w = writers_[writer];
  return !w.unindexed.empty() || (w.segment != Writer::kNone && w.tail > w.synced);
}

Status Store::SealForStop() {
  auto seal = [&](Writer& w) -> Status {
    FlushWriter(w);
    if (w.segment == Writer::kNone) return Status::Ok();
    SLIP_RETURN_IF_ERROR(table_->Transition(w.segment, SegmentState::kCommitted));
    w.segment = Writer::kNone;
    return Status::Ok();
  };
  for (Writer& w : writers_) SLIP_RETURN_IF_ERROR(seal(w));
  return seal(cleaner_);
}

Status Store::Advance(Writer& w, SegmentOwner owner) {
  // Nothing unpersisted or unindexed may stay behind in a sealed segment:
  // the cleaner takes Committed segments, and an entry not yet indexed looks
  // dead to it.
  FlushWriter(w);
  if (w.segment != Writer::kNone) {
    // A t-log segment skips Used: with no replication in flight every entry
    // in it is already persistent everywhere it needs to be.
    SLIP_RETURN_IF_ERROR(table_->Transition(w.segment, SegmentState::kCommitted));
    w.segment = Writer::kNone;
  }
  uint32_t keep = owner == SegmentOwner::kClean ? 0 : options_.cleaner_reserve;
  SLIP_ASSIGN_OR_RETURN(uint32_t seg, table_->Allocate(owner, keep));
  w.segment = seg;
  w.tail = 0;
  w.synced = 0;
  return Status::Ok();
}

Result<Store::Blocks> Store::Append(Writer& w, SegmentOwner owner, const log::EntryMeta& meta,
                                   std::string_view key, std::string_view value, Persist persist) {
  SLIP_ASSIGN_OR_RETURN(log::Layout layout,
                        log::PlanEntry(key.size(), value.size(), options_.max_block_bytes));
  const uint64_t payload = key.size() + value.size();
  Blocks b;
  for (uint16_t seq = 0; seq < layout.cnt; ++seq) {
    const uint32_t bytes = layout.BlockBytes(seq, payload);
    if (w.segment == Writer::kNone || w.tail + bytes > table_->segment_size()) {
      Status s = Advance(w, owner);
      if (!s.ok()) {
        // Hide the blocks already written: the end mark on a block's first
        // line ends a recovery scan of its segment there, and everything
        // after it in that segment belongs to this entry too (the log is
        // sequential).
        for (uint64_t off : b.offsets) log::StampEndMark(region_, region_->at(off));
        Retire(b);
        if (!b.offsets.empty() && table_->SegmentOf(b.offsets.back()) == w.segment) {
          w.tail = b.offsets.back() - table_->SegmentOffset(w.segment);
        }
        return s;
      }
    }
    const uint64_t off = table_->SegmentOffset(w.segment) + w.tail;
    std::byte* dst = region_->at(off);
    log::EncodeBlock(meta, key, value, layout, seq, dst);
    live_[w.segment].fetch_add(bytes, std::memory_order_relaxed);
    w.tail += bytes;
    b.offsets.push_back(off);
    b.bytes.push_back(bytes);
  }
  // kNow persists the deferred entries before this one too; a deferred
  // Apply still waits for Flush to be indexed.
  if (persist == Persist::kNow) PersistTail(w);
  return b;
}

void Store::Retire(const Blocks& b) {
  for (size_t i = 0; i < b.offsets.size(); ++i) {
    live_[table_->SegmentOf(b.offsets[i])].fetch_sub(b.bytes[i], std::memory_order_relaxed);
  }
}

Store::Blocks Store::BlocksOf(uint64_t offset0) const {
  const log::BlockHeader h = log::PeekHeader(region_->at(offset0));
  if (h.cnt == 1) return Blocks{{offset0}, {h.BlockBytes()}};
  std::lock_guard<std::mutex> lock(large_mu_);
  auto it = large_.find(offset0);
  return it == large_.end() ? Blocks{} : it->second;
}

void Store::RememberLarge(const Blocks& b) {
  if (b.offsets.size() < 2) return;
  std::lock_guard<std::mutex> lock(large_mu_);
  large_[b.offsets[0]] = b;
  for (size_t i = 1; i < b.offsets.size(); ++i) {
    // After recovery two instances of one entry (an original and a cleaner
    // copy cut short by a crash) can share blocks: keep every owner.
    auto [lo, hi] = large_rev_.equal_range(b.offsets[i]);
    bool known = false;
    for (auto it = lo; it != hi && !known; ++it) known = it->second == b.offsets[0];
    if (!known) large_rev_.emplace(b.offsets[i], b.offsets[0]);
  }
}

Status Store::WriteVersioned(uint32_t writer, const log::EntryMeta& meta, uint64_t hash,
                             std::string_view key, std::string_view value, Persist persist) {
  Writer& w = writers_[writer];
  SLIP_ASSIGN_OR_RETURN(Blocks blocks, Append(w, SegmentOwner::kWorker, meta, key, value, persist));
  for (uint32_t bytes : blocks.bytes) appended_.fetch_add(bytes, std::memory_order_relaxed);
  RememberLarge(blocks);
  if (persist == Persist::kDeferred) {
    w.unindexed.push_back({meta, hash, std::string(key), std::move(blocks)});
    return Status::Ok();
  }
  Index(meta, hash, key, blocks);
  return Status::Ok();
}

void Store::Index(const log::EntryMeta& meta, uint64_t hash, std::string_view key, const Blocks& blocks) {
  // Visible only now, after every block is persistent.
  auto r = shards_[meta.shard].index->Upsert(hash, key, meta.version, blocks.offsets[0]);
  if (!r.applied) {
    Retire(blocks);  // a newer version of the key was indexed first
  } else if (r.displaced) {
    Retire(BlocksOf(*r.displaced));
  }
  if (r.applied) IndexChanged(hash, key);
}

Status Store::Apply(uint32_t writer, const log::EntryMeta& meta, std::string_view key,
                    std::string_view value, Persist persist) {
  if (writer >= writers_.size()) {
    return Status::InvalidArgument("writer " + std::to_string(writer) + " out of range (" +
                                   std::to_string(writers_.size()) + " writers)");
  }
  if (meta.type != EntryType::kPut && meta.type != EntryType::kDel) {
    return Status::InvalidArgument("only PUT and DEL entries can be applied");
  }
  if (meta.version == 0 || meta.version > log::kMaxVersion) {
    return Status::InvalidArgument("version " + std::to_string(meta.version) + " out of range");
  }
  // A DEL carries no value from the primary; ours holds 8 reserved bytes.
  const std::string_view stored = meta.type == EntryType::kDel ? std::string_view(kDelValue, 8) : value;
  SLIP_RETURN_IF_ERROR(log::Validate(meta, key.size(), stored.size(), options_.limits));
  const uint64_t hash = HashKey(key);
  if (meta.shard >= shards_.size() || ShardOf(hash) != meta.shard) {
    return Status::InvalidArgument("entry for shard " + std::to_string(meta.shard) +
                                   " holds a key of shard " + std::to_string(ShardOf(hash)));
  }
  RaiseShardVersion(meta.shard, meta.version);
  runtime::Charge(runtime::Cost::kStorePut, key.size() + stored.size());
  return WriteVersioned(writer, meta, hash, key, stored, persist);
}

void Store::RaiseShardVersion(uint32_t shard, uint64_t version) {
  auto& v = shards_[shard].version;
  uint64_t cur = v.load();
  while (cur < version && !v.compare_exchange_weak(cur, version)) {
  }
}

size_t Store::DropShard(uint32_t shard) {
  if (shard >= shards_.size()) return 0;
  // Under the cleaner's lock: no segment is freed (and no key read from PM
  // goes stale) while the shard's entries are retired.
  std::lock_guard<std::mutex> lock(clean_mu_);
  dropped_below_[shard] = table_->next_seq();
  // First the filter, then the index emptied: a block digested meanwhile is
  // either taken out with the rest or not indexed at all.
  std::map<uint32_t, DroppedRegion> regions;
  for (uint32_t seg = 0; seg < table_->num_segments(); ++seg) {
    const log::SegmentMeta m = table_->meta(seg);
    if (m.owner == log::SegmentOwner::kControl && m.state == log::SegmentState::kUsing) {
      regions[seg] = DroppedRegion{m.seq, LandedExtent(seg)};
    }
  }
  {
    std::lock_guard<std::mutex> dl(drop_mu_);
    dropped_regions_[shard] = std::move(regions);
    any_dropped_ = true;
  }
  {
    // Its entries still being assembled will not be indexed: they pin no
    // segment any more.
    std::lock_guard<std::mutex> lk(large_mu_);
    for (auto it = received_partial_.begin(); it != received_partial_.end();) {
      if (it->first.first != shard) {
        ++it;
        continue;
      }
      for (uint64_t o : it->second.offsets) {
        if (o == 0) continue;
        auto pin = partial_blocks_.find(table_->SegmentOf(o));
        if (--pin->second == 0) partial_blocks_.erase(pin);
      }
      it = received_partial_.erase(it);
    }
  }
  const std::vector<uint64_t> held = shards_[shard].index->TakeAll();
  for (uint64_t offset : held) {
    Retire(BlocksOf(offset));
    const std::string key(Read(offset).key);
    IndexChanged(HashKey(key), key);
  }
  return held.size();
}

uint64_t Store::LandedExtent(uint32_t seg) const {
  const std::byte* base = table_->SegmentBase(seg);
  const uint64_t size = table_->segment_size();
  uint64_t pos = 0, extent = 0;
  while (pos + log::kHeaderSize <= size) {
    if (LoadLE<uint64_t>(base + pos) == 0) {
      pos += log::kAlign;
      continue;
    }
    auto d = log::DecodeBlock({base + pos, size - pos}, options_.limits);
    if (!d.status.ok()) {
      pos = internal::SkipInvalid(base, pos, size, options_.limits);
      continue;
    }
    pos += d.block.encoded_bytes;
    extent = pos;
  }
  return extent;
}

bool Store::InDroppedRegion(uint32_t shard, uint64_t offset) const {
  const uint32_t seg = table_->SegmentOf(offset);
  std::lock_guard<std::mutex> lock(drop_mu_);
  const auto& regions = dropped_regions_[shard];
  auto it = regions.find(seg);
  return it != regions.end() && it->second.seq == table_->meta(seg).seq &&
         offset - table_->SegmentOffset(seg) < it->second.extent;
}

Result<uint64_t> Store::ForEachInShard(uint32_t shard, uint64_t min_version, uint64_t skip,
                                       const std::function<bool(const ShardEntry&)>& fn) const {
  if (shard >= shards_.size()) return Status::InvalidArgument("no such shard");
  // Keys are collected under the index lock, where every offset is current
  // (the cleaner frees a segment only after moving the index off it); each
  // entry is then read by key, the safe way, since it may move meanwhile.
  std::vector<std::string> keys;
  shards_[shard].index->ForEach([&](uint64_t off) { keys.emplace_back(Read(off).key); });
  uint64_t walked = std::min<uint64_t>(skip, keys.size());
  for (; walked < keys.size(); ++walked) {
    std::string& key = keys[walked];
    ShardEntry e;
    e.meta.type = EntryType::kCommitVersion;  // overwritten by a successful read
    auto v = Find(key, &e.meta);
    if (v.ok()) {
      e.value = std::move(*v);
    } else if (!v.status().Is(Code::kNotFound)) {
      return v.status();
    }
    // NotFound with no entry read: the cleaner dropped the key meanwhile.
    if (e.meta.type != EntryType::kPut && e.meta.type != EntryType::kDel) continue;
    if (e.meta.version <= min_version) continue;
    e.key = std::move(key);
    if (!fn(e)) return walked + 1;
  }
  return walked;
}

Status Store::Put(uint32_t writer, std::string_view key, std::string_view value) {
  SLIP_ASSIGN_OR_RETURN(PendingWrite w, Prepare(writer, EntryType::kPut, key, value));
  Commit(w);
  return Status::Ok();
}

Status Store::Delete(uint32_t writer, std::string_view key) {
  SLIP_ASSIGN_OR_RETURN(PendingWrite w, Prepare(writer, EntryType::kDel, key, {}));
  Commit(w);
  return Status::Ok();
}

Result<Store::PendingWrite> Store::Prepare(uint32_t writer, EntryType type, std::string_view key,
                                           std::string_view value, Persist persist) {
  return PrepareAs(writer, type, key, value, /*version=*/0, persist);
}

Result<Store::PendingWrite> Store::PrepareVersioned(uint32_t writer, const log::EntryMeta& meta,
                                                    std::string_view key, std::string_view value,
                                                    Persist persist) {
  if (meta.shard != ShardOf(HashKey(key))) {
    return Status::InvalidArgument("key not of shard " + std::to_string(meta.shard));
  }
  if (meta.version == 0 || meta.version > shard_version(meta.shard)) {
    return Status::InvalidArgument("version " + std::to_string(meta.version) + " of shard " +
                                   std::to_string(meta.shard) + " was not reserved");
  }
  return PrepareAs(writer, meta.type, key, value, meta.version, persist);
}

Result<Store::PendingWrite> Store::PrepareAs(uint32_t writer, EntryType type, std::string_view key,
                                             std::string_view value, uint64_t version, Persist persist) {
  if (writer >= writers_.size()) {
    return Status::InvalidArgument("writer " + std::to_string(writer) + " out of range (" +
                                   std::to_string(writers_.size()) + " writers)");
  }
  if (type != EntryType::kPut && type != EntryType::kDel) {
    return Status::InvalidArgument("only PUT and DEL can be written");
  }
  if (type == EntryType::kDel) {
    if (key.empty() || key.size() > options_.limits.max_key) {
      return Status::InvalidArgument("key length " + std::to_string(key.size()) + " not in 1.." +
                                     std::to_string(options_.limits.max_key));
    }
    // Absent or already deleted: nothing to delete, nothing written.
    auto cur = Find(key);
    if (!cur.ok()) return cur.status();
    value = std::string_view(kDelValue, 8);
  }
  PendingWrite w;
  w.hash_ = HashKey(key);
  const uint32_t shard = ShardOf(w.hash_);
  w.meta_ = log::EntryMeta{type, static_cast<uint16_t>(shard), 0};
  SLIP_RETURN_IF_ERROR(log::Validate(w.meta_, key.size(), value.size(), options_.limits));
  w.meta_.version = version != 0 ? version : shards_[shard].version.fetch_add(1) + 1;
  if (w.meta_.version > log::kMaxVersion) return Status::NoSpace("shard version space exhausted");
  runtime::Charge(runtime::Cost::kStorePut, key.size() + value.size());
  SLIP_ASSIGN_OR_RETURN(Blocks blocks, Append(writers_[writer], SegmentOwner::kWorker, w.meta_,
                                              key, value, persist));
  for (uint32_t bytes : blocks.bytes) appended_.fetch_add(bytes, std::memory_order_relaxed);
  RememberLarge(blocks);
  w.writer_ = writer;
  w.key_.assign(key);
  w.offsets_ = std::move(blocks.offsets);
  w.bytes_ = std::move(blocks.bytes);
  return w;
}

void Store::Commit(PendingWrite& w) {
  if (w.done_) return;
  w.done_ = true;
  // Visible only once persistent (a deferred Prepare whose group flush has not run).
  if (w.writer_ != kAdopted) {
    if (Writer& wr = writers_[w.writer_]; Unpersisted(wr, w.offsets_.back() + w.bytes_.back())) PersistTail(wr);
  }
  auto r = shards_[w.meta_.shard].index->Upsert(w.hash_, w.key_, w.meta_.version, w.offsets_[0]);
  if (!r.applied) {
    Retire(Blocks{w.offsets_, w.bytes_});  // a newer version of the key was indexed first
  } else if (r.displaced) {
    Retire(BlocksOf(*r.displaced));
  }
  (w.meta_.type == EntryType::kPut ? puts_ : deletes_).fetch_add(1, std::memory_order_relaxed);
  if (r.applied) IndexChanged(w.hash_, w.key_);
}

void Store::Abandon(PendingWrite& w) {
  if (w.done_) return;
  w.done_ = true;
  // Not indexed, so the cleaner treats it as dead and never copies it; but
  // the index never counted it either, so the cleaner must not release it.
  Retire(Blocks{w.offsets_, w.bytes_});
  std::lock_guard<std::mutex> lock(large_mu_);
  abandoned_.emplace(w.offsets_[0], w.key_);
  ++abandoned_keys_[w.key_];
}

// ---------------------------------------------------------------------------
// Direct client writes (erda)

Result<uint64_t> Store::ReserveVersion(uint32_t shard) {
  if (shard >= shards_.size()) return Status::InvalidArgument("no shard " + std::to_string(shard));
  const uint64_t v = shards_[shard].version.fetch_add(1) + 1;
  if (v > log::kMaxVersion) return Status::NoSpace("shard version space exhausted");
  return v;
}

Result<uint32_t> Store::OpenReceivePlace(uint64_t offset) const {
  if (!table_->InDataArea(offset) || offset % log::kAlign != 0) {
    return Status::InvalidArgument("offset " + std::to_string(offset) + " is not an entry's place");
  }
  const uint32_t seg = table_->SegmentOf(offset);
  const log::SegmentMeta m = table_->meta(seg);
  if (m.owner != SegmentOwner::kControl || m.state != SegmentState::kUsing) {
    return Status::InvalidArgument("segment " + std::to_string(seg) + " is not an open receive segment");
  }
  return seg;
}

Result<log::BlockView> Store::ReadReceived(uint64_t offset, const log::EntryMeta& meta,
                                           std::string_view key) const {
  SLIP_ASSIGN_OR_RETURN(const uint32_t seg, OpenReceivePlace(offset));
  if (ShardOf(HashKey(key)) != meta.shard) return Status::InvalidArgument("key not of shard " + std::to_string(meta.shard));
  const uint64_t end = table_->SegmentOffset(seg) + table_->segment_size();
  // The client may still be writing (a torn or absent entry fails here, and
  // the caller refuses the commit); decoding reads PM once, then the checks
  // below hold for the bytes persisted next, which nobody else writes.
  auto d = log::DecodeBlock({region_->at(offset), end - offset}, options_.limits);
  if (!d.status.ok()) return Status::Corruption("the entry has not landed whole: " + d.status.message());
  const log::BlockView& b = d.block;
  if (b.cnt != 1 || b.type != meta.type || b.shard != meta.shard || b.version != meta.version ||
      b.key() != key) {
    return Status::Corruption("the entry that landed is not the one reserved");
  }
  return b;
}

Result<Store::PendingWrite> Store::AdoptReceived(uint64_t offset, const log::EntryMeta& meta,
                                                 std::string_view key, std::string_view* value) {
  SLIP_ASSIGN_OR_RETURN(log::BlockView b, ReadReceived(offset, meta, key));
  const uint32_t seg = table_->SegmentOf(offset);
  region_->Persist(region_->at(offset), b.encoded_bytes);
  live_[seg].fetch_add(b.encoded_bytes, std::memory_order_relaxed);
  adopted_.fetch_add(b.encoded_bytes, std::memory_order_relaxed);
  PendingWrite w;
  w.meta_ = meta;
  w.hash_ = HashKey(key);
  w.key_.assign(key);
  w.offsets_ = {offset};
  w.bytes_ = {b.encoded_bytes};
  w.writer_ = kAdopted;
  if (value != nullptr) *value = b.value();
  return w;
}

Status Store::WriteReceived(uint64_t offset, uint32_t bytes, const log::EntryMeta& meta, std::string_view key,
                            std::string_view value) {
  SLIP_ASSIGN_OR_RETURN(const uint32_t seg, OpenReceivePlace(offset));
  SLIP_RETURN_IF_ERROR(log::Validate(meta, key.size(), value.size(), options_.limits));
  const uint64_t end = table_->SegmentOffset(seg) + table_->segment_size();
  SLIP_ASSIGN_OR_RETURN(log::Layout layout, log::PlanEntry(key.size(), value.size(), options_.max_block_bytes));
  if (layout.cnt != 1 || layout.total_bytes > bytes || offset + layout.total_bytes > end) {
    return Status::InvalidArgument("an entry of " + std::to_string(layout.total_bytes) +
                                   " bytes does not fit its place of " + std::to_string(bytes));
  }
  const size_t n = log::EncodeBlock(meta, key, value, layout, 0, region_->at(offset));
  region_->Persist(region_->at(offset), n);
  staged_.fetch_add(n, std::memory_order_relaxed);
  return Status::Ok();
}

void Store::AbandonReceived(uint64_t offset, std::string_view key) {
  std::lock_guard<std::mutex> lock(large_mu_);
  if (!abandoned_.emplace(offset, std::string(key)).second) return;
  ++abandoned_keys_[std::string(key)];
}

Status Store::KillReceived(uint64_t offset, uint32_t bytes) {
  SLIP_ASSIGN_OR_RETURN(const uint32_t seg, OpenReceivePlace(offset));
  const uint64_t end = table_->SegmentOffset(seg) + table_->segment_size();
  const uint64_t len = std::min<uint64_t>(bytes, end - offset);
  // Header first: from then on no scan decodes a block here.
  const uint64_t first = std::min<uint64_t>(len, pm::kCacheLine);
  std::memset(region_->at(offset), 0, first);
  region_->Persist(region_->at(offset), first);
  if (len > first) {
    std::memset(region_->at(offset + first), 0, len - first);
    region_->Persist(region_->at(offset + first), len - first);
  }
  std::lock_guard<std::mutex> lock(large_mu_);
  if (auto ab = abandoned_.find(offset); ab != abandoned_.end()) {
    if (--abandoned_keys_[ab->second] == 0) abandoned_keys_.erase(ab->second);
    abandoned_.erase(ab);
  }
  return Status::Ok();
}

std::optional<uint64_t> Store::Locate(std::string_view key) const {
  const uint64_t hash = HashKey(key);
  return shards_[ShardOf(hash)].index->Lookup(hash, key);
}

void Store::ForEachIndexedKey(const std::function<void(uint64_t hash, std::string_view key)>& fn) const {
  for (const Shard& sh : shards_) {
    std::vector<std::string> keys;
    sh.index->ForEach([&](uint64_t off) { keys.emplace_back(Read(off).key); });
    for (const std::string& k : keys) fn(HashKey(k), k);
  }
}

Status Store::FreeCleaned(uint32_t seg) {
  if (!options_.hold_freed_segments) return table_->Free(seg);
  SLIP_RETURN_IF_ERROR(table_->Free(seg, /*hold=*/true));
  std::lock_guard<std::mutex> lock(held_mu_);
  held_[0].push_back(seg);
  return Status::Ok();
}

void Store::ReleaseHeldSegments() {
  std::vector<uint32_t> ready;
  {
    std::lock_guard<std::mutex> lock(held_mu_);
    ready.swap(held_[1]);
    held_[1].swap(held_[0]);
  }
  for (uint32_t seg : ready) table_->Reuse(seg);
}

bool Store::HasAbandoned(const std::string& key) const {
  std::lock_guard<std::mutex> lock(large_mu_);
  return abandoned_keys_.count(key) > 0;
}

// ---------------------------------------------------------------------------
// Read path

Result<std::string> Store::ReadValue(uint64_t offset0, std::string_view want_key,
                                     std::string* key_out, log::EntryMeta* meta_out) const {
  // A reader races the cleaner and writers: the segment under `offset0` may be
  // freed and reused while we read. So every block is copied out of PM first
  // and only the copy is decoded: a copy torn by a concurrent overwrite fails
  // its CRC, and a valid entry of another key that now lives there fails the
  // key comparison. Either way the caller re-reads the index.
  Blocks b = BlocksOf(offset0);
  if (b.offsets.empty()) return Status::Corruption("entry blocks unknown");
  std::vector<std::byte> copy;
  std::string payload;
  uint64_t key_len = 0;
  for (size_t i = 0; i < b.offsets.size(); ++i) {
    const uint64_t off = b.offsets[i];
    const uint32_t seg = table_->SegmentOf(off);
    const uint64_t room = table_->SegmentOffset(seg) + table_->segment_size() - off;
    const uint64_t len = std::min<uint64_t>({room, b.bytes[i], options_.max_block_bytes});
    copy.resize(len);
    std::memcpy(copy.data(), region_->at(off), len);
    std::atomic_thread_fence(std::memory_order_acquire);
    auto d = log::DecodeBlock({copy.data(), copy.size()}, options_.limits);
    if (!d.status.ok()) {
      return Status::Corruption("entry at offset " + std::to_string(off) + ": " +
                                d.status.message());
    }
    const log::BlockView& v = d.block;
    if (v.seq != i || v.cnt != b.offsets.size()) {
      return Status::Corruption("entry at offset " + std::to_string(off) + " changed under the reader");
    }
    if (i == 0) {
      key_len = v.key_len;
      payload.resize(uint64_t{v.key_len} + v.value_len);
    } else if (payload.size() != uint64_t{v.key_len} + v.value_len) {
      return Status::Corruption("entry blocks disagree on their lengths");
    }
    std::memcpy(payload.data() + v.chunk_offset, v.chunk.data(), v.chunk.size());
    if (i == 0 && meta_out) *meta_out = log::EntryMeta{v.type, v.shard, v.version};
    if (i == 0 && v.type == EntryType::kDel && v.key_len == want_key.size() &&
        v.key_len <= v.chunk.size() &&
        std::memcmp(v.chunk.data(), want_key.data(), want_key.size()) == 0) {
      return Status::NotFound();
    }
  }
  if (std::string_view(payload).substr(0, key_len) != want_key) {
    return Status::Corruption("entry at offset " + std::to_string(offset0) +
                              " holds another key (moved under the reader)");
  }
  if (key_out) *key_out = payload.substr(0, key_len);
  return payload.substr(key_len);
}

Result<std::string> Store::Get(std::string_view key, log::EntryMeta* meta) const {
  gets_.fetch_add(1, std::memory_order_relaxed);
  auto v = Find(key, meta);
  runtime::Charge(runtime::Cost::kStoreGet, v.ok() ? key.size() + v->size() : key.size());
  return v;
}

Result<std::string> Store::Find(std::string_view key, log::EntryMeta* meta) const {
  if (key.empty() || key.size() > options_.limits.max_key) {
    return Status::InvalidArgument("key length " + std::to_string(key.size()) + " not in 1.." +
                                   std::to_string(options_.limits.max_key));
  }
  const uint64_t hash = HashKey(key);
  const Shard& sh = shards_[ShardOf(hash)];
  // The cleaner moves an entry before it frees its segment and a concurrent
  // overwrite only retires the old copy, so an offset read here stays
  // readable long enough; the CRC check in ReadValue catches a racing reuse,
  // and the retry re-reads the index.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto off = sh.index->Lookup(hash, key);
    if (!off) return Status::NotFound();
    auto v = ReadValue(*off, key, nullptr, meta);
    if (v.ok() || v.status().Is(Code::kNotFound)) return v;
    if (sh.index->Lookup(hash, key) == off) return v;  // genuinely corrupt
  }
  return Status::Corruption("entry kept moving under the reader");
}

bool Store::NeedsCleaning() const {
  return table_->free_count() <
         static_cast<uint32_t>(options_.clean_below_free_fraction * table_->num_segments()) +
             options_.cleaner_reserve;
}

StoreStats Store::stats() const {
  StoreStats s;
  s.puts = puts_.load();
  s.deletes = deletes_.load();
  s.gets = gets_.load();
  s.appended_bytes = appended_.load();
  s.adopted_bytes = adopted_.load();
  s.staged_bytes = staged_.load();
  s.segments_cleaned = cleaned_.load();
  s.entries_relocated = relocated_.load();
  s.relocated_bytes = relocated_bytes_.load();
  s.tombstones_dropped = tombstones_dropped_.load();
  s.free_segments = table_->free_count();
  s.num_segments = table_->num_segments();
  for (const auto& sh : shards_) s.keys += sh.index->size();
  return s;
}

}  // namespace slip::store
