#include "dinomo/clover.h"

#include <cstring>

#include "proto/kv.h"
#include "proto/pool.h"
#include "runtime/cost.h"

namespace slip::dinomo {
namespace {

// Every walk ends: a chain longer than this is taken as damaged.
constexpr int kMaxSteps = 1 << 16;

uint64_t LoadLink(const std::byte* p) { return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE); }

}  // namespace

struct CloverNode::Op {
  std::string key;
  bool write = false;
  log::EntryType type = log::EntryType::kPut;
  std::string value;  // a write's value; a GET's answer
  std::function<void(Result<std::string>)> got;
  std::function<void(Status)> wrote;
  std::vector<std::byte> buf;  // a READ's bytes
  std::vector<std::byte> out;  // a write's version
  Version mine;                // where a write's version landed
  uint64_t flush_word = 0;
  int waiting = 0;
  bool failed = false;
  BucketView bucket;
  Version start;   // where the walk began (a shortcut or the chain's head)
  Version newest;  // the newest version seen so far
  bool from_shortcut = false;
  bool deleted = false;
  uint64_t old = 0;  // a swap's prior value
  uint32_t rts = 0;
  int steps = 0;
  int index_moves = 0;
};

CloverNode::CloverNode(runtime::Executor* exec, fabric::Endpoint* ep, rpc::PeerCaller* calls, rpc::NodeId pool,
                       CloverNodeOptions options)
    : exec_(exec),
      calls_(calls),
      pool_(pool),
      options_(std::move(options)),
      ops_(ep),
      cache_(CacheOptions{.capacity_bytes = options_.cache_bytes,
                          .policy = CacheOptions::Policy::kStatic,
                          .value_share = 0}),
      pool_calls_{calls, pool, options_.node, options_.epoch} {}

CloverNode::~CloverNode() = default;

void CloverNode::Start(std::function<void(Status)> ready) {
  pool_calls_.Layout(ops_.endpoint(), life_, [this, ready = std::move(ready)](Result<PoolAccess> a) {
    if (!a.ok()) return ready(a.status());
    at_ = *a;
    started_ = true;
    ready(Status::Ok());
  });
}

uint64_t& CloverNode::RoundTrips(const Op& op) { return op.write ? stats_.write_round_trips : stats_.get_round_trips; }

// ---------------------------------------------------------------------------
// GET

void CloverNode::Get(std::string key, std::function<void(Result<std::string>)> done) {
  auto op = std::make_shared<Op>();
  ++open_ops_;
  op->key = std::move(key);
  op->got = std::move(done);
  if (!started_) return Finish(op, Status::Unavailable("the node has no pool yet"));
  ++stats_.gets;
  const AdaptiveCache::Found f = cache_.Lookup(op->key);
  if (f.kind == AdaptiveCache::Kind::kMiss) {
    ++stats_.misses;
    return Lookup(op);
  }
  ++stats_.shortcut_hits;
  op->from_shortcut = true;
  Walk(op, Version::FromBlock(IndexPointer{f.pointer.offset, f.pointer.length}), false, 0);
}

void CloverNode::Lookup(std::shared_ptr<Op> op) {
  ReadBucket(op, at_.HomeBucket(SlotHash(op->key)), 0);
}

void CloverNode::RefreshIndex(std::shared_ptr<Op> op) {
  ++op->rts;
  ++RoundTrips(*op);
  pool_calls_.Index(&at_, life_, [this, op](Status s) {
    if (!s.ok()) return Finish(op, Status::Unavailable("finding the pool's index failed: " + s.ToString()));
    Lookup(op);
  });
}

void CloverNode::ReadBucket(std::shared_ptr<Op> op, uint64_t offset, int attempts) {
  if (offset + kBucketBytes > at_.region.len) return Finish(op, Status::Corruption("a bucket outside the pool"));
  op->buf.assign(kBucketBytes, std::byte{0});
  ++op->rts;
  stats_.read_bytes += kBucketBytes;
  ++RoundTrips(*op);
  Status s = ops_.Read(at_.peer, op->buf.data(), kBucketBytes, at_.region, offset, [this, op, offset, attempts](Code c) {
    if (c != Code::kOk) return Finish(op, Status::Unavailable("reading the pool failed"));
    op->bucket = ParseBucket(std::span<const std::byte, kBucketBytes>(op->buf.data(), kBucketBytes));
    if (op->bucket.moved) {
      // The pool grew its index: find the new one and look there.
      if (++op->index_moves > 4) return Finish(op, Status::Unavailable("the pool's index kept moving"));
      return RefreshIndex(op);
    }
    if (!op->bucket.consistent) {
      if (attempts >= 16) return Finish(op, Status::Unavailable("a bucket kept changing"));
      return ReadBucket(op, offset, attempts + 1);
    }
    NextSlot(op, 0);
  });
  if (!s.ok()) Finish(op, Status::Unavailable("reading the pool failed: " + s.ToString()));
}

void CloverNode::NextSlot(std::shared_ptr<Op> op, size_t slot) {
  const uint64_t h = SlotHash(op->key);
  for (size_t i = slot; i < kSlotsPerBucket; ++i) {
    if (op->bucket.slots[i].hash == h) return Walk(op, Version::FromBlock(op->bucket.slots[i].pointer), true, i);
  }
  if (op->bucket.next != 0) return ReadBucket(op, at_.OverflowBucket(op->bucket.next), 0);
  // No chain: the key has never been written.
  if (op->write) return Insert(op);
  Finish(op, Status::NotFound());
}

void CloverNode::Walk(std::shared_ptr<Op> op, Version v, bool from_index, size_t slot) {
  if (++op->steps > kMaxSteps) return Finish(op, Status::Corruption("a version chain does not end"));
  // Overflow-safe: a version's place comes from the pool (links, the index).
  if (v.bytes <= log::kAlign || v.bytes > at_.region.len || v.offset > at_.region.len - v.bytes ||
      v.offset % log::kAlign != 0) {
    return Finish(op, Status::Corruption("a version outside the pool"));
  }
  op->buf.assign(v.bytes, std::byte{0});
  ++op->rts;
  stats_.read_bytes += v.bytes;
  ++RoundTrips(*op);
  Status s = ops_.Read(at_.peer, op->buf.data(), v.bytes, at_.region, v.offset, [this, op, v, from_index, slot](Code c) {
    if (c != Code::kOk) return Finish(op, Status::Unavailable("reading the pool failed"));
    auto d = log::DecodeBlock(std::span<const std::byte>(op->buf).subspan(log::kAlign), options_.limits);
    const bool ours = d.status.ok() && d.block.single() && d.block.key() == op->key &&
                      (d.block.type == log::EntryType::kPut || d.block.type == log::EntryType::kDel);
    if (!ours) {
      if (from_index) return NextSlot(op, slot + 1);  // another key with the same slot hash
      if (op->steps == 1 && op->from_shortcut) {       // a shortcut that leads elsewhere: ask the index
        cache_.Erase(op->key);
        op->from_shortcut = false;
        return Lookup(op);
      }
      return Finish(op, Status::Corruption("a version chain leads to another key"));
    }
    if (op->steps == 1) op->start = v;
    op->newest = v;
    op->deleted = d.block.type == log::EntryType::kDel;
    if (!op->write) op->value.assign(d.block.value());
    uint64_t link;
    std::memcpy(&link, op->buf.data(), sizeof link);
    if (link == 0) return AtNewest(op);
    ++stats_.hops;
    Walk(op, Version::FromLink(link), false, 0);
  });
  if (!s.ok()) Finish(op, Status::Unavailable("reading the pool failed: " + s.ToString()));
}

void CloverNode::AtNewest(std::shared_ptr<Op> op) {
  if (op->write) return Link(op);
  const PoolPointer p{op->newest.block().offset, op->newest.block().bytes};
  if (op->from_shortcut) {
    cache_.ShortcutRead(op->key, op->value, /*shared=*/true);
    if (!(op->newest.offset == op->start.offset)) cache_.Wrote(op->key, p, op->value, /*shared=*/true);
  } else {
    cache_.Missed(op->key, p, op->value, op->rts, /*shared=*/true);
  }
  if (op->deleted) return Finish(op, Status::NotFound());
  Finish(op, Status::Ok());
}

// ---------------------------------------------------------------------------
// PUT and DEL

void CloverNode::Put(std::string key, std::string value, std::function<void(Status)> done) {
  Write(std::move(key), std::move(value), log::EntryType::kPut, std::move(done));
}

void CloverNode::Delete(std::string key, std::function<void(Status)> done) {
  Write(std::move(key), std::string(8, '\0'), log::EntryType::kDel, std::move(done));
}

void CloverNode::Write(std::string key, std::string value, log::EntryType type, std::function<void(Status)> done) {
  auto op = std::make_shared<Op>();
  ++open_ops_;
  op->write = true;
  op->key = std::move(key);
  op->value = std::move(value);
  op->type = type;
  op->wrote = std::move(done);
  if (!started_) return Finish(op, Status::Unavailable("the node has no pool yet"));
  if (Status s = log::Validate({type, 0, 1}, op->key.size(), op->value.size(), options_.limits); !s.ok()) {
    return Finish(op, s);
  }
  auto layout = log::PlanEntry(op->key.size(), op->value.size(), at_.segment_bytes);
  if (!layout.ok() || layout->cnt != 1 || layout->total_bytes + log::kAlign > at_.segment_bytes / 2) {
    return Finish(op, Status::TooLarge("a version of " + std::to_string(op->key.size() + op->value.size()) +
                                       " bytes does not fit half a pool segment"));
  }
  ++stats_.writes;
  op->out.assign(log::kAlign + layout->total_bytes, std::byte{0});
  log::EncodeBlock({type, static_cast<uint16_t>(options_.node), (options_.epoch << 32) | ++next_version_}, op->key,
                   op->value, *layout, 0, op->out.data() + log::kAlign);
  runtime::Charge(runtime::Cost::kStorePut, op->key.size() + op->value.size());  // as KvsNode's write
  Place(op);
}

void CloverNode::Allocate(std::function<void(Status)> then) {
  waiting_for_segment_.push_back(std::move(then));
  if (allocating_) return;
  allocating_ = true;
  calls_->Call(pool_, static_cast<uint16_t>(proto::Method::kPoolAllocate),
               proto::Encode(proto::PoolNodeRequest{options_.node, options_.epoch}),
               [this, life = std::weak_ptr<int>(life_)](Result<rpc::PeerResponse> r) {
                 if (life.expired()) return;
                 allocating_ = false;
                 Status s;
                 if (!r.ok()) {
                   s = r.status();
                 } else if (r->status != Code::kOk) {
                   s = Status(r->status, "pool allocate: " + r->payload);
                 } else if (auto a = proto::DecodePoolAllocateResponse(proto::AsBytes(r->payload)); !a.ok()) {
                   s = a.status();
                 } else {
                   segment_ = a->segment;
                   tail_ = 0;
                 }
                 auto waiting = std::move(waiting_for_segment_);
                 waiting_for_segment_.clear();
                 for (auto& w : waiting) w(s);
               });
}

void CloverNode::Place(std::shared_ptr<Op> op) {
  const uint64_t bytes = op->out.size();
  if (segment_ == 0 || tail_ + bytes > at_.segment_bytes) {
    return Allocate([this, op](Status s) {
      if (!s.ok()) return Finish(op, s.Is(Code::kNoSpace) ? s : Status::Unavailable("no segment: " + s.ToString()));
      Place(op);
    });
  }
  op->mine = Version{segment_ + tail_, static_cast<uint32_t>(bytes)};
  tail_ += bytes;
  stats_.written_bytes += bytes;
  ++op->rts;
  ++stats_.write_round_trips;
  auto landed = [this, op](Code c) {
    if (c != Code::kOk) op->failed = true;
    if (--op->waiting > 0) return;
    // Nothing links to it: a failed write is not applied.
    if (op->failed) return Finish(op, Status::Unavailable("writing the pool failed"));
    const AdaptiveCache::Found f = cache_.Lookup(op->key);
    if (f.kind == AdaptiveCache::Kind::kMiss) return Lookup(op);
    // Optimistically: the shortcut names the newest version.
    op->from_shortcut = true;
    op->newest = Version::FromBlock(IndexPointer{f.pointer.offset, f.pointer.length});
    Link(op);
  };
  // The READ on the same connection completes once the WRITE is placed.
  Status s = ops_.Write(at_.peer, op->out.data(), bytes, at_.region, op->mine.offset, landed);
  if (s.ok()) {
    ++op->waiting;
    s = ops_.Read(at_.peer, &op->flush_word, sizeof op->flush_word, at_.region, op->mine.offset, landed);
    if (s.ok()) ++op->waiting;
  }
  if (!s.ok()) {
    op->failed = true;
    if (op->waiting == 0) Finish(op, Status::Unavailable("writing the pool failed: " + s.ToString()));
  }
}

void CloverNode::Insert(std::shared_ptr<Op> op) {
  ++op->rts;
  ++stats_.write_round_trips;
  ++stats_.inserts;
  const IndexPointer b = op->mine.block();
  calls_->Call(pool_, static_cast<uint16_t>(proto::Method::kCloverInsert),
               proto::Encode(proto::CloverInsertRequest{options_.node, options_.epoch, b.offset, b.bytes}),
               [this, op, life = std::weak_ptr<int>(life_)](Result<rpc::PeerResponse> r) {
                 if (life.expired()) return;
                 if (!r.ok() || r->status != Code::kOk) {
                   return Finish(op, Status::Unavailable("the metadata server did not insert: " +
                                                         (r.ok() ? r->payload : r.status().ToString())));
                 }
                 auto head = proto::DecodeCloverHeadResponse(proto::AsBytes(r->payload));
                 if (!head.ok()) return Finish(op, head.status());
                 const IndexPointer h{head->offset, head->bytes};
                 if (h == op->mine.block()) {
                   cache_.Wrote(op->key, PoolPointer{h.offset, h.bytes}, op->value, /*shared=*/true);
                   return Finish(op, Status::Ok());
                 }
                 // Another writer's version came first: link ours after its chain.
                 Walk(op, Version::FromBlock(h), false, 0);
               });
}

void CloverNode::Link(std::shared_ptr<Op> op) {
  if (++op->steps > kMaxSteps) return Finish(op, Status::Corruption("a version chain does not end"));
  ++op->rts;
  ++stats_.write_round_trips;
  const Version at = op->newest;
  stats_.written_bytes += sizeof(uint64_t);
  Status s = ops_.CompareSwap(at_.peer, at_.region, at.offset, 0, op->mine.link(), &op->old, [this, op](Code c) {
    // The swap may or may not have happened.
    if (c != Code::kOk) return Finish(op, Status::Unavailable("linking the version failed; outcome unknown"));
    if (op->old == 0) {
      const IndexPointer b = op->mine.block();
      cache_.Wrote(op->key, PoolPointer{b.offset, b.bytes}, op->value, /*shared=*/true);
      return Finish(op, Status::Ok());
    }
    // A newer version is linked there: go to the end of the chain.
    ++stats_.swap_failures;
    ++stats_.hops;
    Walk(op, Version::FromLink(op->old), false, 0);
  });
  if (!s.ok()) Finish(op, Status::Unavailable("linking the version failed: " + s.ToString()));
}

void CloverNode::Finish(std::shared_ptr<Op> op, Status s) {
  // Never inside the caller's call: answers come from the executor (and the
  // node is idle only once they are out).
  exec_->Post([this, op, s = std::move(s), life = std::weak_ptr<int>(life_)] {
    if (life.expired()) return;
    --open_ops_;
    if (op->write) return op->wrote(s);
    if (!s.ok()) return op->got(s);
    op->got(std::move(op->value));
  });
}

// ---------------------------------------------------------------------------
// The metadata server's GC pass

Result<uint64_t> AdvanceChains(Pool& pool, pm::PmRegion& region) {
  std::vector<IndexPointer> heads;
  pool.index().ForEachPointer([&](IndexPointer p) { heads.push_back(p); });
  uint64_t moved = 0;
  for (const IndexPointer& head : heads) {
    if (head.offset < log::kAlign) continue;
    uint64_t at = head.offset - log::kAlign;  // the head version's line
    IndexPointer newest = head;
    for (int steps = 0;; ++steps) {
      if (steps > kMaxSteps || at + sizeof(uint64_t) > region.size()) {
        return Status::Corruption("a version chain does not end");
      }
      const uint64_t link = LoadLink(region.at(at));
      if (link == 0) break;
      const IndexPointer v = IndexPointer::Decode(link);
      if (v.bytes <= log::kAlign || v.bytes > region.size() || v.offset > region.size() - v.bytes) {
        return Status::Corruption("a version chain leaves the pool");
      }
      at = v.offset;
      newest = IndexPointer{v.offset + log::kAlign, v.bytes - static_cast<uint32_t>(log::kAlign)};
    }
    if (newest == head) continue;
    SLIP_ASSIGN_OR_RETURN(IndexPointer now, pool.CompareAndSetIndex(head, newest));
    if (now == newest) ++moved;
  }
  return moved;
}

}  // namespace slip::dinomo
