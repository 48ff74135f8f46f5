#include "erda/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "common/hash.h"
#include "common/random.h"

namespace slip::erda {
namespace {

EngineOptions SmallOptions() {
  EngineOptions o;
  o.num_buckets = 256;
  o.num_heads = 2;
  o.num_shards = 4;
  o.segment_bytes = 16 << 10;
  o.limits.max_key = 256;
  o.limits.max_value = 8000;
  return o;
}

std::unique_ptr<pm::PmRegion> Region(size_t bytes, bool crash_model = true) {
  pm::RegionOptions o;
  o.crash_model = crash_model;
  return std::move(pm::PmRegion::Anonymous(bytes, o)).value();
}

std::unique_ptr<Engine> OpenEngine(pm::PmRegion* r, const EngineOptions& o = SmallOptions()) {
  auto e = Engine::Open(r, o);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

// What a client's one-sided write does: the object's bytes land at the
// reserved place (all of them, or the first `landed`).
void ClientWrite(pm::PmRegion& region, const Engine& e, const Reservation& r, std::string_view value,
                 size_t landed = SIZE_MAX) {
  const std::string obj = EncodeObject(r.type, r.key, value);
  std::memcpy(region.at(e.layout().ObjectOffset(r.head, r.units)), obj.data(), std::min(landed, obj.size()));
}

TEST(ErdaEngineTest, PutGetDeleteOverwrite) {
  auto region = Region(1 << 20);
  auto e = OpenEngine(region.get());
  EXPECT_TRUE(e->Get("a").status().Is(Code::kNotFound));
  ASSERT_TRUE(e->Put("a", "1").ok());
  ASSERT_TRUE(e->Put("b", "").ok());
  ASSERT_TRUE(e->Put("a", std::string(5000, 'x')).ok());
  EXPECT_EQ(*e->Get("a"), std::string(5000, 'x'));
  EXPECT_EQ(*e->Get("b"), "");
  ASSERT_TRUE(e->Delete("a").ok());
  EXPECT_TRUE(e->Get("a").status().Is(Code::kNotFound));
  const EngineStats before = e->stats();
  EXPECT_TRUE(e->Delete("a").Is(Code::kNotFound));
  EXPECT_TRUE(e->Delete("never").Is(Code::kNotFound));
  EXPECT_EQ(e->stats().object_bytes, before.object_bytes) << "a refused delete wrote";
  ASSERT_TRUE(e->Put("a", "back").ok());
  EXPECT_EQ(*e->Get("a"), "back");
}

TEST(ErdaEngineTest, BadInputIsRefusedAndChangesNothing) {
  auto region = Region(1 << 20);
  auto e = OpenEngine(region.get());
  EXPECT_TRUE(e->Reserve("", ObjectType::kPut, 1).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(e->Reserve(std::string(257, 'k'), ObjectType::kPut, 1).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(e->Reserve("k", ObjectType::kPut, 8001).status().Is(Code::kTooLarge));
  EXPECT_EQ(e->stats().reserves, 0u);
  EXPECT_TRUE(e->Reserve("k", ObjectType::kPut, 1).ok()) << "a refusal left the key pending";

  EngineOptions huge = SmallOptions();
  huge.limits.max_key = 70000;
  EXPECT_TRUE(Engine::Open(Region(1 << 20).get(), huge).status().Is(Code::kInvalidArgument));
  EngineOptions wide = SmallOptions();
  wide.limits.max_value = 1 << 20;  // larger than a segment
  EXPECT_TRUE(Engine::Open(Region(1 << 20).get(), wide).status().Is(Code::kInvalidArgument));
  EXPECT_FALSE(Engine::Open(Region(2048).get(), SmallOptions()).ok());
}

// The client protocol: nothing is visible until Publish; Check refuses an
// object that has not (all) landed, and the client may write again.
TEST(ErdaEngineTest, AWriteIsVisibleOnlyOncePublishedAndATornOneIsRefused) {
  auto region = Region(1 << 20);
  auto e = OpenEngine(region.get());
  ASSERT_TRUE(e->Put("k", "old").ok());
  const std::string value(300, 'n');
  auto r = e->Reserve("k", ObjectType::kPut, value.size());
  ASSERT_TRUE(r.ok());
  const size_t bytes = ObjectBytes(1, value.size());
  for (size_t landed = 0; landed < bytes; landed += 7) {
    ClientWrite(*region, *e, *r, value, landed);
    EXPECT_TRUE(e->Check(*r).status().Is(Code::kCorruption)) << landed << " of " << bytes << " bytes";
    EXPECT_EQ(*e->Get("k"), "old");
  }
  // Any complete object of the reserved key, type and size passes; the
  // client may write again before it commits, and the last write counts.
  ClientWrite(*region, *e, *r, std::string(300, 'w'));
  ASSERT_TRUE(e->Check(*r).ok());
  ClientWrite(*region, *e, *r, value);
  auto checked = e->Check(*r);
  ASSERT_TRUE(checked.ok());
  EXPECT_EQ(checked->value, value);
  EXPECT_EQ(*e->Get("k"), "old") << "visible before it was published";
  ASSERT_TRUE(e->Publish(*r).ok());
  EXPECT_EQ(*e->Get("k"), value);

  // Another key's object, or a different size, at the reserved place is refused.
  auto r2 = e->Reserve("j", ObjectType::kPut, 5);
  ASSERT_TRUE(r2.ok());
  Reservation wrong_key = *r2;
  wrong_key.key = "i";
  ClientWrite(*region, *e, wrong_key, "12345");
  EXPECT_TRUE(e->Check(*r2).status().Is(Code::kCorruption));
  ClientWrite(*region, *e, *r2, "1234");
  EXPECT_TRUE(e->Check(*r2).status().Is(Code::kCorruption));
  EXPECT_EQ(e->stats().refused_checks, bytes / 7 + 1 + 2);
}

// G1: at most one write of a key is pending, so two torn writes can never
// push the last good version out of the index word.
TEST(ErdaEngineTest, OneWriteOfAKeyIsPendingAtATime) {
  auto region = Region(1 << 20);
  auto e = OpenEngine(region.get());
  ASSERT_TRUE(e->Put("k", "v0").ok());
  auto w1 = e->Reserve("k", ObjectType::kPut, 2);
  ASSERT_TRUE(w1.ok());
  EXPECT_TRUE(e->Reserve("k", ObjectType::kPut, 2).status().Is(Code::kBusy));
  EXPECT_TRUE(e->Reserve("k", ObjectType::kDel, 0).status().Is(Code::kBusy));
  EXPECT_TRUE(e->Reserve("other", ObjectType::kPut, 2).ok());
  // W1's client dies after a torn write: aborted, v0 stays, the key is free.
  ClientWrite(*region, *e, *w1, "v1", 5);
  e->Abort(*w1);
  EXPECT_EQ(*e->Get("k"), "v0");
  auto w2 = e->Reserve("k", ObjectType::kPut, 2);
  ASSERT_TRUE(w2.ok());
  ClientWrite(*region, *e, *w2, "v2");
  ASSERT_TRUE(e->Check(*w2).ok());
  ASSERT_TRUE(e->Publish(*w2).ok());
  EXPECT_EQ(*e->Get("k"), "v2");
  EXPECT_EQ(e->stats().busy, 2u);
}

// E3, E4: no object spans a segment; reservations never overlap and move
// forward; a full head is NoSpace and leaves the key free.
TEST(ErdaEngineTest, ReservationsAreDisjointAndNeverSpanASegment) {
  auto region = Region(1 << 20);
  EngineOptions o = SmallOptions();
  o.num_heads = 1;
  auto e = OpenEngine(region.get(), o);
  Random rng(5);
  uint64_t last_end = 0;
  int n = 0;
  for (;; ++n) {
    const std::string key = "k" + std::to_string(n);
    const size_t len = rng.Uniform(8000);
    auto r = e->Reserve(key, ObjectType::kPut, len);
    if (!r.ok()) {
      ASSERT_TRUE(r.status().Is(Code::kNoSpace)) << r.status().ToString();
      break;
    }
    const uint64_t at = uint64_t{r->units} * 8;
    EXPECT_EQ(at / o.segment_bytes, (at + r->bytes - 1) / o.segment_bytes) << "object " << n << " spans";
    EXPECT_GE(at, last_end) << "overlap";
    last_end = at + r->bytes;
    EXPECT_LE(last_end, e->layout().head_bytes);
    ClientWrite(*region, *e, *r, std::string(len, 'v'));
    ASSERT_TRUE(e->Check(*r).ok());
    ASSERT_TRUE(e->Publish(*r).ok());
  }
  EXPECT_GT(n, 50);
  // Fill what is left with the smallest objects (aborted: their space stays used).
  for (int j = 0;; ++j) {
    auto r = e->Reserve("fill" + std::to_string(j), ObjectType::kPut, 0);
    if (!r.ok()) {
      ASSERT_TRUE(r.status().Is(Code::kNoSpace));
      break;
    }
    e->Abort(*r);
  }
  EXPECT_TRUE(e->Reserve("k0", ObjectType::kPut, 100).status().Is(Code::kNoSpace));
  EXPECT_TRUE(e->Reserve("k0", ObjectType::kPut, 100).status().Is(Code::kNoSpace)) << "NoSpace left k0 pending";
  for (int i = 0; i < n; i += 17) EXPECT_TRUE(e->Get("k" + std::to_string(i)).ok()) << i;
}

// EB1's counters: Table 1's formulas with our 11-byte object header
// (docs/papers/erda.md §6.6).
TEST(ErdaEngineTest, NvmBytesFollowTheFormulas) {
  auto region = Region(1 << 20);
  auto e = OpenEngine(region.get());
  const std::string key(19, 'k');
  for (size_t value : {16, 64, 256, 1024, 4096}) {
    const std::string k = key.substr(0, 15) + std::to_string(1000 + value).substr(0, 4);
    const size_t n = k.size() + value;  // Table 1's N: the key-value pair
    EngineStats s0 = e->stats();
    ASSERT_TRUE(e->Put(k, std::string(value, 'c')).ok());
    EngineStats s1 = e->stats();
    EXPECT_EQ((s1.object_bytes - s0.object_bytes) + (s1.index_bytes - s0.index_bytes), n + 11 + 16) << "create";
    ASSERT_TRUE(e->Put(k, std::string(value, 'u')).ok());
    EngineStats s2 = e->stats();
    EXPECT_EQ((s2.object_bytes - s1.object_bytes) + (s2.index_bytes - s1.index_bytes), n + 11 + 4) << "update";
    ASSERT_TRUE(e->Delete(k).ok());
    EngineStats s3 = e->stats();
    EXPECT_EQ((s3.object_bytes - s2.object_bytes) + (s3.index_bytes - s2.index_bytes), k.size() + 11 + 4)
        << "delete";
  }
}

// E1 with a live reader: a reader racing a writer of one key only ever sees
// whole values, and never goes back in time.
TEST(ErdaEngineTest, AReaderRacingAWriterSeesWholeValuesInOrder) {
  auto region = Region(4 << 20, /*crash_model=*/false);
  EngineOptions o = SmallOptions();
  o.num_heads = 1;
  auto e = OpenEngine(region.get(), o);
  ASSERT_TRUE(e->Put("k", std::string(200, 'a') + "0").ok());
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    int last = 0;
    while (!done.load()) {
      auto v = e->Get("k");
      if (!v.ok()) {
        ++bad;
        continue;
      }
      const int i = std::stoi(v->substr(200));
      if (v->substr(0, 200) != std::string(200, static_cast<char>('a' + i % 26)) || i < last) ++bad;
      last = i;
    }
  });
  int i = 1;
  for (; i < 2000; ++i) {
    Status s = e->Put("k", std::string(200, static_cast<char>('a' + i % 26)) + std::to_string(i));
    if (s.Is(Code::kNoSpace)) break;
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  done = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(i, 100);
}

// A damaged newest object is never returned: the reader falls back to the
// old version, and recovery rolls the word back to it (E1, E5).
TEST(ErdaEngineTest, ADamagedObjectFallsBackToTheOldVersionAndRecoveryRollsBack) {
  auto region = Region(1 << 20);
  auto e = OpenEngine(region.get());
  ASSERT_TRUE(e->Put("k", "first").ok());
  auto r = e->Reserve("k", ObjectType::kPut, 6);
  ASSERT_TRUE(r.ok());
  ClientWrite(*region, *e, *r, "second");
  ASSERT_TRUE(e->Check(*r).ok());
  ASSERT_TRUE(e->Publish(*r).ok());
  EXPECT_EQ(*e->Get("k"), "second");
  std::byte* obj = region->at(e->layout().ObjectOffset(r->head, r->units));
  obj[kObjectHeader + 2] ^= std::byte{0x10};  // a bit flips in the value
  region->Persist(obj, 64);
  EXPECT_EQ(*e->Get("k"), "first");
  e.reset();
  e = OpenEngine(region.get());
  EXPECT_EQ(e->recovery().rolled_back, 1u);
  EXPECT_EQ(*e->Get("k"), "first");
  // Both versions damaged: Corruption, never bytes that fail their check.
  auto r2 = e->Reserve("j", ObjectType::kPut, 1);
  ClientWrite(*region, *e, *r2, "x");
  ASSERT_TRUE(e->Check(*r2).ok());
  ASSERT_TRUE(e->Publish(*r2).ok());
  region->at(e->layout().ObjectOffset(r2->head, r2->units))[1] ^= std::byte{1};
  EXPECT_TRUE(e->Get("j").status().Is(Code::kCorruption));
}

// Power fails at a random persist while writes run (some through the
// client protocol, some left reserved and unpublished, some aborted): after
// recovery every acknowledged write is there, nothing unpublished is
// visible, and new writes never overwrite a recovered object.
TEST(ErdaEngineTest, SeededPowerFailuresLoseNothingAcknowledged) {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    Random rng(seed);
    auto region = Region(1 << 20);
    auto e = OpenEngine(region.get());
    std::map<std::string, std::optional<std::string>> acked;  // nullopt: deleted
    std::map<std::string, std::set<std::optional<std::string>>> maybe;
    const int ops = 1 + static_cast<int>(rng.Uniform(300));
    region->FreezePersistenceAfter(rng.Uniform(static_cast<uint64_t>(ops) * 2));
    for (int i = 0; i < ops; ++i) {
      const std::string key = "key" + std::to_string(rng.Uniform(20));
      const std::string value(rng.Uniform(600), static_cast<char>('a' + rng.Uniform(26)));
      const double dice = rng.NextDouble();
      Status s;
      std::optional<std::string> written = value;
      if (dice < 0.15) {
        written = std::nullopt;
        s = e->Delete(key);
        if (s.Is(Code::kNotFound)) continue;
      } else if (dice < 0.25) {
        // Reserved and written, never published (the client died before COMMIT).
        auto r = e->Reserve(key, ObjectType::kPut, value.size());
        if (r.ok()) ClientWrite(*region, *e, *r, value);
        if (r.ok() && rng.Bernoulli(0.5)) e->Abort(*r);
        continue;
      } else {
        s = e->Put(key, value);
      }
      if (s.Is(Code::kNoSpace) || s.Is(Code::kBusy)) continue;
      ASSERT_TRUE(s.ok()) << "seed " << seed << ": " << s.ToString();
      if (region->power_failed()) {
        maybe[key].insert(written);
      } else {
        acked[key] = written;
        maybe[key].clear();
      }
    }
    region->SimulateCrash(seed);
    e.reset();
    e = OpenEngine(region.get());
    ASSERT_NE(e, nullptr) << "seed " << seed;
    for (int k = 0; k < 20; ++k) {
      const std::string key = "key" + std::to_string(k);
      auto got = e->Get(key);
      ASSERT_TRUE(got.ok() || got.status().Is(Code::kNotFound)) << "seed " << seed << " " << got.status().ToString();
      std::optional<std::string> state = got.ok() ? std::optional<std::string>(*got) : std::nullopt;
      const auto a = acked.count(key) ? acked[key] : std::nullopt;
      EXPECT_TRUE(state == a || maybe[key].count(state))
          << "seed " << seed << ": " << key << " recovered to a state no completed write left";
      acked[key] = state;
    }
    // New writes land past every recovered object.
    for (int k = 0; k < 20; ++k) {
      Status s = e->Put("new" + std::to_string(k), std::string(300, 'z'));
      if (s.Is(Code::kNoSpace)) break;
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    for (auto& [key, state] : acked) {
      auto got = e->Get(key);
      std::optional<std::string> now = got.ok() ? std::optional<std::string>(*got) : std::nullopt;
      EXPECT_EQ(now, state) << "seed " << seed << ": a new write overwrote " << key;
    }
  }
}

TEST(ErdaEngineTest, AnExistingRegionKeepsItsLayoutAndADamagedOneIsRefused) {
  auto region = Region(1 << 20);
  auto e = OpenEngine(region.get());
  ASSERT_TRUE(e->Put("k", "v").ok());
  const Layout before = e->layout();
  e.reset();
  EngineOptions other = SmallOptions();
  other.num_buckets = 512;
  other.num_heads = 3;
  e = OpenEngine(region.get(), other);
  EXPECT_EQ(e->layout().num_buckets, before.num_buckets);
  EXPECT_EQ(e->layout().num_heads, before.num_heads);
  EXPECT_EQ(*e->Get("k"), "v");
  e.reset();
  region->at(20)[0] ^= std::byte{1};
  EXPECT_TRUE(Engine::Open(region.get(), SmallOptions()).status().Is(Code::kCorruption));
}

}  // namespace
}  // namespace slip::erda
