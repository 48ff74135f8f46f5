// The LSM engine's building blocks (src/lsm/, docs/formats/lsm_sst.md):
// varints and internal keys, SST blocks (round trip, seeks, every flipped
// byte caught by the block's checksum, malformed contents refused), and
// Bloom filters (no false negatives, false positives within bounds).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <set>

#include "common/random.h"
#include "lsm/block.h"
#include "lsm/bloom.h"
#include "lsm/format.h"

namespace slip::lsm {
namespace {

static_assert(std::endian::native == std::endian::little, "the formats are little-endian; so must the host be");

TEST(FormatTest, VarintsRoundTripAndRefuseWhatIsCutShortOrTooLong) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{300}, uint64_t{UINT32_MAX},
                     uint64_t{UINT64_MAX}}) {
    std::string s;
    PutVarint64(&s, v);
    std::string_view in = s;
    EXPECT_EQ(GetVarint64(&in), v);
    EXPECT_TRUE(in.empty());
    for (size_t cut = 0; cut < s.size(); ++cut) {
      std::string_view part(s.data(), cut);
      EXPECT_FALSE(GetVarint64(&part).has_value()) << v << " cut at " << cut;
      EXPECT_EQ(part.size(), cut) << "unchanged";
    }
  }
  std::string big;
  PutVarint64(&big, uint64_t{UINT32_MAX} + 1);
  std::string_view in = big;
  EXPECT_FALSE(GetVarint32(&in).has_value()) << "past 32 bits";
  std::string eleven(11, '\x80');
  in = eleven;
  EXPECT_FALSE(GetVarint64(&in).has_value()) << "longer than 64 bits can be";
}

TEST(FormatTest, InternalKeysOrderByKeyThenNewestFirst) {
  const std::string a5 = InternalKey("a", 5, ValueType::kValue), a9 = InternalKey("a", 9, ValueType::kValue),
                    a9d = InternalKey("a", 9, ValueType::kDeletion), b1 = InternalKey("b", 1, ValueType::kValue);
  EXPECT_LT(CompareInternalKeys(a9, a5), 0) << "newer first";
  EXPECT_LT(CompareInternalKeys(a9, a9d), 0) << "a value before a delete of the same sequence";
  EXPECT_LT(CompareInternalKeys(a5, b1), 0);
  EXPECT_EQ(CompareInternalKeys(a5, a5), 0);
  auto p = ParseInternalKey(a9d);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->user_key, "a");
  EXPECT_EQ(p->sequence, 9u);
  EXPECT_EQ(p->type, ValueType::kDeletion);
  EXPECT_FALSE(ParseInternalKey("short").has_value());
  std::string bad = a5;
  bad[bad.size() - 8] = 7;  // type 7
  EXPECT_FALSE(ParseInternalKey(bad).has_value());
}

std::map<std::string, std::string> RandomEntries(uint64_t seed, int n) {
  Random rng(seed);
  std::map<std::string, std::string> m;
  while (static_cast<int>(m.size()) < n) {
    // Shared prefixes, so prefix compression has work to do.
    std::string k = "user" + std::to_string(rng.Uniform(50)) + ":" + std::to_string(rng.Uniform(100000));
    m[k] = std::string(rng.Uniform(40), static_cast<char>('a' + rng.Uniform(26)));
  }
  return m;
}

TEST(BlockTest, RoundTripAndSeekForEveryRestartInterval) {
  for (int interval : {1, 2, 16, 1000}) {
    const auto m = RandomEntries(static_cast<uint64_t>(interval), 500);
    BlockBuilder b(interval);
    for (const auto& [k, v] : m) b.Add(k, v);
    const size_t estimate = b.EstimatedSize();
    const std::string contents = b.Finish();
    EXPECT_EQ(contents.size(), estimate);
    auto block = Block::Parse(contents);
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    auto it = block->NewIterator();
    auto want = m.begin();
    for (it.SeekToFirst(); it.Valid(); it.Next(), ++want) {
      ASSERT_NE(want, m.end());
      EXPECT_EQ(it.key(), want->first);
      EXPECT_EQ(it.value(), want->second);
    }
    EXPECT_EQ(want, m.end());
    EXPECT_TRUE(it.status().ok());
    // Seeks: to every key, and between keys.
    for (const auto& [k, v] : m) {
      it.Seek(k);
      ASSERT_TRUE(it.Valid()) << k;
      EXPECT_EQ(it.key(), k);
      it.Seek(k + "\x01");
      auto after = m.upper_bound(k);
      EXPECT_EQ(it.Valid(), after != m.end());
      if (after != m.end() && it.Valid()) {
        EXPECT_EQ(it.key(), after->first);
      }
    }
    it.Seek("");
    EXPECT_EQ(it.key(), m.begin()->first);
    it.Seek("zzzz");
    EXPECT_FALSE(it.Valid());
  }
}

TEST(BlockTest, InternalKeysSeekToTheNewestVisibleVersion) {
  BlockBuilder b;
  for (const auto& [k, seq] : std::vector<std::pair<std::string, uint64_t>>{{"a", 9}, {"a", 5}, {"a", 2}, {"b", 7}}) {
    b.Add(InternalKey(k, seq, ValueType::kValue), k + std::to_string(seq));
  }
  const std::string contents = b.Finish();
  auto block = Block::Parse(contents);
  ASSERT_TRUE(block.ok());
  auto it = block->NewIterator(CompareInternalKeys);
  it.Seek(InternalKey("a", 6, ValueType::kValue));  // a snapshot at sequence 6
  ASSERT_TRUE(it.Valid());
  EXPECT_EQ(it.value(), "a5");
  it.Seek(InternalKey("a", 1, ValueType::kValue));
  ASSERT_TRUE(it.Valid());
  EXPECT_EQ(it.value(), "b7") << "nothing of a at or before 1";
}

TEST(BlockTest, EveryFlippedByteIsCaughtAndMalformedContentsRefused) {
  const auto m = RandomEntries(7, 60);
  BlockBuilder b;
  for (const auto& [k, v] : m) b.Add(k, v);
  const std::string stored = SealBlock(b.Finish());
  ASSERT_TRUE(OpenBlock(stored).ok());
  for (size_t i = 0; i < stored.size(); ++i) {
    std::string bad = stored;
    bad[i] = static_cast<char>(bad[i] ^ 0x40);
    EXPECT_TRUE(OpenBlock(bad).status().Is(Code::kCorruption)) << "byte " << i;
  }
  EXPECT_TRUE(OpenBlock("abc").status().Is(Code::kCorruption));
  // Contents that pass no checksum (a bug, not a bit flip): refused or read
  // as Corruption, never a crash.
  EXPECT_TRUE(Block::Parse("").status().Is(Code::kCorruption));
  std::string huge_count;
  PutFixed32(&huge_count, 1000);
  EXPECT_TRUE(Block::Parse(huge_count).status().Is(Code::kCorruption));
  Random rng(11);
  const std::string contents(OpenBlock(stored).value());
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = contents;
    bad[rng.Uniform(bad.size())] = static_cast<char>(rng.Uniform(256));
    auto block = Block::Parse(bad);
    if (!block.ok()) continue;
    auto it = block->NewIterator();
    int steps = 0;
    for (it.SeekToFirst(); it.Valid() && steps < 1000; it.Next()) ++steps;
    it.Seek("user3");
    EXPECT_LT(steps, 1000);
  }
}

TEST(BloomTest, NoFalseNegativesAndAboutOnePercentFalsePositives) {
  BloomFilterPolicy policy(10);
  EXPECT_EQ(policy.probes(), 7);
  for (int n : {1, 10, 1000, 20000}) {
    std::vector<std::string> keys;
    for (int i = 0; i < n; ++i) keys.push_back("key" + std::to_string(i));
    std::vector<std::string_view> views(keys.begin(), keys.end());
    const std::string filter = policy.Create(views);
    for (const auto& k : keys) ASSERT_TRUE(policy.MayContain(filter, k)) << k;
    int passed = 0;
    constexpr int kProbes = 20000;
    for (int i = 0; i < kProbes; ++i) passed += policy.MayContain(filter, "absent" + std::to_string(i));
    // 10 bits per key: ~0.8% in theory; small filters are padded to 64 bits.
    EXPECT_LT(passed, kProbes / 50) << n << " keys: " << passed << " of " << kProbes << " absent keys passed";
  }
  EXPECT_TRUE(policy.MayContain("", "anything")) << "no filter passes everything";
  EXPECT_TRUE(policy.MayContain(std::string(9, '\0') + "\x7f", "x")) << "a k this code never writes";
}

}  // namespace
}  // namespace slip::lsm
