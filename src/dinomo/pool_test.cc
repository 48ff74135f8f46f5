// The pool (dinomo/pool.h): segments handed to nodes, sealed and merged in
// log order, a dead node's open segments merged before anyone serves its
// keys (D4), segments freed once all their entries are dead and reused
// zeroed (D10), and a restarted pool that rebuilds its counters and still
// merges what was left open.
#include "dinomo/pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

namespace slip::dinomo {
namespace {

constexpr uint64_t kSegmentBytes = 64 << 10;

PoolOptions Small() {
  PoolOptions o;
  o.segment_bytes = kSegmentBytes;
  o.num_buckets = 256;
  return o;
}

// A node's view of its log: appends blocks to its current segment.
struct Writer {
  pm::PmRegion* region;
  uint32_t node;
  uint64_t segment = 0, tail = 0;
  uint64_t Append(std::string_view key, std::string_view value, uint64_t version,
                  log::EntryType type = log::EntryType::kPut) {
    auto layout = log::PlanEntry(key.size(), value.size(), 8192);
    auto bytes = log::EncodeEntry({type, static_cast<uint16_t>(node), version}, key, value, *layout);
    std::memcpy(region->at(segment + tail), bytes.data(), bytes.size());
    const uint64_t at = segment + tail;
    tail += bytes.size();
    return at;
  }
};

struct Fixture {
  std::unique_ptr<pm::PmRegion> region = std::move(pm::PmRegion::Anonymous(2 << 20, {})).value();
  std::unique_ptr<Pool> pool = std::move(Pool::Open(region.get(), Small())).value();
  Writer Start(uint32_t node) {
    Writer w{region.get(), node};
    w.segment = *pool->Allocate(node);
    return w;
  }
  std::string Get(std::string_view key) const {
    auto p = pool->index().Find(key);
    if (!p) return "<none>";
    auto d = log::DecodeBlock({region->at(p->offset), p->bytes}, {});
    if (!d.status.ok()) return "<bad>";
    return d.block.type == log::EntryType::kDel ? "<deleted>" : std::string(d.block.value());
  }
};

TEST(PoolTest, ASealedSegmentIsMergedInLogOrder) {
  Fixture f;
  Writer w = f.Start(1);
  w.Append("a", "1", 1);
  w.Append("b", "2", 2);
  w.Append("a", "3", 3);
  EXPECT_EQ(f.Get("a"), "<none>") << "nothing merged before the seal";
  auto r = f.pool->Seal(1, w.segment, w.tail);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->entries, 3u);
  EXPECT_EQ(f.Get("a"), "3");
  EXPECT_EQ(f.Get("b"), "2");
  EXPECT_EQ(f.pool->stats().open_segments, 0u);
  EXPECT_TRUE(f.pool->OpenSegments(1).empty());
}

TEST(PoolTest, BytesPastTheSealAreNeverMerged) {
  Fixture f;
  Writer w = f.Start(1);
  w.Append("a", "acked", 1);
  const uint64_t end = w.tail;
  w.Append("a", "landed after the node gave up on it", 2);
  ASSERT_TRUE(f.pool->Seal(1, w.segment, end).ok());
  EXPECT_EQ(f.Get("a"), "acked");
}

TEST(PoolTest, SealRefusesWhatIsNotTheNodesOpenSegment) {
  Fixture f;
  Writer w = f.Start(1);
  w.Append("a", "1", 1);
  EXPECT_TRUE(f.pool->Seal(2, w.segment, w.tail).status().Is(Code::kInvalidArgument)) << "another node's";
  EXPECT_TRUE(f.pool->Seal(1, w.segment + 64, w.tail).status().Is(Code::kInvalidArgument)) << "not a segment";
  EXPECT_TRUE(f.pool->Seal(1, w.segment, kSegmentBytes + 64).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(f.pool->Seal(1, w.segment, 10).status().Is(Code::kInvalidArgument));
  EXPECT_EQ(f.Get("a"), "<none>");
  ASSERT_TRUE(f.pool->Seal(1, w.segment, w.tail).ok());
  EXPECT_TRUE(f.pool->Seal(1, w.segment, w.tail).status().Is(Code::kInvalidArgument)) << "sealed already";
}

// D4: a node died with two open segments; before another node serves its
// keys the pool merges both, oldest first.
TEST(PoolTest, ADeadNodesOpenSegmentsAreMergedOldestFirst) {
  Fixture f;
  Writer w = f.Start(3);
  w.Append("k", "old", 1);
  w.Append("x", "x1", 2);
  Writer w2{f.region.get(), 3, *f.pool->Allocate(3)};
  w2.Append("k", "new", 3);
  w2.Append("y", "torn", 4);
  std::memset(f.region->at(w2.segment + w2.tail - 40), 0xee, 8);  // the node died mid-write
  ASSERT_EQ(f.pool->OpenSegments(3), (std::vector<uint64_t>{w.segment, w2.segment}));
  auto merged = f.pool->MergeAll(3);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(*merged, 3u);
  EXPECT_EQ(f.Get("k"), "new");
  EXPECT_EQ(f.Get("x"), "x1");
  EXPECT_EQ(f.Get("y"), "<none>") << "the torn entry was never acknowledged";
  EXPECT_TRUE(f.pool->OpenSegments(3).empty());
  EXPECT_EQ(*f.pool->MergeAll(3), 0u) << "nothing left";
}

// D10: a segment whose every entry was overwritten is freed, and handed out
// again zeroed — no reader of the new owner's log walks into old blocks.
TEST(PoolTest, AllDeadSegmentsAreFreedAndReusedZeroed) {
  Fixture f;
  Writer w = f.Start(1);
  for (int i = 0; i < 10; ++i) w.Append("key" + std::to_string(i), "first", i + 1);
  ASSERT_TRUE(f.pool->Seal(1, w.segment, w.tail).ok());
  const uint32_t free_before = f.pool->stats().free_segments;
  Writer w2 = f.Start(1);
  for (int i = 0; i < 10; ++i) w2.Append("key" + std::to_string(i), "second", 100 + i);
  ASSERT_TRUE(f.pool->Seal(1, w2.segment, w2.tail).ok());
  EXPECT_EQ(f.pool->stats().freed_segments, 1u);
  EXPECT_EQ(f.pool->stats().free_segments, free_before) << "one taken, one freed";
  for (int i = 0; i < 10; ++i) EXPECT_EQ(f.Get("key" + std::to_string(i)), "second");
  // Reused — after every segment never used (the longest freed goes first,
  // so a slow reader's old pointer stays valid the longest) — and zero.
  uint64_t again = 0;
  for (uint32_t n = 0; n < f.pool->stats().segments && again != w.segment; ++n) again = *f.pool->Allocate(2);
  EXPECT_EQ(again, w.segment);
  EXPECT_EQ(f.pool->stats().free_segments, 0u) << "every never-used segment was handed out first";
  for (uint64_t b = 0; b < 1024; ++b) ASSERT_EQ(f.region->at(again)[b], std::byte{0}) << b;
  // A segment holding a live tombstone is kept.
  Writer w3{f.region.get(), 2, again};
  w3.Append("key0", std::string(8, '\0'), 200, log::EntryType::kDel);
  ASSERT_TRUE(f.pool->Seal(2, w3.segment, w3.tail).ok());
  EXPECT_EQ(f.Get("key0"), "<deleted>");
  EXPECT_EQ(f.pool->stats().freed_segments, 1u);
}

TEST(PoolTest, ARestartedPoolRebuildsItsCountersAndMergesWhatWasLeftOpen) {
  Fixture f;
  Writer w = f.Start(1);
  w.Append("a", "1", 1);
  w.Append("b", "1", 2);
  ASSERT_TRUE(f.pool->Seal(1, w.segment, w.tail).ok());
  Writer w2 = f.Start(1);
  w2.Append("a", "2", 3);  // merged before the crash? not yet: left open
  Writer other = f.Start(2);
  other.Append("c", "1", 4);
  f.pool.reset();
  auto reopened = Pool::Open(f.region.get(), Small());
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  f.pool = std::move(*reopened);
  EXPECT_EQ(f.pool->stats().open_segments, 2u);
  EXPECT_EQ(f.Get("a"), "1");
  ASSERT_TRUE(f.pool->Seal(1, w2.segment, w2.tail).ok());
  EXPECT_EQ(f.Get("a"), "2");
  EXPECT_EQ(f.Get("b"), "1");
  ASSERT_TRUE(f.pool->MergeAll(2).ok());
  EXPECT_EQ(f.Get("c"), "1");
  // The first segment still holds b's live entry: not freed; once b is
  // overwritten too, it is.
  EXPECT_EQ(f.pool->stats().freed_segments, 0u);
  Writer w3 = f.Start(1);
  w3.Append("b", "2", 5);
  ASSERT_TRUE(f.pool->Seal(1, w3.segment, w3.tail).ok());
  EXPECT_EQ(f.pool->stats().freed_segments, 1u);
}

TEST(PoolTest, TokensAdmitFenceAndSurviveARestart) {
  Fixture f;
  EXPECT_TRUE(f.pool->CheckToken(1, 1).Is(Code::kStaleTerm)) << "not admitted";
  ASSERT_TRUE(f.pool->Admit(1, 1).ok());
  EXPECT_TRUE(f.pool->CheckToken(1, 1).ok());
  EXPECT_TRUE(f.pool->CheckToken(1, 2).Is(Code::kStaleTerm));
  ASSERT_TRUE(f.pool->Fence(1, 2).ok());
  EXPECT_TRUE(f.pool->CheckToken(1, 1).Is(Code::kStaleTerm)) << "fenced";
  EXPECT_TRUE(f.pool->Admit(1, 1).Is(Code::kStaleTerm));
  EXPECT_TRUE(f.pool->Admit(7, 1).ok()) << "fences are per node";
  EXPECT_TRUE(f.pool->Admit(Pool::kMaxNodes, 1).Is(Code::kInvalidArgument));
  // The fence is persistent: a restarted pool still refuses epoch 1.
  f.pool.reset();
  f.pool = std::move(Pool::Open(f.region.get(), Small())).value();
  EXPECT_TRUE(f.pool->Admit(1, 1).Is(Code::kStaleTerm));
  EXPECT_TRUE(f.pool->Admit(1, 2).ok());
  EXPECT_TRUE(f.pool->CheckToken(1, 2).ok());
}

// The pool died part-way through merging an open segment S: some of its
// entries are indexed, S is still open. After the restart a later segment
// displaces one of them before S is merged again. S must not be freed while
// its other entry is live (that entry would be counted dead twice).
TEST(PoolTest, ASegmentMergedHalfBeforeACrashIsCountedOnce) {
  Fixture f;
  Writer s = f.Start(1);
  const uint64_t e1 = s.Append("a", "a1", 1);
  const uint64_t e2 = s.Append("b", "b1", 2);
  ASSERT_TRUE(f.pool->index().Apply(IndexPointer{e1, 64}).ok());  // the merge that was cut short
  ASSERT_TRUE(f.pool->index().Apply(IndexPointer{e2, 64}).ok());
  f.pool.reset();
  f.pool = std::move(Pool::Open(f.region.get(), Small())).value();
  Writer t = f.Start(1);
  t.Append("a", "a2", 3);
  ASSERT_TRUE(f.pool->Seal(1, t.segment, t.tail).ok());
  ASSERT_TRUE(f.pool->Seal(1, s.segment, s.tail).ok());
  EXPECT_EQ(f.pool->stats().freed_segments, 0u) << "b1 is still live in S";
  EXPECT_EQ(f.Get("b"), "b1");
  EXPECT_EQ(f.Get("a"), "a2");
  // Once b is overwritten too, S goes.
  Writer u = f.Start(1);
  u.Append("b", "b2", 4);
  ASSERT_TRUE(f.pool->Seal(1, u.segment, u.tail).ok());
  EXPECT_EQ(f.pool->stats().freed_segments, 1u);
  EXPECT_EQ(f.Get("b"), "b2");
}

// A full index grows (scenario 9 of docs/papers/dinomo.md §6): the merge
// that finds no room has the pool build an index with twice the buckets in a
// run of free segments, copy every pointer, switch the superblock, and mark
// the old buckets moved; every key is found, after a restart too, and the
// restarted pool frees the runs of indexes it no longer uses.
TEST(PoolTest, AFullIndexGrowsAndEveryKeyIsFoundAfterARestartToo) {
  PoolOptions o = Small();
  o.num_buckets = 2;
  o.index_bytes = 64 * 4;  // 2 home buckets, 1 overflow bucket: 9 slots
  auto region = std::move(pm::PmRegion::Anonymous(8 << 20, {})).value();
  auto pool = std::move(Pool::Open(region.get(), o)).value();
  const uint64_t old_table = pool->index().table_offset();
  std::map<std::string, std::string> want;
  uint64_t version = 1;
  for (int round = 0; round < 4; ++round) {
    Writer w{region.get(), 1};
    w.segment = *pool->Allocate(1);
    for (int i = 0; i < 60; ++i) {
      const std::string key = "key" + std::to_string(i), value = "r" + std::to_string(round) + "v" + std::to_string(i);
      w.Append(key, value, version++);
      want[key] = value;
    }
    auto m = pool->Seal(1, w.segment, w.tail);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
  }
  EXPECT_EQ(pool->index_grows(), 1u) << "the new index takes a whole segment: room to spare";
  EXPECT_NE(pool->index().table_offset(), old_table);
  // Grown once more (as when that fills up too): the first run is retired.
  ASSERT_TRUE(pool->GrowIndex().ok());
  EXPECT_EQ(pool->index().num_buckets(), 8u);
  for (const auto& [k, v] : want) {
    auto p = pool->index().Find(k);
    ASSERT_TRUE(p.has_value()) << k;
    auto d = log::DecodeBlock({region->at(p->offset), p->bytes}, {});
    ASSERT_TRUE(d.status.ok());
    EXPECT_EQ(d.block.value(), v) << k;
  }
  // The old table reads as moved to a one-sided reader.
  const BucketView b = ParseBucket(std::span<const std::byte, kBucketBytes>(region->at(old_table), kBucketBytes));
  EXPECT_TRUE(b.moved);
  EXPECT_FALSE(b.consistent);
  const uint32_t free_before = pool->stats().free_segments;
  pool.reset();
  auto again = Pool::Open(region.get(), o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (const auto& [k, v] : want) EXPECT_TRUE((*again)->index().Find(k).has_value()) << k;
  EXPECT_GT((*again)->stats().free_segments, free_before) << "the replaced indexes' runs are free again";
}

TEST(PoolTest, AFullPoolSaysSo) {
  Fixture f;
  std::vector<uint64_t> got;
  for (;;) {
    auto s = f.pool->Allocate(1);
    if (!s.ok()) {
      EXPECT_TRUE(s.status().Is(Code::kNoSpace));
      break;
    }
    got.push_back(*s);
  }
  EXPECT_EQ(got.size(), f.pool->num_segments());
  EXPECT_GT(got.size(), 10u);
}

TEST(PoolTest, ARegionTooSmallOrCorruptIsRefused) {
  auto tiny = std::move(pm::PmRegion::Anonymous(64 << 10, {})).value();
  EXPECT_TRUE(Pool::Open(tiny.get(), Small()).status().Is(Code::kInvalidArgument));
  Fixture f;
  f.pool.reset();
  std::memset(f.region->at(8), 0xff, 8);  // segment_bytes
  EXPECT_TRUE(Pool::Open(f.region.get(), Small()).status().Is(Code::kCorruption));
}

}  // namespace
}  // namespace slip::dinomo
