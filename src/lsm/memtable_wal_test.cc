// The MemTable (lsm/memtable.h) against a model of versions, a MemTable
// flushed into an SST answering as it did, and the WAL (lsm/wal.h): batches
// replayed in order, a log torn at every byte replaying exactly the whole
// records before the tear, a damaged record ending the replay there, and
// malformed batches refused.
#include <gtest/gtest.h>

#include <map>

#include "common/random.h"
#include "lsm/memtable.h"
#include "lsm/table.h"
#include "lsm/wal.h"

namespace slip::lsm {
namespace {

TEST(MemTableTest, AnswersAtEverySnapshotAsTheModelAndFlushesTheSame) {
  Random rng(9);
  MemTable mem;
  // key -> sequence -> (type, value)
  std::map<std::string, std::map<uint64_t, std::pair<ValueType, std::string>>> model;
  for (uint64_t seq = 1; seq <= 3000; ++seq) {
    const std::string k = "k" + std::to_string(rng.Uniform(300));
    const bool del = rng.Uniform(6) == 0;
    const std::string v = del ? "" : "v" + std::to_string(seq);
    mem.Add(seq, del ? ValueType::kDeletion : ValueType::kValue, k, v);
    model[k][seq] = {del ? ValueType::kDeletion : ValueType::kValue, v};
  }
  EXPECT_EQ(mem.entries(), 3000u);
  EXPECT_EQ(mem.smallest_sequence(), 1u);
  EXPECT_EQ(mem.largest_sequence(), 3000u);
  EXPECT_GT(mem.ApproximateBytes(), 3000u * (4 + 8)) << "at least every entry's key and trailer";
  MemoryFile f;
  TableBuilder b(TableOptions{}, &f);
  mem.ForEach([&](std::string_view k, std::string_view v) { ASSERT_TRUE(b.Add(k, v).ok()); });
  ASSERT_TRUE(b.Finish().ok());
  auto t = Table::Open(&f);
  ASSERT_TRUE(t.ok());
  for (int probe = 0; probe < 3000; ++probe) {
    const std::string k = "k" + std::to_string(rng.Uniform(320));  // some never written
    const uint64_t snap = 1 + rng.Uniform(3100);
    std::optional<std::pair<uint64_t, std::pair<ValueType, std::string>>> want;
    if (auto it = model.find(k); it != model.end()) {
      auto v = it->second.upper_bound(snap);
      if (v != it->second.begin()) want = *std::prev(v);
    }
    const auto got = mem.Get(k, snap);
    ASSERT_EQ(got.has_value(), want.has_value()) << k << "@" << snap;
    auto flushed = (*t)->Get(k, snap);
    ASSERT_TRUE(flushed.ok());
    ASSERT_EQ(flushed->has_value(), want.has_value());
    if (!want) continue;
    EXPECT_EQ(got->sequence, want->first);
    EXPECT_EQ(got->type, want->second.first);
    EXPECT_EQ(got->value, want->second.second);
    EXPECT_EQ((*flushed)->sequence, want->first);
    EXPECT_EQ((*flushed)->value, want->second.second);
  }
}

std::vector<WriteBatch> Batches(int n) {
  std::vector<WriteBatch> out;
  uint64_t seq = 1;
  for (int i = 0; i < n; ++i) {
    WriteBatch b;
    b.sequence = seq;
    for (int j = 0; j <= i % 4; ++j) {
      b.ops.push_back({j == 2 ? ValueType::kDeletion : ValueType::kValue, "key" + std::to_string(i * 10 + j),
                       j == 2 ? "" : std::string(static_cast<size_t>(i * 7 % 50), 'x')});
    }
    seq += b.ops.size();
    out.push_back(std::move(b));
  }
  return out;
}

TEST(WalTest, ReplaysWholeRecordsUpToATearAtEveryByte) {
  const auto batches = Batches(12);
  MemoryFile f;
  WalWriter w(&f);
  std::vector<uint64_t> ends;  // the log's size after each record
  for (const auto& b : batches) {
    ASSERT_TRUE(w.Add(b).ok());
    ends.push_back(f.size());
  }
  for (uint64_t cut = 0; cut <= f.size(); ++cut) {
    MemoryFile torn;
    torn.contents() = f.contents().substr(0, cut);
    std::vector<WriteBatch> seen;
    auto r = ReplayWal(torn, [&](const WriteBatch& b) {
      seen.push_back(b);
      return Status::Ok();
    });
    ASSERT_TRUE(r.ok());
    size_t whole = 0;
    while (whole < ends.size() && ends[whole] <= cut) ++whole;
    ASSERT_EQ(seen.size(), whole) << "cut at " << cut;
    EXPECT_EQ(r->end, whole == 0 ? 0 : ends[whole - 1]);
    EXPECT_EQ(r->torn, r->end != cut);
    for (size_t i = 0; i < whole; ++i) {
      EXPECT_EQ(seen[i].sequence, batches[i].sequence);
      ASSERT_EQ(seen[i].ops.size(), batches[i].ops.size());
      for (size_t j = 0; j < seen[i].ops.size(); ++j) {
        EXPECT_EQ(seen[i].ops[j].key, batches[i].ops[j].key);
        EXPECT_EQ(seen[i].ops[j].value, batches[i].ops[j].value);
        EXPECT_EQ(seen[i].ops[j].type, batches[i].ops[j].type);
      }
    }
    if (whole > 0) {
      EXPECT_EQ(r->last_sequence, batches[whole - 1].sequence + batches[whole - 1].ops.size() - 1);
    }
  }
}

TEST(WalTest, ADamagedRecordEndsTheReplayThereAndBadBatchesAreRefused) {
  const auto batches = Batches(6);
  MemoryFile f;
  WalWriter w(&f);
  uint64_t third = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    if (i == 2) third = f.size();
    ASSERT_TRUE(w.Add(batches[i]).ok());
  }
  f.contents()[third + 12] = static_cast<char>(f.contents()[third + 12] ^ 1);
  uint64_t applied = 0;
  auto r = ReplayWal(f, [&](const WriteBatch&) {
    ++applied;
    return Status::Ok();
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(applied, 2u);
  EXPECT_EQ(r->end, third);
  EXPECT_TRUE(r->torn);
  // An apply that fails stops the replay with its error.
  auto failing = ReplayWal(f, [](const WriteBatch&) { return Status::NoSpace("full"); });
  EXPECT_TRUE(failing.status().Is(Code::kNoSpace));
  // Batches that do not decode.
  const std::string good = EncodeBatch(batches[3]);
  EXPECT_TRUE(DecodeBatch(good).ok());
  for (size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(DecodeBatch(std::string_view(good).substr(0, cut)).ok()) << cut;
  }
  EXPECT_FALSE(DecodeBatch(good + "x").ok()) << "trailing bytes";
  std::string bad_type = good;
  bad_type[9] = 5;  // the first op's type
  EXPECT_FALSE(DecodeBatch(bad_type).ok());
}

}  // namespace
}  // namespace slip::lsm
