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

TEST(StoreTest, PutGetDeleteOverwrite) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  EXPECT_TRUE(store->Get("a").status().Is(Code::kNotFound));
  ASSERT_TRUE(store->Put(0, "a", "1").ok());
  ASSERT_TRUE(store->Put(1, "b", "2").ok());
  EXPECT_EQ(*store->Get("a"), "1");
  ASSERT_TRUE(store->Put(0, "a", "one").ok());
  EXPECT_EQ(*store->Get("a"), "one");
  ASSERT_TRUE(store->Delete(1, "a").ok());
  EXPECT_TRUE(store->Get("a").status().Is(Code::kNotFound));
  EXPECT_TRUE(store->Delete(1, "a").Is(Code::kNotFound));
  EXPECT_TRUE(store->Delete(1, "never").Is(Code::kNotFound));
  ASSERT_TRUE(store->Put(0, "a", "again").ok());
  EXPECT_EQ(*store->Get("a"), "again");
  ASSERT_TRUE(store->Put(0, "empty", "").ok());
  EXPECT_EQ(*store->Get("empty"), "");
}

TEST(StoreTest, BadInputIsRefusedAndChangesNothing) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  ASSERT_TRUE(store->Put(0, "k", "v").ok());
  auto before = store->stats().appended_bytes;
  EXPECT_TRUE(store->Put(0, std::string(1025, 'k'), "v").Is(Code::kTooLarge));
  EXPECT_TRUE(store->Put(0, "k", std::string((1 << 20) + 1, 'v')).Is(Code::kTooLarge));
  EXPECT_TRUE(store->Put(0, "", "v").Is(Code::kInvalidArgument));
  EXPECT_TRUE(store->Put(7, "k", "v").Is(Code::kInvalidArgument));
  EXPECT_TRUE(store->Get("").status().Is(Code::kInvalidArgument));
  EXPECT_EQ(store->stats().appended_bytes, before);
  EXPECT_EQ(*store->Get("k"), "v");
}

TEST(StoreTest, OptionsAreValidated) {
  auto region = MakeRegion(4 << 20);
  StoreOptions o = SmallOptions();
  o.max_block_bytes = 1000;
  EXPECT_TRUE(Store::Open(region.get(), o).status().Is(Code::kInvalidArgument));
  o = SmallOptions();
  o.limits.max_key = 64 << 10;  // cannot fit in an 8 KiB block
  EXPECT_TRUE(Store::Open(region.get(), o).status().Is(Code::kInvalidArgument));
}

TEST(StoreTest, LargeValuesSpanBlocksAndSegments) {
  auto region = MakeRegion(8 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  Random rng(5);
  std::string big = Value(rng, 300 << 10);  // ~37 blocks over ~5 segments
  ASSERT_TRUE(store->Put(0, "big", big).ok());
  ASSERT_TRUE(store->Put(0, "small", "x").ok());
  EXPECT_EQ(*store->Get("big"), big);
  // Cold start rebuilds the multi-block entry from its blocks.
  store.reset();
  store = std::move(Store::Open(region.get(), SmallOptions())).value();
  EXPECT_EQ(*store->Get("big"), big);
  EXPECT_EQ(*store->Get("small"), "x");
  EXPECT_EQ(store->recovery_stats().incomplete_entries, 0u);
}

TEST(StoreTest, ColdStartFromFileKeepsDataAndVersionsGrow) {
  auto dir = std::filesystem::temp_directory_path() / ("slip_store_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "pm").string();
  std::map<std::string, std::string> model;
  uint64_t versions_before = 0;
  {
    auto region = std::move(pm::PmRegion::OpenFile(path, 4 << 20, {})).value();
    auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
    Random rng(9);
    for (int i = 0; i < 2000; ++i) {
      std::string k = "key" + std::to_string(rng.Uniform(200));
      if (rng.Bernoulli(0.2) && model.count(k)) {
        ASSERT_TRUE(store->Delete(0, k).ok());
        model.erase(k);
      } else {
        std::string v = Value(rng, rng.Uniform(300));
        ASSERT_TRUE(store->Put(i % 2, k, v).ok());
        model[k] = v;
      }
    }
    for (uint32_t s = 0; s < 4; ++s) versions_before += store->shard_version(s);
  }
  auto region = std::move(pm::PmRegion::OpenFile(path, 0, {})).value();
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  for (int k = 0; k < 200; ++k) {
    std::string key = "key" + std::to_string(k);
    auto got = store->Get(key);
    if (model.count(key)) {
      ASSERT_TRUE(got.ok()) << key;
      EXPECT_EQ(*got, model[key]);
    } else {
      EXPECT_TRUE(got.status().Is(Code::kNotFound)) << key;
    }
  }
  uint64_t versions_after = 0;
  for (uint32_t s = 0; s < 4; ++s) versions_after += store->shard_version(s);
  EXPECT_EQ(versions_after, versions_before);  // next writes continue above every entry
  std::filesystem::remove_all(dir);
}

TEST(StoreTest, CleanerReclaimsSpaceWithoutLosingOrResurrecting) {
  auto region = MakeRegion(2 << 20);  // ~30 segments of 64 KiB
  StoreOptions o = SmallOptions();
  auto store = std::move(Store::Open(region.get(), o)).value();
  std::map<std::string, std::string> model;
  Random rng(21);
  // Far more bytes than the region holds: only cleaning makes this possible.
  for (int i = 0; i < 60000; ++i) {
    std::string k = "k" + std::to_string(rng.Uniform(100));
    Status s;
    if (rng.Bernoulli(0.3)) {
      s = store->Delete(0, k);
      if (s.ok()) model.erase(k);
      if (s.Is(Code::kNotFound)) s = Status::Ok();
    } else {
      std::string v = Value(rng, 50 + rng.Uniform(150));
      s = store->Put(0, k, v);
      if (s.ok()) model[k] = v;
    }
    if (s.Is(Code::kNoSpace)) {
      auto cleaned = store->CleanStep();
      ASSERT_TRUE(cleaned.ok()) << cleaned.status().ToString();
      ASSERT_TRUE(*cleaned) << "no segment to clean at op " << i;
      continue;
    }
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (i % 50 == 0) {
      ASSERT_TRUE(store->CleanStep().ok());
    }
  }
  auto st = store->stats();
  EXPECT_GT(st.segments_cleaned, 10u);
  EXPECT_GT(st.tombstones_dropped, 0u);
  auto check = [&](Store& s) {
    for (int k = 0; k < 100; ++k) {
      std::string key = "k" + std::to_string(k);
      auto got = s.Get(key);
      if (model.count(key)) {
        ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
        EXPECT_EQ(*got, model[key]);
      } else {
        EXPECT_TRUE(got.status().Is(Code::kNotFound)) << key << " resurrected";
      }
    }
  };
  check(*store);
  store.reset();
  store = std::move(Store::Open(region.get(), o)).value();
  check(*store);
}

// A shard that leaves a node and comes back (a migration away and back):
// the drop frees its space, and the old entries the cleaner finds later
// must not be subtracted from the new copy's counts (which would drop its
// keys from the index).
TEST(StoreTest, ADroppedShardIsReclaimedAndCanComeBack) {
  auto region = MakeRegion(2 << 20);
  StoreOptions o = SmallOptions();
  auto store = std::move(Store::Open(region.get(), o)).value();
  Random rng(7);
  std::map<std::string, std::string> model;
  for (int i = 0; i < 600; ++i) {
    std::string k = "k" + std::to_string(i % 200);
    std::string v = Value(rng, 100);
    ASSERT_TRUE(store->Put(0, k, v).ok());
    model[k] = v;
  }
  ASSERT_TRUE(store->Delete(0, "k1").ok());
  model.erase("k1");
  const uint32_t s = store->ShardOf(HashKey("k0"));
  std::vector<Store::ShardEntry> copy;
  ASSERT_TRUE(store->ForEachInShard(s, 0, 0, [&](const Store::ShardEntry& e) {
                  copy.push_back(e);
                  return true;
                }).ok());
  ASSERT_GT(copy.size(), 20u);
  const int64_t live_before = [&] {
    int64_t n = 0;
    for (uint32_t g = 0; g < store->segments().num_segments(); ++g) n += store->live_bytes(g);
    return n;
  }();
  EXPECT_EQ(store->DropShard(s), copy.size());
  int64_t live_after = 0;
  for (uint32_t g = 0; g < store->segments().num_segments(); ++g) live_after += store->live_bytes(g);
  EXPECT_LT(live_after, live_before) << "the dropped entries are dead bytes now";
  for (const auto& [k, v] : model) {
    auto got = store->Get(k);
    if (store->ShardOf(HashKey(k)) == s) {
      EXPECT_TRUE(got.status().Is(Code::kNotFound)) << k;
    } else {
      ASSERT_TRUE(got.ok()) << k;
      EXPECT_EQ(*got, v);
    }
  }
  // It comes back: the same entries, as a new copy (seed or migration).
  for (const auto& e : copy) ASSERT_TRUE(store->Apply(1, e.meta, e.key, e.value).ok());
  // Churn the other shards until every segment that held the old copy is
  // cleaned and freed.
  const uint64_t cleaned0 = store->stats().segments_cleaned;
  for (int i = 0; store->stats().segments_cleaned < cleaned0 + 60; ++i) {
    ASSERT_LT(i, 200000) << "the cleaner stalled";
    std::string k = "o" + std::to_string(rng.Uniform(300));
    if (store->ShardOf(HashKey(k)) == s) continue;
    Status st = store->Put(0, k, Value(rng, 100));
    if (st.Is(Code::kNoSpace) || i % 20 == 0) {
      ASSERT_TRUE(store->CleanStep().ok());
      continue;
    }
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  for (const auto& [k, v] : model) {
    if (store->ShardOf(HashKey(k)) != s) continue;
    auto got = store->Get(k);
    ASSERT_TRUE(got.ok()) << k << ": " << got.status().ToString();
    EXPECT_EQ(*got, v);
  }
  EXPECT_TRUE(store->Get("k1").status().Is(Code::kNotFound)) << "its tombstone came back too";
}

TEST(StoreTest, NoSpaceIsAClearErrorAndKeepsData) {
  auto region = MakeRegion(1 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  Random rng(2);
  int stored = 0;
  Status s;
  while ((s = store->Put(0, "key" + std::to_string(stored), Value(rng, 500))).ok()) ++stored;
  EXPECT_TRUE(s.Is(Code::kNoSpace)) << s.ToString();
  EXPECT_GT(stored, 100);
  for (int i = 0; i < stored; i += 37) EXPECT_TRUE(store->Get("key" + std::to_string(i)).ok());
}

TEST(StoreTest, ConcurrentWritersReaderAndCleaner) {
  auto region = MakeRegion(8 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  std::atomic<bool> stop{false};
  std::map<std::string, std::string> final_values[2];
  auto writer = [&](uint32_t w) {
    Random rng(w + 100);
    for (int i = 0; i < 20000; ++i) {
      // Each writer owns its keys, so the final value per key is known.
      std::string k = "w" + std::to_string(w) + "_" + std::to_string(rng.Uniform(300));
      std::string v = Value(rng, 20 + rng.Uniform(100));
      Status s = store->Put(w, k, v);
      while (s.Is(Code::kNoSpace)) s = store->Put(w, k, v);
      ASSERT_TRUE(s.ok()) << s.ToString();
      final_values[w][k] = v;
    }
  };
  std::thread cleaner([&] {
    while (!stop) ASSERT_TRUE(store->CleanStep().ok());
  });
  std::thread reader([&] {
    Random rng(7);
    while (!stop) {
      auto got = store->Get("w0_" + std::to_string(rng.Uniform(300)));
      ASSERT_TRUE(got.ok() || got.status().Is(Code::kNotFound)) << got.status().ToString();
    }
  });
  std::thread w0(writer, 0), w1(writer, 1);
  w0.join();
  w1.join();
  stop = true;
  cleaner.join();
  reader.join();
  for (auto& m : final_values)
    for (auto& [k, v] : m) EXPECT_EQ(*store->Get(k), v) << k;
}

TEST(SegmentTableTest, StateMachineRejectsIllegalTransitions) {
  auto region = MakeRegion(1 << 20);
  log::Geometry g;
  g.segment_size = 64 << 10;
  auto t = std::move(log::SegmentTable::Format(region.get(), g)).value();
  uint32_t id = *t->Allocate(log::SegmentOwner::kWorker);
  EXPECT_EQ(t->meta(id).state, log::SegmentState::kUsing);
  EXPECT_TRUE(t->Free(id).Is(Code::kInvalidArgument));  // Using -> Free
  EXPECT_TRUE(t->Transition(id, log::SegmentState::kUsed).ok());
  EXPECT_TRUE(t->Transition(id, log::SegmentState::kUsing).Is(Code::kInvalidArgument));
  EXPECT_TRUE(t->Transition(id, log::SegmentState::kCommitted).ok());
  uint64_t seq = t->meta(id).seq;
  EXPECT_TRUE(t->Free(id).ok());
  EXPECT_EQ(t->meta(id).state, log::SegmentState::kFree);
  uint32_t again = *t->Allocate(log::SegmentOwner::kClean);
  EXPECT_EQ(again, id);  // lowest free id first: address order
  EXPECT_GT(t->meta(again).seq, seq);
  // The meta table survives a reopen.
  auto t2 = std::move(log::SegmentTable::Open(region.get())).value();
  EXPECT_EQ(t2->meta(again).state, log::SegmentState::kUsing);
  EXPECT_EQ(t2->meta(again).owner, log::SegmentOwner::kClean);
  EXPECT_EQ(t2->free_count(), t->free_count());
}

TEST(SegmentTableTest, DamagedSuperblockIsCorruption) {
  auto region = MakeRegion(1 << 20);
  log::Geometry g;
  g.segment_size = 64 << 10;
  ASSERT_TRUE(log::SegmentTable::Format(region.get(), g).ok());
  region->base()[20] ^= std::byte{1};
  EXPECT_TRUE(log::SegmentTable::Open(region.get()).status().Is(Code::kCorruption));
  EXPECT_TRUE(Store::Open(region.get(), SmallOptions()).status().Is(Code::kCorruption));
}

// A backup applying its primary's entries in any order ends in the primary's
// state; a fresh replica seeded from ForEachInShard matches too.
TEST(StoreApplyTest, AnyOrderGivesThePrimarysStateAndSeedsANewReplica) {
  auto pr = MakeRegion(8 << 20);
  auto primary = std::move(Store::Open(pr.get(), SmallOptions())).value();
  Random rng(11);
  struct Logged {
    log::EntryMeta meta;
    std::string key, value;
  };
  std::vector<Logged> log;
  for (int i = 0; i < 600; ++i) {
    std::string key = "k" + std::to_string(rng.Uniform(60));
    if (rng.Bernoulli(0.3)) {
      if (!primary->Delete(0, key).ok()) continue;
      log::EntryMeta m;
      ASSERT_TRUE(primary->Get(key, &m).status().Is(Code::kNotFound));
      log.push_back({m, key, ""});
    } else {
      std::string v = Value(rng, rng.Uniform(3000));
      ASSERT_TRUE(primary->Put(0, key, v).ok());
      log::EntryMeta m;
      ASSERT_TRUE(primary->Get(key, &m).ok());
      log.push_back({m, key, v});
    }
  }
  for (size_t i = log.size(); i > 1; --i) std::swap(log[i - 1], log[rng.Uniform(i)]);

  auto br = MakeRegion(8 << 20);
  auto backup = std::move(Store::Open(br.get(), SmallOptions())).value();
  for (const auto& e : log) {
    ASSERT_TRUE(backup->Apply(rng.Uniform(2), e.meta, e.key, e.value).ok());
  }
  auto nr = MakeRegion(8 << 20);
  auto fresh = std::move(Store::Open(nr.get(), SmallOptions())).value();
  uint64_t seeded = 0;
  for (uint32_t sh = 0; sh < 4; ++sh) {
    auto walked = primary->ForEachInShard(sh, 0, 0, [&](const Store::ShardEntry& e) {
      ++seeded;
      EXPECT_EQ(e.meta.shard, sh);
      EXPECT_TRUE(fresh->Apply(0, e.meta, e.key, e.value).ok());
      return true;
    });
    ASSERT_TRUE(walked.ok());
    // Paging by skip sees the same entries; a version floor filters.
    uint64_t paged = 0, above = 0;
    for (uint64_t skip = 0; skip < *walked;) {
      auto w = primary->ForEachInShard(sh, 0, skip, [&](const Store::ShardEntry&) {
        return ++paged % 7 != 0;  // stop every 7 entries, like a full page
      });
      ASSERT_TRUE(w.ok());
      ASSERT_GT(*w, skip);
      skip = *w;
    }
    const uint64_t floor = primary->shard_version(sh) / 2;
    ASSERT_TRUE(primary->ForEachInShard(sh, floor, 0, [&](const Store::ShardEntry& e) {
      EXPECT_GT(e.meta.version, floor);
      ++above;
      return true;
    }).ok());
    EXPECT_LE(above, *walked);
    EXPECT_EQ(paged, *walked);
    EXPECT_EQ(backup->shard_version(sh), primary->shard_version(sh)) << "shard " << sh;
    EXPECT_GE(fresh->shard_version(sh), 1u);
  }
  EXPECT_GT(seeded, 30u);
  for (int k = 0; k < 60; ++k) {
    std::string key = "k" + std::to_string(k);
    auto want = primary->Get(key);
    for (Store* replica : {backup.get(), fresh.get()}) {
      auto got = replica->Get(key);
      ASSERT_EQ(got.ok(), want.ok()) << key;
      if (want.ok()) {
        EXPECT_EQ(*got, *want) << key;
      }
    }
  }
  // A promoted backup numbers new writes above everything it applied.
  ASSERT_TRUE(backup->Put(0, "k1", "after promotion").ok());
  log::EntryMeta m;
  ASSERT_TRUE(backup->Get("k1", &m).ok());
  EXPECT_GT(m.version, primary->shard_version(m.shard));
}

TEST(StoreApplyTest, BadEntriesAreRefusedAndChangeNothing) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  ASSERT_TRUE(store->Put(0, "key", "v1").ok());
  log::EntryMeta m;
  ASSERT_TRUE(store->Get("key", &m).ok());
  const uint64_t appended = store->stats().appended_bytes;

  log::EntryMeta wrong_shard = m;
  wrong_shard.shard = static_cast<uint16_t>((m.shard + 1) % 4);
  wrong_shard.version = m.version + 1;
  EXPECT_TRUE(store->Apply(0, wrong_shard, "key", "x").Is(Code::kInvalidArgument));
  log::EntryMeta no_version = m;
  no_version.version = 0;
  EXPECT_TRUE(store->Apply(0, no_version, "key", "x").Is(Code::kInvalidArgument));
  log::EntryMeta commit = m;
  commit.type = log::EntryType::kCommitVersion;
  commit.version = m.version + 1;
  EXPECT_TRUE(store->Apply(0, commit, "key", "x").Is(Code::kInvalidArgument));
  log::EntryMeta ok = m;
  ok.version = m.version + 1;
  EXPECT_TRUE(store->Apply(7, ok, "key", "x").Is(Code::kInvalidArgument));  // no writer 7
  EXPECT_TRUE(store->Apply(0, ok, std::string(2000, 'k'), "x").Is(Code::kTooLarge));
  EXPECT_EQ(store->stats().appended_bytes, appended);
  EXPECT_EQ(*store->Get("key"), "v1");

  // An older version arriving late is stored but does not win.
  ASSERT_TRUE(store->Apply(0, ok, "key", "v2").ok());
  ASSERT_TRUE(store->Apply(1, m, "key", "stale").ok());
  EXPECT_EQ(*store->Get("key"), "v2");
}

TEST(StorePrepareTest, PreparedWritesStayInvisibleUntilCommitted) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  ASSERT_TRUE(store->Put(0, "key", "v1").ok());
  auto a = store->Prepare(0, log::EntryType::kPut, "key", "v2");
  auto b = store->Prepare(1, log::EntryType::kPut, "key", "v3");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(a->meta().version, b->meta().version);
  EXPECT_EQ(*store->Get("key"), "v1");
  store->Commit(*b);  // acks may come back in any order
  EXPECT_EQ(*store->Get("key"), "v3");
  store->Commit(*a);
  EXPECT_EQ(*store->Get("key"), "v3") << "an older version must not win";
  store->Commit(*a);  // idempotent

  auto d = store->Prepare(0, log::EntryType::kDel, "key", {});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(store->Get("key").ok());
  store->Commit(*d);
  EXPECT_TRUE(store->Get("key").status().Is(Code::kNotFound));
  EXPECT_TRUE(store->Prepare(0, log::EntryType::kDel, "key", {}).status().Is(Code::kNotFound));
}

// Abandoned writes are never visible, and the cleaner drops them without
// disturbing the key's counted entries; after a restart they may appear
// (the outcome was reported unknown), but nothing older than them does.
TEST(StorePrepareTest, AbandonedWritesAreCleanedWithoutLosingTheKey) {
  auto region = MakeRegion(2 << 20);
  StoreOptions o = SmallOptions();
  auto store = std::move(Store::Open(region.get(), o)).value();
  Random rng(5);
  std::map<std::string, std::string> model;
  for (int i = 0; i < 20000; ++i) {
    std::string key = "k" + std::to_string(rng.Uniform(20));
    std::string v = Value(rng, 20 + rng.Uniform(400));
    auto w = store->Prepare(rng.Uniform(2), log::EntryType::kPut, key, v);
    if (w.status().Is(Code::kNoSpace)) {
      ASSERT_TRUE(store->CleanStep().ok());
      continue;
    }
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    if (rng.Bernoulli(0.3)) {
      store->Abandon(*w);
    } else {
      store->Commit(*w);
      model[key] = v;
    }
    if (store->NeedsCleaning()) {
      ASSERT_TRUE(store->CleanStep().ok());
    }
    if (i % 97 == 0) {
      for (auto& [k, want] : model) ASSERT_EQ(*store->Get(k), want) << k << " at op " << i;
    }
  }
  EXPECT_GT(store->stats().segments_cleaned, 5u);
  for (auto& [k, want] : model) ASSERT_EQ(*store->Get(k), want) << k;
}

// ---------------------------------------------------------------------------
// Group commit: a batch of deferred writes costs one persist, and none of
// it is visible before that persist.
TEST(StoreGroupCommitTest, ABatchIsPersistedByOneFlushAndHiddenUntilThen) {
  pm::RegionOptions ro;
  ro.crash_model = true;  // counts Persist calls
  auto region = std::move(pm::PmRegion::Anonymous(4 << 20, ro)).value();
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  ASSERT_TRUE(store->Put(0, "a", "old").ok());
  ASSERT_TRUE(store->Put(1, "w", "each writer has its segment").ok());
  const uint64_t before = region->persist_calls();
  std::vector<std::string> keys = {"a", "b", "c", "a"};
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint32_t shard = store->ShardOf(HashKey(keys[i]));
    const log::EntryMeta meta{log::EntryType::kPut, static_cast<uint16_t>(shard),
                              store->shard_version(shard) + 1};
    ASSERT_TRUE(store->Apply(0, meta, keys[i], "v" + std::to_string(i), Store::Persist::kDeferred).ok());
  }
  EXPECT_EQ(region->persist_calls(), before) << "a deferred apply persisted";
  EXPECT_TRUE(store->HasDeferred(0));
  EXPECT_FALSE(store->HasDeferred(1));
  EXPECT_EQ(*store->Get("a"), "old");
  EXPECT_TRUE(store->Get("b").status().Is(Code::kNotFound));

  store->Flush(0);
  EXPECT_EQ(region->persist_calls(), before + 1);
  EXPECT_FALSE(store->HasDeferred(0));
  EXPECT_EQ(*store->Get("a"), "v3") << "the batch's newest write of a key wins";
  EXPECT_EQ(*store->Get("b"), "v1");
  EXPECT_EQ(*store->Get("c"), "v2");
  store->Flush(0);
  EXPECT_EQ(region->persist_calls(), before + 1) << "an empty flush persisted";

  // Deferred Prepares: Commit flushes what is not persistent yet, once.
  auto p1 = store->Prepare(1, log::EntryType::kPut, "d", "d1", Store::Persist::kDeferred);
  auto p2 = store->Prepare(1, log::EntryType::kPut, "e", "e1", Store::Persist::kDeferred);
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_EQ(region->persist_calls(), before + 1);
  store->Commit(*p2);
  store->Commit(*p1);
  EXPECT_EQ(region->persist_calls(), before + 2);
  EXPECT_EQ(*store->Get("d"), "d1");
  EXPECT_EQ(*store->Get("e"), "e1");

  // A persisted write after deferred ones covers them too (the log stays a
  // persistent prefix), but a deferred Apply still waits for Flush to show.
  const uint32_t shard = store->ShardOf(HashKey("f"));
  ASSERT_TRUE(store->Apply(1, {log::EntryType::kPut, static_cast<uint16_t>(shard), store->shard_version(shard) + 1},
                           "f", "f1", Store::Persist::kDeferred)
                  .ok());
  const uint32_t gs = store->ShardOf(HashKey("g"));
  ASSERT_TRUE(store->Apply(1, {log::EntryType::kPut, static_cast<uint16_t>(gs), store->shard_version(gs) + 1},
                           "g", "g1")
                  .ok());
  EXPECT_EQ(region->persist_calls(), before + 3);
  EXPECT_EQ(*store->Get("g"), "g1");
  EXPECT_TRUE(store->Get("f").status().Is(Code::kNotFound));
  store->Flush(1);
  EXPECT_EQ(region->persist_calls(), before + 3) << "f was persistent already";
  EXPECT_EQ(*store->Get("f"), "f1");
  region->SimulateCrash(1);  // nothing unpersisted may matter

  // Everything flushed survives a reopen.
  store.reset();
  store = std::move(Store::Open(region.get(), SmallOptions())).value();
  for (auto [k, v] : {std::pair{"a", "v3"}, {"b", "v1"}, {"d", "d1"}, {"f", "f1"}, {"g", "g1"}}) {
    EXPECT_EQ(*store->Get(k), v) << k;
  }
}

// A batch that fills its segment is flushed before the segment is sealed:
// nothing unpersisted or unindexed is left where the cleaner may take it.
TEST(StoreGroupCommitTest, ASealedSegmentHoldsNothingDeferred) {
  auto region = MakeRegion(4 << 20);
  auto store = std::move(Store::Open(region.get(), SmallOptions())).value();
  Random rng(7);
  std::map<std::string, std::string> want;
  for (int i = 0; i < 200; ++i) {
    const std::string key = "k" + std::to_string(rng.Uniform(50));
    const std::string value = Value(rng, 100 + rng.Uniform(3000));
    auto p = store->Prepare(0, log::EntryType::kPut, key, value, Store::Persist::kDeferred);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    store->Commit(*p);
    want[key] = value;
    if (i % 7 == 0) {
      ASSERT_TRUE(store->CleanStep().ok());
    }
  }
  while (*store->CleanStep()) {
  }
  for (const auto& [k, v] : want) EXPECT_EQ(*store->Get(k), v) << k;
}

// Receive segments (one-sided replication): peers' log blocks land in PM at
// 64 B-aligned offsets and the store indexes them where they lie.

}  // namespace
}  // namespace slip::store
