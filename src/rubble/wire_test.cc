// The chain's messages (rubble/wire.h): each round-trips, and every
// truncation, extension and flipped byte is refused or decodes to a
// well-formed value — never a crash or a read past the input.
#include "rubble/wire.h"

#include <gtest/gtest.h>

#include "common/random.h"

namespace slip::rubble {
namespace {

ChainItem AWrite() {
  ChainItem w;
  w.header = {3, 17, 2};
  w.kind = ChainItem::Kind::kWrite;
  w.batch.sequence = 41;
  w.batch.ops.push_back({lsm::ValueType::kValue, "key", "value"});
  w.batch.ops.push_back({lsm::ValueType::kDeletion, "gone", ""});
  w.ticket = {41, 5, 30};
  return w;
}

ChainItem AnEdit() {
  ChainItem e;
  e.header = {1, 9, 0};
  e.kind = ChainItem::Kind::kEdit;
  e.edit.id = 12;
  e.edit.flushed_memtable = 4;
  lsm::FileMeta f;
  f.number = 33;
  f.size = 4096;
  f.slot = 7;
  f.smallest = lsm::InternalKey("a", 1, lsm::ValueType::kValue);
  f.largest = lsm::InternalKey("z", 2, lsm::ValueType::kValue);
  e.edit.added.push_back({0, f});
  e.edit.deleted.push_back({1, 20});
  return e;
}

lsm::FollowerSeed ASeed() {
  lsm::FollowerSeed s;
  s.version.snapshot = true;
  s.version.id = 12;
  s.last_sequence = 99;
  s.mems.push_back({.id = 4, .first_sequence = 80, .entries = {{80, {lsm::ValueType::kValue, "k", "v"}}}});
  s.mems.push_back({.id = 5, .first_sequence = 90, .entries = {{90, {lsm::ValueType::kDeletion, "k", ""}}}});
  return s;
}

// Every prefix and every one-byte extension is refused.
template <typename Decode>
void RefusesEveryTruncation(const std::string& bytes, Decode decode) {
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(decode(std::string_view(bytes).substr(0, n)).ok()) << "prefix of " << n << " bytes";
  }
  EXPECT_FALSE(decode(bytes + '\0').ok()) << "a trailing byte";
}

TEST(ChainWireTest, ItemsRoundTrip) {
  const ChainItem w = AWrite();
  auto got = DecodeItem(EncodeItem(w));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->header, w.header);
  EXPECT_EQ(got->kind, w.kind);
  EXPECT_EQ(got->batch.sequence, 41u);
  ASSERT_EQ(got->batch.ops.size(), 2u);
  EXPECT_EQ(got->batch.ops[1].key, "gone");
  EXPECT_EQ(got->ticket.memtable, 5u);
  EXPECT_EQ(got->ticket.memtable_first, 30u);
  const ChainItem e = AnEdit();
  auto edit = DecodeItem(EncodeItem(e));
  ASSERT_TRUE(edit.ok()) << edit.status().ToString();
  EXPECT_EQ(edit->edit, e.edit);
  RefusesEveryTruncation(EncodeItem(w), DecodeItem);
  RefusesEveryTruncation(EncodeItem(e), DecodeItem);
}

TEST(ChainWireTest, AWriteWhoseTicketDisagreesWithItsBatchIsRefused) {
  ChainItem w = AWrite();
  w.ticket.sequence = 40;
  EXPECT_TRUE(DecodeItem(EncodeItem(w)).status().Is(Code::kCorruption));
}

TEST(ChainWireTest, LinksSeedsAndReportsRoundTrip) {
  LinkRequest l{{2, 5, 1}, true, 64, 1 << 20};
  auto link = DecodeLink(EncodeLink(l));
  ASSERT_TRUE(link.ok());
  EXPECT_TRUE(link->fresh);
  EXPECT_EQ(link->slot_count, 64u);
  EXPECT_EQ(link->slot_bytes, uint64_t{1} << 20);
  RefusesEveryTruncation(EncodeLink(l), DecodeLink);
  const LinkResponse lr{"/data/node-1/rubble/shard-2.slots", 901, 17};
  auto answer = DecodeLinkResponse(EncodeLinkResponse(lr));
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(*answer, lr);
  RefusesEveryTruncation(EncodeLinkResponse(lr), DecodeLinkResponse);

  const std::string blob = "part of a seed";
  SeedChunk c{{2, 5, 1}, 77, 10, 24, blob};
  const std::string encoded = EncodeSeedChunk(c);  // the part decodes as a view into it
  auto chunk = DecodeSeedChunk(encoded);
  ASSERT_TRUE(chunk.ok());
  EXPECT_EQ(chunk->bytes, blob);
  EXPECT_EQ(chunk->seed_id, 77u);
  RefusesEveryTruncation(EncodeSeedChunk(c), DecodeSeedChunk);
  c.total = 20;  // the part would end past the seed
  EXPECT_FALSE(DecodeSeedChunk(EncodeSeedChunk(c)).ok());

  const lsm::FollowerSeed s = ASeed();
  auto seed = DecodeSeed(EncodeSeed(s));
  ASSERT_TRUE(seed.ok()) << seed.status().ToString();
  EXPECT_EQ(seed->version, s.version);
  EXPECT_EQ(seed->last_sequence, 99u);
  ASSERT_EQ(seed->mems.size(), 2u);
  EXPECT_EQ(seed->mems[1].entries.front().second.type, lsm::ValueType::kDeletion);
  RefusesEveryTruncation(EncodeSeed(s), DecodeSeed);

  SlotReport r{{2, 5, 1}, 3, 12, {1, 5, 9}};
  auto report = DecodeSlotReport(EncodeSlotReport(r));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(*report, r);
  RefusesEveryTruncation(EncodeSlotReport(r), DecodeSlotReport);
}

TEST(ChainWireTest, RandomBytesNeverCrashTheDecoders) {
  Random rng(11);
  const std::string samples[] = {EncodeItem(AWrite()), EncodeItem(AnEdit()), EncodeSeed(ASeed()),
                                 EncodeSlotReport({{1, 2, 3}, 4, 5, {6}})};
  for (int i = 0; i < 20000; ++i) {
    std::string b = samples[i % 4];
    const int flips = 1 + static_cast<int>(rng.Uniform(4));
    for (int f = 0; f < flips; ++f) b[rng.Uniform(b.size())] = static_cast<char>(rng.Next());
    (void)DecodeItem(b);
    (void)DecodeLink(b);
    (void)DecodeSeedChunk(b);
    (void)DecodeSeed(b);
    (void)DecodeSlotReport(b);
  }
}

}  // namespace
}  // namespace slip::rubble
