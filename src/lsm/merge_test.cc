// Compaction's merge (lsm/merge.h) against a model: sources with
// overlapping keys and interleaved sequences, merged with and without live
// snapshots, at the bottommost level or not — every read at a snapshot a
// reader may still hold answers as it did from the inputs, and what no
// reader can see is gone.
#include "lsm/merge.h"

#include <gtest/gtest.h>

#include <map>

#include "common/random.h"

namespace slip::lsm {
namespace {

// What a reader at `snapshot` sees of `key`: its value, or nullopt (absent
// or deleted).
std::optional<std::string> Visible(const MemTable& m, const std::string& key, uint64_t snapshot) {
  auto f = m.Get(key, snapshot);
  if (!f || f->type == ValueType::kDeletion) return std::nullopt;
  return std::string(f->value);
}

TEST(CompactTest, KeepsExactlyWhatSnapshotsCanSee) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    Random rng(seed);
    MemTable inputs[3], all;
    uint64_t seq = 0;
    for (int i = 0; i < 2000; ++i) {
      const std::string k = "k" + std::to_string(rng.Uniform(150));
      const bool del = rng.Uniform(4) == 0;
      const std::string v = del ? "" : "v" + std::to_string(i);
      ++seq;
      inputs[rng.Uniform(3)].Add(seq, del ? ValueType::kDeletion : ValueType::kValue, k, v);
      all.Add(seq, del ? ValueType::kDeletion : ValueType::kValue, k, v);
    }
    for (const bool bottommost : {false, true}) {
      const uint64_t oldest = seed % 3 == 0 ? kMaxSequence : 1 + rng.Uniform(seq);
      std::vector<std::unique_ptr<EntrySource>> owned;
      std::vector<EntrySource*> sources;
      for (auto& m : inputs) {
        owned.push_back(MemTableSource(m));
        sources.push_back(owned.back().get());
      }
      MemTable out;
      std::string last;
      auto stats = Compact(sources, CompactionOptions{oldest, bottommost}, [&](std::string_view k, std::string_view v) {
        if (!last.empty()) {
          EXPECT_LT(CompareInternalKeys(last, k), 0) << "out of order";
        }
        last.assign(k);
        auto p = ParseInternalKey(k);
        out.Add(p->sequence, p->type, p->user_key, v);
        return Status::Ok();
      });
      ASSERT_TRUE(stats.ok()) << stats.status().ToString();
      EXPECT_EQ(stats->input, 2000u);
      EXPECT_EQ(stats->output, out.entries());
      EXPECT_EQ(stats->input, stats->output + stats->shadowed + stats->tombstones);
      EXPECT_LT(stats->output, stats->input) << "something is always shadowed here";
      if (!bottommost) {
        EXPECT_EQ(stats->tombstones, 0u);
      }
      // Every reader at or after the oldest snapshot sees what it saw.
      for (int key = 0; key < 150; ++key) {
        const std::string k = "k" + std::to_string(key);
        for (uint64_t snap : {oldest, oldest + 1 + rng.Uniform(seq), kMaxSequence}) {
          if (snap < oldest) continue;
          ASSERT_EQ(Visible(out, k, snap), Visible(all, k, snap))
              << "seed " << seed << " key " << k << " at " << snap << (bottommost ? " bottommost" : "");
        }
      }
      if (oldest == kMaxSequence && bottommost) {
        // Nothing but each key's newest value.
        size_t live = 0;
        for (int key = 0; key < 150; ++key) live += Visible(all, "k" + std::to_string(key), kMaxSequence).has_value();
        EXPECT_EQ(out.entries(), live);
      }
    }
  }
}

TEST(CompactTest, MergesTablesAndStopsAtDamage) {
  MemTable a, b;
  for (int i = 0; i < 500; ++i) {
    a.Add(static_cast<uint64_t>(2 * i + 1), ValueType::kValue, "k" + std::to_string(i % 100), "a" + std::to_string(i));
    b.Add(static_cast<uint64_t>(2 * i + 2), ValueType::kValue, "k" + std::to_string(i % 120), "b" + std::to_string(i));
  }
  MemoryFile fa, fb;
  for (auto [m, f] : {std::pair{&a, &fa}, std::pair{&b, &fb}}) {
    TableBuilder tb(TableOptions{}, f);
    m->ForEach([&](std::string_view k, std::string_view v) { ASSERT_TRUE(tb.Add(k, v).ok()); });
    ASSERT_TRUE(tb.Finish().ok());
  }
  auto ta = Table::Open(&fa), tb = Table::Open(&fb);
  ASSERT_TRUE(ta.ok() && tb.ok());
  auto sa = TableSource(**ta), sb = TableSource(**tb);
  uint64_t n = 0;
  auto stats = Compact({sa.get(), sb.get()}, CompactionOptions{kMaxSequence, true}, [&](std::string_view, std::string_view) {
    ++n;
    return Status::Ok();
  });
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(n, 120u) << "one version per key";
  // A damaged data block: the source reports it and the merge stops.
  fa.contents()[100] = static_cast<char>(fa.contents()[100] ^ 1);
  auto damaged = Table::Open(&fa);
  ASSERT_TRUE(damaged.ok()) << "the damage is in a data block";
  auto sd = TableSource(**damaged);
  auto sb2 = TableSource(**tb);
  auto broken = Compact({sd.get(), sb2.get()}, CompactionOptions{}, [](std::string_view, std::string_view) {
    return Status::Ok();
  });
  EXPECT_TRUE(broken.status().Is(Code::kCorruption));
  // An output that fails stops the merge with its error.
  auto sb3 = TableSource(**tb);
  auto full = Compact({sb3.get()}, CompactionOptions{}, [](std::string_view, std::string_view) {
    return Status::NoSpace("the disk is full");
  });
  EXPECT_TRUE(full.status().Is(Code::kNoSpace));
}

}  // namespace
}  // namespace slip::lsm
