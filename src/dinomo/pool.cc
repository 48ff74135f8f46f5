#include "dinomo/pool.h"

#include <cstddef>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>

#include "dinomo/cell.h"

namespace slip::dinomo {

namespace {

constexpr uint64_t kMagic = 0x4c4f4f5050494c53ull;  // "SLIPPOOL"
constexpr uint64_t kTableAt = 4096;
constexpr uint64_t kRowBytes = 16;  // state u8 | 3 zero | owner u32 | seq u64
// Fence per node (u64), after the superblock in its page.
constexpr uint64_t kFencesAt = 64;
static_assert(kFencesAt + 8 * Pool::kMaxNodes <= kTableAt);

// Superblock: magic | segment_bytes u64 | num_segments u32 | 0 u32 |
// index_offset u64 | index_bytes u64 | segments_offset u64.
struct Superblock {
  uint64_t magic, segment_bytes;
  uint32_t num_segments, zero;
  uint64_t index_offset, index_bytes, segments_offset;
};

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

Pool::Pool(pm::PmRegion* region, const PoolOptions& options)
    : region_(region), limits_(options.limits), admitted_(kMaxNodes, 0), fence_(kMaxNodes, 0) {}

Result<std::unique_ptr<Pool>> Pool::Open(pm::PmRegion* region, const PoolOptions& options) {
  std::unique_ptr<Pool> p(new Pool(region, options));
  uint64_t magic;
  std::memcpy(&magic, region->at(0), 8);
  if (magic == kMagic) {
    SLIP_RETURN_IF_ERROR(p->Load());
  } else {
    SLIP_RETURN_IF_ERROR(p->Format(options));
  }
  return p;
}

Status Pool::Format(const PoolOptions& o) {
  if (o.segment_bytes < 64 * 1024 || o.segment_bytes % 4096 != 0) {
    return Status::InvalidArgument("segments must be a multiple of 4 KiB and at least 64 KiB");
  }
  const uint64_t index_bytes = o.index_bytes != 0 ? o.index_bytes : kBucketBytes * (1 + 2 * uint64_t{o.num_buckets});
  // The table is sized for the most segments the region could hold.
  const uint64_t max_segments = region_->size() / o.segment_bytes;
  const uint64_t index_offset = AlignUp(kTableAt + max_segments * kRowBytes, 4096);
  const uint64_t segments_offset = AlignUp(index_offset + index_bytes, 4096);
  if (segments_offset + o.segment_bytes > region_->size()) {
    return Status::InvalidArgument("a region of " + std::to_string(region_->size()) +
                                   " bytes holds no segment after its index of " + std::to_string(index_bytes));
  }
  const uint64_t n = (region_->size() - segments_offset) / o.segment_bytes;
  std::memset(region_->at(0), 0, index_offset);
  region_->Persist(region_->at(0), index_offset);
  SLIP_ASSIGN_OR_RETURN(index_, PoolIndex::Create(region_, index_offset, index_bytes, o.num_buckets, limits_));
  segment_bytes_ = o.segment_bytes;
  table_offset_ = kTableAt;
  index_offset_ = index_offset;
  segments_offset_ = segments_offset;
  num_segments_ = static_cast<uint32_t>(n);
  segments_.assign(num_segments_, Segment{});
  // The magic last: a pool is formatted only once everything else is.
  const Superblock sb{kMagic, segment_bytes_, num_segments_, 0, index_offset_, index_bytes, segments_offset_};
  std::memcpy(region_->at(0), &sb, sizeof sb);
  region_->Persist(region_->at(0), sizeof sb);
  return Status::Ok();
}

Status Pool::Load() {
  Superblock sb;
  std::memcpy(&sb, region_->at(0), sizeof sb);
  // Checked by division: a corrupt field must not overflow the arithmetic.
  const uint64_t size = region_->size();
  if (sb.segment_bytes == 0 || sb.segment_bytes > size || sb.segments_offset > size ||
      sb.num_segments > (size - sb.segments_offset) / sb.segment_bytes || sb.index_offset < kTableAt ||
      sb.num_segments > (sb.index_offset - kTableAt) / kRowBytes || sb.index_offset >= size) {
    return Status::Corruption("the pool's superblock is inconsistent");
  }
  segment_bytes_ = sb.segment_bytes;
  table_offset_ = kTableAt;
  index_offset_ = sb.index_offset;
  segments_offset_ = sb.segments_offset;
  num_segments_ = sb.num_segments;
  SLIP_ASSIGN_OR_RETURN(index_, PoolIndex::Open(region_, index_offset_, limits_));
  for (uint32_t n = 0; n < kMaxNodes; ++n) std::memcpy(&fence_[n], region_->at(kFencesAt + 8 * n), 8);
  segments_.assign(num_segments_, Segment{});
  for (uint32_t s = 0; s < num_segments_; ++s) {
    const std::byte* row = region_->at(table_offset_ + s * kRowBytes);
    Segment& g = segments_[s];
    g.state = static_cast<State>(static_cast<uint8_t>(row[0]));
    if (g.state != State::kFree && g.state != State::kOpen && g.state != State::kMerged && g.state != State::kIndex &&
        g.state != State::kCells) {
      return Status::Corruption("segment " + std::to_string(s) + " has state " +
                                std::to_string(static_cast<int>(g.state)));
    }
    std::memcpy(&g.owner, row + 4, 4);
    std::memcpy(&g.seq, row + 8, 8);
    next_seq_ = std::max(next_seq_, g.seq + 1);
    // A run of an index replaced before the restart (or one a crash left
    // half-built): no reader can be in it any more.
    const uint64_t at = segments_offset_ + uint64_t{s} * segment_bytes_;
    if (g.state == State::kIndex && (at + segment_bytes_ <= index_offset_ || at >= index_offset_ + index_->area_bytes())) {
      Free(s);
    }
  }
  for (uint32_t s = 0; s < num_segments_; ++s) {
    if (segments_[s].state == State::kCells) SLIP_RETURN_IF_ERROR(LoadCells(s));
  }
  // Garbage counters: what each merged segment holds against what the index
  // (or a shared key's cell) still points at in it. Open segments start
  // over: their next merge walks them from the start (entries it already
  // merged count as current).
  std::vector<uint64_t> valid(num_segments_, 0);
  auto count_valid = [&](IndexPointer p) {
    if (!p.cell && p.offset >= segments_offset_) {
      const uint32_t s = SegmentOf(p.offset);
      if (s < num_segments_) ++valid[s];
    }
  };
  index_->ForEachPointer(count_valid);
  for (auto& [offset, c] : cells_) {
    c.counted = CellWord(offset);
    if (c.counted) count_valid(*c.counted);
  }
  for (uint32_t s = 0; s < num_segments_; ++s) {
    Segment& g = segments_[s];
    if (g.state != State::kMerged) continue;
    const uint64_t base = segments_offset_ + uint64_t{s} * segment_bytes_;
    uint64_t pos = 0;
    while (pos < segment_bytes_) {
      auto d = log::DecodeBlock({region_->at(base + pos), segment_bytes_ - pos}, limits_);
      if (!d.status.ok()) break;
      ++g.entries;
      pos += d.block.encoded_bytes;
    }
    g.merged_to = pos;
    g.dead = g.entries - std::min(g.entries, valid[s]);
    if (g.dead == g.entries) Free(s);
  }
  return Status::Ok();
}

Status Pool::Admit(uint32_t node, uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (node >= kMaxNodes) return Status::InvalidArgument("node " + std::to_string(node) + " is past the token table");
  if (epoch == 0 || epoch < fence_[node]) {
    return Status::StaleTerm("node " + std::to_string(node) + " is fenced below epoch " + std::to_string(fence_[node]) +
                             "; it asked with " + std::to_string(epoch));
  }
  admitted_[node] = epoch;
  if (fence_[node] < epoch) {
    // Earlier tokens of the node are void from now on, too.
    fence_[node] = epoch;
    PersistToken(node);
  }
  return Status::Ok();
}

Status Pool::CheckToken(uint32_t node, uint64_t epoch) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (node >= kMaxNodes) return Status::InvalidArgument("node " + std::to_string(node) + " is past the token table");
  if (epoch == 0 || epoch != admitted_[node] || epoch < fence_[node]) {
    return Status::StaleTerm("node " + std::to_string(node) + " has no valid token for epoch " + std::to_string(epoch));
  }
  return Status::Ok();
}

Status Pool::Fence(uint32_t node, uint64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (node >= kMaxNodes) return Status::InvalidArgument("node " + std::to_string(node) + " is past the token table");
  if (epoch > fence_[node]) {
    fence_[node] = epoch;
    PersistToken(node);
  }
  if (admitted_[node] < fence_[node]) admitted_[node] = 0;
  return Status::Ok();
}

void Pool::PersistToken(uint32_t node) {
  std::memcpy(region_->at(kFencesAt + 8 * node), &fence_[node], 8);
  region_->Persist(region_->at(kFencesAt + 8 * node), 8);
}

void Pool::Persist(uint32_t s) {
  std::byte* row = region_->at(table_offset_ + s * kRowBytes);
  const Segment& g = segments_[s];
  std::memset(row, 0, kRowBytes);
  row[0] = static_cast<std::byte>(g.state);
  std::memcpy(row + 4, &g.owner, 4);
  std::memcpy(row + 8, &g.seq, 8);
  region_->Persist(row, kRowBytes);
}

uint32_t Pool::SegmentOf(uint64_t offset) const {
  return static_cast<uint32_t>((offset - segments_offset_) / segment_bytes_);
}

Result<uint64_t> Pool::Allocate(uint32_t node) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint32_t s = LeastRecentlyFreed();
  if (s < num_segments_) {
    Segment& g = segments_[s];
    // Zeroed first: the walk of a node's log ends at the first block that
    // does not decode, and a reused segment's old blocks would decode.
    std::byte* base = region_->at(segments_offset_ + uint64_t{s} * segment_bytes_);
    std::memset(base, 0, segment_bytes_);
    region_->Persist(base, segment_bytes_);
    g = Segment{};
    g.state = State::kOpen;
    g.owner = node;
    g.seq = next_seq_++;
    Persist(s);
    return segments_offset_ + uint64_t{s} * segment_bytes_;
  }
  return Status::NoSpace("the pool has no free segment");
}

Result<MergeResult> Pool::Seal(uint32_t node, uint64_t segment, uint64_t end) {
  uint32_t s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (segment < segments_offset_ || (segment - segments_offset_) % segment_bytes_ != 0 ||
        SegmentOf(segment) >= num_segments_) {
      return Status::InvalidArgument("offset " + std::to_string(segment) + " is not a segment of the pool");
    }
    s = SegmentOf(segment);
    const Segment& g = segments_[s];
    if (g.state != State::kOpen || g.owner != node) {
      return Status::InvalidArgument("segment at " + std::to_string(segment) + " is not an open segment of node " +
                                     std::to_string(node));
    }
    if (end > segment_bytes_ || end % log::kAlign != 0) {
      return Status::InvalidArgument("end " + std::to_string(end) + " is not inside the segment");
    }
    if (g.merging) return Status::Busy("the segment is being merged");
    segments_[s].merging = true;
  }
  return MergeOpen(s, end);
}

Status Pool::GrowIndex() { return GrowIndexFrom(index_place().num_buckets); }

Pool::IndexPlace Pool::index_place() const {
  std::shared_lock<std::shared_mutex> ilock(index_mu_);
  return IndexPlace{index_->table_offset(), index_->overflow_offset(), index_->num_buckets()};
}

Result<IndexPointer> Pool::CompareAndSetIndex(std::optional<IndexPointer> expected, IndexPointer entry) {
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint32_t seen;
    {
      std::shared_lock<std::shared_mutex> ilock(index_mu_);
      seen = index_->num_buckets();
      auto r = index_->CompareAndSet(expected, entry);
      if (r.ok() || !r.status().Is(Code::kNoSpace)) return r;
    }
    SLIP_RETURN_IF_ERROR(GrowIndexFrom(seen));
  }
  return Status::NoSpace("the pool index stayed full");
}

Status Pool::CheckInOpenSegment(uint32_t node, uint64_t offset, uint64_t bytes) const {
  const uint64_t size = region_->size();
  if (bytes == 0 || bytes > segment_bytes_ || offset < segments_offset_ || offset > size - bytes) {
    return Status::InvalidArgument("the range [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                                   ") is not inside the pool's segments");
  }
  const uint32_t s = SegmentOf(offset);
  const uint64_t base = segments_offset_ + uint64_t{s} * segment_bytes_;
  std::lock_guard<std::mutex> lock(mu_);
  if (s >= num_segments_ || offset + bytes > base + segment_bytes_ || segments_[s].state != State::kOpen ||
      segments_[s].owner != node) {
    return Status::InvalidArgument("the range is not inside an open segment of node " + std::to_string(node));
  }
  return Status::Ok();
}

Status Pool::GrowIndexFrom(uint32_t seen_buckets) {
  std::unique_lock<std::shared_mutex> ilock(index_mu_);
  if (index_->num_buckets() != seen_buckets) return Status::Ok();  // grown meanwhile
  if (index_->num_buckets() > (UINT32_MAX >> 2)) return Status::NoSpace("the pool index cannot grow further");
  const uint32_t buckets = index_->num_buckets() * 2;
  const uint64_t bytes = kBucketBytes * (1 + 2 * uint64_t{buckets});
  const uint32_t run = static_cast<uint32_t>((bytes + segment_bytes_ - 1) / segment_bytes_);
  uint32_t first = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t len = 0;
    for (uint32_t s = 0; s < num_segments_ && len < run; ++s) {
      len = segments_[s].state == State::kFree ? len + 1 : 0;
      if (len == 1) first = s;
    }
    if (len < run) {
      return Status::NoSpace("the pool index is full and no run of " + std::to_string(run) +
                             " free segments is left to grow it into");
    }
    for (uint32_t s = first; s < first + run; ++s) {
      segments_[s] = Segment{};
      segments_[s].state = State::kIndex;
      Persist(s);
    }
  }
  const uint64_t offset = segments_offset_ + uint64_t{first} * segment_bytes_;
  auto give_back = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint32_t s = first; s < first + run; ++s) Free(s);
  };
  auto next = PoolIndex::Create(region_, offset, uint64_t{run} * segment_bytes_, buckets, limits_);
  if (!next.ok()) {
    give_back();
    return next.status();
  }
  Status copied;
  index_->ForEachPointer([&](IndexPointer p) {
    if (!copied.ok()) return;
    if (auto a = (*next)->Apply(p); !a.ok()) copied = a.status();
  });
  if (!copied.ok()) {
    give_back();
    return copied;
  }
  // The switch: one 8-byte store of the superblock's index offset.
  std::memcpy(region_->at(offsetof(Superblock, index_offset)), &offset, sizeof offset);
  region_->Persist(region_->at(offsetof(Superblock, index_offset)), sizeof offset);
  const uint64_t area = (*next)->area_bytes();
  std::memcpy(region_->at(offsetof(Superblock, index_bytes)), &area, sizeof area);
  region_->Persist(region_->at(offsetof(Superblock, index_bytes)), sizeof area);
  index_offset_ = offset;
  index_->MarkMoved();  // its area stays as it is: a slow reader may still be in it
  index_ = std::move(*next);
  ++index_grows_;
  return Status::Ok();
}

Result<MergeResult> Pool::MergeOpen(uint32_t s, uint64_t end) {
  uint64_t from;
  {
    std::lock_guard<std::mutex> lock(mu_);
    from = std::min(segments_[s].merged_to, end);
  }
  const uint64_t base = segments_offset_ + uint64_t{s} * segment_bytes_;
  // Walk [from, end) only: what lands past `end` was never acknowledged.
  // A full index is grown and the walk repeated (merging is idempotent).
  Result<MergeResult> r = MergeResult{};
  MergeResult total;
  for (uint64_t at = from, rounds = 0;; ++rounds) {
    if (rounds == 32) {
      r = Status::NoSpace("the pool index stayed full while merging");
      break;
    }
    uint32_t seen;
    {
      std::shared_lock<std::shared_mutex> ilock(index_mu_);
      seen = index_->num_buckets();
      r = MergeSegment(*region_, *index_, base, end, at, limits_);
    }
    if (!r.ok()) break;
    total.entries += r->entries;
    total.applied += r->applied;
    total.garbage.insert(total.garbage.end(), r->garbage.begin(), r->garbage.end());
    total.cell_live.insert(total.cell_live.end(), r->cell_live.begin(), r->cell_live.end());
    total.end = r->end;
    total.torn = r->torn;
    if (!r->index_full) {
      r = std::move(total);
      break;
    }
    if (Status g = GrowIndexFrom(seen); !g.ok()) {
      r = g;
      break;
    }
    at = r->end;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Segment& g = segments_[s];
  g.merging = false;
  if (!r.ok()) return r.status();
  g.entries += r->entries;
  g.merged_to = r->end;
  merged_entries_ += r->applied;
  g.state = State::kMerged;
  Persist(s);
  // After the state: the walk's garbage includes this segment's own entries.
  CountDead(r->garbage);
  for (const MergeResult::CellLive& l : r->cell_live) {
    auto it = cells_.find(l.cell);
    if (it == cells_.end()) continue;  // unshared meanwhile: the index holds the word's entry
    Cell& c = it->second;
    if (CellWord(l.cell) != l.entry) {
      // The word moved on since the walk read it (another merge may have
      // adopted its newer entry meanwhile): this one is garbage now.
      if (c.counted != l.entry) CountDead({l.entry});
      continue;
    }
    if (c.counted && c.counted != l.entry) CountDead({*c.counted});
    c.counted = l.entry;
  }
  SweepCells();
  if (g.state == State::kMerged && g.dead >= g.entries) Free(s);
  return r;
}

void Pool::CountDead(const std::vector<IndexPointer>& garbage) {
  for (const IndexPointer& p : garbage) {
    if (p.offset < segments_offset_) continue;
    const uint32_t s = SegmentOf(p.offset);
    if (s >= num_segments_) continue;
    Segment& g = segments_[s];
    // Only a merged segment's entries are counted. An open segment can hold
    // indexed entries only when the pool died part-way through merging it;
    // its next merge walks them all again and counts each once (a displaced
    // one as garbage then). Counting it here too would count it twice, and
    // free the segment under a live entry.
    if (g.state != State::kMerged) continue;
    ++g.dead;
    if (g.dead >= g.entries) Free(s);
  }
}

void Pool::Free(uint32_t s) {
  segments_[s] = Segment{};
  segments_[s].freed_at = ++free_clock_;
  Persist(s);
  ++freed_;
}

uint32_t Pool::LeastRecentlyFreed() const {
  uint32_t best = num_segments_;
  for (uint32_t s = 0; s < num_segments_; ++s) {
    if (segments_[s].state != State::kFree) continue;
    if (best == num_segments_ || segments_[s].freed_at < segments_[best].freed_at) best = s;
    if (segments_[best].freed_at == 0) break;
  }
  return best;
}

Status Pool::LoadCells(uint32_t s) {
  Segment& g = segments_[s];
  const uint64_t base = segments_offset_ + uint64_t{s} * segment_bytes_;
  uint64_t pos = 0;
  while (pos + kCellHeader <= segment_bytes_) {
    auto c = ParseCell({region_->at(base + pos), segment_bytes_ - pos});
    if (!c) break;
    const uint64_t offset = base + pos;
    pos += c->bytes;
    if (c->magic != kCellMagic) continue;
    const IndexPointer self{offset, c->bytes, true};
    if (index_->Find(c->key) != self) {
      // Made but never installed (or removed but not marked): the index is
      // the truth.
      const uint64_t removed = kCellRemoved;
      std::memcpy(region_->at(offset), &removed, 8);
      region_->Persist(region_->at(offset), 8);
      continue;
    }
    cells_[offset] = Cell{std::string(c->key), c->bytes, std::nullopt};
    cell_of_[std::string(c->key)] = offset;
    ++g.entries;
  }
  g.merged_to = pos;
  if (g.entries == 0) Free(s);
  return Status::Ok();
}

std::optional<IndexPointer> Pool::CellWord(uint64_t cell) const {
  const uint64_t w = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(region_->at(cell + kCellWordOffset)))
                         .load(std::memory_order_acquire);
  if (w == 0) return std::nullopt;
  return IndexPointer::Decode(w);
}

void Pool::SweepCells() {
  for (auto& [offset, c] : cells_) {
    if (c.counted && CellWord(offset) != c.counted) {
      // The word moved on, to an entry whose own merge counts it.
      const IndexPointer was = *c.counted;
      c.counted.reset();
      CountDead({was});
    }
  }
}

Result<IndexPointer> Pool::Share(std::string_view key) {
  const uint32_t bytes = CellBytes(key.size());
  if (key.empty() || key.size() > limits_.max_key || bytes > segment_bytes_) {
    return Status::InvalidArgument("a key of " + std::to_string(key.size()) + " bytes cannot be shared");
  }
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint32_t seen = 0;
    auto r = ShareOnce(key, bytes, &seen);
    if (r.ok() || !r.status().Is(Code::kNoSpace) || seen == 0) return r;
    // The index had no slot for the key: grow it, then try again.
    SLIP_RETURN_IF_ERROR(GrowIndexFrom(seen));
  }
  return Status::NoSpace("the pool index stayed full");
}

Result<IndexPointer> Pool::ShareOnce(std::string_view key, uint32_t bytes, uint32_t* index_full) {
  // No merge runs meanwhile: none can apply an entry of the key between
  // the cell taking the key's entry and the index taking the cell.
  std::unique_lock<std::shared_mutex> ilock(index_mu_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = cell_of_.find(std::string(key)); it != cell_of_.end()) {
      return IndexPointer{it->second, cells_.at(it->second).bytes, true};
    }
  }
  const std::optional<IndexPointer> now = index_->Find(key);
  if (now && now->cell) return Status::Corruption("the index points the key at a cell the pool does not know");
  uint64_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    uint32_t at = num_segments_;
    for (uint32_t s = 0; s < num_segments_ && at == num_segments_; ++s) {
      if (segments_[s].state == State::kCells && segments_[s].merged_to + bytes <= segment_bytes_) at = s;
    }
    if (at == num_segments_) {
      at = LeastRecentlyFreed();
      if (at == num_segments_) return Status::NoSpace("the pool has no room for a cell");
      std::byte* base = region_->at(segments_offset_ + uint64_t{at} * segment_bytes_);
      std::memset(base, 0, segment_bytes_);
      region_->Persist(base, segment_bytes_);
      segments_[at] = Segment{};
      segments_[at].state = State::kCells;
      segments_[at].seq = next_seq_++;
      Persist(at);
    }
    offset = segments_offset_ + uint64_t{at} * segment_bytes_ + segments_[at].merged_to;
    segments_[at].merged_to += bytes;
    ++segments_[at].entries;
  }
  // Everything but the magic first: a crash leaves no cell or a whole one
  // (and a whole one the index does not point at is dropped at open).
  std::span<std::byte> cell(region_->at(offset), bytes);
  EncodeCell(cell, key, now ? now->Encode() : 0, 0);
  region_->Persist(cell.data(), bytes);
  EncodeCell(cell, key, now ? now->Encode() : 0, kCellMagic);
  region_->Persist(cell.data(), 8);
  const IndexPointer self{offset, bytes, true};
  auto set = index_->Set(key, self);
  std::lock_guard<std::mutex> lock(mu_);
  if (!set.ok()) {
    // Left as a removed cell: the segment's cells stay walkable at open.
    const uint64_t removed = kCellRemoved;
    std::memcpy(cell.data(), &removed, 8);
    region_->Persist(cell.data(), 8);
    if (--segments_[SegmentOf(offset)].entries == 0) Free(SegmentOf(offset));
    if (set.status().Is(Code::kNoSpace)) *index_full = index_->num_buckets();
    return set.status();
  }
  // The entry the index held is the cell's now: counted live as before.
  cells_[offset] = Cell{std::string(key), bytes, now};
  cell_of_[std::string(key)] = offset;
  return self;
}

Status Pool::Unshare(std::string_view key) {
  std::unique_lock<std::shared_mutex> ilock(index_mu_);
  uint64_t offset;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cell_of_.find(std::string(key));
    if (it == cell_of_.end()) return Status::Ok();
    offset = it->second;
  }
  const std::optional<IndexPointer> current = CellWord(offset);
  // The index first: a crash before the cell is marked leaves a cell the
  // index does not point at, dropped at open.
  SLIP_RETURN_IF_ERROR(index_->Set(key, current).status());
  const uint64_t removed = kCellRemoved;
  std::memcpy(region_->at(offset), &removed, 8);
  region_->Persist(region_->at(offset), 8);
  std::lock_guard<std::mutex> lock(mu_);
  Cell& c = cells_.at(offset);
  // The index holds `current` now, live as it was; an entry the sweep has
  // not yet seen the word leave is garbage.
  if (c.counted && c.counted != current) CountDead({*c.counted});
  cells_.erase(offset);
  cell_of_.erase(std::string(key));
  const uint32_t s = SegmentOf(offset);
  if (--segments_[s].entries == 0) Free(s);
  return Status::Ok();
}

std::vector<std::string> Pool::SharedKeys() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> keys;
  for (const auto& [key, offset] : cell_of_) keys.push_back(key);
  return keys;
}

Result<uint64_t> Pool::MergeAll(uint32_t node, uint64_t* walked) {
  uint64_t merged = 0;
  for (uint64_t segment : OpenSegments(node)) {
    uint32_t s;
    uint64_t from;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s = SegmentOf(segment);
      Segment& g = segments_[s];
      if (g.state != State::kOpen || g.owner != node) continue;
      if (g.merging) return Status::Busy("a segment of node " + std::to_string(node) + " is being merged");
      g.merging = true;
      from = g.merged_to;
    }
    SLIP_ASSIGN_OR_RETURN(MergeResult r, MergeOpen(s, segment_bytes_));
    merged += r.applied;
    if (walked != nullptr) *walked += r.end > from ? r.end - from : 0;
  }
  return merged;
}

std::vector<uint64_t> Pool::OpenSegments(uint32_t node) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<uint64_t, uint64_t> by_seq;
  for (uint32_t s = 0; s < num_segments_; ++s) {
    const Segment& g = segments_[s];
    if (g.state == State::kOpen && g.owner == node) by_seq[g.seq] = segments_offset_ + uint64_t{s} * segment_bytes_;
  }
  std::vector<uint64_t> out;
  for (const auto& [seq, offset] : by_seq) out.push_back(offset);
  return out;
}

PoolStats Pool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PoolStats st;
  st.segments = num_segments_;
  for (const Segment& g : segments_) {
    if (g.state == State::kFree) ++st.free_segments;
    if (g.state == State::kOpen) ++st.open_segments;
  }
  st.merged_entries = merged_entries_;
  st.shared_keys = static_cast<uint32_t>(cells_.size());
  st.freed_segments = freed_;
  return st;
}

}  // namespace slip::dinomo
