// The engine (lsm/db.h) against a model map: random puts, deletes, gets and
// scans across flushes, compactions and reopens; a crash at every failure
// point of its files loses no acknowledged write and resurrects nothing; the
// background threads under concurrent writers and readers.
#include "lsm/db.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "common/random.h"
#include "lsm/testing/tiny_shape.h"
#include "runtime/cost.h"
#include "runtime/sim_runtime.h"

namespace slip::lsm {
namespace {

// Small enough that a few thousand writes flush and compact through
// several levels.
DbOptions SmallOptions(MemFileSystem* fs, bool background = false) {
  DbOptions o = testing::TinyShape(fs, 8);
  o.background = background;
  return o;
}

using Model = std::map<std::string, std::string>;

std::string KeyOf(uint64_t i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "key%06llu", static_cast<unsigned long long>(i));
  return buf;
}

void ExpectMatches(Db& db, const Model& model, uint64_t keys) {
  for (uint64_t i = 0; i < keys; ++i) {
    const std::string k = KeyOf(i);
    auto got = db.Get(k);
    auto it = model.find(k);
    if (it == model.end()) {
      ASSERT_TRUE(got.status().Is(Code::kNotFound)) << k << ": " << got.status().ToString();
    } else {
      ASSERT_TRUE(got.ok()) << k << ": " << got.status().ToString();
      ASSERT_EQ(*got, it->second) << k;
    }
  }
  std::vector<std::pair<std::string, std::string>> all;
  ASSERT_TRUE(db.Scan("", keys + 1, &all).ok());
  const std::vector<std::pair<std::string, std::string>> want(model.begin(), model.end());
  ASSERT_EQ(all, want);
}

TEST(DbTest, MatchesAModelAcrossFlushesCompactionsAndReopens) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    MemFileSystem fs;
    Random rng(seed);
    Model model;
    const uint64_t keys = seed % 2 == 0 ? 2000 : 600;
    uint64_t cursor = 0;  // even seeds walk the keys in order: files with narrow ranges, levels that do not overlap
    for (int round = 0; round < 3; ++round) {
      auto db = Db::Open("/db", SmallOptions(&fs));
      ASSERT_TRUE(db.ok()) << db.status().ToString();
      ExpectMatches(**db, model, keys);
      for (int i = 0; i < 5000; ++i) {
        const std::string k = KeyOf(seed % 2 == 0 ? cursor++ % keys : rng.Uniform(keys));
        const uint64_t what = rng.Uniform(10);
        if (what < 6) {
          const std::string v = "v" + std::to_string(seed) + "." + std::to_string(round) + "." + std::to_string(i) +
                                std::string(rng.Uniform(40), 'x');
          ASSERT_TRUE((*db)->Put(k, v).ok());
          model[k] = v;
        } else if (what < 8) {
          ASSERT_TRUE((*db)->Delete(k).ok());
          model.erase(k);
        } else if (what < 9) {
          auto got = (*db)->Get(k);
          auto it = model.find(k);
          ASSERT_EQ(got.ok(), it != model.end()) << k;
          if (got.ok()) {
            ASSERT_EQ(*got, it->second);
          }
        } else {
          std::vector<std::pair<std::string, std::string>> out;
          ASSERT_TRUE((*db)->Scan(k, 10, &out).ok());
          std::vector<std::pair<std::string, std::string>> want;
          for (auto it = model.lower_bound(k); it != model.end() && want.size() < 10; ++it) want.push_back(*it);
          ASSERT_EQ(out, want) << "scan from " << k;
        }
      }
      ExpectMatches(**db, model, keys);
      if (round == 1) {
        ASSERT_TRUE((*db)->CompactAll().ok());
        ExpectMatches(**db, model, keys);
      }
      const Db::Stats s = (*db)->stats();
      EXPECT_GT(s.flushes, 0u);
      EXPECT_GT(s.compactions, 0u);
      // Level 0 stays under its trigger when the writer does the work.
      EXPECT_LT(s.files[0], 2u);
    }
  }
}

// A MemTable larger than a table's target flushes into several tables,
// every one of them installed (a head's flush used to install only the
// first).
TEST(DbTest, AMemTableLargerThanATableFlushesIntoSeveral) {
  MemFileSystem fs;
  DbOptions o = SmallOptions(&fs);
  o.memtable_bytes = 64 << 10;
  o.l0_compaction_trigger = 100;
  o.l0_slowdown = 100;
  o.l0_stop = 100;
  auto db = Db::Open("/db", o);
  ASSERT_TRUE(db.ok());
  Model model;
  for (int i = 0; i < 3000; ++i) {
    const std::string k = KeyOf(i % 700), v = std::string(40, 'a' + i % 26);
    ASSERT_TRUE((*db)->Put(k, v).ok());
    model[k] = v;
  }
  ASSERT_TRUE((*db)->Flush().ok());
  const Db::Stats s = (*db)->stats();
  EXPECT_GT(s.files[0], s.flushes) << "some flush wrote more than one table";
  ExpectMatches(**db, model, 700);
}

TEST(DbTest, CompactionToTheBottomDropsDeletedKeys) {
  MemFileSystem fs;
  auto db = Db::Open("/db", SmallOptions(&fs));
  ASSERT_TRUE(db.ok());
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE((*db)->Put(KeyOf(i), std::string(100, 'a')).ok());
  ASSERT_TRUE((*db)->Flush().ok());
  uint64_t before = 0;
  for (uint64_t b : (*db)->stats().level_bytes) before += b;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 2000; ++i) ASSERT_TRUE((*db)->Delete(KeyOf(i)).ok());
  }
  ASSERT_TRUE((*db)->CompactAll().ok());
  uint64_t after = 0;
  for (uint64_t b : (*db)->stats().level_bytes) after += b;
  EXPECT_EQ(after, 0u) << "tombstones and the values they hide should be compacted away";
  std::vector<std::pair<std::string, std::string>> out;
  ASSERT_TRUE((*db)->Scan("", 10, &out).ok());
  EXPECT_TRUE(out.empty());
}

// In a modelled simulation the engine's steps cost what the model says,
// where the work is done: a write and a lookup per entry and its bytes, a
// flush per table written and its bytes, a compaction over the bytes it
// reads and writes (a table moved down a level costs nothing).
TEST(DbTest, ChargesItsStepsInAModelledSimulation) {
  using runtime::Cost;
  runtime::CostModel m;
  m[Cost::kLsmWrite] = {100, 1};
  m[Cost::kLsmGet] = {50, 1};
  m[Cost::kFlush] = {1000, 2};
  m[Cost::kCompaction] = {2000, 3};
  runtime::SimRuntime rt;
  rt.SetCostModel(m);
  runtime::Executor* x = rt.CreateExecutor("engine");
  rt.PlaceOn(x, rt.AddHost(1, -1));
  MemFileSystem fs;
  auto db = Db::Open("/db", SmallOptions(&fs));
  ASSERT_TRUE(db.ok());
  const int writes = 3000, gets = 500;
  const size_t value_bytes = 40;
  uint64_t written = 0;
  Status failed;
  x->Post([&] {
    for (int i = 0; i < writes && failed.ok(); ++i) {
      const std::string k = KeyOf(static_cast<uint64_t>(i % 1000));
      failed = (*db)->Put(k, std::string(value_bytes, 'v'));
      written += k.size() + value_bytes;
    }
    if (failed.ok()) failed = (*db)->CompactAll();
    for (int i = 0; i < gets && failed.ok(); ++i) {
      if (!(*db)->Get(KeyOf(static_cast<uint64_t>(i))).ok()) failed = Status::Corruption("a write went missing");
    }
    if (failed.ok() && !(*db)->Get("absent").status().Is(Code::kNotFound)) failed = Status::Corruption("absent found");
  });
  rt.RunUntilIdle();
  ASSERT_TRUE(failed.ok()) << failed.ToString();
  const auto& total = rt.CostTotals();
  auto charged = [&](Cost c) { return total[static_cast<size_t>(c)]; };
  const Db::Stats s = (*db)->stats();
  ASSERT_GT(s.flushes, 1u);
  ASSERT_GT(s.compactions, 0u);
  EXPECT_EQ(charged(Cost::kLsmWrite), static_cast<runtime::Nanos>(writes * 100 + written));
  EXPECT_EQ(charged(Cost::kLsmGet), static_cast<runtime::Nanos>((gets + 1) * 50 + gets * value_bytes));
  // A flush may write several tables, each charged: at least one per flush.
  const runtime::Nanos flush_fixed = charged(Cost::kFlush) - static_cast<runtime::Nanos>(2 * s.flush_bytes);
  EXPECT_EQ(flush_fixed % 1000, 0);
  EXPECT_GE(flush_fixed / 1000, static_cast<runtime::Nanos>(s.flushes));
  EXPECT_EQ(charged(Cost::kCompaction),
            static_cast<runtime::Nanos>(s.compactions * 2000 + 3 * (s.compaction_read_bytes + s.compaction_write_bytes)));
  EXPECT_EQ(x->CpuTime(), charged(Cost::kLsmWrite) + charged(Cost::kLsmGet) + charged(Cost::kFlush) +
                              charged(Cost::kCompaction))
      << "every step on the executor that ran it";
}

// Every failure point of a run's files: the disk goes at mutation K, the
// power at once (keeping a random part of what was not synced), and the
// reopened engine holds every write that was acknowledged and at most the
// one write that failed — nothing from after it, nothing resurrected.
TEST(DbTest, ACrashAtEveryFailurePointLosesNoAcknowledgedWrite) {
  auto run = [](MemFileSystem* fs, Random* rng, Model* acked, std::optional<std::pair<std::string, std::string>>* failed,
                bool* failed_is_delete) {
    auto db = Db::Open("/db", SmallOptions(fs));
    if (!db.ok()) return;
    for (int i = 0; i < 700; ++i) {
      const std::string k = KeyOf(rng->Uniform(150));
      const bool del = rng->Uniform(5) == 0;
      const std::string v = "v" + std::to_string(i) + std::string(rng->Uniform(60), 'y');
      Status s = del ? (*db)->Delete(k) : (*db)->Put(k, v);
      if (!s.ok()) {
        *failed = std::make_pair(k, v);
        *failed_is_delete = del;
        return;
      }
      if (del) {
        acked->erase(k);
      } else {
        (*acked)[k] = v;
      }
    }
  };
  uint64_t total = 0;
  {
    MemFileSystem fs;
    Random rng(7);
    Model acked;
    std::optional<std::pair<std::string, std::string>> failed;
    bool del = false;
    run(&fs, &rng, &acked, &failed, &del);
    ASSERT_FALSE(failed.has_value());
    total = fs.mutations();
  }
  ASSERT_GT(total, 100u);
  int checked = 0;
  for (uint64_t k = 0; k <= total; k += 1 + k / 200) {
    MemFileSystem fs;
    fs.FailAfter(static_cast<int64_t>(k));
    Random rng(7), crash(k);
    Model acked;
    std::optional<std::pair<std::string, std::string>> failed;
    bool del = false;
    run(&fs, &rng, &acked, &failed, &del);
    fs.Crash(&crash);
    auto db = Db::Open("/db", SmallOptions(&fs));
    ASSERT_TRUE(db.ok()) << "failure point " << k << ": " << db.status().ToString();
    for (uint64_t i = 0; i < 150; ++i) {
      const std::string key = KeyOf(i);
      auto got = (*db)->Get(key);
      auto it = acked.find(key);
      std::optional<std::string> want = it == acked.end() ? std::nullopt : std::optional(it->second);
      std::optional<std::string> have = got.ok() ? std::optional(*got) : std::nullopt;
      ASSERT_TRUE(got.ok() || got.status().Is(Code::kNotFound)) << got.status().ToString();
      if (failed && failed->first == key && have != want) {
        // The write that failed may have reached the WAL.
        ASSERT_EQ(have, del ? std::nullopt : std::optional(failed->second)) << "failure point " << k << ", " << key;
      } else {
        ASSERT_EQ(have, want) << "failure point " << k << ", " << key;
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

TEST(DbTest, AWriteAfterAFailedOneIsRefusedUntilReopen) {
  MemFileSystem fs;
  auto db = Db::Open("/db", SmallOptions(&fs));
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Put("a", "1").ok());
  fs.FailAfter(0);
  EXPECT_FALSE((*db)->Put("b", "2").ok());
  fs.FailAfter(-1);
  EXPECT_FALSE((*db)->Put("c", "3").ok()) << "the WAL may hold part of the failed write";
  EXPECT_EQ(*(*db)->Get("a"), "1");  // reads go on
  db->reset();
  auto again = Db::Open("/db", SmallOptions(&fs));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*(*again)->Get("a"), "1");
  EXPECT_TRUE((*again)->Put("c", "3").ok());
}

// Flips one bit of `path` at `at(size)`, as a bad disk would.
void FlipBit(MemFileSystem& fs, const std::string& path, size_t (*at)(size_t)) {
  auto f = fs.Open(path, FileSystem::Kind::kLog);
  ASSERT_TRUE(f.ok());
  std::string scratch;
  std::string bytes(*(*f)->Read(0, (*f)->size(), &scratch));
  ASSERT_FALSE(bytes.empty());
  bytes[at(bytes.size())] ^= 0x40;
  auto w = fs.Create(path, FileSystem::Kind::kLog);
  ASSERT_TRUE((*w)->Append(bytes).ok());
  ASSERT_TRUE((*w)->Sync().ok());
}

TEST(DbTest, DamageIsReportedNotServed) {
  MemFileSystem fs;
  {
    auto db = Db::Open("/db", SmallOptions(&fs));
    ASSERT_TRUE(db.ok());
    for (int i = 0; i < 300; ++i) ASSERT_TRUE((*db)->Put(KeyOf(i), std::string(50, 'z')).ok());
    ASSERT_TRUE((*db)->Flush().ok());
  }
  // Flip a byte in the middle of every table: each lookup that reads a
  // damaged block says Corruption; none returns a wrong value.
  auto names = fs.List("/db");
  ASSERT_TRUE(names.ok());
  int tables = 0;
  for (const auto& n : *names) {
    if (!n.ends_with(".sst")) continue;
    ++tables;
    FlipBit(fs, "/db/" + n, [](size_t size) { return size / 3; });
  }
  ASSERT_GT(tables, 0);
  auto db = Db::Open("/db", SmallOptions(&fs));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  int corrupt = 0;
  for (int i = 0; i < 300; ++i) {
    auto got = (*db)->Get(KeyOf(i));
    if (got.ok()) {
      EXPECT_EQ(*got, std::string(50, 'z'));
    } else {
      EXPECT_TRUE(got.status().Is(Code::kCorruption)) << got.status().ToString();
      ++corrupt;
    }
  }
  EXPECT_GT(corrupt, 0);
}

TEST(DbTest, AManifestDamagedBeforeItsEndIsRefused) {
  MemFileSystem fs;
  {
    auto db = Db::Open("/db", SmallOptions(&fs));
    ASSERT_TRUE(db.ok());
    for (int i = 0; i < 2000; ++i) ASSERT_TRUE((*db)->Put(KeyOf(i % 500), std::string(40, 'm')).ok());
  }
  auto names = fs.List("/db");
  std::string manifest;
  for (const auto& n : *names) {
    if (n.starts_with("MANIFEST-")) manifest = "/db/" + n;
  }
  ASSERT_FALSE(manifest.empty());
  // In the middle: an edit with whole edits after it, not a crash's tear.
  FlipBit(fs, manifest, [](size_t size) { return size / 2; });
  auto db = Db::Open("/db", SmallOptions(&fs));
  EXPECT_TRUE(db.status().Is(Code::kCorruption)) << db.status().ToString();
}

TEST(DbTest, RefusesOptionsOutOfRange) {
  MemFileSystem fs;
  DbOptions o = SmallOptions(&fs);
  o.levels = 1;
  EXPECT_TRUE(Db::Open("/db", o).status().Is(Code::kInvalidArgument));
  o = SmallOptions(&fs);
  o.l0_stop = 1;
  EXPECT_TRUE(Db::Open("/db", o).status().Is(Code::kInvalidArgument));
}

// Background flushes and compactions under 4 writers and 2 readers: each
// writer owns its keys, so its last write of each is what must be read.
TEST(DbTest, BackgroundJobsUnderConcurrentWritersAndReaders) {
  MemFileSystem fs;
  auto db = Db::Open("/db", SmallOptions(&fs, /*background=*/true));
  ASSERT_TRUE(db.ok());
  constexpr int kWriters = 4, kKeys = 200, kOps = 3000;
  std::vector<Model> models(kWriters);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      Random rng(100 + w);
      for (int i = 0; i < kOps; ++i) {
        const std::string k = "w" + std::to_string(w) + KeyOf(rng.Uniform(kKeys));
        const std::string v = std::to_string(i) + std::string(rng.Uniform(80), 'q');
        if (!(*db)->Put(k, v, WriteOptions{.sync = i % 2 == 0}).ok()) bad++;
        models[w][k] = v;
        auto got = (*db)->Get(k);  // read-your-writes through every flush
        if (!got.ok() || *got != v) bad++;
      }
    });
  }
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        std::vector<std::pair<std::string, std::string>> out;
        if (!(*db)->Scan("w", 50, &out).ok()) bad++;
        for (size_t i = 1; i < out.size(); ++i) {
          if (out[i - 1].first >= out[i].first) bad++;
        }
      }
    });
  }
  for (int w = 0; w < kWriters; ++w) threads[w].join();
  stop = true;
  for (size_t i = kWriters; i < threads.size(); ++i) threads[i].join();
  EXPECT_EQ(bad.load(), 0);
  ASSERT_TRUE((*db)->WaitForIdle().ok());
  for (const Model& m : models) {
    for (const auto& [k, v] : m) ASSERT_EQ(*(*db)->Get(k), v);
  }
  const Db::Stats s = (*db)->stats();
  EXPECT_GT(s.flushes, 0u);
  EXPECT_GT(s.compactions, 0u);
  EXPECT_LT(s.write_groups, s.writes) << "concurrent writers should share WAL syncs";
}

}  // namespace
}  // namespace slip::lsm
