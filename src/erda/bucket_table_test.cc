#include "erda/bucket_table.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace slip::erda {
namespace {

std::unique_ptr<pm::PmRegion> Region(size_t bytes) {
  pm::RegionOptions o;
  o.crash_model = true;
  return std::move(pm::PmRegion::Anonymous(bytes, o)).value();
}

// Hashes that share one home bucket: the bucket comes from bits 20 and up.
uint64_t HashAtHome(const BucketTable& t, uint32_t bucket, uint64_t low) {
  const uint64_t h = (uint64_t{bucket} << 20) | (low & 0xfffff);
  EXPECT_EQ(t.HomeBucket(h), bucket);
  return h;
}

TEST(BucketTableTest, ClaimFindPublishAndReadTheWindowAsAClientWould) {
  auto region = Region(1 << 20);
  BucketTable t(region.get(), 4096, 64);
  const uint64_t h = HashAtHome(t, 10, 0x1234);
  EXPECT_TRUE(t.Find(h).empty());
  auto slot = t.Claim(h);
  ASSERT_TRUE(slot.ok());
  EXPECT_EQ(t.Find(h), std::vector<Slot>{*slot});
  EXPECT_FALSE(t.Load(*slot).valid()) << "claimed but not published";

  // Not published: a client sees no entry for the key.
  auto window = [&](uint64_t hash) {
    return std::span<const std::byte>(region->at(t.WindowOffset(hash)), kWindowBytes);
  };
  EXPECT_TRUE(BucketTable::WordsIn(window(h), h).empty());

  const uint64_t before = region->persist_calls();
  t.Store(*slot, IndexWord::Create(42));
  EXPECT_EQ(region->persist_calls(), before + 1);
  EXPECT_EQ(t.Load(*slot).new_offset(), 42u);
  auto words = BucketTable::WordsIn(window(h), h);
  ASSERT_EQ(words.size(), 1u);
  EXPECT_EQ(words[0].new_offset(), 42u);
  EXPECT_TRUE(BucketTable::WordsIn(window(h), h + 1).empty()) << "another key's fingerprint";

  // The publication survives a power loss once Store returned.
  region->SimulateCrash(9);
  EXPECT_EQ(t.Load(*slot).new_offset(), 42u);
  EXPECT_EQ(t.fingerprint(*slot), Fingerprint(h));

  t.Release(*slot);
  EXPECT_TRUE(t.Find(h).empty());
  EXPECT_TRUE(BucketTable::WordsIn(window(h), h).empty());
}

TEST(BucketTableTest, AWindowHoldsEightEntriesAndNeverWraps) {
  auto region = Region(1 << 20);
  BucketTable t(region.get(), 0, 16);
  for (uint64_t h : {uint64_t{0}, ~uint64_t{0}, uint64_t{15} << 20, uint64_t{14} << 20}) {
    EXPECT_LE(t.WindowOffset(h) + kWindowBytes, BucketTable::Bytes(16)) << std::hex << h;
  }
  // Keys of one home bucket fill the window, then NoSpace; a neighbour's
  // keys share the overlapping bucket.
  std::set<Slot> slots;
  for (uint64_t i = 0; i < kProbeBuckets * kEntriesPerBucket; ++i) {
    auto s = t.Claim(HashAtHome(t, 3, i + 1));
    ASSERT_TRUE(s.ok()) << i;
    slots.insert(*s);
  }
  EXPECT_EQ(slots.size(), kProbeBuckets * kEntriesPerBucket);
  EXPECT_TRUE(t.Claim(HashAtHome(t, 3, 999)).status().Is(Code::kNoSpace));
  // A neighbour's window overlaps: home 4 finds bucket 4 full, takes 5.
  auto n = t.Claim(HashAtHome(t, 4, 999));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n / kEntriesPerBucket, 5u);
}

TEST(BucketTableTest, TwoKeysWithOneFingerprintGetTwoEntries) {
  auto region = Region(1 << 20);
  BucketTable t(region.get(), 0, 16);
  const uint64_t h = HashAtHome(t, 2, 77);
  auto a = t.Claim(h), b = t.Claim(h);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  t.Store(*a, IndexWord::Create(1));
  t.Store(*b, IndexWord::Create(2));
  EXPECT_EQ(t.Find(h).size(), 2u);
  auto words = BucketTable::WordsIn({region->at(t.WindowOffset(h)), kWindowBytes}, h);
  ASSERT_EQ(words.size(), 2u) << "the reader tries both and checks the key in the object";
}

TEST(BucketTableTest, ConcurrentClaimsInOneWindowNeverShareAnEntry) {
  auto region = pm::PmRegion::Anonymous(1 << 20, {});
  BucketTable t(region->get(), 0, 16);
  std::vector<std::thread> threads;
  std::vector<Result<Slot>> got(kProbeBuckets * kEntriesPerBucket + 2, Status::Aborted("not run"));
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = t.Claim((uint64_t{6} << 20) | (i + 1)); });
  }
  for (auto& th : threads) th.join();
  std::set<Slot> slots;
  size_t full = 0;
  for (auto& r : got) {
    if (r.ok()) {
      EXPECT_TRUE(slots.insert(*r).second) << "slot " << *r << " claimed twice";
    } else {
      EXPECT_TRUE(r.status().Is(Code::kNoSpace));
      ++full;
    }
  }
  EXPECT_EQ(slots.size(), kProbeBuckets * kEntriesPerBucket);
  EXPECT_EQ(full, 2u);
}

}  // namespace
}  // namespace slip::erda
