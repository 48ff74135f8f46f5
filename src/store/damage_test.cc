// The media-damage sweep (docs/design-notes.md "Damage on the media"): a
// store is written and stopped, then every bit of a sample of its blocks is
// flipped and every 8-byte word of them torn to zero, one case at a time, on
// a copy of the region, and the store is recovered from the copy. Each case
// must be *detected* (the recovery reports damage, or the store refuses to
// open) or *harmless* (every key still reads its value). A case that is
// neither — a value lost or changed without a report — fails the test.
//
// Samples: live single-block entries, a multi-block entry's middle block, a
// tombstone, entries peers wrote into a receive segment, the superblock's
// first line and segment meta words, each in a store stopped in order
// (everything sealed) and — for a t-log's open segment — after a process
// crash in the same boot (nothing sealed, no tear possible).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/coding.h"
#include "common/hash.h"
#include "store/store_test_util.h"

namespace slip::store {
namespace {

using testing::MakeRegion;
using testing::SmallOptions;

struct Written {
  std::unique_ptr<pm::PmRegion> region;
  std::map<std::string, std::optional<std::string>> want;  // nullopt: deleted
  std::string deleted_value;                                // key5's before its delete
};

struct Sample {
  std::string what;
  uint64_t offset;  // in the region
  uint64_t bytes;
  bool must_detect;  // entry bytes: every change is covered by a CRC
};

StoreOptions Options(bool tears_possible) {
  StoreOptions o = SmallOptions();
  o.max_block_bytes = 512;  // multi-block entries from 480 payload bytes on
  o.limits.max_key = 256;
  o.tears_possible = tears_possible;
  return o;
}

// A recovery seals and erases what it opens: every look goes to a copy.
std::unique_ptr<pm::PmRegion> CopyOf(const pm::PmRegion& r) {
  auto copy = MakeRegion(r.size());
  std::memcpy(copy->base(), r.base(), r.size());
  return copy;
}

// Where the index puts `key`'s entry (a tombstone included), recovered on a copy.
uint64_t Locate(const pm::PmRegion& r, const std::string& key) {
  auto probe = CopyOf(r);
  auto st = Store::Open(probe.get(), Options(/*tears_possible=*/false));
  EXPECT_TRUE(st.ok());
  EXPECT_EQ((*st)->recovery_stats().damaged, 0u);
  const std::optional<uint64_t> at = (*st)->Locate(key);
  EXPECT_TRUE(at.has_value()) << key;
  return at.value_or(0);
}

// Where the entry of `key` with `value` starts (its block 0), or npos.
uint64_t Find(const pm::PmRegion& r, const std::string& key, const std::string& value) {
  const std::string needle = key + value.substr(0, std::min<size_t>(value.size(), 64));
  const std::string_view all(reinterpret_cast<const char*>(r.base()), r.size());
  const size_t at = all.find(needle);
  return at == std::string_view::npos ? at : at - log::kHeaderSize;
}

Written Write(bool seal) {
  Written w;
  w.region = MakeRegion(1 << 20);
  auto opened = Store::Open(w.region.get(), Options(true));
  if (!opened.ok()) {
    ADD_FAILURE() << opened.status().ToString();
    return w;
  }
  Store& st = **opened;
  Random rng(7);
  for (int i = 0; i < 24; ++i) {
    const std::string key = "key" + std::to_string(i);
    const std::string value = "v" + std::to_string(i) + "-" + testing::Value(rng, 40 + 20 * (i % 5));
    EXPECT_TRUE(st.Put(i % 2, key, value).ok());
    w.want[key] = value;
  }
  const std::string big = "big-" + testing::Value(rng, 1500);  // 4 blocks
  EXPECT_TRUE(st.Put(0, "big", big).ok());
  w.want["big"] = big;
  EXPECT_TRUE(st.Delete(1, "key5").ok());
  w.deleted_value = *w.want["key5"];
  w.want["key5"] = std::nullopt;
  // A peer's entries, landed in a receive segment and digested.
  auto seg = st.AllocateReceiveSegment();
  EXPECT_TRUE(seg.ok());
  const log::SegmentTable& t = st.segments();
  uint64_t pos = 0;
  for (int i = 0; i < 6; ++i) {
    const std::string key = "peer" + std::to_string(i);
    const std::string value = "p" + std::to_string(i) + "-" + testing::Value(rng, 60);
    const uint16_t shard = static_cast<uint16_t>(st.ShardOf(HashKey(key)));
    const log::EntryMeta meta{log::EntryType::kPut, shard, st.shard_version(shard) + 1};
    auto layout = log::PlanEntry(key.size(), value.size(), 512);
    EXPECT_TRUE(layout.ok());
    pos += log::EncodeBlock(meta, key, value, *layout, 0, t.SegmentBase(*seg) + pos);
    w.want[key] = value;
  }
  EXPECT_TRUE(st.DigestReceived(*seg, 0, t.segment_size(), Store::ReceiveWalk::kFinal).ok());
  if (seal) {
    EXPECT_TRUE(st.SealReceiveSegment(*seg).ok());
    EXPECT_TRUE(st.SealForStop().ok());
  }
  return w;  // the store object is dropped: a stop (sealed) or a process crash
}

enum class Outcome { kDetected, kHarmless, kSilent };

Outcome Check(const pm::PmRegion& image, const Written& w, bool tears_possible, std::string* why) {
  auto copy = CopyOf(image);
  auto st = Store::Open(copy.get(), Options(tears_possible));
  if (!st.ok()) return Outcome::kDetected;  // superblock or meta table: refused whole
  if ((*st)->recovery_stats().damaged != 0) return Outcome::kDetected;
  for (const auto& [key, value] : w.want) {
    auto got = (*st)->Get(key);
    const bool same = value ? got.ok() && *got == *value : got.status().Is(Code::kNotFound);
    if (!same) {
      *why = key + " reads " + (got.ok() ? "a wrong value" : got.status().ToString()) + " with no damage reported";
      return Outcome::kSilent;
    }
  }
  return Outcome::kHarmless;
}

struct Tally {
  uint64_t cases = 0, detected = 0, harmless = 0;
};

// Flips every bit and tears every non-zero word of [offset, offset+bytes).
Tally Sweep(const Written& w, const Sample& s, bool tears_possible) {
  Tally t;
  pm::PmRegion& r = *w.region;
  auto run = [&](const std::string& change) {
    std::string why;
    const Outcome o = Check(r, w, tears_possible, &why);
    ++t.cases;
    if (o == Outcome::kDetected) ++t.detected;
    if (o == Outcome::kHarmless) ++t.harmless;
    if (o == Outcome::kSilent) ADD_FAILURE() << s.what << ", " << change << ": " << why;
    if (o == Outcome::kHarmless && s.must_detect) ADD_FAILURE() << s.what << ", " << change << ": not detected";
  };
  for (uint64_t byte = 0; byte < s.bytes && !::testing::Test::HasFailure(); ++byte) {
    std::byte* p = r.at(s.offset + byte);
    for (int bit = 0; bit < 8; ++bit) {
      *p ^= std::byte(1u << bit);
      run("bit " + std::to_string(bit) + " of byte " + std::to_string(byte) + " flipped");
      *p ^= std::byte(1u << bit);
    }
  }
  for (uint64_t word = 0; word + 8 <= s.bytes && !::testing::Test::HasFailure(); word += 8) {
    std::byte* p = r.at(s.offset + word);
    uint64_t old;
    std::memcpy(&old, p, 8);
    if (old == 0) continue;  // tearing it back to zero changes nothing
    std::memset(p, 0, 8);
    run("word at byte " + std::to_string(word) + " torn to zero");
    std::memcpy(p, &old, 8);
  }
  std::printf("  %-40s %5llu cases: %5llu detected, %4llu harmless\n", s.what.c_str(),
              static_cast<unsigned long long>(t.cases), static_cast<unsigned long long>(t.detected),
              static_cast<unsigned long long>(t.harmless));
  return t;
}

std::vector<Sample> EntrySamples(const Written& w) {
  std::vector<Sample> out;
  auto entry = [&](const std::string& what, const std::string& key, uint16_t seq) {
    const uint64_t at = Find(*w.region, key, *w.want.at(key));
    EXPECT_NE(at, std::string_view::npos) << key;
    if (at == std::string_view::npos) return;
    uint64_t off = at;
    for (uint16_t i = 0; i < seq; ++i) off += log::PeekHeader(w.region->at(off)).BlockBytes();
    out.push_back({what, off, log::PeekHeader(w.region->at(off)).BlockBytes(), true});
  };
  entry("a live entry (t-log)", "key3", 0);
  entry("a live entry (other t-log)", "key8", 0);
  entry("an entry late in a t-log", "key23", 0);
  entry("block 2 of a 4-block entry", "big", 2);
  entry("a peer's entry (receive segment)", "peer2", 0);
  return out;
}

TEST(DamageSweep, EveryFlipAndTearOfAStoppedStoreIsDetectedOrHarmless) {
  Written w = Write(/*seal=*/true);
  Tally all;
  auto add = [&](const Tally& t) {
    all.cases += t.cases;
    all.detected += t.detected;
    all.harmless += t.harmless;
  };
  for (const Sample& s : EntrySamples(w)) add(Sweep(w, s, /*tears_possible=*/true));
  // The tombstone of key5: the DEL entry.
  const uint64_t tomb = Locate(*w.region, "key5");
  add(Sweep(w, {"a tombstone", tomb, log::PeekHeader(w.region->at(tomb)).BlockBytes(), true}, true));
  // The superblock's first line and the first four segments' meta words.
  add(Sweep(w, {"the superblock", 0, 64, false}, true));
  add(Sweep(w, {"the meta words", log::SegmentTable::kSuperblockSize, 8 * 4, false}, true));
  std::printf("damage sweep (stopped in order): %llu cases, %llu detected, %llu harmless, 0 silent\n",
              static_cast<unsigned long long>(all.cases), static_cast<unsigned long long>(all.detected),
              static_cast<unsigned long long>(all.harmless));
  EXPECT_GT(all.cases, 10000u);
}

TEST(DamageSweep, AnOpenTLogAfterAProcessCrashIsCheckedStrictlyInTheSameBoot) {
  Written w = Write(/*seal=*/false);
  Tally all;
  for (const Sample& s : EntrySamples(w)) {
    if (s.what.find("receive") != std::string::npos) continue;  // open: a cut-short transfer looks the same
    const Tally t = Sweep(w, s, /*tears_possible=*/false);
    all.cases += t.cases;
    all.detected += t.detected;
  }
  std::printf("damage sweep (process crash, same boot): %llu cases, %llu detected\n",
              static_cast<unsigned long long>(all.cases), static_cast<unsigned long long>(all.detected));
  EXPECT_EQ(all.detected, all.cases);
}

// After a possible power loss the end of an open t-log may be torn: its
// torn last entry (here key5's tombstone) is dropped — never reported as
// damage, never half-applied.
TEST(DamageSweep, AfterAPowerLossTheOpenTLogsTornTailIsATearNotDamage) {
  Written w = Write(/*seal=*/false);
  const uint64_t at = Locate(*w.region, "key5");
  const uint64_t bytes = log::PeekHeader(w.region->at(at)).BlockBytes();
  for (uint64_t word = 0; word < bytes; word += 8) {
    auto copy = CopyOf(*w.region);
    std::memset(copy->at(at + word), 0, 8);
    auto st = Store::Open(copy.get(), Options(/*tears_possible=*/true));
    ASSERT_TRUE(st.ok());
    EXPECT_EQ((*st)->recovery_stats().damaged, 0u) << "word " << word;
    auto got = (*st)->Get("key5");
    EXPECT_TRUE(got.ok() ? *got == w.deleted_value : got.status().Is(Code::kNotFound)) << "word " << word;
  }
}

}  // namespace
}  // namespace slip::store
