// SST files (lsm/table.h): a table of versions and deletions read back in
// order and by lookups at snapshots, the Bloom filter sparing reads of
// absent keys, and damage — a flipped byte anywhere, a truncated file, keys
// out of order — reported, never read as data.
#include "lsm/table.h"

#include <gtest/gtest.h>

#include <map>

#include "common/random.h"

namespace slip::lsm {
namespace {

struct Version {
  uint64_t sequence;
  ValueType type;
  std::string value;
};

// Random keys, each with 1..3 versions (some deletions), as internal keys.
std::map<std::string, std::vector<Version>> Model(uint64_t seed, int keys) {
  Random rng(seed);
  std::map<std::string, std::vector<Version>> m;
  uint64_t seq = 1;
  while (static_cast<int>(m.size()) < keys) {
    const std::string k = "key" + std::to_string(rng.Uniform(1000000));
    if (m.contains(k)) continue;
    const int n = 1 + static_cast<int>(rng.Uniform(3));
    for (int i = 0; i < n; ++i) {
      const bool del = rng.Uniform(5) == 0;
      m[k].push_back(Version{seq++, del ? ValueType::kDeletion : ValueType::kValue,
                             del ? "" : std::string(rng.Uniform(300), static_cast<char>('a' + i))});
    }
  }
  return m;
}

MemoryFile Build(const std::map<std::string, std::vector<Version>>& m, uint64_t* entries = nullptr) {
  MemoryFile f;
  TableBuilder b(TableOptions{}, &f);
  for (const auto& [k, versions] : m) {
    // Newest first within a key.
    for (auto v = versions.rbegin(); v != versions.rend(); ++v) {
      EXPECT_TRUE(b.Add(InternalKey(k, v->sequence, v->type), v->value).ok());
    }
  }
  EXPECT_TRUE(b.Finish().ok());
  if (entries) *entries = b.entries();
  return f;
}

TEST(TableTest, ReadsBackEveryVersionInOrderAndAtEverySnapshot) {
  const auto m = Model(1, 3000);
  uint64_t entries = 0;
  MemoryFile f = Build(m, &entries);
  auto t = Table::Open(&f);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_GT((*t)->data_blocks(), 100u) << "4 KB blocks";
  uint64_t seen = 0;
  std::string last;
  ASSERT_TRUE((*t)->ForEach([&](std::string_view k, std::string_view) {
                  if (seen > 0) {
                    EXPECT_LT(CompareInternalKeys(last, k), 0);
                  }
                  last.assign(k);
                  ++seen;
                }).ok());
  EXPECT_EQ(seen, entries);
  for (const auto& [k, versions] : m) {
    // The newest, and each version at its own snapshot and just before the next.
    for (size_t i = 0; i < versions.size(); ++i) {
      const Version& v = versions[i];
      auto got = (*t)->Get(k, v.sequence);
      ASSERT_TRUE(got.ok() && got->has_value()) << k;
      EXPECT_EQ((*got)->sequence, v.sequence);
      EXPECT_EQ((*got)->type, v.type);
      EXPECT_EQ((*got)->value, v.value);
    }
    auto newest = (*t)->Get(k);
    ASSERT_TRUE(newest.ok() && newest->has_value());
    EXPECT_EQ((*newest)->sequence, versions.back().sequence);
    auto before = (*t)->Get(k, versions.front().sequence - 1);
    ASSERT_TRUE(before.ok());
    EXPECT_FALSE(before->has_value()) << "nothing of " << k << " before its first write";
  }
}

TEST(TableTest, TheFilterSparesReadsOfAbsentKeys) {
  const auto m = Model(2, 2000);
  MemoryFile f = Build(m);
  auto t = Table::Open(&f);
  ASSERT_TRUE(t.ok());
  int absent = 0;
  for (int i = 0; i < 5000; ++i) {
    auto got = (*t)->Get("nokey" + std::to_string(i));
    ASSERT_TRUE(got.ok());
    absent += !got->has_value();
  }
  EXPECT_EQ(absent, 5000);
  EXPECT_GT((*t)->filtered(), 4900u) << "about 1% pass the filter";
}

// The media-damage sweep over a whole small table (docs/design-notes.md
// "Damage on the media"): every bit flipped and every non-zero 8-byte word
// torn to zero, one case at a time. Each case is detected (the table does
// not open, or a lookup says Corruption) or harmless (every lookup is
// right); none returns a wrong or missing answer.
TEST(TableTest, EveryFlipAndTearOfATableIsDetectedOrHarmless) {
  const auto m = Model(4, 12);
  MemoryFile good = Build(m);
  uint64_t cases = 0, detected = 0, harmless = 0;
  auto check = [&](const MemoryFile& f, const std::string& change) {
    ++cases;
    auto t = Table::Open(&f);
    if (!t.ok()) {
      EXPECT_TRUE(t.status().Is(Code::kCorruption)) << change << ": " << t.status().ToString();
      ++detected;
      return;
    }
    bool corrupt = false;
    for (const auto& [k, versions] : m) {
      auto got = (*t)->Get(k);
      if (!got.ok()) {
        EXPECT_TRUE(got.status().Is(Code::kCorruption)) << change;
        corrupt = true;
        continue;
      }
      ASSERT_TRUE(got->has_value()) << k << " missing, " << change;
      EXPECT_EQ((*got)->value, versions.back().value) << k << ", " << change;
      EXPECT_EQ((*got)->sequence, versions.back().sequence) << k << ", " << change;
    }
    ++(corrupt ? detected : harmless);
  };
  const size_t n = good.contents().size();
  for (size_t byte = 0; byte < n && !HasFailure(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      MemoryFile f = good;
      f.contents()[byte] = static_cast<char>(f.contents()[byte] ^ (1 << bit));
      check(f, "bit " + std::to_string(bit) + " of byte " + std::to_string(byte));
    }
  }
  for (size_t word = 0; word + 8 <= n && !HasFailure(); word += 8) {
    MemoryFile f = good;
    if (f.contents().compare(word, 8, std::string(8, '\0')) == 0) continue;
    f.contents().replace(word, 8, std::string(8, '\0'));
    check(f, "word at " + std::to_string(word) + " torn");
  }
  std::printf("table damage sweep: %zu bytes, %llu cases, %llu detected, %llu harmless\n", n,
              static_cast<unsigned long long>(cases), static_cast<unsigned long long>(detected),
              static_cast<unsigned long long>(harmless));
  EXPECT_GT(detected, cases * 9 / 10);
}

TEST(TableTest, DamageIsReportedNeverReadAsData) {
  const auto m = Model(3, 300);
  MemoryFile good = Build(m);
  Random rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    MemoryFile f = good;
    const size_t at = rng.Uniform(f.contents().size());
    f.contents()[at] = static_cast<char>(f.contents()[at] ^ (1 + rng.Uniform(255)));
    auto t = Table::Open(&f);
    if (!t.ok()) {
      EXPECT_TRUE(t.status().Is(Code::kCorruption)) << t.status().ToString();
      continue;
    }
    // Opened (the flip is in a data block): every answer is right or Corruption.
    for (const auto& [k, versions] : m) {
      auto got = (*t)->Get(k);
      if (!got.ok()) {
        EXPECT_TRUE(got.status().Is(Code::kCorruption));
        continue;
      }
      if (got->has_value()) {
        EXPECT_EQ((*got)->value, versions.back().value) << "byte " << at;
        EXPECT_EQ((*got)->sequence, versions.back().sequence) << "byte " << at;
      } else {
        ADD_FAILURE() << k << " missing after a flip at byte " << at << " without Corruption";
      }
    }
  }
  for (size_t cut : {size_t{0}, size_t{10}, kFooterBytes - 1, good.contents().size() / 2, good.contents().size() - 1}) {
    MemoryFile f = good;
    f.contents().resize(cut);
    EXPECT_TRUE(Table::Open(&f).status().Is(Code::kCorruption)) << "cut at " << cut;
  }
  MemoryFile f;
  TableBuilder b(TableOptions{}, &f);
  ASSERT_TRUE(b.Add(InternalKey("b", 1, ValueType::kValue), "x").ok());
  EXPECT_TRUE(b.Add(InternalKey("a", 2, ValueType::kValue), "y").Is(Code::kInvalidArgument)) << "out of order";
  EXPECT_TRUE(b.Add("short", "z").Is(Code::kInvalidArgument)) << "not an internal key";
  ASSERT_TRUE(b.Finish().ok());
  EXPECT_TRUE(b.Finish().Is(Code::kInvalidArgument));
}

}  // namespace
}  // namespace slip::lsm
