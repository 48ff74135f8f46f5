#include "pm/region.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/coding.h"
#include "common/random.h"

namespace slip::pm {
namespace {

constexpr size_t kWord = 8;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/slip-pm-test-XXXXXX";
    char* d = ::mkdtemp(tmpl);
    if (d != nullptr) path_ = d;
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
    }
  }
  bool ok() const { return !path_.empty(); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

class PmRegionFileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.ok()) << "mkdtemp failed"; }
  TempDir dir_;
};

uint64_t Word(const PmRegion& r, uint64_t offset) { return LoadLE<uint64_t>(r.at(offset)); }

// Distinct, non-zero values per (line, word, generation) so every word of a
// rewritten line differs from what it replaced.
uint64_t Pattern(size_t line, size_t word, uint64_t gen) {
  return (gen << 48) | (uint64_t{line} << 8) | (word + 1);
}

void FillLine(PmRegion& r, size_t line, uint64_t gen) {
  for (size_t w = 0; w < kCacheLine / kWord; ++w) {
    StoreLE<uint64_t>(r.at(line * kCacheLine + w * kWord), Pattern(line, w, gen));
  }
}

std::vector<std::byte> Snapshot(const PmRegion& r) {
  return std::vector<std::byte>(r.base(), r.base() + r.size());
}

RegionOptions CrashOpts(PersistMode mode = PersistMode::kNone) {
  RegionOptions o;
  o.mode = mode;
  o.crash_model = true;
  return o;
}

// --- mapping -----------------------------------------------------------------

TEST(PmRegionTest, AnonymousIsZeroFilledVolatile) {
  auto r = PmRegion::Anonymous(1 << 20, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  PmRegion& region = **r;
  EXPECT_EQ(region.size(), 1u << 20);
  EXPECT_EQ(region.mode(), PersistMode::kNone);
  EXPECT_FALSE(region.is_dax());
  for (size_t i = 0; i < region.size(); ++i) ASSERT_EQ(region.base()[i], std::byte{0}) << i;
  EXPECT_EQ(region.offset_of(region.at(12345)), 12345u);
}

TEST(PmRegionTest, AnonymousZeroSizeIsInvalid) {
  auto r = PmRegion::Anonymous(0, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
}

TEST(PmRegionTest, Contains) {
  auto r = PmRegion::Anonymous(4096, {});
  ASSERT_TRUE(r.ok());
  PmRegion& region = **r;
  EXPECT_TRUE(region.contains(region.base(), 4096));
  EXPECT_TRUE(region.contains(region.at(4000), 96));
  EXPECT_TRUE(region.contains(region.at(4096), 0));
  EXPECT_FALSE(region.contains(region.at(4000), 97));
  EXPECT_FALSE(region.contains(region.base() - 1, 1));
  EXPECT_FALSE(region.contains(region.at(4097), 0));
  EXPECT_FALSE(region.contains(region.at(8), SIZE_MAX));
}

TEST(PmRegionTest, FlushInstructionIsDetected) {
  const std::string insn = PmRegion::FlushInstruction();
  EXPECT_TRUE(insn == "clwb" || insn == "clflushopt" || insn == "clflush") << insn;
  RecordProperty("flush_instruction", insn);
}

TEST_F(PmRegionFileTest, CreatesZeroFilledFileAndResolvesAuto) {
  const std::string path = dir_.File("pm");
  auto r = PmRegion::OpenFile(path, 64 * 1024, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  PmRegion& region = **r;
  EXPECT_EQ(region.size(), 64u * 1024);
  EXPECT_EQ(region.mode(), region.is_dax() ? PersistMode::kFlush : PersistMode::kMsync);
  RecordProperty("dax", region.is_dax() ? "yes" : "no");
  for (size_t i = 0; i < region.size(); ++i) ASSERT_EQ(region.base()[i], std::byte{0}) << i;
  EXPECT_EQ(std::filesystem::file_size(path), 64u * 1024);
}

TEST_F(PmRegionFileTest, PersistsAcrossReopen) {
  const std::string path = dir_.File("pm");
  {
    auto r = PmRegion::OpenFile(path, 16 * 1024, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (size_t line = 0; line < (*r)->size() / kCacheLine; ++line) FillLine(**r, line, 7);
    (*r)->Persist((*r)->base(), (*r)->size());
  }
  for (size_t adopt_size : {size_t{16 * 1024}, size_t{0}}) {
    auto r = PmRegion::OpenFile(path, adopt_size, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ((*r)->size(), 16u * 1024);
    for (size_t line = 0; line < (*r)->size() / kCacheLine; ++line) {
      for (size_t w = 0; w < kCacheLine / kWord; ++w) {
        ASSERT_EQ(Word(**r, line * kCacheLine + w * kWord), Pattern(line, w, 7));
      }
    }
  }
}

TEST_F(PmRegionFileTest, SizeMismatchIsInvalidArgumentAndLeavesFileAlone) {
  const std::string path = dir_.File("pm");
  { ASSERT_TRUE(PmRegion::OpenFile(path, 8192, {}).ok()); }
  for (size_t wrong : {size_t{4096}, size_t{16384}}) {
    auto r = PmRegion::OpenFile(path, wrong, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().ToString();
  }
  EXPECT_EQ(std::filesystem::file_size(path), 8192u);
}

TEST_F(PmRegionFileTest, BadPathIsIoErrorNamingThePath) {
  const std::string path = dir_.File("no/such/dir/pm");
  auto r = PmRegion::OpenFile(path, 4096, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kIoError);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find(std::strerror(ENOENT)), std::string::npos)
      << r.status().ToString();
}

TEST_F(PmRegionFileTest, DirectoryIsRejected) {
  const std::string path = dir_.File("d");
  ASSERT_TRUE(std::filesystem::create_directory(path));
  for (size_t size : {size_t{4096}, size_t{0}}) {
    auto r = PmRegion::OpenFile(path, size, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kIoError) << r.status().ToString();
  }
}

TEST_F(PmRegionFileTest, ZeroSizeForMissingFileIsInvalidAndCreatesNothing) {
  const std::string path = dir_.File("pm");
  auto r = PmRegion::OpenFile(path, 0, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(PmRegionFileTest, EmptyPathIsInvalid) {
  auto r = PmRegion::OpenFile("", 4096, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
}

TEST_F(PmRegionFileTest, ExistingEmptyFileIsSizedLikeANewOne) {
  // What a crash between create and ftruncate leaves behind.
  const std::string path = dir_.File("pm");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  auto adopt = PmRegion::OpenFile(path, 0, {});
  ASSERT_FALSE(adopt.ok());
  EXPECT_EQ(adopt.status().code(), Code::kInvalidArgument);
  auto r = PmRegion::OpenFile(path, 4096, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(std::filesystem::file_size(path), 4096u);
}

class PmRegionModeTest : public PmRegionFileTest,
                         public ::testing::WithParamInterface<PersistMode> {};

TEST_P(PmRegionModeTest, PersistOddRangesAndReopen) {
  const std::string path = dir_.File("pm");
  const size_t size = 5 * 4096;
  std::vector<std::byte> expect(size, std::byte{0});
  {
    RegionOptions o;
    o.mode = GetParam();
    auto r = PmRegion::OpenFile(path, size, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    PmRegion& region = **r;
    EXPECT_EQ(region.mode(), GetParam());
    Random rng(42);
    // Unaligned ranges, ranges straddling lines and pages, empty, whole region.
    const std::pair<size_t, size_t> ranges[] = {{0, 1},        {63, 2},     {100, 0}, {4090, 20},
                                                {size - 1, 1}, {777, 9000}, {0, size}};
    for (auto [off, len] : ranges) {
      for (size_t i = 0; i < len; ++i) {
        expect[off + i] = static_cast<std::byte>(rng.Next());
        region.base()[off + i] = expect[off + i];
      }
      region.Persist(region.at(off), len);
    }
  }
  if (GetParam() == PersistMode::kMsync) {
    auto r = PmRegion::OpenFile(path, 0, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ((*r)->size(), size);
    EXPECT_EQ(std::memcmp((*r)->base(), expect.data(), size), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, PmRegionModeTest,
                         ::testing::Values(PersistMode::kFlush, PersistMode::kMsync,
                                           PersistMode::kNone),
                         [](const ::testing::TestParamInfo<PersistMode>& p) {
                           switch (p.param) {
                             case PersistMode::kFlush:
                               return std::string("Flush");
                             case PersistMode::kMsync:
                               return std::string("Msync");
                             case PersistMode::kNone:
                               return std::string("None");
                             default:
                               return std::string("Auto");
                           }
                         });

TEST(PmRegionTest, AnonymousAcceptsEveryExplicitMode) {
  for (PersistMode m : {PersistMode::kFlush, PersistMode::kMsync, PersistMode::kNone}) {
    RegionOptions o;
    o.mode = m;
    auto r = PmRegion::Anonymous(3 * 4096, o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ((*r)->mode(), m);
    std::memset((*r)->at(100), 0x5a, 5000);
    (*r)->Persist((*r)->at(100), 5000);
    EXPECT_EQ((*r)->base()[5099], std::byte{0x5a});
  }
}

// --- crash model -------------------------------------------------------------

// How a line came out of a crash, judged word by word against the old and new
// contents it could legally hold.
enum class Outcome { kNew, kOld, kMixed, kIllegal };

Outcome Judge(const PmRegion& r, size_t line, uint64_t old_gen, uint64_t new_gen) {
  size_t n_new = 0, n_old = 0;
  for (size_t w = 0; w < kCacheLine / kWord; ++w) {
    const uint64_t v = Word(r, line * kCacheLine + w * kWord);
    if (v == Pattern(line, w, new_gen)) {
      ++n_new;
    } else if (v == Pattern(line, w, old_gen)) {
      ++n_old;
    } else {
      return Outcome::kIllegal;
    }
  }
  if (n_old == 0) return Outcome::kNew;
  if (n_new == 0) return Outcome::kOld;
  return Outcome::kMixed;
}

// Region of `lines` lines, all durable at generation 1; lines [0, dirty) then
// rewritten at generation 2 without Persist.
std::unique_ptr<PmRegion> DirtyRegion(size_t lines, size_t dirty) {
  auto r = PmRegion::Anonymous(lines * kCacheLine, CrashOpts());
  if (!r.ok()) return nullptr;
  std::unique_ptr<PmRegion> region = std::move(*r);
  for (size_t l = 0; l < lines; ++l) FillLine(*region, l, 1);
  region->Persist(region->base(), region->size());
  for (size_t l = 0; l < dirty; ++l) FillLine(*region, l, 2);
  return region;
}

TEST(PmCrashModelTest, UnpersistedLinesAreKeptDroppedOrTornWordwise) {
  constexpr size_t kLines = 512, kDirty = 300, kPersisted = 100;
  auto region = DirtyRegion(kLines, kDirty);
  ASSERT_NE(region, nullptr);
  // Lines [kDirty, kDirty + kPersisted) get generation 3 and are persisted,
  // one Persist per line, some via an unaligned sub-range of the line.
  for (size_t l = kDirty; l < kDirty + kPersisted; ++l) {
    FillLine(*region, l, 3);
    region->Persist(region->at(l * kCacheLine + (l % 7)), 1 + l % 50);
  }

  const CrashStats s = region->SimulateCrash(12345);
  EXPECT_EQ(s.dirty_lines, kDirty);
  EXPECT_EQ(s.kept + s.dropped + s.torn, s.dirty_lines);

  size_t kept = 0, dropped = 0, torn = 0;
  for (size_t l = 0; l < kDirty; ++l) {
    switch (Judge(*region, l, 1, 2)) {
      case Outcome::kNew:
        ++kept;
        break;
      case Outcome::kOld:
        ++dropped;
        break;
      case Outcome::kMixed:
        ++torn;
        break;
      case Outcome::kIllegal:
        FAIL() << "line " << l << " holds a word that was never written";
    }
  }
  EXPECT_EQ(kept, s.kept);
  EXPECT_EQ(dropped, s.dropped);
  EXPECT_EQ(torn, s.torn);
  // Roughly a third each; 300 draws make these bounds hold for any sane RNG.
  EXPECT_GT(s.kept, kDirty / 6);
  EXPECT_GT(s.dropped, kDirty / 6);
  EXPECT_GT(s.torn, kDirty / 6);

  for (size_t l = kDirty; l < kDirty + kPersisted; ++l) {
    EXPECT_EQ(Judge(*region, l, 1, 3), Outcome::kNew) << "persisted line " << l << " lost";
  }
  for (size_t l = kDirty + kPersisted; l < kLines; ++l) {
    EXPECT_EQ(Judge(*region, l, 0, 1), Outcome::kNew) << "untouched line " << l << " changed";
  }

  // The crash resolved everything: the working image is the durable one.
  const CrashStats again = region->SimulateCrash(999);
  EXPECT_EQ(again.dirty_lines, 0u);
}

TEST(PmCrashModelTest, SingleWordChangesAreNeverTorn) {
  constexpr size_t kLines = 200;
  auto region = DirtyRegion(kLines, 0);
  ASSERT_NE(region, nullptr);
  for (size_t l = 0; l < kLines; ++l) {
    StoreLE<uint64_t>(region->at(l * kCacheLine + (l % 8) * kWord), Pattern(l, l % 8, 2));
  }
  const CrashStats s = region->SimulateCrash(7);
  EXPECT_EQ(s.dirty_lines, kLines);
  EXPECT_EQ(s.torn, 0u);
  EXPECT_EQ(s.kept + s.dropped, kLines);
  EXPECT_GT(s.kept, 0u);
  EXPECT_GT(s.dropped, 0u);
  for (size_t l = 0; l < kLines; ++l) {
    const uint64_t v = Word(*region, l * kCacheLine + (l % 8) * kWord);
    EXPECT_TRUE(v == Pattern(l, l % 8, 1) || v == Pattern(l, l % 8, 2)) << l;
  }
}

TEST(PmCrashModelTest, TwoDifferingWordsTearIntoOneOfEach) {
  constexpr size_t kLines = 300;
  auto region = DirtyRegion(kLines, 0);
  ASSERT_NE(region, nullptr);
  for (size_t l = 0; l < kLines; ++l) {
    StoreLE<uint64_t>(region->at(l * kCacheLine + 0), Pattern(l, 0, 2));
    StoreLE<uint64_t>(region->at(l * kCacheLine + 56), Pattern(l, 7, 2));
  }
  const CrashStats s = region->SimulateCrash(31);
  EXPECT_EQ(s.dirty_lines, kLines);
  EXPECT_GT(s.torn, 0u);
  size_t mixed = 0;
  for (size_t l = 0; l < kLines; ++l) {
    const bool first_new = Word(*region, l * kCacheLine) == Pattern(l, 0, 2);
    const bool last_new = Word(*region, l * kCacheLine + 56) == Pattern(l, 7, 2);
    if (first_new != last_new) ++mixed;
    // The untouched words in between never change.
    for (size_t w = 1; w < 7; ++w)
      ASSERT_EQ(Word(*region, l * kCacheLine + w * kWord), Pattern(l, w, 1));
  }
  EXPECT_EQ(mixed, s.torn);
}

TEST(PmCrashModelTest, SameSeedSameImageDifferentSeedsDiffer) {
  constexpr size_t kLines = 256;
  auto a = DirtyRegion(kLines, kLines);
  auto b = DirtyRegion(kLines, kLines);
  auto c = DirtyRegion(kLines, kLines);
  ASSERT_TRUE(a && b && c);
  const CrashStats sa = a->SimulateCrash(2024);
  const CrashStats sb = b->SimulateCrash(2024);
  const CrashStats sc = c->SimulateCrash(2025);
  EXPECT_EQ(Snapshot(*a), Snapshot(*b));
  EXPECT_EQ(sa.kept, sb.kept);
  EXPECT_EQ(sa.dropped, sb.dropped);
  EXPECT_EQ(sa.torn, sb.torn);
  EXPECT_EQ(sc.dirty_lines, kLines);

  size_t differing_lines = 0;
  for (size_t l = 0; l < kLines; ++l) {
    if (std::memcmp(a->at(l * kCacheLine), c->at(l * kCacheLine), kCacheLine) != 0) {
      ++differing_lines;
    }
  }
  // Two independent outcomes per line agree with probability well under 1/2.
  EXPECT_GT(differing_lines, kLines / 3);
}

TEST(PmCrashModelTest, PersistCoversEveryTouchedLine) {
  auto region = DirtyRegion(4, 0);
  ASSERT_NE(region, nullptr);
  // Bytes 60..69 straddle lines 0 and 1; the whole of both becomes durable,
  // including a store in line 1 that the range does not name.
  std::memset(region->at(60), 0xab, 10);
  StoreLE<uint64_t>(region->at(64 + 48), 0xfeed);
  region->Persist(region->at(60), 10);
  const CrashStats s = region->SimulateCrash(1);
  EXPECT_EQ(s.dirty_lines, 0u);
  EXPECT_EQ(region->base()[69], std::byte{0xab});
  EXPECT_EQ(Word(*region, 64 + 48), 0xfeedu);
}

TEST(PmCrashModelTest, FreezePersistenceAfterTwoCalls) {
  auto region = DirtyRegion(8, 0);
  ASSERT_NE(region, nullptr);
  const uint64_t calls0 = region->persist_calls();
  EXPECT_FALSE(region->persistence_frozen());
  region->FreezePersistenceAfter(2);
  EXPECT_FALSE(region->persistence_frozen());
  for (size_t l = 0; l < 3; ++l) {
    FillLine(*region, l, 2);
    region->Persist(region->at(l * kCacheLine), kCacheLine);
    EXPECT_EQ(region->persistence_frozen(), l >= 1) << "after persist " << l + 1;
  }
  EXPECT_EQ(region->persist_calls(), calls0 + 3);

  const CrashStats s = region->SimulateCrash(5);
  EXPECT_EQ(s.dirty_lines, 1u) << "only the third Persist should have been lost";
  EXPECT_EQ(Judge(*region, 0, 1, 2), Outcome::kNew);
  EXPECT_EQ(Judge(*region, 1, 1, 2), Outcome::kNew);
  EXPECT_NE(Judge(*region, 2, 1, 2), Outcome::kIllegal);

  // A crash restores an unlimited budget.
  EXPECT_FALSE(region->persistence_frozen());
  FillLine(*region, 3, 2);
  region->Persist(region->at(3 * kCacheLine), kCacheLine);
  EXPECT_EQ(region->SimulateCrash(6).dirty_lines, 0u);
  EXPECT_EQ(Judge(*region, 3, 1, 2), Outcome::kNew);
}

TEST(PmCrashModelTest, FreezeAfterZeroFreezesAtOnce) {
  auto region = DirtyRegion(2, 0);
  ASSERT_NE(region, nullptr);
  region->FreezePersistenceAfter(0);
  EXPECT_TRUE(region->persistence_frozen());
  FillLine(*region, 0, 2);
  region->Persist(region->base(), kCacheLine);
  EXPECT_EQ(region->SimulateCrash(1).dirty_lines, 1u);
}

TEST(PmCrashModelTest, PersistCallsCountEveryCall) {
  auto r = PmRegion::Anonymous(4096, CrashOpts());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->persist_calls(), 0u);
  for (int i = 0; i < 10; ++i) (*r)->Persist((*r)->at(i * 64), i);
  EXPECT_EQ((*r)->persist_calls(), 10u);
  (*r)->FreezePersistenceAfter(0);
  (*r)->Persist((*r)->base(), 1);
  EXPECT_EQ((*r)->persist_calls(), 11u);
}

TEST(PmCrashModelTest, ConcurrentPersistOnDisjointLines) {
  constexpr size_t kLinesPerThread = 64;
  constexpr int kRounds = 200;
  auto r = PmRegion::Anonymous(2 * kLinesPerThread * kCacheLine, CrashOpts(PersistMode::kFlush));
  ASSERT_TRUE(r.ok());
  PmRegion& region = **r;
  region.FreezePersistenceAfter(2 * kLinesPerThread * kRounds);
  auto work = [&](size_t first_line) {
    for (int round = 1; round <= kRounds; ++round) {
      for (size_t l = first_line; l < first_line + kLinesPerThread; ++l) {
        FillLine(region, l, static_cast<uint64_t>(round));
        region.Persist(region.at(l * kCacheLine), kCacheLine);
      }
    }
  };
  std::thread t1(work, 0), t2(work, kLinesPerThread);
  t1.join();
  t2.join();
  EXPECT_EQ(region.persist_calls(), uint64_t{2} * kLinesPerThread * kRounds);
  // The budget was exactly the number of calls: none was lost, none spare.
  EXPECT_TRUE(region.persistence_frozen());
  EXPECT_EQ(region.SimulateCrash(3).dirty_lines, 0u);
}

TEST_F(PmRegionFileTest, CrashModelOnFileStartsFromFileAndWritesOutcomeBack) {
  const std::string path = dir_.File("pm");
  constexpr size_t kLines = 128;
  {
    auto r = PmRegion::OpenFile(path, kLines * kCacheLine, {});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (size_t l = 0; l < kLines; ++l) FillLine(**r, l, 1);
    (*r)->Persist((*r)->base(), (*r)->size());
  }
  std::vector<std::byte> after_crash;
  {
    auto r = PmRegion::OpenFile(path, 0, CrashOpts(PersistMode::kAuto));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    PmRegion& region = **r;
    EXPECT_EQ(region.mode(), region.is_dax() ? PersistMode::kFlush : PersistMode::kMsync);
    // The file's contents are the starting durable image: nothing is dirty.
    EXPECT_EQ(region.SimulateCrash(1).dirty_lines, 0u);
    for (size_t l = 0; l < kLines; ++l) EXPECT_EQ(Judge(region, l, 0, 1), Outcome::kNew);

    for (size_t l = 0; l < kLines; ++l) FillLine(region, l, 2);
    region.Persist(region.base(), kCacheLine);  // line 0 only
    const CrashStats s = region.SimulateCrash(77);
    EXPECT_EQ(s.dirty_lines, kLines - 1);
    EXPECT_EQ(Judge(region, 0, 1, 2), Outcome::kNew);
    after_crash = Snapshot(region);
  }
  auto r = PmRegion::OpenFile(path, 0, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Snapshot(**r), after_crash);
}

}  // namespace
}  // namespace slip::pm
