// The pool's index and the merge of a node's log into it
// (dinomo/pool_index.h, dinomo/merge.h): lookups as a one-sided reader does
// them, version-conditional merging (invariant D5), torn batches at every
// byte (scenario 2), chains, a reopened pool, readers racing a merge.
#include "dinomo/pool_index.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "dinomo/merge.h"

namespace slip::dinomo {
namespace {

constexpr uint64_t kIndexAt = 0;
constexpr uint64_t kIndexBytes = 64 << 10;
constexpr uint64_t kSegment = 1 << 20;  // a node's log segment
constexpr uint64_t kSegmentBytes = 256 << 10;

struct Pool {
  std::unique_ptr<pm::PmRegion> region = std::move(pm::PmRegion::Anonymous(2 << 20, {})).value();
  std::unique_ptr<PoolIndex> index;
  uint64_t tail = 0;  // the node's next append, segment-relative

  explicit Pool(uint32_t buckets = 64, uint64_t index_bytes = kIndexBytes) {
    index = std::move(PoolIndex::Create(region.get(), kIndexAt, index_bytes, buckets)).value();
  }
  // What a node's batched WRITE puts in its log: one block per entry.
  IndexPointer Append(std::string_view key, std::string_view value, uint64_t version,
                      log::EntryType type = log::EntryType::kPut) {
    auto layout = log::PlanEntry(key.size(), value.size(), 8192);
    auto bytes = log::EncodeEntry({type, 7, version}, key, value, *layout);
    std::memcpy(region->at(kSegment + tail), bytes.data(), bytes.size());
    const IndexPointer p{kSegment + tail, static_cast<uint32_t>(bytes.size())};
    tail += bytes.size();
    return p;
  }
  Result<MergeResult> Merge(uint64_t from = 0) { return MergeSegment(*region, *index, kSegment, kSegmentBytes, from); }
  std::string ValueAt(IndexPointer p) const {
    auto d = log::DecodeBlock({region->at(p.offset), p.bytes}, {});
    return d.status.ok() ? std::string(d.block.value()) : "<bad>";
  }
  uint64_t VersionAt(IndexPointer p) const { return log::PeekHeader(region->at(p.offset)).version; }
};

TEST(PoolIndexTest, AMergedEntryIsFoundInOneBucketRead) {
  Pool pool;
  const IndexPointer p = pool.Append("apple", "red", 1);
  auto r = pool.Merge();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->entries, 1u);
  EXPECT_EQ(r->applied, 1u);
  EXPECT_FALSE(r->torn);
  EXPECT_EQ(r->end, p.bytes);
  uint32_t reads = 0;
  auto found = pool.index->Find("apple", &reads);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, p);
  EXPECT_EQ(reads, 1u) << "D12: a collision-free miss is one bucket read (then the entry)";
  EXPECT_EQ(pool.ValueAt(*found), "red");
  EXPECT_FALSE(pool.index->Find("pear").has_value());
}

TEST(PoolIndexTest, MergingIsInLogOrderAndIdempotent) {
  Pool pool;
  pool.Append("k", "v1", 1);
  pool.Append("other", "o1", 2);
  const IndexPointer v3 = pool.Append("k", "v3", 3);
  auto r = pool.Merge();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->applied, 3u);
  ASSERT_EQ(r->garbage.size(), 1u) << "v1, displaced by v3";
  EXPECT_EQ(pool.ValueAt(*pool.index->Find("k")), "v3");
  // The pool crashed mid-merge and merges the segment again from the start:
  // nothing moves backwards, every entry is garbage or already indexed.
  r = pool.Merge();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->entries, 3u);
  EXPECT_EQ(r->applied, 0u);
  EXPECT_EQ(*pool.index->Find("k"), v3);
  // An older version merged late (another node's stale log) does not win.
  Pool other;
  other.Append("k", "new", 9);
  other.Append("k", "old", 4);
  ASSERT_TRUE(other.Merge().ok());
  EXPECT_EQ(other.ValueAt(*other.index->Find("k")), "new");
}

TEST(PoolIndexTest, ATombstoneStaysIndexedSoOlderPutsCannotReturn) {
  Pool pool;
  pool.Append("k", "v1", 1);
  const IndexPointer del = pool.Append("k", std::string(8, '\0'), 2, log::EntryType::kDel);
  ASSERT_TRUE(pool.Merge().ok());
  auto found = pool.index->Find("k");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, del);
  EXPECT_EQ(log::PeekHeader(pool.region->at(found->offset)).type, log::EntryType::kDel);
  ASSERT_TRUE(pool.Merge().ok());  // re-merge: the PUT of version 1 stays dead
  EXPECT_EQ(*pool.index->Find("k"), del);
}

// Scenario 2: a node died part-way through a batched write. Whatever prefix
// of the batch landed, exactly its whole entries are merged, and the walk
// stops at the torn one.
TEST(PoolIndexTest, ATornBatchMergesExactlyItsWholeEntries) {
  Pool model;
  struct Placed {
    uint64_t at, data;  // segment-relative start; header + key + value bytes (the rest is zero padding)
  };
  std::vector<Placed> batch;
  for (int i = 0; i < 3; ++i) {
    const std::string key = "key" + std::to_string(i), value(40 + 30 * i, 'x');
    const IndexPointer p = model.Append(key, value, i + 1);
    batch.push_back({p.offset - kSegment, log::kHeaderSize + key.size() + value.size()});
  }
  const uint64_t batch_bytes = model.tail;
  std::vector<std::byte> image(model.region->at(kSegment), model.region->at(kSegment) + batch_bytes);
  for (uint64_t k = 0; k <= batch_bytes; ++k) {
    Pool pool;
    std::memcpy(pool.region->at(kSegment), image.data(), k);
    auto r = pool.Merge();
    ASSERT_TRUE(r.ok()) << k << ": " << r.status().ToString();
    uint64_t whole = 0;
    for (const Placed& p : batch) whole += p.at + p.data <= k ? 1 : 0;
    EXPECT_EQ(r->applied, whole) << "landed " << k << " bytes";
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(pool.index->Find("key" + std::to_string(i)).has_value(), static_cast<uint64_t>(i) < whole) << k;
    }
    // Cut inside the next entry's data past its first word: torn, not empty.
    if (whole < batch.size() && k >= batch[whole].at + 8) {
      EXPECT_TRUE(r->torn) << k;
    }
  }
}

TEST(PoolIndexTest, FullBucketsChainIntoOverflowUntilTheAreaIsFull) {
  // One home bucket and 3 overflow buckets: 12 slots in one chain.
  Pool pool(/*buckets=*/1, /*index_bytes=*/64 * (1 + 1 + 3));
  for (int i = 0; i < 13; ++i) pool.Append("key" + std::to_string(i), "v", i + 1);
  auto r = pool.Merge();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->index_full) << "the 13th entry found no room; the walk stops before it";
  EXPECT_EQ(r->entries, 12u);
  EXPECT_EQ(pool.index->overflow_used(), 3u);
  for (int i = 0; i < 12; ++i) {
    uint32_t reads = 0;
    auto f = pool.index->Find("key" + std::to_string(i), &reads);
    ASSERT_TRUE(f.has_value()) << i;
    EXPECT_EQ(reads, static_cast<uint32_t>(i / 3 + 1)) << "key " << i << " is in bucket " << i / 3 << " of the chain";
  }
  EXPECT_FALSE(pool.index->Find("key12").has_value());
}

TEST(PoolIndexTest, AReopenedPoolFindsWhatWasMerged) {
  Pool pool;
  for (int i = 0; i < 100; ++i) pool.Append("key" + std::to_string(i), "v" + std::to_string(i), i + 1);
  ASSERT_TRUE(pool.Merge().ok());
  auto reopened = PoolIndex::Open(pool.region.get(), kIndexAt);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  for (int i = 0; i < 100; ++i) {
    auto f = (*reopened)->Find("key" + std::to_string(i));
    ASSERT_TRUE(f.has_value()) << i;
    EXPECT_EQ(pool.ValueAt(*f), "v" + std::to_string(i));
  }
  EXPECT_TRUE(PoolIndex::Open(pool.region.get(), kSegment).status().Is(Code::kCorruption));
}

TEST(PoolIndexTest, BadInputIsRefusedAndChangesNothing) {
  Pool pool;
  EXPECT_TRUE(PoolIndex::Create(pool.region.get(), 0, 4096, 3).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(PoolIndex::Create(pool.region.get(), 0, 128, 64).status().Is(Code::kInvalidArgument));
  pool.Append("k", "v", 1);
  EXPECT_TRUE(pool.index->Apply(IndexPointer{kSegment + 64, 64}).status().Is(Code::kCorruption)) << "no entry there";
  EXPECT_TRUE(pool.index->Apply(IndexPointer{1 << 30, 64}).status().Is(Code::kCorruption)) << "outside the region";
  EXPECT_FALSE(pool.index->Find("k").has_value());
  EXPECT_TRUE(MergeSegment(*pool.region, *pool.index, kSegment, 4 << 20, 0).status().Is(Code::kInvalidArgument));
  // A block kind a node's log never holds.
  auto layout = log::PlanEntry(0, 8, 8192);
  auto cv = log::EncodeEntry({log::EntryType::kCommitVersion, 7, 2}, "", "12345678", *layout);
  std::memcpy(pool.region->at(kSegment + pool.tail), cv.data(), cv.size());
  auto r = pool.Merge();
  EXPECT_TRUE(r.status().Is(Code::kCorruption));
  EXPECT_TRUE(pool.index->Find("k").has_value()) << "what came before it was merged";
}

// One-sided readers racing the merge thread: a reader never takes a
// half-written bucket, and the entry it finds is always its key's, never
// older than one it saw before.
TEST(PoolIndexTest, ReadersRacingAMergeSeeOnlyWholeNewerEntries) {
  Pool pool(/*buckets=*/4);
  constexpr int kKeys = 12, kRounds = 400;
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    std::vector<uint64_t> last(kKeys, 0);
    while (!done.load()) {
      for (int k = 0; k < kKeys; ++k) {
        auto f = pool.index->Find("key" + std::to_string(k));
        if (!f) continue;
        auto d = log::DecodeBlock({pool.region->at(f->offset), f->bytes}, {});
        if (!d.status.ok() || d.block.key() != "key" + std::to_string(k) || d.block.version < last[k]) ++bad;
        if (d.status.ok()) last[k] = d.block.version;
      }
    }
  });
  uint64_t version = 0;
  for (int round = 0; round < kRounds && pool.tail + 4096 < kSegmentBytes; ++round) {
    const uint64_t from = pool.tail;
    for (int k = 0; k < kKeys; ++k) pool.Append("key" + std::to_string(k), "v" + std::to_string(round), ++version);
    ASSERT_TRUE(pool.Merge(from).ok());
  }
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace slip::dinomo
