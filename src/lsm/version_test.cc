// Version edits and the MANIFEST (lsm/version.h): edits round-trip and
// every cut or unknown tag is refused; a version applies edits strictly in
// order and only consistent ones (nothing deleted that is not there, no
// file twice, no overlap above level 0), changing nothing otherwise; a
// MANIFEST torn at every byte recovers the version of its whole edits.
#include "lsm/version.h"

#include <gtest/gtest.h>

#include "lsm/format.h"
#include "lsm/wal.h"

namespace slip::lsm {
namespace {

FileMeta File(uint64_t number, const std::string& lo, const std::string& hi, uint32_t slot = 0) {
  return FileMeta{number, 4096 * number, InternalKey(lo, number * 10, ValueType::kValue),
                  InternalKey(hi, number * 10 + 5, ValueType::kValue), number * 10, number * 10 + 5, slot};
}

std::vector<VersionEdit> History() {
  std::vector<VersionEdit> h;
  VersionEdit e1;  // a flush
  e1.id = 1;
  e1.log_number = 3;
  e1.last_sequence = 100;
  e1.flushed_memtable = 1;
  e1.added = {{0, File(5, "a", "m")}};
  VersionEdit e2;  // another
  e2.id = 2;
  e2.added = {{0, File(6, "c", "z", 7)}};
  e2.flushed_memtable = 2;
  VersionEdit e3;  // a compaction of both into level 1
  e3.id = 3;
  e3.deleted = {{0, 5}, {0, 6}};
  e3.added = {{1, File(7, "a", "k")}, {1, File(8, "l", "z")}};
  e3.next_file_number = 9;
  h = {e1, e2, e3};
  return h;
}

TEST(VersionEditTest, RoundTripsAndRefusesWhatDoesNotDecode) {
  for (const VersionEdit& e : History()) {
    const std::string bytes = EncodeEdit(e);
    auto back = DecodeEdit(bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, e);
    for (size_t cut = 1; cut < bytes.size(); ++cut) {
      auto part = DecodeEdit(std::string_view(bytes).substr(0, cut));
      // A cut at a field boundary decodes to a shorter edit; never to this one.
      if (part.ok()) {
        EXPECT_NE(*part, e) << cut;
      }
    }
  }
  EXPECT_TRUE(DecodeEdit("").status().Is(Code::kCorruption)) << "no id";
  std::string unknown = EncodeEdit(History()[0]);
  PutVarint32(&unknown, 99);
  EXPECT_TRUE(DecodeEdit(unknown).status().Is(Code::kCorruption));
  VersionEdit backwards;
  backwards.id = 1;
  backwards.added = {{1, File(4, "z", "a")}};
  backwards.added[0].second.smallest = InternalKey("z", 1, ValueType::kValue);
  backwards.added[0].second.largest = InternalKey("a", 1, ValueType::kValue);
  EXPECT_TRUE(DecodeEdit(EncodeEdit(backwards)).status().Is(Code::kCorruption)) << "smallest after largest";
}

TEST(VersionTest, AppliesEditsInOrderAndOnlyConsistentOnes) {
  const auto h = History();
  Version v;
  ASSERT_TRUE(v.Apply(h[0]).ok());
  EXPECT_TRUE(v.Apply(h[2]).Is(Code::kInvalidArgument)) << "edit 3 before edit 2";
  ASSERT_TRUE(v.Apply(h[1]).ok());
  EXPECT_EQ(v.files(0).size(), 2u);
  EXPECT_EQ(v.files(0)[1].slot, 7u);
  ASSERT_TRUE(v.Apply(h[2]).ok());
  EXPECT_TRUE(v.files(0).empty());
  ASSERT_EQ(v.files(1).size(), 2u);
  EXPECT_EQ(v.files(1)[0].number, 7u);
  EXPECT_EQ(v.last_edit(), 3u);
  EXPECT_EQ(v.log_number(), 3u);
  EXPECT_EQ(v.last_sequence(), 100u);
  EXPECT_EQ(v.next_file_number(), 9u);
  const Version before = v;
  VersionEdit missing;
  missing.id = 4;
  missing.deleted = {{1, 42}};
  EXPECT_TRUE(v.Apply(missing).Is(Code::kInvalidArgument));
  VersionEdit twice;
  twice.id = 4;
  twice.added = {{2, File(7, "x", "y")}};
  EXPECT_TRUE(v.Apply(twice).Is(Code::kInvalidArgument)) << "file 7 is at level 1";
  VersionEdit overlap;
  overlap.id = 4;
  overlap.added = {{1, File(10, "j", "m")}};
  EXPECT_TRUE(v.Apply(overlap).Is(Code::kInvalidArgument));
  EXPECT_EQ(v, before) << "a refused edit changes nothing";
}

TEST(ManifestTest, RecoversTheVersionOfItsWholeEditsFromATearAtEveryByte) {
  const auto h = History();
  MemoryFile m;
  std::vector<uint64_t> ends;
  std::vector<Version> after;
  Version v;
  for (const auto& e : h) {
    ASSERT_TRUE(AppendEdit(&m, e).ok());
    ASSERT_TRUE(v.Apply(e).ok());
    ends.push_back(m.size());
    after.push_back(v);
  }
  for (uint64_t cut = 0; cut <= m.size(); ++cut) {
    MemoryFile torn;
    torn.contents() = m.contents().substr(0, cut);
    auto r = RecoverManifest(torn);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    size_t whole = 0;
    while (whole < ends.size() && ends[whole] <= cut) ++whole;
    EXPECT_EQ(r->edits, whole) << cut;
    EXPECT_EQ(r->version, whole == 0 ? Version{} : after[whole - 1]) << cut;
    EXPECT_EQ(r->torn, r->end != cut);
  }
  // An edit that checks but breaks the rules: the MANIFEST is not ours.
  MemoryFile wrong;
  ASSERT_TRUE(AppendEdit(&wrong, h[0]).ok());
  ASSERT_TRUE(AppendEdit(&wrong, h[2]).ok());
  EXPECT_TRUE(RecoverManifest(wrong).status().Is(Code::kCorruption));
}

}  // namespace
}  // namespace slip::lsm
