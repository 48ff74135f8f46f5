#include "erda/index_word.h"

#include <gtest/gtest.h>

#include <bit>

namespace slip::erda {
namespace {

TEST(IndexWordTest, TheAllZeroWordIsNoEntry) {
  EXPECT_FALSE(IndexWord().valid());
  EXPECT_FALSE(IndexWord(0).valid());
  const IndexWord w = IndexWord::Create(1);
  EXPECT_TRUE(w.valid());
  EXPECT_NE(w.raw(), 0u);
  EXPECT_EQ(w.new_offset(), 1u);
  EXPECT_EQ(w.old_offset(), 0u) << "a fresh create has no old version";
}

TEST(IndexWordTest, AnUpdateTurnsNewIntoOldAndChangesOnlyTheBitAndOneField) {
  IndexWord w = IndexWord::Create(100);
  uint32_t expect_old = 100;
  for (uint32_t next : {200u, 300u, 7u, IndexWord::kMaxOffset, 1u, 12345u}) {
    const IndexWord u = w.Updated(next);
    EXPECT_TRUE(u.valid());
    EXPECT_EQ(u.new_offset(), next);
    EXPECT_EQ(u.old_offset(), expect_old);
    EXPECT_NE(u.flip(), w.flip());
    // Data-comparison writes: the bits that differ lie in the flip bit and
    // the one field that received the new offset (32 bits: Table 1's 4 B).
    const uint64_t changed = u.raw() ^ w.raw();
    const uint64_t field1 = uint64_t{IndexWord::kMaxOffset} << 32;
    const uint64_t field2 = uint64_t{IndexWord::kMaxOffset} << 1;
    const uint64_t allowed = (uint64_t{1} << 63) | (u.flip() ? field1 : field2);
    EXPECT_EQ(changed & ~allowed, 0u) << std::hex << w.raw() << " -> " << u.raw();
    expect_old = next;
    w = u;
  }
}

TEST(IndexWordTest, ReplacingOneOffsetKeepsTheOther) {
  const IndexWord w = IndexWord::Create(10).Updated(20);  // new 20, old 10
  const IndexWord moved = w.WithNew(99);
  EXPECT_EQ(moved.new_offset(), 99u);
  EXPECT_EQ(moved.old_offset(), 10u);
  EXPECT_EQ(moved.flip(), w.flip());
  const IndexWord rolled = w.WithNew(w.old_offset());  // the paper's rollback: new := old
  EXPECT_EQ(rolled.new_offset(), 10u);
  const IndexWord other = w.WithOld(55);
  EXPECT_EQ(other.new_offset(), 20u);
  EXPECT_EQ(other.old_offset(), 55u);
  // Both flip values decode the same way.
  const IndexWord again = other.Updated(66).Updated(77);
  EXPECT_EQ(again.new_offset(), 77u);
  EXPECT_EQ(again.old_offset(), 66u);
}

TEST(IndexWordTest, EveryValidWordDecodesToOffsetsInRange) {
  for (uint64_t raw : {~uint64_t{0}, uint64_t{1}, uint64_t{0x8000000000000001}, uint64_t{0x7fffffffffffffff}}) {
    const IndexWord w(raw);
    EXPECT_LE(w.new_offset(), IndexWord::kMaxOffset);
    EXPECT_LE(w.old_offset(), IndexWord::kMaxOffset);
  }
}

}  // namespace
}  // namespace slip::erda
