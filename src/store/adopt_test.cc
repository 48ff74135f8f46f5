// Direct client writes (the erda design): entries a client placed in a
// receive segment, adopted as prepared writes (Store::AdoptReceived), places
// given up (KillReceived, AbandonReceived), the index-change hook that keeps
// erda's bucket table in step, and freed segments held back from reuse.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/hash.h"
#include "store/store.h"
#include "store/store_test_util.h"

namespace slip::store {
namespace {

using testing::MakeRegion;
using testing::SmallOptions;

struct Fixture {
  std::unique_ptr<pm::PmRegion> region = MakeRegion(4 << 20);
  std::unique_ptr<Store> store;
  explicit Fixture(StoreOptions o = SmallOptions()) { store = std::move(Store::Open(region.get(), o)).value(); }

  uint16_t ShardOf(std::string_view key) const { return static_cast<uint16_t>(store->ShardOf(HashKey(key))); }
  // What a client does: encodes the entry and writes it at `offset`.
  uint32_t Place(uint64_t offset, std::string_view key, std::string_view value, uint64_t version) {
    auto layout = log::PlanEntry(key.size(), value.size(), 8192);
    auto bytes = log::EncodeEntry({log::EntryType::kPut, ShardOf(key), version}, key, value, *layout);
    std::memcpy(region->at(offset), bytes.data(), bytes.size());
    return static_cast<uint32_t>(bytes.size());
  }
};

TEST(StoreAdoptTest, AdoptedEntryIsVisibleOnlyOnceCommitted) {
  Fixture f;
  const uint32_t seg = *f.store->AllocateReceiveSegment();
  const uint64_t at = f.store->segments().SegmentOffset(seg) + 128;
  auto v = f.store->ReserveVersion(f.ShardOf("k"));
  ASSERT_TRUE(v.ok());
  f.Place(at, "k", "client value", *v);
  std::string_view value;
  auto w = f.store->AdoptReceived(at, {log::EntryType::kPut, f.ShardOf("k"), *v}, "k", &value);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(value, "client value");
  EXPECT_TRUE(f.store->Get("k").status().Is(Code::kNotFound)) << "prepared, not committed";
  f.store->Commit(*w);
  EXPECT_EQ(*f.store->Get("k"), "client value");
  EXPECT_EQ(f.store->Locate("k"), at);
  EXPECT_EQ(f.store->live_bytes(seg), 64);
}

TEST(StoreAdoptTest, RefusesWhatIsNotTheReservedEntryAndChangesNothing) {
  Fixture f;
  const uint32_t seg = *f.store->AllocateReceiveSegment();
  const uint64_t at = f.store->segments().SegmentOffset(seg);
  const uint16_t shard = f.ShardOf("k");
  const uint64_t v = *f.store->ReserveVersion(shard);
  // Nothing landed yet.
  EXPECT_TRUE(f.store->AdoptReceived(at, {log::EntryType::kPut, shard, v}, "k").status().Is(Code::kCorruption));
  const uint32_t bytes = f.Place(at, "k", "value", v);
  // Another version, another key, a DEL, a torn byte: refused.
  EXPECT_FALSE(f.store->AdoptReceived(at, {log::EntryType::kPut, shard, v + 1}, "k").ok());
  EXPECT_FALSE(f.store->AdoptReceived(at, {log::EntryType::kPut, shard, v}, "x").ok());
  EXPECT_FALSE(f.store->AdoptReceived(at, {log::EntryType::kDel, shard, v}, "k").ok());
  f.region->at(at)[bytes - 40] ^= std::byte{1};
  EXPECT_TRUE(f.store->AdoptReceived(at, {log::EntryType::kPut, shard, v}, "k").status().Is(Code::kCorruption));
  // Outside an open receive segment: never.
  const uint64_t tlog = f.store->segments().SegmentOffset(seg == 0 ? 1 : 0);
  EXPECT_TRUE(f.store->AdoptReceived(tlog, {log::EntryType::kPut, shard, v}, "k").status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(f.store->AdoptReceived(at + 8, {log::EntryType::kPut, shard, v}, "k").status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(f.store->Get("k").status().Is(Code::kNotFound));
  EXPECT_EQ(f.store->live_bytes(seg), 0);
}

TEST(StoreAdoptTest, KilledPlaceNeverResurfacesAtRecovery) {
  Fixture f;
  const uint32_t seg = *f.store->AllocateReceiveSegment();
  const uint64_t at = f.store->segments().SegmentOffset(seg);
  const uint64_t v = *f.store->ReserveVersion(f.ShardOf("k"));
  const uint32_t bytes = f.Place(at, "k", "never committed", v);
  f.region->Persist(f.region->at(at), bytes);
  f.store->AbandonReceived(at, "k");
  ASSERT_TRUE(f.store->KillReceived(at, bytes).ok());
  for (uint32_t i = 0; i < bytes; ++i) ASSERT_EQ(f.region->at(at)[i], std::byte{0}) << i;
  f.store.reset();
  f.store = std::move(Store::Open(f.region.get(), SmallOptions())).value();
  EXPECT_TRUE(f.store->Get("k").status().Is(Code::kNotFound));
}

TEST(StoreAdoptTest, AnUnkilledEntryIsRecoveredAsAnyWriteOfUnknownOutcome) {
  // A crash between the client's write and COMMIT: the entry is in PM and a
  // recovery may show it (the client was never answered OK).
  Fixture f;
  const uint32_t seg = *f.store->AllocateReceiveSegment();
  const uint64_t at = f.store->segments().SegmentOffset(seg) + 64;
  const uint64_t v = *f.store->ReserveVersion(f.ShardOf("k"));
  const uint32_t bytes = f.Place(at, "k", "in flight", v);
  f.region->Persist(f.region->at(at), bytes);
  f.store.reset();
  f.store = std::move(Store::Open(f.region.get(), SmallOptions())).value();
  EXPECT_EQ(*f.store->Get("k"), "in flight");
}

TEST(StoreAdoptTest, AStagedEntryIsCopiedUnderItsReservedVersion) {
  // The copying baselines (erda-raw, erda-redo): an entry staged in a
  // receive segment is checked, written again into a t-log with the version
  // reserved for it, and the staged copy is then given up.
  Fixture f;
  const uint32_t seg = *f.store->AllocateReceiveSegment();
  const uint64_t at = f.store->segments().SegmentOffset(seg) + 192;
  const uint16_t shard = f.ShardOf("k");
  const uint64_t v = *f.store->ReserveVersion(shard);
  const log::EntryMeta meta{log::EntryType::kPut, shard, v};
  // The node stages it itself (redo) — refused where it does not fit.
  EXPECT_TRUE(f.store->WriteReceived(at, 64, meta, "k", std::string(100, 'x')).Is(Code::kInvalidArgument));
  ASSERT_TRUE(f.store->WriteReceived(at, 128, meta, "k", "staged value").ok());
  auto staged = f.store->ReadReceived(at, meta, "k");
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  EXPECT_EQ(staged->value(), "staged value");
  EXPECT_EQ(f.store->live_bytes(seg), 0) << "reading a staged entry counts nothing";
  // A version nobody reserved, or a key of another shard: refused.
  EXPECT_TRUE(f.store->PrepareVersioned(0, {log::EntryType::kPut, shard, v + 1}, "k", "x").status().Is(Code::kInvalidArgument));
  std::string other = "a";
  while (f.ShardOf(other) == shard) other += "a";
  EXPECT_TRUE(f.store->PrepareVersioned(0, meta, other, "x").status().Is(Code::kInvalidArgument));
  auto w = f.store->PrepareVersioned(0, meta, "k", staged->value());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->meta().version, v);
  f.store->Commit(*w);
  EXPECT_NE(f.store->Locate("k"), at) << "the copy, not the staged entry, is indexed";
  f.store->AbandonReceived(at, "k");
  ASSERT_TRUE(f.store->KillReceived(at, 128).ok());
  f.store.reset();
  f.store = std::move(Store::Open(f.region.get(), SmallOptions())).value();
  log::EntryMeta got;
  EXPECT_EQ(*f.store->Get("k", &got), "staged value");
  EXPECT_EQ(got.version, v);
}

TEST(StoreAdoptTest, IndexChangesReachTheHookWithTheNewState) {
  StoreOptions o = SmallOptions();
  std::map<std::string, std::optional<uint64_t>> seen;
  Store* s = nullptr;
  o.on_index_change = [&](uint64_t hash, std::string_view key) {
    EXPECT_EQ(hash, HashKey(key));
    seen[std::string(key)] = s->Locate(key);
  };
  Fixture f(o);
  s = f.store.get();
  ASSERT_TRUE(f.store->Put(0, "a", "1").ok());
  EXPECT_EQ(seen["a"], f.store->Locate("a"));
  ASSERT_TRUE(f.store->Put(0, "a", "2").ok());
  EXPECT_EQ(seen["a"], f.store->Locate("a"));
  ASSERT_TRUE(f.store->Delete(0, "a").ok());
  EXPECT_EQ(seen["a"], f.store->Locate("a")) << "the tombstone's place";
  // A backup's apply, and the cleaner moving and finally dropping the key.
  ASSERT_TRUE(f.store->Apply(0, {log::EntryType::kPut, f.ShardOf("b"), 7}, "b", "x").ok());
  EXPECT_EQ(seen["b"], f.store->Locate("b"));
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(f.store->Put(0, "filler" + std::to_string(i % 50), std::string(200, 'f')).ok());
  while (*f.store->CleanStep()) {
  }
  EXPECT_EQ(seen["b"], f.store->Locate("b")) << "moved by the cleaner";
  EXPECT_EQ(seen["a"], f.store->Locate("a"));
}

TEST(StoreAdoptTest, HeldSegmentsAreReusedOnlyAfterTwoReleases) {
  StoreOptions o = SmallOptions();
  o.hold_freed_segments = true;
  Fixture f(o);
  // Fill and overwrite until the cleaner frees segments.
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(f.store->Put(0, "k" + std::to_string(i % 20), std::string(300, 'v')).ok());
  const uint32_t free_before = f.store->stats().free_segments;
  uint32_t cleaned = 0;
  while (*f.store->CleanStep()) ++cleaned;
  ASSERT_GT(cleaned, 0u);
  EXPECT_EQ(f.store->stats().free_segments, free_before) << "freed, but held back";
  f.store->ReleaseHeldSegments();
  EXPECT_EQ(f.store->stats().free_segments, free_before) << "one release: maybe still read";
  f.store->ReleaseHeldSegments();
  EXPECT_EQ(f.store->stats().free_segments, free_before + cleaned);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(f.store->Get("k" + std::to_string(i))->size(), 300u);
}

}  // namespace
}  // namespace slip::store
