// Receive segments: digest, walks past holes, recovery and cleaning of what
// peers wrote one-sidedly (store/receive.cc).
#include "store/store.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/hash.h"
#include "common/random.h"
#include "store/store_test_util.h"

namespace slip::store {
namespace {

using testing::MakeRegion;
using testing::SmallOptions;
using testing::Value;

// What a peer does: encodes an entry with the log codec.
std::vector<std::byte> Encoded(log::EntryType type, uint16_t shard, uint64_t version,
                               std::string_view key, std::string_view value,
                               size_t max_block = 8192) {
  auto layout = log::PlanEntry(key.size(), value.size(), max_block);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  return log::EncodeEntry({type, shard, version}, key, value, *layout);
}

// A PUT or DEL of `key` for its right shard.
std::vector<std::byte> PutEntry(const Store& s, std::string_view key, std::string_view value,
                                uint64_t version) {
  return Encoded(log::EntryType::kPut, static_cast<uint16_t>(s.ShardOf(HashKey(key))), version, key,
                 value);
}
std::vector<std::byte> DelEntry(const Store& s, std::string_view key, uint64_t version) {
  return Encoded(log::EntryType::kDel, static_cast<uint16_t>(s.ShardOf(HashKey(key))), version, key,
                 std::string(8, '\0'));
}

// A peer's write landing at `off` of receive segment `seg`, made durable.
void Land(pm::PmRegion* region, const Store& s, uint32_t seg, uint64_t off,
          std::span<const std::byte> bytes) {
  ASSERT_EQ(off % log::kAlign, 0u);
  ASSERT_LE(off + bytes.size(), s.segments().segment_size());
  std::byte* dst = s.segments().SegmentBase(seg) + off;
  std::memcpy(dst, bytes.data(), bytes.size());
  region->Persist(dst, bytes.size());
}

uint32_t FindSegment(const Store& s, log::SegmentOwner owner, log::SegmentState state) {
  for (uint32_t i = 0; i < s.segments().num_segments(); ++i) {
    const log::SegmentMeta m = s.segments().meta(i);
    if (m.owner == owner && m.state == state) return i;
  }
  return UINT32_MAX;
}

std::unique_ptr<Store> Reopen(std::unique_ptr<Store>& store, pm::PmRegion* region,
                              const StoreOptions& o = SmallOptions()) {
  store.reset();
  auto r = Store::Open(region, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(StoreReceiveTest, DigestIndexesEntriesInPlace) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t free_before = store->stats().free_segments;
  auto seg_r = store->AllocateReceiveSegment();
  ASSERT_TRUE(seg_r.ok()) << seg_r.status().ToString();
  const uint32_t seg = *seg_r;
  EXPECT_EQ(store->segments().meta(seg).owner, log::SegmentOwner::kControl);
  EXPECT_EQ(store->segments().meta(seg).state, log::SegmentState::kUsing);
  EXPECT_EQ(store->stats().free_segments, free_before - 1);

  Random rng(31);
  struct E {
    std::string key, value;
    uint64_t version;
  };
  const std::vector<E> entries = {{"alpha", "A", 5}, {"beta", Value(rng, 1000), 9}, {"gamma", "G", 7}};
  uint64_t off = 0;
  std::map<uint32_t, uint64_t> max_version;  // per shard
  for (const E& e : entries) {
    auto bytes = PutEntry(*store, e.key, e.value, e.version);
    Land(region.get(), *store, seg, off, bytes);
    off += bytes.size();
    uint64_t& m = max_version[store->ShardOf(HashKey(e.key))];
    m = std::max(m, e.version);
  }
  const uint64_t appended = store->stats().appended_bytes;
  auto end = store->DigestReceived(seg, 0, store->segments().segment_size());
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(*end, off);
  for (const E& e : entries) {
    log::EntryMeta m;
    auto got = store->Get(e.key, &m);
    ASSERT_TRUE(got.ok()) << e.key << ": " << got.status().ToString();
    EXPECT_EQ(*got, e.value);
    EXPECT_EQ(m.type, log::EntryType::kPut);
    EXPECT_EQ(m.version, e.version);
    EXPECT_EQ(m.shard, store->ShardOf(HashKey(e.key)));
  }
  for (uint32_t sh = 0; sh < 4; ++sh) {
    EXPECT_EQ(store->shard_version(sh), max_version.count(sh) ? max_version[sh] : 0) << sh;
  }
  EXPECT_EQ(store->stats().appended_bytes, appended) << "digest must not copy";
  EXPECT_EQ(store->received_bytes(), off);
  EXPECT_EQ(store->live_bytes(seg), static_cast<int64_t>(off));
  EXPECT_EQ(store->stats().keys, entries.size());

  // Nothing new landed: a digest from where it stopped stays there.
  auto again = store->DigestReceived(seg, *end, store->segments().segment_size());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, off);
  EXPECT_EQ(store->received_bytes(), off);

  // A local write numbers above what was received.
  ASSERT_TRUE(store->Put(0, "alpha", "local").ok());
  log::EntryMeta m;
  ASSERT_EQ(*store->Get("alpha", &m), "local");
  EXPECT_EQ(m.version, max_version[store->ShardOf(HashKey("alpha"))] + 1);
}

TEST(StoreReceiveTest, DigestStopsAtTheFirstInvalidBlockAndResumes) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = *store->AllocateReceiveSegment();
  const uint64_t ss = store->segments().segment_size();
  Random rng(32);
  const std::string vb = Value(rng, 300);
  auto a = PutEntry(*store, "a", "1", 1);
  auto b = PutEntry(*store, "b", vb, 2);
  auto c = PutEntry(*store, "c", "3", 3);
  ASSERT_EQ(a.size(), 64u);
  ASSERT_GT(b.size(), 128u);
  const uint64_t b_at = a.size(), c_at = b_at + b.size(), end = c_at + c.size();

  // Nothing landed yet.
  EXPECT_EQ(*store->DigestReceived(seg, 0, ss), 0u);
  Land(region.get(), *store, seg, 0, a);
  // A range that ends inside a block does not take it.
  EXPECT_EQ(*store->DigestReceived(seg, 0, 40), 0u);
  EXPECT_TRUE(store->Get("a").status().Is(Code::kNotFound));
  // C lands before B: a zero hole where B goes.
  Land(region.get(), *store, seg, c_at, c);
  auto r = store->DigestReceived(seg, 0, ss);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, b_at);
  EXPECT_EQ(*store->Get("a"), "1");
  EXPECT_TRUE(store->Get("c").status().Is(Code::kNotFound)) << "indexed past a hole";

  // B half landed (its last line still zero): still a stop.
  std::vector<std::byte> torn = b;
  std::fill(torn.end() - 64, torn.end(), std::byte{0});
  Land(region.get(), *store, seg, b_at, torn);
  auto r2 = store->DigestReceived(seg, *r, ss);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(*r2, b_at);
  EXPECT_TRUE(store->Get("b").status().Is(Code::kNotFound));
  EXPECT_TRUE(store->Get("c").status().Is(Code::kNotFound));

  // The hole fills: the next digest continues from where the last stopped.
  Land(region.get(), *store, seg, b_at, b);
  auto r3 = store->DigestReceived(seg, *r2, ss);
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(*r3, end);
  EXPECT_EQ(*store->Get("a"), "1");
  EXPECT_EQ(*store->Get("b"), vb);
  EXPECT_EQ(*store->Get("c"), "3");
  EXPECT_EQ(store->received_bytes(), end);
}

// Several senders share a receive segment: an entry behind a hole is
// another sender's, possibly acknowledged. kPastHoles indexes it but leaves
// the cursor at the hole (the hole may still fill); kFinal counts it too.
TEST(StoreReceiveTest, WalksPastHolesIndexBeyondThemAndResumeAtTheHole) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = *store->AllocateReceiveSegment();
  const uint64_t ss = store->segments().segment_size();
  Random rng(33);
  const std::string vb = Value(rng, 300);
  auto a = PutEntry(*store, "a", "1", 1);
  auto b = PutEntry(*store, "b", vb, 2);
  auto c = PutEntry(*store, "c", "3", 3);
  const uint64_t b_at = a.size(), c_at = b_at + b.size(), end = c_at + c.size();
  Land(region.get(), *store, seg, 0, a);
  // B torn: its header intact, its last line never written.
  std::vector<std::byte> torn = b;
  std::fill(torn.end() - 64, torn.end(), std::byte{0});
  Land(region.get(), *store, seg, b_at, torn);
  Land(region.get(), *store, seg, c_at, c);

  using Walk = Store::ReceiveWalk;
  auto r = store->DigestReceived(seg, 0, ss, Walk::kPastHoles);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, b_at) << "the cursor stays at the hole";
  EXPECT_EQ(*store->Get("a"), "1");
  EXPECT_EQ(*store->Get("c"), "3") << "an entry behind a hole must be found";
  EXPECT_TRUE(store->Get("b").status().Is(Code::kNotFound));
  EXPECT_EQ(store->received_bytes(), a.size()) << "beyond the hole is not counted yet";
  EXPECT_EQ(store->stats().keys, 2u);

  // Walking again finds C again: harmless.
  ASSERT_EQ(*store->DigestReceived(seg, *r, ss, Walk::kPastHoles), b_at);
  EXPECT_EQ(store->stats().keys, 2u);
  EXPECT_EQ(store->live_bytes(seg), static_cast<int64_t>(a.size() + c.size()));

  // B completes; the final walk resumes at the hole and counts everything once.
  Land(region.get(), *store, seg, b_at, b);
  ASSERT_EQ(*store->DigestReceived(seg, *r, ss, Walk::kFinal), end);
  EXPECT_EQ(*store->Get("b"), vb);
  EXPECT_EQ(store->received_bytes(), end);
  EXPECT_EQ(store->live_bytes(seg), static_cast<int64_t>(end));
}

// A backup that lets a shard go (it moved away) while entries of it sit in
// its receive segments, digested or not: none comes back into the index —
// not by a lazy digest, not by a final re-walk — while what lands later
// (the shard is back) is indexed as usual.
TEST(StoreReceiveTest, ADroppedShardsLandedEntriesNeverComeBack) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = store->AllocateReceiveSegment().value();
  const uint32_t shard = store->ShardOf(HashKey("stale"));
  std::string other = "o", stale2 = "s";
  while (store->ShardOf(HashKey(other)) == shard) other += "o";
  while (store->ShardOf(HashKey(stale2)) != shard) stale2 += "s";
  uint64_t off = 0;
  auto land = [&](std::vector<std::byte> bytes) {
    Land(region.get(), *store, seg, off, bytes);
    off += bytes.size();
  };
  land(PutEntry(*store, "stale", "digested", 3));
  ASSERT_TRUE(store->DigestReceived(seg, 0, off).ok());
  const uint64_t digested = off;
  land(PutEntry(*store, stale2, "not digested yet", 4));
  land(PutEntry(*store, other, "another shard's", 5));
  ASSERT_EQ(*store->Get("stale"), "digested");
  store->DropShard(shard);
  EXPECT_TRUE(store->Get("stale").status().Is(Code::kNotFound));
  // The lazy digest, then a final walk of everything.
  ASSERT_TRUE(store->DigestReceived(seg, digested, off).ok());
  ASSERT_TRUE(store->DigestReceived(seg, 0, off, Store::ReceiveWalk::kFinal).ok());
  EXPECT_TRUE(store->Get("stale").status().Is(Code::kNotFound)) << "a re-walk brought it back";
  EXPECT_TRUE(store->Get(stale2).status().Is(Code::kNotFound)) << "digested after the drop";
  EXPECT_EQ(*store->Get(other), "another shard's") << "other shards are not touched";
  // The shard is back: a new entry lands further on.
  const uint64_t back = off;
  land(PutEntry(*store, "stale", "new", 9));
  ASSERT_TRUE(store->DigestReceived(seg, back, off).ok());
  EXPECT_EQ(*store->Get("stale"), "new");
}

TEST(StoreReceiveTest, NewerVersionWinsRegardlessOfOrder) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = *store->AllocateReceiveSegment();
  const uint64_t ss = store->segments().segment_size();
  uint64_t off = 0;
  auto land_and_digest = [&](const std::vector<std::byte>& bytes) {
    Land(region.get(), *store, seg, off, bytes);
    auto r = store->DigestReceived(seg, off, ss);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    off += bytes.size();
    ASSERT_EQ(*r, off);
  };
  land_and_digest(PutEntry(*store, "k", "three", 3));
  land_and_digest(PutEntry(*store, "k", "two", 2));
  log::EntryMeta m;
  EXPECT_EQ(*store->Get("k", &m), "three");
  EXPECT_EQ(m.version, 3u);
  land_and_digest(DelEntry(*store, "k", 5));
  EXPECT_TRUE(store->Get("k", &m).status().Is(Code::kNotFound));
  EXPECT_EQ(m.type, log::EntryType::kDel);
  EXPECT_EQ(m.version, 5u);
  land_and_digest(PutEntry(*store, "k", "four", 4));
  EXPECT_TRUE(store->Get("k").status().Is(Code::kNotFound)) << "an older PUT resurrected a delete";
  land_and_digest(PutEntry(*store, "k", "six", 6));
  EXPECT_EQ(*store->Get("k"), "six");

  // All in one digest, newest first.
  const uint64_t from = off;
  for (auto& bytes : {PutEntry(*store, "m", "twelve", 12), DelEntry(*store, "m", 11),
                      PutEntry(*store, "m", "ten", 10), DelEntry(*store, "n", 8),
                      PutEntry(*store, "n", "seven", 7)}) {
    Land(region.get(), *store, seg, off, bytes);
    off += bytes.size();
  }
  EXPECT_EQ(*store->DigestReceived(seg, from, ss), off);
  EXPECT_EQ(*store->Get("m"), "twelve");
  EXPECT_TRUE(store->Get("n").status().Is(Code::kNotFound));
  EXPECT_GE(store->shard_version(store->ShardOf(HashKey("m"))), 12u);

  // Recovery finds the same winners.
  store = Reopen(store, region.get());
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->Get("k"), "six");
  EXPECT_EQ(*store->Get("m"), "twelve");
  EXPECT_TRUE(store->Get("n").status().Is(Code::kNotFound));
  EXPECT_GE(store->shard_version(store->ShardOf(HashKey("m"))), 12u);
  EXPECT_GE(store->shard_version(store->ShardOf(HashKey("k"))), 6u);
}

TEST(StoreReceiveTest, EntriesOfAWrongShardAreWalkedOverNotIndexed) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = *store->AllocateReceiveSegment();
  const uint64_t ss = store->segments().segment_size();
  const uint16_t right = static_cast<uint16_t>(store->ShardOf(HashKey("stray")));
  const uint16_t wrong = static_cast<uint16_t>((right + 1) % 4);
  std::vector<std::vector<std::byte>> landed = {
      Encoded(log::EntryType::kPut, wrong, 50, "stray", "x"),
      Encoded(log::EntryType::kDel, wrong, 51, "stray", std::string(8, '\0')),
      // Blocks that hold no key: walked over.
      Encoded(log::EntryType::kCommitVersion, right, 40, "", std::string(8, '\x01')),
      Encoded(log::EntryType::kChecksum, 0, 1, "", std::string(8, '\x02')),
      PutEntry(*store, "good", "g", 3),
  };
  uint64_t off = 0;
  for (auto& bytes : landed) {
    Land(region.get(), *store, seg, off, bytes);
    off += bytes.size();
  }
  auto r = store->DigestReceived(seg, 0, ss);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, off);
  EXPECT_TRUE(store->Get("stray").status().Is(Code::kNotFound));
  EXPECT_EQ(*store->Get("good"), "g");
  EXPECT_EQ(store->stats().keys, 1u);
  // The stray entry's blocks are not counted as live data.
  EXPECT_EQ(store->live_bytes(seg), static_cast<int64_t>(landed.back().size()));

  // A later right-shard entry of the key is indexed normally, at its own version.
  auto ok = PutEntry(*store, "stray", "right", 2);
  Land(region.get(), *store, seg, off, ok);
  off += ok.size();
  EXPECT_EQ(*store->DigestReceived(seg, *r, ss), off);
  EXPECT_EQ(*store->Get("stray"), "right");

  // Recovery, too, walks over them.
  store = Reopen(store, region.get());
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->Get("stray"), "right");
  EXPECT_EQ(*store->Get("good"), "g");
}

// A block naming a shard this store does not have (a peer's bug) is walked
// over by digest, and the cleaner must cope with it too. Runs in a child
// process: a store that indexes its shard table with the block's shard
// crashes there, which must fail only this test.
std::string CleanSegmentWithAnUnknownShardBlock() {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = *store->AllocateReceiveSegment();
  const uint64_t ss = store->segments().segment_size();
  auto alien = Encoded(log::EntryType::kPut, 77, 9, "alien", "from shard 77");
  auto good = PutEntry(*store, "good", "g", 3);
  Land(region.get(), *store, seg, 0, alien);
  Land(region.get(), *store, seg, alien.size(), good);
  auto r = store->DigestReceived(seg, 0, ss);
  if (!r.ok() || *r != alien.size() + good.size()) return "digest did not walk over the block";
  if (!store->Get("alien").status().Is(Code::kNotFound)) return "alien indexed";
  if (*store->Get("good") != "g") return "good missing";
  if (!store->SealReceiveSegment(seg).ok()) return "seal failed";
  if (!store->Put(0, "good", "overwritten").ok()) return "put failed";
  auto cleaned = store->CleanStep();
  if (!cleaned.ok()) return "CleanStep: " + cleaned.status().ToString();
  if (!*cleaned) return "nothing cleaned";
  if (store->segments().meta(seg).state != log::SegmentState::kFree) return "segment not freed";
  if (*store->Get("good") != "overwritten") return "good lost";
  if (!store->Get("alien").status().Is(Code::kNotFound)) return "alien appeared";
  return "";
}

TEST(StoreReceiveTest, BlockOfAnUnknownShardIsWalkedOverAndCleaned) {
  EXPECT_EXIT(
      {
        const std::string err = CleanSegmentWithAnUnknownShardBlock();
        if (!err.empty()) std::fprintf(stderr, "%s\n", err.c_str());
        std::_Exit(err.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(StoreReceiveTest, MultiBlockEntryPlacedOutOfOrderIsIndexedOnceComplete) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = *store->AllocateReceiveSegment();
  const uint32_t seg2 = *store->AllocateReceiveSegment();
  const uint64_t ss = store->segments().segment_size();
  Random rng(33);
  const std::string value = Value(rng, 1000);
  const log::EntryMeta meta{log::EntryType::kPut, static_cast<uint16_t>(store->ShardOf(HashKey("big"))),
                            21};
  auto layout = log::PlanEntry(3, value.size(), 256);
  ASSERT_TRUE(layout.ok());
  ASSERT_GE(layout->cnt, 4);
  std::vector<std::vector<std::byte>> blocks(layout->cnt);
  uint64_t total = 0;
  for (uint16_t i = 0; i < layout->cnt; ++i) {
    blocks[i].resize(layout->BlockBytes(i, 3 + value.size()));
    log::EncodeBlock(meta, "big", value, *layout, i, blocks[i].data());
    total += blocks[i].size();
  }
  auto mid = PutEntry(*store, "mid", "between", 4);
  // seg:  [block 1][mid][block 0][block 3 .. n-1];  seg2: [block 2]
  uint64_t off = 0;
  Land(region.get(), *store, seg, off, blocks[1]);
  off += blocks[1].size();
  Land(region.get(), *store, seg, off, mid);
  off += mid.size();
  auto r = store->DigestReceived(seg, 0, ss);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, off);
  EXPECT_EQ(*store->Get("mid"), "between");
  EXPECT_TRUE(store->Get("big").status().Is(Code::kNotFound));

  Land(region.get(), *store, seg, off, blocks[0]);
  off += blocks[0].size();
  for (uint16_t i = 3; i < layout->cnt; ++i) {
    Land(region.get(), *store, seg, off, blocks[i]);
    off += blocks[i].size();
  }
  EXPECT_EQ(*store->DigestReceived(seg, *r, ss), off);
  EXPECT_TRUE(store->Get("big").status().Is(Code::kNotFound)) << "indexed with block 2 missing";

  Land(region.get(), *store, seg2, 0, blocks[2]);
  EXPECT_EQ(*store->DigestReceived(seg2, 0, ss), blocks[2].size());
  log::EntryMeta m;
  auto got = store->Get("big", &m);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, value);
  EXPECT_EQ(m.version, 21u);
  EXPECT_EQ(store->live_bytes(seg) + store->live_bytes(seg2), static_cast<int64_t>(total + mid.size()));

  // Recovery reassembles it from both segments.
  store = Reopen(store, region.get());
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->Get("big"), value);
  EXPECT_EQ(*store->Get("mid"), "between");
  EXPECT_EQ(store->recovery_stats().incomplete_entries, 0u);
  EXPECT_GE(store->shard_version(meta.shard), 21u);

  // The cleaner moves it out of both (now sealed) segments intact.
  EXPECT_EQ(store->segments().meta(seg).state, log::SegmentState::kCommitted);
  EXPECT_EQ(store->segments().meta(seg2).state, log::SegmentState::kCommitted);
  ASSERT_TRUE(store->Put(0, "mid", "local").ok());
  for (int i = 0; i < 2; ++i) {
    auto c = store->CleanStep();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_TRUE(*c);
  }
  EXPECT_EQ(store->segments().meta(seg).state, log::SegmentState::kFree);
  EXPECT_EQ(store->segments().meta(seg2).state, log::SegmentState::kFree);
  EXPECT_EQ(*store->Get("big"), value);
  EXPECT_EQ(*store->Get("mid"), "local");
  store = Reopen(store, region.get());
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->Get("big"), value);
  EXPECT_EQ(*store->Get("mid"), "local");
}

// A multi-block entry can span receive segments that are digested apart
// (Rowan's shared log: a Send split across the end of one posted buffer
// and the start of the next). Until its last block is digested its blocks
// are no entry's: the cleaner must not free the segment holding the first
// ones, or the completed entry would point into reused space.
TEST(StoreReceiveTest, ASegmentHoldingPartOfAnIncompleteEntryIsNotCleanedUnderIt) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = *store->AllocateReceiveSegment();
  const uint32_t seg2 = *store->AllocateReceiveSegment();
  const uint64_t ss = store->segments().segment_size();
  Random rng(35);
  const std::string value = Value(rng, 1000);
  const log::EntryMeta meta{log::EntryType::kPut, static_cast<uint16_t>(store->ShardOf(HashKey("big"))), 9};
  auto layout = log::PlanEntry(3, value.size(), 256);
  ASSERT_TRUE(layout.ok());
  ASSERT_GE(layout->cnt, 3);
  std::vector<std::vector<std::byte>> blocks(layout->cnt);
  for (uint16_t i = 0; i < layout->cnt; ++i) {
    blocks[i].resize(layout->BlockBytes(i, 3 + value.size()));
    log::EncodeBlock(meta, "big", value, *layout, i, blocks[i].data());
  }
  // seg: [dead entry][block 0][block 1]; seg2: [block 2 .. n-1]
  auto dead = PutEntry(*store, "dead", Value(rng, 100), 1);
  uint64_t off = 0;
  Land(region.get(), *store, seg, off, dead);
  off += dead.size();
  for (uint16_t i = 0; i < 2; ++i) {
    Land(region.get(), *store, seg, off, blocks[i]);
    off += blocks[i].size();
  }
  uint64_t off2 = 0;
  for (uint16_t i = 2; i < layout->cnt; ++i) {
    Land(region.get(), *store, seg2, off2, blocks[i]);
    off2 += blocks[i].size();
  }
  ASSERT_TRUE(store->DigestReceived(seg, 0, ss).ok());
  ASSERT_TRUE(store->SealReceiveSegment(seg).ok());
  ASSERT_TRUE(store->Put(0, "dead", "overwritten").ok());
  EXPECT_EQ(store->live_bytes(seg), 0);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(store->CleanStep().ok());
  EXPECT_NE(store->segments().meta(seg).state, log::SegmentState::kFree)
      << "freed under an entry whose other blocks are still to be digested";
  // Whatever reuses free space meanwhile must not be what the entry reads.
  for (int i = 0; i < 200 && store->stats().free_segments > 2; ++i) {
    ASSERT_TRUE(store->Put(1, "fill" + std::to_string(i), Value(rng, 2000)).ok());
  }
  ASSERT_TRUE(store->DigestReceived(seg2, 0, ss).ok());
  auto got = store->Get("big");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, value);
}

// A catch-up walks past a hole and completes an entry spanning two
// segments; the final walk of the first segment, resumed at the hole, meets
// that entry's blocks again. They must not start a new partial entry that
// never completes — it would pin the segment against the cleaner for good.
TEST(StoreReceiveTest, AWalkFromAHoleDoesNotPinAnEntryAlreadyIndexed) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = *store->AllocateReceiveSegment();
  const uint32_t seg2 = *store->AllocateReceiveSegment();
  const uint64_t ss = store->segments().segment_size();
  Random rng(36);
  const std::string value = Value(rng, 1000);
  const log::EntryMeta meta{log::EntryType::kPut, static_cast<uint16_t>(store->ShardOf(HashKey("big"))), 5};
  auto layout = log::PlanEntry(3, value.size(), 256);
  ASSERT_TRUE(layout.ok());
  std::vector<std::vector<std::byte>> blocks(layout->cnt);
  for (uint16_t i = 0; i < layout->cnt; ++i) {
    blocks[i].resize(layout->BlockBytes(i, 3 + value.size()));
    log::EncodeBlock(meta, "big", value, *layout, i, blocks[i].data());
  }
  // seg: [torn entry][block 0][block 1]; seg2: [block 2 .. n-1]
  auto torn = PutEntry(*store, "torn", Value(rng, 300), 1);
  std::vector<std::byte> hole = torn;
  std::fill(hole.end() - 64, hole.end(), std::byte{0});
  Land(region.get(), *store, seg, 0, hole);
  uint64_t off = torn.size();
  for (uint16_t i = 0; i < 2; ++i) {
    Land(region.get(), *store, seg, off, blocks[i]);
    off += blocks[i].size();
  }
  uint64_t off2 = 0;
  for (uint16_t i = 2; i < layout->cnt; ++i) {
    Land(region.get(), *store, seg2, off2, blocks[i]);
    off2 += blocks[i].size();
  }
  using Walk = Store::ReceiveWalk;
  auto cursor = store->DigestReceived(seg, 0, ss, Walk::kPastHoles);  // a catch-up
  ASSERT_TRUE(cursor.ok());
  EXPECT_EQ(*cursor, 0u) << "the cursor stays at the hole";
  ASSERT_TRUE(store->DigestReceived(seg2, 0, ss, Walk::kPastHoles).ok());
  ASSERT_EQ(*store->Get("big"), value);
  Land(region.get(), *store, seg, 0, torn);  // the torn transfer completes
  ASSERT_TRUE(store->DigestReceived(seg, *cursor, ss, Walk::kFinal).ok());
  ASSERT_TRUE(store->SealReceiveSegment(seg).ok());
  // Everything in seg dies; the cleaner must be free to take it.
  ASSERT_TRUE(store->Put(0, "torn", "local").ok());
  ASSERT_TRUE(store->Put(0, "big", "local").ok());
  EXPECT_EQ(store->live_bytes(seg), 0);
  for (int i = 0; i < 4 && store->segments().meta(seg).state != log::SegmentState::kFree; ++i) {
    ASSERT_TRUE(store->CleanStep().ok());
  }
  EXPECT_EQ(store->segments().meta(seg).state, log::SegmentState::kFree) << "pinned by a partial that never completes";
  EXPECT_EQ(*store->Get("big"), "local");
}

TEST(StoreReceiveTest, RecoveryWalksPastAHoleInAReceiveSegment) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = *store->AllocateReceiveSegment();
  // Entry A (128 bytes) would go at offset 0 but never persisted: zeros.
  auto a = PutEntry(*store, "a", std::string(60, 'a'), 4);
  ASSERT_EQ(a.size(), 128u);
  auto b = PutEntry(*store, "b", "bee", 5);
  Land(region.get(), *store, seg, 128, b);
  store = Reopen(store, region.get());
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->Get("b"), "bee") << "recovery stopped at the hole";
  EXPECT_TRUE(store->Get("a").status().Is(Code::kNotFound));
  EXPECT_GE(store->shard_version(store->ShardOf(HashKey("b"))), 5u);
  EXPECT_EQ(store->segments().meta(seg).state, log::SegmentState::kCommitted);  // sealed by recovery
  EXPECT_EQ(store->recovery_stats().entries, 1u);
}

// The same under the PM crash model: A was written but not persisted, B
// (landed later, at a higher offset) was. Whatever the crash does to A's
// lines, B survives and A is either whole or absent.
TEST(StoreReceiveTest, RecoveryAfterACrashThatLostAnEarlierTransfer) {
  int lost = 0;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    pm::RegionOptions ro;
    ro.crash_model = true;
    auto region = std::move(pm::PmRegion::Anonymous(1 << 20, ro)).value();
    auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
    const uint32_t seg = *store->AllocateReceiveSegment();
    Random rng(seed);
    const std::string va = Value(rng, 400);
    auto a = PutEntry(*store, "a", va, 4);
    auto b = PutEntry(*store, "b", "bee", 5);
    std::memcpy(store->segments().SegmentBase(seg), a.data(), a.size());  // not persisted
    Land(region.get(), *store, seg, a.size(), b);
    store.reset();
    region->SimulateCrash(seed);
    store = std::move(Store::Open(region.get(), SmallOptions())).value();
    EXPECT_EQ(*store->Get("b"), "bee");
    auto got = store->Get("a");
    if (got.ok()) {
      EXPECT_EQ(*got, va);
    } else {
      EXPECT_TRUE(got.status().Is(Code::kNotFound)) << got.status().ToString();
    }
    EXPECT_EQ(store->stats().keys, got.ok() ? 2u : 1u);
    lost += !got.ok();
  }
  EXPECT_GT(lost, 0) << "the crash model never lost A: the test checks nothing";
}

// Recovery walks a receive segment past blocks that do not decode; it must
// not take the payload of a torn entry for blocks of its own. A transfer is
// cut short at its end (DMA places a message in address order), so the torn
// entry's header is intact and the walk steps over the whole block.
// (A message whose first line alone was lost cannot be told from a hole:
// docs/architecture.md "Receive segments are walked past holes".)
TEST(StoreReceiveTest, RecoveryDoesNotIndexBytesInsideATornEntry) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint32_t seg = *store->AllocateReceiveSegment();
  // A value that holds the bytes of a valid block ("ghost"), placed so that
  // they sit at a 64 B-aligned offset of the segment: block header (32 B) +
  // key "a" (1 B) + 31 filler bytes, then the embedded block.
  auto ghost = PutEntry(*store, "ghost", "never written", 9);
  std::string value(31, 'f');
  value.append(reinterpret_cast<const char*>(ghost.data()), ghost.size());
  value.append(100, 'g');
  auto a = PutEntry(*store, "a", value, 4);
  ASSERT_EQ(std::memcmp(a.data() + 64, ghost.data(), ghost.size()), 0);
  auto b = PutEntry(*store, "b", "bee", 5);
  // A's last line did not persist before the crash; the rest, ghost included, did.
  std::vector<std::byte> torn = a;
  std::fill(torn.end() - 64, torn.end(), std::byte{0});
  Land(region.get(), *store, seg, 0, torn);
  Land(region.get(), *store, seg, a.size(), b);
  store = Reopen(store, region.get());
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->Get("b"), "bee");
  EXPECT_TRUE(store->Get("a").status().Is(Code::kNotFound));
  EXPECT_TRUE(store->Get("ghost").status().Is(Code::kNotFound))
      << "recovery indexed a key nobody wrote (bytes inside A's value)";
}

// A worker's t-log still ends at its first invalid block (no stride walk).
TEST(StoreReceiveTest, WorkerLogRecoveryStillStopsAtTheFirstInvalidBlock) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  ASSERT_TRUE(store->Put(0, "a", "1").ok());
  ASSERT_TRUE(store->Put(0, "b", "2").ok());
  ASSERT_TRUE(store->Put(0, "c", "3").ok());
  const uint32_t wseg = FindSegment(*store, log::SegmentOwner::kWorker, log::SegmentState::kUsing);
  ASSERT_NE(wseg, UINT32_MAX);
  std::byte* base = store->segments().SegmentBase(wseg);
  // Each entry is one 64 B block: a at 0, b at 64, c at 128. Hide b.
  ASSERT_TRUE(log::DecodeBlock({base + 128, 64}, store->options().limits).status.ok());
  std::memset(base + 64, 0, 64);
  region->Persist(base + 64, 64);
  store = Reopen(store, region.get());
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->Get("a"), "1");
  EXPECT_TRUE(store->Get("b").status().Is(Code::kNotFound));
  EXPECT_TRUE(store->Get("c").status().Is(Code::kNotFound)) << "t-log scan went past its tail";
}

TEST(StoreReceiveTest, SealedSegmentIsCleanedAndLatestValuesSurvive) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint64_t ss = store->segments().segment_size();
  Random rng(34);

  // 1. Every received key overwritten: the segment is all dead.
  const uint32_t seg = *store->AllocateReceiveSegment();
  uint64_t off = 0;
  for (int i = 0; i < 10; ++i) {
    auto e = PutEntry(*store, "r" + std::to_string(i), Value(rng, 100), 1 + i);
    Land(region.get(), *store, seg, off, e);
    off += e.size();
  }
  ASSERT_EQ(*store->DigestReceived(seg, 0, ss), off);
  ASSERT_TRUE(store->SealReceiveSegment(seg).ok());
  EXPECT_EQ(store->segments().meta(seg).state, log::SegmentState::kCommitted);
  EXPECT_FALSE(store->SealReceiveSegment(seg).ok()) << "sealed twice";
  std::map<std::string, std::string> model;
  for (int i = 0; i < 10; ++i) {
    const std::string k = "r" + std::to_string(i);
    model[k] = "new" + std::to_string(i);
    ASSERT_TRUE(store->Put(0, k, model[k]).ok());
  }
  EXPECT_EQ(store->live_bytes(seg), 0);
  const uint32_t free_before = store->stats().free_segments;
  auto c = store->CleanStep();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(*c);
  EXPECT_EQ(store->stats().free_segments, free_before + 1);
  EXPECT_EQ(store->segments().meta(seg).state, log::SegmentState::kFree);
  for (auto& [k, v] : model) EXPECT_EQ(*store->Get(k), v) << k;

  // 2. Half the keys overwritten, plus a received tombstone of a local key:
  //    the live half is relocated and the delete stays in force.
  ASSERT_TRUE(store->Put(1, "d", "local").ok());
  log::EntryMeta dm;
  ASSERT_TRUE(store->Get("d", &dm).ok());
  const uint32_t seg2 = *store->AllocateReceiveSegment();
  off = 0;
  for (int i = 0; i < 10; ++i) {
    const std::string k = "q" + std::to_string(i);
    model[k] = Value(rng, 200);
    auto e = PutEntry(*store, k, model[k], 100 + i);
    Land(region.get(), *store, seg2, off, e);
    off += e.size();
  }
  auto del = DelEntry(*store, "d", dm.version + 10);
  Land(region.get(), *store, seg2, off, del);
  off += del.size();
  ASSERT_EQ(*store->DigestReceived(seg2, 0, ss), off);
  EXPECT_TRUE(store->Get("d").status().Is(Code::kNotFound));
  ASSERT_TRUE(store->SealReceiveSegment(seg2).ok());
  for (int i = 0; i < 10; i += 2) {
    const std::string k = "q" + std::to_string(i);
    model[k] = "local" + std::to_string(i);
    ASSERT_TRUE(store->Put(0, k, model[k]).ok());
  }
  const uint64_t cleaned_before = store->stats().segments_cleaned;
  c = store->CleanStep();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(*c);
  EXPECT_EQ(store->stats().segments_cleaned, cleaned_before + 1);
  EXPECT_EQ(store->segments().meta(seg2).state, log::SegmentState::kFree);
  EXPECT_GE(store->stats().entries_relocated, 5u);
  auto check = [&](Store& s) {
    for (auto& [k, v] : model) {
      auto got = s.Get(k);
      ASSERT_TRUE(got.ok()) << k << ": " << got.status().ToString();
      EXPECT_EQ(*got, v) << k;
    }
    EXPECT_TRUE(s.Get("d").status().Is(Code::kNotFound)) << "a received delete was lost";
  };
  check(*store);
  store = Reopen(store, region.get());
  ASSERT_TRUE(store);
  check(*store);
}

TEST(StoreReceiveTest, BadInputIsRefusedAndChangesNothing) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  const uint64_t ss = store->segments().segment_size();
  ASSERT_TRUE(store->Put(0, "w", "1").ok());
  const uint32_t wseg = FindSegment(*store, log::SegmentOwner::kWorker, log::SegmentState::kUsing);
  ASSERT_NE(wseg, UINT32_MAX);
  const uint32_t seg = *store->AllocateReceiveSegment();
  auto e = PutEntry(*store, "r", "v", 7);
  Land(region.get(), *store, seg, 0, e);
  const uint32_t n = store->segments().num_segments();
  const uint32_t a_free = FindSegment(*store, log::SegmentOwner::kNone, log::SegmentState::kFree);
  ASSERT_NE(a_free, UINT32_MAX);
  const StoreStats before = store->stats();

  EXPECT_TRUE(store->DigestReceived(wseg, 0, ss).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(store->DigestReceived(a_free, 0, ss).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(store->DigestReceived(n, 0, ss).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(store->DigestReceived(UINT32_MAX, 0, ss).status().Is(Code::kInvalidArgument));
  for (uint64_t from : {uint64_t{1}, uint64_t{8}, uint64_t{32}, uint64_t{63}, uint64_t{65}}) {
    EXPECT_TRUE(store->DigestReceived(seg, from, ss).status().Is(Code::kInvalidArgument)) << from;
  }
  EXPECT_TRUE(store->DigestReceived(seg, 128, 64).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(store->DigestReceived(seg, ss + 64, UINT64_MAX).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(store->SealReceiveSegment(wseg).Is(Code::kInvalidArgument));
  EXPECT_TRUE(store->SealReceiveSegment(n).Is(Code::kInvalidArgument));
  EXPECT_TRUE(store->ReleaseReceiveSegment(wseg).Is(Code::kInvalidArgument));
  EXPECT_TRUE(store->ReleaseReceiveSegment(n).Is(Code::kInvalidArgument));

  const StoreStats after = store->stats();
  EXPECT_EQ(store->received_bytes(), 0u);
  EXPECT_EQ(after.keys, before.keys);
  EXPECT_EQ(after.appended_bytes, before.appended_bytes);
  EXPECT_EQ(after.free_segments, before.free_segments);
  EXPECT_TRUE(store->Get("r").status().Is(Code::kNotFound));
  EXPECT_EQ(*store->Get("w"), "1");
  EXPECT_EQ(store->segments().meta(wseg).state, log::SegmentState::kUsing);
  EXPECT_EQ(store->segments().meta(wseg).owner, log::SegmentOwner::kWorker);
  EXPECT_LT(store->shard_version(store->ShardOf(HashKey("r"))), 7u);
  ASSERT_TRUE(store->Put(0, "w", "2").ok());  // the t-log is intact
  EXPECT_EQ(*store->Get("w"), "2");

  // The segment still digests normally; an unused one goes back to the free list.
  EXPECT_EQ(*store->DigestReceived(seg, 0, ss), e.size());
  EXPECT_EQ(*store->Get("r"), "v");
  const uint32_t unused = *store->AllocateReceiveSegment();
  const uint32_t free_now = store->stats().free_segments;
  ASSERT_TRUE(store->ReleaseReceiveSegment(unused).ok());
  EXPECT_EQ(store->stats().free_segments, free_now + 1);
  EXPECT_EQ(store->segments().meta(unused).state, log::SegmentState::kFree);
  EXPECT_TRUE(store->DigestReceived(unused, 0, ss).status().Is(Code::kInvalidArgument));
}

TEST(StoreReceiveTest, AllocationLeavesTheCleanersReserve) {
  auto region = MakeRegion(1 << 20);
  StoreOptions o = SmallOptions();
  auto store = std::move(Store::Open(region.get(), o)).value();
  std::vector<uint32_t> got;
  for (;;) {
    auto s = store->AllocateReceiveSegment();
    if (!s.ok()) {
      EXPECT_TRUE(s.status().Is(Code::kNoSpace)) << s.status().ToString();
      break;
    }
    got.push_back(*s);
    ASSERT_LE(got.size(), store->segments().num_segments());
  }
  EXPECT_EQ(store->stats().free_segments, o.cleaner_reserve);
  for (uint32_t s : got) ASSERT_TRUE(store->ReleaseReceiveSegment(s).ok());
  EXPECT_EQ(store->stats().free_segments, store->segments().num_segments());
}

}  // namespace
}  // namespace slip::store
