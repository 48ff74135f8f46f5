#include "dinomo/kvs_node.h"

#include "dinomo/cell.h"
#include "proto/kv.h"
#include "runtime/cost.h"

namespace slip::dinomo {

struct KvsNode::Write {
  std::string key, value;  // a DEL's value: its 8 zero bytes
  log::EntryType type = log::EntryType::kPut;
  std::function<void(Status)> done;
  log::Layout layout;  // one block
  uint64_t at = 0;     // offset in the batch
  uint32_t bytes = 0;
};

struct KvsNode::GetOp {
  std::string key;
  uint64_t hash = 0;
  std::function<void(Result<std::string>)> done;
  uint32_t rts = 0;
  uint64_t merges_at_start = 0;  // merges confirmed when the GET began
  std::vector<std::byte> buf;
  BucketView bucket;
  uint64_t bucket_offset = 0;  // where `bucket` was read
  uint32_t rechecks = 0;
  uint32_t index_moves = 0;  // moved buckets met (the pool grew its index)
  IndexPointer found;
  bool deleted = false;
  std::string value;
  // A write of a shared key looking for its cell: called with the cell
  // instead of reading on (`done` then means the key has no cell).
  std::function<void(IndexPointer cell)> locate;
};

KvsNode::KvsNode(runtime::Executor* exec, fabric::Endpoint* ep, rpc::PeerCaller* calls, rpc::NodeId pool,
                 KvsNodeOptions options)
    : exec_(exec),
      calls_(calls),
      pool_(pool),
      options_(options),
      ops_(ep),
      cache_(options.cache),
      pool_calls_{calls, pool, options.node, options.epoch} {
  next_version_ = options_.epoch << 32;
}

KvsNode::~KvsNode() {
  if (batch_timer_ != 0) exec_->Cancel(batch_timer_);
}

void KvsNode::Start(std::function<void(Status)> ready) {
  pool_calls_.Layout(ops_.endpoint(), life_, [this, ready = std::move(ready)](Result<PoolAccess> a) {
    if (!a.ok()) return ready(a.status());
    at_ = *a;
    started_ = true;
    ready(Status::Ok());
  });
}

// ---------------------------------------------------------------------------
// Writes

void KvsNode::Put(std::string key, std::string value, std::function<void(Status)> done) {
  Enqueue(std::move(key), std::move(value), log::EntryType::kPut, std::move(done));
}

void KvsNode::Delete(std::string key, std::function<void(Status)> done) {
  Enqueue(std::move(key), std::string(8, '\0'), log::EntryType::kDel, std::move(done));
}

void KvsNode::Enqueue(std::string key, std::string value, log::EntryType type, std::function<void(Status)> done) {
  auto refuse = [&](Status s) {
    exec_->Post([life = std::weak_ptr<int>(life_), done = std::move(done), s] {
      if (!life.expired()) done(s);
    });
  };
  if (!started_) return refuse(Status::Unavailable("the node has no pool yet"));
  if (fenced_) return refuse(Status::StaleTerm("the pool fenced this node"));
  if (Status s = log::Validate({type, 0, 1}, key.size(), value.size(), options_.limits); !s.ok()) return refuse(s);
  auto layout = log::PlanEntry(key.size(), value.size(), at_.segment_bytes);
  if (!layout.ok() || layout->cnt != 1 || layout->total_bytes > at_.segment_bytes / 2) {
    return refuse(Status::TooLarge("an entry of " + std::to_string(key.size() + value.size()) +
                                   " bytes does not fit half a pool segment"));
  }
  auto w = std::make_unique<Write>();
  w->key = std::move(key);
  w->value = std::move(value);
  w->type = type;
  w->done = std::move(done);
  w->layout = *layout;
  w->bytes = static_cast<uint32_t>(layout->total_bytes);
  pending_.push_back(std::move(w));
  if (pending_.size() >= options_.batch_entries) return FlushBatch();
  if (batch_timer_ == 0) {
    batch_timer_ = exec_->After(options_.batch_wait, [this] {
      batch_timer_ = 0;
      FlushBatch();
    });
  }
}

void KvsNode::FlushBatch() {
  if (in_flight_ || rolling_ || pending_.empty()) return;
  if (fenced_) return FailPending(Status::StaleTerm("the pool fenced this node"));
  if (segment_ == 0 || tail_ + pending_.front()->bytes > at_.segment_bytes) return RollSegment();
  if (batch_timer_ != 0) {
    exec_->Cancel(batch_timer_);
    batch_timer_ = 0;
  }
  auto b = std::make_unique<Batch>();
  b->segment = segment_;
  b->at = tail_;
  uint64_t bytes = 0;
  size_t n = 0;
  while (n < pending_.size() && n < options_.batch_entries && tail_ + bytes + pending_[n]->bytes <= at_.segment_bytes) {
    bytes += pending_[n]->bytes;
    ++n;
  }
  b->bytes.resize(bytes);
  // Versions in log order: the index keeps the newest of a key.
  for (size_t i = 0; i < n; ++i) {
    Write& w = *pending_[i];
    w.at = b->writes.empty() ? 0 : b->writes.back()->at + b->writes.back()->bytes;
    log::EncodeBlock({w.type, static_cast<uint16_t>(options_.node), ++next_version_}, w.key, w.value, w.layout, 0,
                     b->bytes.data() + w.at);
    // Priced as the store's write (runtime/cost.h): an entry encoded and
    // appended, then indexed (the unmerged map, once the batch lands).
    runtime::Charge(runtime::Cost::kStorePut, w.key.size() + w.value.size());
    b->writes.push_back(std::move(pending_[i]));
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
  tail_ += bytes;
  ++stats_.batches;
  stats_.written_bytes += bytes;
  in_flight_ = std::move(b);
  Batch* batch = in_flight_.get();
  auto landed = [this](Code c) {
    if (c != Code::kOk) in_flight_->failed = true;
    if (--in_flight_->waiting > 0) return;
    if (in_flight_->failed) return BatchLanded(Code::kUnavailable);
    if (at_.persist_by_request) return PersistBatch();
    BatchLanded(Code::kOk);
  };
  const uint64_t at = batch->segment + batch->at;
  // The READ, on the same connection, completes once the WRITE is placed
  // (and on hardware persistent).
  int posted = 0;
  Status s = ops_.Write(at_.peer, batch->bytes.data(), batch->bytes.size(), at_.region, at, landed);
  if (s.ok()) {
    ++posted;
    s = ops_.Read(at_.peer, &batch->flush_word, sizeof batch->flush_word, at_.region, at, landed);
    if (s.ok()) ++posted;
  }
  // Completions come only from Poll(), never inside the posting calls.
  batch->waiting = posted;
  if (!s.ok()) batch->failed = true;
  if (posted == 0) BatchLanded(Code::kUnavailable);
}

void KvsNode::PersistBatch() {
  // The batch stays in flight meanwhile: no later batch is acknowledged
  // before this one is durable.
  ++stats_.persists;
  const Batch& b = *in_flight_;
  calls_->Call(pool_, static_cast<uint16_t>(proto::Method::kPoolPersist),
               proto::Encode(proto::PoolPersistRequest{options_.node, options_.epoch, b.segment + b.at, b.bytes.size()}),
               [this, life = std::weak_ptr<int>(life_)](Result<rpc::PeerResponse> r) {
                 if (life.expired()) return;
                 if (r.ok() && r->status == Code::kStaleTerm) Fenced(r->payload);
                 BatchLanded(r.ok() && r->status == Code::kOk ? Code::kOk : Code::kUnavailable);
               });
}

void KvsNode::BatchLanded(Code status) {
  std::unique_ptr<Batch> b = std::move(in_flight_);
  if (status != Code::kOk) {
    // Some of the batch may have landed; nothing after it in this segment
    // can be trusted by the merge, so the segment ends where the batch began.
    tail_ = b->at;
    for (auto& w : b->writes) w->done(Status::Unavailable("the write to the pool failed; outcome unknown"));
    return RollSegment();
  }
  for (auto& w : b->writes) {
    const IndexPointer p{b->segment + b->at + w->at, w->bytes};
    if (IsShared(w->key)) {
      // Takes effect (and is acknowledged) when the cell points at it.
      ++stats_.writes;
      ++stats_.shared_writes;
      ++swapping_[b->segment];
      Swap(std::shared_ptr<Write>(std::move(w)), p, b->segment);  // may answer at once (a fenced node)
      continue;
    }
    const bool deleted = w->type == log::EntryType::kDel;
    if (deleted) {
      cache_.Erase(w->key);
    } else {
      cache_.Wrote(w->key, PoolPointer{p.offset, p.bytes}, w->value);
    }
    Unmerged& u = unmerged_[w->key];
    u = Unmerged{p, deleted, deleted ? std::string() : std::move(w->value), b->segment};
    ++stats_.writes;
    w->done(Status::Ok());
  }
  FlushBatch();
}

void KvsNode::RollSegment() {
  if (rolling_) return;
  if (segment_ != 0) {
    const uint64_t seg = segment_, end = tail_;
    segment_ = 0;
    tail_ = 0;
    sealing_.push_back(seg);
    ++stats_.seals;
    if (swapping_.contains(seg)) {
      seal_after_swaps_[seg] = end;  // Swapped() seals it
    } else {
      SendSeal(seg, end);
    }
  }
  if (sealing_.size() + 1 > options_.max_unmerged) {
    ++stats_.backpressure_waits;
    return;  // Sealed() rolls on
  }
  if (pending_.empty() && !in_flight_) return;  // a segment is taken when writes need one
  rolling_ = true;
  calls_->Call(pool_, static_cast<uint16_t>(proto::Method::kPoolAllocate),
               proto::Encode(proto::PoolNodeRequest{options_.node, options_.epoch}),
               [this, life = std::weak_ptr<int>(life_)](Result<rpc::PeerResponse> r) {
                 if (life.expired()) return;
                 rolling_ = false;
                 if (r.ok() && r->status == Code::kStaleTerm) return Fenced(r->payload);
                 Status s = !r.ok()                   ? r.status()
                            : r->status != Code::kOk ? Status(r->status, "pool allocate: " + r->payload)
                                                     : Status::Ok();
                 auto a = s.ok() ? proto::DecodePoolAllocateResponse(proto::AsBytes(r->payload))
                                 : Result<proto::PoolAllocateResponse>(s);
                 if (!a.ok()) {
                   Status f = a.status();
                   if (f.Is(Code::kNoSpace)) f = Status::Busy("the pool is full: " + f.message());
                   return FailPending(f);
                 }
                 segment_ = a->segment;
                 tail_ = 0;
                 ++stats_.segments;
                 FlushBatch();
               });
}

void KvsNode::SendSeal(uint64_t segment, uint64_t end) {
  calls_->Call(pool_, static_cast<uint16_t>(proto::Method::kPoolSeal),
               proto::Encode(proto::PoolSealRequest{options_.node, options_.epoch, segment, end}),
               [this, life = std::weak_ptr<int>(life_), segment, end](Result<rpc::PeerResponse> r) {
                 if (life.expired()) return;
                 // Fenced: the pool merged (or will merge) this segment for
                 // whoever owns its keys now; it is not this node's any more.
                 if (r.ok() && r->status == Code::kStaleTerm) return Fenced(r->payload);
                 // InvalidArgument: no longer an open segment of this node —
                 // an earlier seal merged it and its answer was lost.
                 if (r.ok() && (r->status == Code::kOk || r->status == Code::kInvalidArgument)) {
                   return Sealed(segment);
                 }
                 // Until it is merged the node keeps the segment's writes in
                 // DRAM; ask again.
                 exec_->After(runtime::kMillisecond, [this, life, segment, end] {
                   if (!life.expired()) SendSeal(segment, end);
                 });
               });
}

bool KvsNode::MayCache(const GetOp& op) const {
  // What this GET read may be older than a write of the key acknowledged
  // while it ran: such a write is in unmerged_ — or was, if a merge was
  // confirmed meanwhile. A shared key's value is never cached (D7): another
  // owner may write it.
  return !IsShared(op.key) && !unmerged_.contains(op.key) && merges_confirmed_ == op.merges_at_start;
}

void KvsNode::Swap(std::shared_ptr<Write> w, IndexPointer p, uint64_t segment) {
  KeySwaps& k = key_swaps_[w->key];
  const std::string key = w->key;
  k.waiting.push_back(PendingSwap{std::move(w), p, segment});
  if (!k.busy) SwapNext(key);
}

void KvsNode::SwapNext(const std::string& key) {
  auto it = key_swaps_.find(key);
  if (it == key_swaps_.end()) return;
  if (it->second.waiting.empty()) {
    key_swaps_.erase(it);
    return;
  }
  it->second.busy = true;
  auto group = std::make_shared<std::vector<PendingSwap>>(std::move(it->second.waiting));
  it->second.waiting.clear();
  SwapGroup(key, group, 0);
}

void KvsNode::SwapGroup(const std::string& key, std::shared_ptr<std::vector<PendingSwap>> group, uint32_t tries) {
  // The group's writes take effect together at the swap to its newest entry
  // (log order is version order): the older ones just before it, never
  // seen — they all ran concurrently with it.
  auto finish = [this, key, group](const Status& s) {
    for (PendingSwap& g : *group) {
      g.w->done(s);
      Swapped(g.segment);
    }
    if (auto it = key_swaps_.find(key); it != key_swaps_.end()) it->second.busy = false;
    SwapNext(key);
  };
  auto fail = [finish](const std::string& why) {
    finish(Status::Unavailable("a shared key's write: " + why + "; outcome unknown"));
  };
  auto it = cells_.find(key);
  if (it == cells_.end()) {
    // Where the cell is: through the index, as a GET would go.
    auto op = std::make_shared<GetOp>();
    op->key = key;
    op->hash = SlotHash(op->key);
    op->merges_at_start = merges_confirmed_;
    op->done = [this, key, group, tries, fail](Result<std::string> r) {
      if (!r.ok() && !r.status().Is(Code::kNotFound)) return fail(r.status().ToString());
      // No cell yet: the key's owner shares it as it starts serving the
      // configuration that shares it, which this node may serve first.
      if (tries >= 50) return fail("the pool has no cell for the key");
      exec_->After(runtime::kMillisecond, [this, life = std::weak_ptr<int>(life_), key, group, tries] {
        if (!life.expired()) SwapGroup(key, group, tries + 1);
      });
    };
    op->locate = [this, key, group, tries](IndexPointer) { SwapGroup(key, group, tries); };
    return ReadBucket(op, at_.HomeBucket(op->hash), 0);
  }
  if (fenced_) return fail("the pool fenced this node");
  struct Cas {
    uint64_t old = 0;
  };
  auto cas = std::make_shared<Cas>();
  const uint64_t expected = it->second.word, desired = group->back().p.Encode();
  ++stats_.swaps;
  Status s = ops_.CompareSwap(
      at_.peer, at_.region, it->second.cell.offset + kCellWordOffset, expected, desired, &cas->old,
      [this, key, group, tries, cas, expected, desired, finish, fail](Code c) {
        if (c != Code::kOk) return fail("swapping its cell failed");
        auto ref = cells_.find(key);
        if (cas->old == expected) {
          if (ref != cells_.end()) ref->second.word = desired;
          if (!at_.persist_by_request) return finish(Status::Ok());
          // A pool on a file (or DAX): the word is durable only once
          // persisted, like a batch — then the writes are acknowledged.
          const uint64_t word_at = ref != cells_.end() ? ref->second.cell.offset + kCellWordOffset : 0;
          ++stats_.persists;
          return calls_->Call(pool_, static_cast<uint16_t>(proto::Method::kPoolPersist),
                              proto::Encode(proto::PoolPersistRequest{options_.node, options_.epoch, word_at, 8}),
                              [this, life = std::weak_ptr<int>(life_), finish, fail](Result<rpc::PeerResponse> r) {
                                if (life.expired()) return;
                                if (r.ok() && r->status == Code::kStaleTerm) Fenced(r->payload);
                                if (r.ok() && r->status == Code::kOk) return finish(Status::Ok());
                                fail("persisting its cell failed");
                              });
        }
        // Another owner's write got there first: this group comes after it,
        // with whatever of this node's writes of the key landed meanwhile.
        ++stats_.swap_retries;
        if (ref != cells_.end()) ref->second.word = cas->old;
        if (tries >= 64) return fail("its cell kept moving");
        if (auto k = key_swaps_.find(key); k != key_swaps_.end()) {
          for (PendingSwap& more : k->second.waiting) group->push_back(std::move(more));
          k->second.waiting.clear();
        }
        SwapGroup(key, group, tries + 1);
      });
  if (!s.ok()) fail("swapping its cell failed: " + s.ToString());
}

void KvsNode::Swapped(uint64_t segment) {
  auto it = swapping_.find(segment);
  if (it == swapping_.end() || --it->second > 0) return;
  swapping_.erase(it);
  if (auto seal = seal_after_swaps_.find(segment); seal != seal_after_swaps_.end()) {
    const uint64_t end = seal->second;
    seal_after_swaps_.erase(seal);
    SendSeal(segment, end);
  }
}

void KvsNode::Sealed(uint64_t segment) {
  ++merges_confirmed_;
  std::erase(sealing_, segment);
  // Merged: the index now leads to these writes.
  std::erase_if(unmerged_, [segment](const auto& kv) { return kv.second.segment == segment; });
  if (segment_ == 0 && !pending_.empty()) RollSegment();
}

void KvsNode::Fenced(const std::string& why) {
  if (!fenced_) ++stats_.fenced;
  fenced_ = true;
  // Nothing more of this node's is ever merged or acknowledged; its DRAM is
  // no one's truth any more.
  sealing_.clear();
  unmerged_.clear();
  cache_.Clear();
  segment_ = 0;
  FailPending(Status::StaleTerm("the pool fenced this node: " + why));
}

void KvsNode::FailPending(const Status& s) {
  std::vector<std::unique_ptr<Write>> failed = std::move(pending_);
  pending_.clear();
  for (auto& w : failed) w->done(s);
}

// ---------------------------------------------------------------------------
// Reads

void KvsNode::Get(std::string key, std::function<void(Result<std::string>)> done) {
  auto op = std::make_shared<GetOp>();
  op->key = std::move(key);
  op->done = std::move(done);
  op->merges_at_start = merges_confirmed_;
  if (!started_) return Answer(op, Status::Unavailable("the node has no pool yet"));
  if (fenced_) return Answer(op, Status::StaleTerm("the pool fenced this node"));
  ++stats_.gets;
  if (IsShared(op->key)) {
    ++stats_.shared_gets;
    op->hash = SlotHash(op->key);
    auto c = cells_.find(op->key);
    if (c == cells_.end()) return ReadBucket(op, at_.HomeBucket(op->hash), 0);
    return ReadCell(op, c->second.cell, [this, op](bool) {
      cells_.erase(op->key);
      ReadBucket(op, at_.HomeBucket(op->hash), 0);
    });
  }
  if (auto u = unmerged_.find(op->key); u != unmerged_.end()) {
    // Priced as a cache hit (runtime/cost.h): a lookup, the value copied out.
    runtime::Charge(runtime::Cost::kCacheLookup, u->second.value.size());
    ++stats_.unmerged_hits;
    if (u->second.deleted) return Answer(op, Status::NotFound("no such key"));
    return Answer(op, u->second.value);
  }
  const AdaptiveCache::Found f = cache_.Lookup(op->key);
  if (f.kind == AdaptiveCache::Kind::kValue) {
    ++stats_.value_hits;
    return Answer(op, std::string(f.value));
  }
  op->hash = SlotHash(op->key);
  auto through_index = [this, op] {
    ReadBucket(op, at_.HomeBucket(op->hash), 0);
  };
  if (f.kind == AdaptiveCache::Kind::kShortcut) {
    ++stats_.shortcut_hits;
    return ReadEntry(op, IndexPointer{f.pointer.offset, f.pointer.length}, [this, op, through_index](bool found) {
      if (!found) {
        ++stats_.stale_shortcuts;
        cache_.Erase(op->key);
        return through_index();
      }
      if (op->deleted) return Answer(op, Status::NotFound("no such key"));
      if (MayCache(*op)) cache_.ShortcutRead(op->key, op->value);
      Answer(op, std::move(op->value));
    });
  }
  ++stats_.misses;
  through_index();
}

void KvsNode::ReadEntry(std::shared_ptr<GetOp> op, IndexPointer p, std::function<void(bool found)> next) {
  if (p.bytes < log::kAlign || p.offset + p.bytes > at_.region.len) return next(false);
  op->buf.assign(p.bytes, std::byte{0});
  ++op->rts;
  stats_.read_bytes += p.bytes;
  Status s = ops_.Read(at_.peer, op->buf.data(), p.bytes, at_.region, p.offset, [this, op, p, next](Code c) {
    if (c != Code::kOk) return Answer(op, Status::Unavailable("reading the pool failed"));
    auto d = log::DecodeBlock(op->buf, options_.limits);
    // The key stored in the entry decides (docs/papers/dinomo.md §4).
    if (!d.status.ok() || !d.block.single() || d.block.key() != op->key ||
        (d.block.type != log::EntryType::kPut && d.block.type != log::EntryType::kDel)) {
      return next(false);
    }
    op->found = p;
    op->deleted = d.block.type == log::EntryType::kDel;
    op->value.assign(d.block.value());
    next(true);
  });
  if (!s.ok()) Answer(op, Status::Unavailable("reading the pool failed: " + s.ToString()));
}

void KvsNode::ReadCell(std::shared_ptr<GetOp> op, IndexPointer cell, std::function<void(bool is_cell)> not_cell) {
  if (cell.bytes < kCellHeader || cell.offset + cell.bytes > at_.region.len) return not_cell(false);
  op->buf.assign(cell.bytes, std::byte{0});
  ++op->rts;
  stats_.read_bytes += cell.bytes;
  Status s = ops_.Read(at_.peer, op->buf.data(), cell.bytes, at_.region, cell.offset, [this, op, cell, not_cell](Code c) {
    if (c != Code::kOk) return Answer(op, Status::Unavailable("reading the pool failed"));
    auto v = ParseCell(op->buf);
    if (!v || v->magic != kCellMagic || v->key != op->key || v->bytes != cell.bytes) return not_cell(false);
    CellRef& ref = cells_[op->key];
    ref.cell = cell;
    ref.word = v->word;
    if (op->locate) return op->locate(cell);
    if (v->word == 0) return Answer(op, Status::NotFound("no such key"));
    ReadEntry(op, IndexPointer::Decode(v->word), [this, op, cell, not_cell](bool found) {
      if (!found) {
        // The word moved on while this GET read, and the entry it named was
        // freed and reused: read the cell again.
        ++stats_.moved_slots;
        if (++op->rechecks > 16) return Answer(op, Status::Unavailable("the key's cell kept moving"));
        return ReadCell(op, cell, not_cell);
      }
      if (op->deleted) return Answer(op, Status::NotFound("no such key"));
      Answer(op, std::move(op->value));  // never cached: another owner may write it
    });
  });
  if (!s.ok()) Answer(op, Status::Unavailable("reading the pool failed: " + s.ToString()));
}

void KvsNode::RefreshIndex(std::function<void(Status)> then) {
  ++stats_.index_moves;
  pool_calls_.Index(&at_, life_, std::move(then));
}

void KvsNode::ReadBucket(std::shared_ptr<GetOp> op, uint64_t offset, int attempts) {
  if (offset + kBucketBytes > at_.region.len) return Answer(op, Status::Corruption("a bucket outside the pool"));
  op->buf.assign(kBucketBytes, std::byte{0});
  ++op->rts;
  stats_.read_bytes += kBucketBytes;
  Status s = ops_.Read(at_.peer, op->buf.data(), kBucketBytes, at_.region, offset, [this, op, offset, attempts](Code c) {
    if (c != Code::kOk) return Answer(op, Status::Unavailable("reading the pool failed"));
    op->bucket = ParseBucket(std::span<const std::byte, kBucketBytes>(op->buf.data(), kBucketBytes));
    if (op->bucket.moved) {
      // The pool grew its index: find the new one and start over there.
      if (++op->index_moves > 4) return Answer(op, Status::Unavailable("the pool's index kept moving"));
      return RefreshIndex([this, op](Status where) {
        if (!where.ok()) return Answer(op, Status::Unavailable("finding the pool's index: " + where.ToString()));
        ReadBucket(op, at_.HomeBucket(op->hash), 0);
      });
    }
    if (!op->bucket.consistent) {
      ++stats_.torn_buckets;
      if (attempts >= 16) return Answer(op, Status::Unavailable("a bucket kept changing"));
      return ReadBucket(op, offset, attempts + 1);
    }
    op->bucket_offset = offset;
    NextSlot(op, 0);
  });
  if (!s.ok()) Answer(op, Status::Unavailable("reading the pool failed: " + s.ToString()));
}

void KvsNode::Recheck(std::shared_ptr<GetOp> op, size_t slot) {
  // A slot of the key's hash led to no entry of the key: another key with
  // the same hash — or the slot moved on while this GET was reading, and
  // the entry it named was freed (its segment all garbage) and reused. Read
  // the bucket again: if the slot still says the same, it is a collision;
  // if not, start over from what it says now.
  const BucketView::Slot seen = op->bucket.slots[slot];
  if (++op->rechecks > 16) return Answer(op, Status::Unavailable("the key's bucket kept changing"));
  op->buf.assign(kBucketBytes, std::byte{0});
  ++op->rts;
  stats_.read_bytes += kBucketBytes;
  Status s = ops_.Read(at_.peer, op->buf.data(), kBucketBytes, at_.region, op->bucket_offset, [this, op, slot, seen](Code c) {
    if (c != Code::kOk) return Answer(op, Status::Unavailable("reading the pool failed"));
    const BucketView now = ParseBucket(std::span<const std::byte, kBucketBytes>(op->buf.data(), kBucketBytes));
    if (!now.consistent) {
      ++stats_.torn_buckets;
      return ReadBucket(op, op->bucket_offset, 0);
    }
    const bool same = now.slots[slot].hash == seen.hash && now.slots[slot].pointer == seen.pointer;
    op->bucket = now;
    if (same) return NextSlot(op, slot + 1);
    ++stats_.moved_slots;
    NextSlot(op, 0);
  });
  if (!s.ok()) Answer(op, Status::Unavailable("reading the pool failed: " + s.ToString()));
}

void KvsNode::NextSlot(std::shared_ptr<GetOp> op, size_t slot) {
  for (; slot < op->bucket.slots.size(); ++slot) {
    const BucketView::Slot& s = op->bucket.slots[slot];
    if (s.hash != op->hash) continue;
    if (s.pointer.cell) return ReadCell(op, s.pointer, [this, op, slot](bool) { Recheck(op, slot); });
    return ReadEntry(op, s.pointer, [this, op, slot](bool found) {
      if (!found) return Recheck(op, slot);
      if (op->deleted) return Answer(op, Status::NotFound("no such key"));
      if (MayCache(*op)) {
        cache_.Missed(op->key, PoolPointer{op->found.offset, op->found.bytes}, op->value, op->rts);
      }
      Answer(op, std::move(op->value));
    });
  }
  if (op->bucket.next != 0) {
    return ReadBucket(op, at_.OverflowBucket(op->bucket.next), 0);
  }
  Answer(op, Status::NotFound("no such key"));
}

void KvsNode::Answer(std::shared_ptr<GetOp> op, Result<std::string> r) {
  stats_.get_round_trips += op->rts;
  ++answering_;  // the node is not idle until the answer is out
  // Never inside the caller's call (and not after the node is gone).
  exec_->Post([this, life = std::weak_ptr<int>(life_), op, r = std::move(r)]() mutable {
    if (life.expired()) return;
    --answering_;
    op->done(std::move(r));
  });
}

}  // namespace slip::dinomo
