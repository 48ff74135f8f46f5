#include "erda/object.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "common/random.h"

namespace slip::erda {
namespace {

log::Limits TestLimits() {
  log::Limits l;
  l.max_key = 1024;
  l.max_value = 1 << 20;
  return l;
}

std::string Filled(Random& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng.Next());
  return s;
}

std::span<const std::byte> Bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST(ErdaObjectTest, RoundTripsPutsAndDeletes) {
  Random rng(1);
  const std::string key = "user0000000000012345";  // the paper's 19-20 B keys
  for (size_t n : {0, 1, 16, 100, 256, 4096, 70000}) {
    const std::string value = Filled(rng, n);
    const std::string obj = EncodeObject(ObjectType::kPut, key, value);
    ASSERT_EQ(obj.size(), ObjectBytes(key.size(), n));
    EXPECT_EQ(AlignedObjectBytes(key.size(), n) % 8, 0u);
    auto d = DecodeObject(Bytes(obj), TestLimits());
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->type, ObjectType::kPut);
    EXPECT_EQ(d->key, key);
    EXPECT_EQ(d->value, value);
    EXPECT_EQ(d->bytes, obj.size());
    EXPECT_EQ(*PeekObjectBytes(Bytes(obj), TestLimits()), obj.size());
  }
  const std::string del = EncodeObject(ObjectType::kDel, key, "ignored");
  EXPECT_EQ(del.size(), kObjectHeader + key.size()) << "a delete is header + key";
  auto d = DecodeObject(Bytes(del), TestLimits());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->type, ObjectType::kDel);
  EXPECT_TRUE(d->value.empty());
}

TEST(ErdaObjectTest, GarbageAndShortReadsAreRefused) {
  const std::string zeros(64, '\0');
  EXPECT_TRUE(DecodeObject(Bytes(zeros), TestLimits()).status().Is(Code::kCorruption));
  EXPECT_TRUE(PeekObjectBytes(Bytes(zeros), TestLimits()).status().Is(Code::kCorruption));
  std::string obj = EncodeObject(ObjectType::kPut, "k", std::string(300, 'v'));
  // A read that stopped early: the header is fine, the object is not all there.
  EXPECT_EQ(*PeekObjectBytes(Bytes(obj.substr(0, 16)), TestLimits()), obj.size());
  EXPECT_TRUE(DecodeObject(Bytes(obj.substr(0, 200)), TestLimits()).status().Is(Code::kCorruption));
  EXPECT_TRUE(PeekObjectBytes(Bytes(obj.substr(0, 10)), TestLimits()).status().Is(Code::kCorruption));
  // Lengths a reader must not believe before the CRC.
  log::Limits small = TestLimits();
  small.max_value = 100;
  EXPECT_TRUE(PeekObjectBytes(Bytes(obj), small).status().Is(Code::kCorruption));
  std::string no_key = obj;
  no_key[5] = no_key[6] = '\0';
  EXPECT_TRUE(PeekObjectBytes(Bytes(no_key), TestLimits()).status().Is(Code::kCorruption));
  std::string del_with_value = EncodeObject(ObjectType::kDel, "k", {});
  del_with_value[7] = '\x05';
  EXPECT_TRUE(PeekObjectBytes(Bytes(del_with_value), TestLimits()).status().Is(Code::kCorruption));
}

// E1 at the object level: a new object torn after any prefix of its bytes
// (ascending placement) or any subset of its 8-byte chunks (random order),
// over zeroed space or over an older object, never decodes to a mixture.
TEST(ErdaObjectTest, ATornObjectIsNeverAMixture) {
  Random rng(7);
  const std::string key = "key-0000000000000042";
  for (size_t n : {16, 100, 256, 4096}) {
    const std::string fresh = EncodeObject(ObjectType::kPut, key, Filled(rng, n));
    const std::string older = EncodeObject(ObjectType::kPut, key, Filled(rng, n));
    for (const std::string* under : {static_cast<const std::string*>(nullptr), &older}) {
      const std::string background = under ? *under : std::string(fresh.size(), '\0');
      const size_t chunks = (fresh.size() + 7) / 8;
      std::vector<size_t> order(chunks);
      std::iota(order.begin(), order.end(), 0);
      for (bool random : {false, true}) {
        if (random) {
          for (size_t i = chunks; i > 1; --i) std::swap(order[i - 1], order[rng.Uniform(i)]);
        }
        // Ascending: every byte prefix. Random: every chunk-count prefix of the permutation.
        const size_t steps = random ? chunks : fresh.size();
        for (size_t k = 0; k <= steps; ++k) {
          std::string landed = background;
          if (random) {
            for (size_t c = 0; c < k; ++c) {
              const size_t off = order[c] * 8;
              std::memcpy(landed.data() + off, fresh.data() + off, std::min<size_t>(8, fresh.size() - off));
            }
          } else {
            std::memcpy(landed.data(), fresh.data(), k);
          }
          auto d = DecodeObject(Bytes(landed), TestLimits());
          const bool complete = k == steps;
          if (complete) {
            ASSERT_TRUE(d.ok()) << n << " B, complete";
            EXPECT_EQ(landed, fresh);
            continue;
          }
          if (!d.ok()) continue;
          const std::string got(reinterpret_cast<const char*>(landed.data()), d->bytes);
          EXPECT_TRUE(got == fresh || got == background)
              << n << " B value, " << (random ? "random" : "ascending") << " order, " << k
              << " of " << steps << (under ? " over an older object" : " over zeroes")
              << ": decoded a mixture";
        }
      }
    }
  }
}

TEST(ErdaObjectTest, EveryBitFlipIsCaught) {
  Random rng(3);
  const std::string obj = EncodeObject(ObjectType::kPut, "flip-me", Filled(rng, 100));
  for (size_t bit = 0; bit < obj.size() * 8; ++bit) {
    std::string bad = obj;
    bad[bit / 8] = static_cast<char>(bad[bit / 8] ^ (1 << (bit % 8)));
    EXPECT_FALSE(DecodeObject(Bytes(bad), TestLimits()).ok()) << "bit " << bit;
  }
}

}  // namespace
}  // namespace slip::erda
