// A chain in one process (rubble/chain.h) on real files: against a model,
// in both modes, with the invariants of docs/papers/rubbledb.md §7 that a
// whole chain shows — followers' versions equal the head's (I1), their
// slots hold the head's bytes and zeros after them (I2), used slots are
// the live tables (I8), followers flush and compact nothing (I11), both
// modes answer alike (I13), and a tail killed under load loses no
// acknowledged write (T10).
#include "rubble/chain.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "common/random.h"
#include "lsm/testing/temp_dir.h"

namespace slip::rubble {
namespace {

using lsm::testing::TempDir;

ChainOptions Small(const std::string& dir, Mode mode, int replicas) {
  ChainOptions o;
  o.dir = dir;
  o.mode = mode;
  o.replicas = replicas;
  o.db.memtable_bytes = 32 << 10;
  o.db.target_file_bytes = 32 << 10;
  o.db.level1_bytes = 128 << 10;
  o.db.l0_compaction_trigger = 2;
  o.db.levels = 4;
  o.db.table.block_bytes = 1024;
  o.db.block_cache_bytes = 256 << 10;
  o.db.wal = false;
  o.slots = {.count = 64, .slot_bytes = 36 << 10};  // 17/16 of the table size, rounded to 4 KB
  return o;
}

std::string Key(uint64_t i) { return "key" + std::to_string(100000 + i); }

std::string ReadFile(const std::string& path, uint64_t offset, uint64_t n) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  return s;
}

using Model = std::map<std::string, std::string>;

Model RunWorkload(Chain& chain, uint64_t seed, int ops) {
  Random rng(seed);
  Model model;
  for (int i = 0; i < ops; ++i) {
    const std::string k = Key(rng.Uniform(800));
    if (rng.Uniform(6) == 0) {
      EXPECT_TRUE(chain.Delete(k).ok());
      model.erase(k);
    } else {
      const std::string v = std::to_string(i) + std::string(20 + rng.Uniform(150), 'v');
      EXPECT_TRUE(chain.Put(k, v).ok());
      model[k] = v;
    }
  }
  return model;
}

void ExpectModel(Chain& chain, const Model& model) {
  for (uint64_t i = 0; i < 800; ++i) {
    auto got = chain.Get(Key(i));
    auto it = model.find(Key(i));
    ASSERT_EQ(got.ok(), it != model.end()) << Key(i) << " " << got.status().ToString();
    if (got.ok()) {
      ASSERT_EQ(*got, it->second);
    }
  }
  std::vector<std::pair<std::string, std::string>> all;
  ASSERT_TRUE(chain.Scan("", 1000, &all).ok());
  const std::vector<std::pair<std::string, std::string>> want(model.begin(), model.end());
  ASSERT_EQ(all, want);
}

TEST(ChainTest, OnlyTheHeadCompactsAndFollowersHoldItsTablesInTheirSlots) {
  TempDir t;
  ASSERT_TRUE(t.ok());
  auto chain = Chain::Open(Small(t.path(), Mode::kRubble, 3));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  const Model model = RunWorkload(**chain, 1, 6000);
  ASSERT_TRUE((*chain)->Drain().ok());
  ExpectModel(**chain, model);

  auto replicas = (*chain)->replicas();
  ASSERT_EQ(replicas.size(), 3u);
  EXPECT_GT(replicas[0].db.compactions, 0u);
  for (size_t i = 1; i < replicas.size(); ++i) {
    EXPECT_EQ(replicas[i].db.flushes + replicas[i].db.compactions + replicas[i].db.trivial_moves, 0u) << "I11";
  }
  // I1 and I2: each follower's version is the head's, each live table's
  // slot holds the head's bytes and zeros to its end.
  const lsm::Version head = (*chain)->head_version();
  size_t live = 0;
  for (int level = 0; level < lsm::kLevels; ++level) {
    for (const auto& f : head.files(level)) {
      ++live;
      char name[32];
      std::snprintf(name, sizeof name, "/head/%06llu.sst", static_cast<unsigned long long>(f.number));
      const std::string mine = ReadFile(t.path() + name, 0, f.size);
      for (int r = 1; r <= 2; ++r) {
        const std::string image = t.path() + "/follower-" + std::to_string(r) + ".slots";
        const uint64_t base = (f.slot - 1) * (36 << 10);
        ASSERT_EQ(ReadFile(image, base, f.size), mine) << "table " << f.number << " in slot " << f.slot;
        ASSERT_EQ(ReadFile(image, base + f.size, (36 << 10) - f.size), std::string((36 << 10) - f.size, '\0'));
      }
    }
  }
  for (int r = 1; r <= 2; ++r) EXPECT_EQ((*chain)->follower_version(r), head) << "I1, follower " << r;
  // I8: the slots in use are the live tables, no more.
  EXPECT_EQ(64 - (*chain)->free_slots(), live);
  EXPECT_GT((*chain)->shipped_bytes(), 0u);
}

TEST(ChainTest, BothModesAnswerAlike) {
  Model models[2];
  int i = 0;
  for (Mode mode : {Mode::kRubble, Mode::kAllCompact}) {
    TempDir t;
  ASSERT_TRUE(t.ok());
    auto chain = Chain::Open(Small(t.path(), mode, 2));
    ASSERT_TRUE(chain.ok());
    models[i] = RunWorkload(**chain, 9, 4000);
    ASSERT_TRUE((*chain)->Drain().ok());
    ExpectModel(**chain, models[i]);
    auto replicas = (*chain)->replicas();
    if (mode == Mode::kAllCompact) {
      EXPECT_GT(replicas[1].db.compactions, 0u) << "in the baseline every replica compacts";
      EXPECT_EQ((*chain)->shipped_bytes(), 0u);
    }
    ++i;
  }
  EXPECT_EQ(models[0], models[1]);
}

// T10: the tail dies under load from 4 writers; every write acknowledged
// before or after is read back from the new tail, and the dead tail's
// slots are free for the head again.
TEST(ChainTest, ATailKilledUnderLoadLosesNoAcknowledgedWrite) {
  TempDir t;
  ASSERT_TRUE(t.ok());
  auto chain = Chain::Open(Small(t.path(), Mode::kRubble, 3));
  ASSERT_TRUE(chain.ok());
  std::vector<Model> acked(4);
  std::atomic<bool> killed{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      Random rng(50 + w);
      for (int i = 0; i < 2000; ++i) {
        const std::string k = "w" + std::to_string(w) + Key(rng.Uniform(200));
        const std::string v = std::to_string(i) + std::string(rng.Uniform(100), 'k');
        if ((*chain)->Put(k, v).ok()) acked[w][k] = v;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE((*chain)->KillTail().ok());
  killed = true;
  for (auto& w : writers) w.join();
  ASSERT_TRUE((*chain)->Drain().ok());
  EXPECT_EQ((*chain)->live_replicas(), 2);
  for (const Model& m : acked) {
    for (const auto& [k, v] : m) ASSERT_EQ(*(*chain)->Get(k), v) << k;
  }
  size_t live = 0;
  const lsm::Version head = (*chain)->head_version();
  for (int level = 0; level < lsm::kLevels; ++level) live += head.files(level).size();
  EXPECT_EQ(64 - (*chain)->free_slots(), live) << "the dead tail's bits no longer hold slots";
}

// T12: the head dies under load; its successor takes over (its MemTables
// flushed into tables of its own and shipped, the slot map rebuilt from
// its version). Writes in flight fail and are retried; every acknowledged
// one is read back, and the remaining follower matches the new head.
TEST(ChainTest, AHeadKilledUnderLoadHandsOverToItsSuccessor) {
  TempDir t;
  ASSERT_TRUE(t.ok());
  auto chain = Chain::Open(Small(t.path(), Mode::kRubble, 3));
  ASSERT_TRUE(chain.ok());
  std::vector<Model> acked(4);
  std::atomic<int> retries{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      Random rng(70 + w);
      for (int i = 0; i < 2000; ++i) {
        const std::string k = "w" + std::to_string(w) + Key(rng.Uniform(200));
        const std::string v = std::to_string(i) + std::string(rng.Uniform(100), 'h');
        Status s;
        for (int attempt = 0; attempt < 100; ++attempt) {
          s = (*chain)->Put(k, v);
          if (s.ok()) break;
          retries++;
        }
        ASSERT_TRUE(s.ok()) << s.ToString();
        acked[w][k] = v;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE((*chain)->KillHead().ok());
  for (auto& w : writers) w.join();
  ASSERT_TRUE((*chain)->Drain().ok());
  EXPECT_EQ((*chain)->live_replicas(), 2);
  for (const Model& m : acked) {
    for (const auto& [k, v] : m) ASSERT_EQ(*(*chain)->Get(k), v) << k;
  }
  // The remaining follower holds the new head's version, and the slots in
  // use are exactly the live tables that are in slots.
  const lsm::Version head = (*chain)->head_version();
  EXPECT_EQ((*chain)->follower_version(2), head);
  size_t in_slots = 0;
  for (int level = 0; level < lsm::kLevels; ++level) {
    for (const auto& f : head.files(level)) in_slots += f.slot != 0;
  }
  EXPECT_EQ(64 - (*chain)->free_slots(), in_slots);
  auto replicas = (*chain)->replicas();
  EXPECT_GT(replicas[1].db.flushes, 0u) << "the new head flushes";
  EXPECT_EQ(replicas[2].db.flushes + replicas[2].db.compactions, 0u);

  // Then the tail dies under load too: the promoted head, now alone,
  // acknowledges what it had passed on.
  std::vector<std::thread> more;
  for (int w = 0; w < 4; ++w) {
    more.emplace_back([&, w] {
      for (int i = 0; i < 500; ++i) {
        const std::string k = "w" + std::to_string(w) + Key(i % 200);
        const std::string v = "after" + std::to_string(i);
        if ((*chain)->Put(k, v).ok()) acked[w][k] = v;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE((*chain)->KillTail().ok());
  for (auto& th : more) th.join();
  ASSERT_TRUE((*chain)->Drain().ok());
  EXPECT_EQ((*chain)->live_replicas(), 1);
  for (const Model& m : acked) {
    for (const auto& [k, v] : m) ASSERT_EQ(*(*chain)->Get(k), v) << k;
  }
}

}  // namespace
}  // namespace slip::rubble
