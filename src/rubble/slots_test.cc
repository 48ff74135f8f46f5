// Slots (rubble/slots.h): the image, the head's one-sided writes into it
// (the table, then zeros to the slot's end), the follower's read-only view
// of a slot as a file of the table's size, and the head's slot map (all or
// nothing, a full pool waits, only followers free).
#include "rubble/slots.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "lsm/testing/temp_dir.h"

namespace slip::rubble {
namespace {

using lsm::testing::TempDir;

const SlotGeometry kGeometry{.count = 4, .slot_bytes = 16 << 10};

lsm::FileMeta Meta(uint64_t number, uint64_t size, uint32_t slot) {
  lsm::FileMeta m;
  m.number = number;
  m.size = size;
  m.slot = slot;
  return m;
}

TEST(SlotsTest, AHeadWritesATableAndAFollowerReadsItBackAsAFileOfItsSize) {
  TempDir t;
  ASSERT_TRUE(t.ok());
  const std::string image = t.path() + "/f.slots";
  ASSERT_TRUE(CreateSlotImage(image, kGeometry).ok());
  EXPECT_EQ(std::filesystem::file_size(image), kGeometry.image_bytes());
  lsm::IoCounters shipped;
  auto w = SlotWriter::Open(image, kGeometry, &shipped);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<uint32_t> released;
  auto fs = SlotFileSystem::Open(t.path() + "/f", image, kGeometry, [&](uint32_t s) { released.push_back(s); });
  ASSERT_TRUE(fs.ok()) << fs.status().ToString();

  // A long table, then a short one in the same slot: no byte of the first
  // survives past the second's end.
  const std::string big(12000, 'B'), small = "small table";
  ASSERT_TRUE((*w)->Write(2, big).ok());
  ASSERT_TRUE((*w)->Write(2, small).ok());
  EXPECT_EQ(shipped.bytes_written.load(), 2 * kGeometry.slot_bytes) << "the slot is written whole (the padding)";
  ASSERT_TRUE((*fs)->Adopt(Meta(7, small.size(), 2)).ok());
  auto f = (*fs)->Open(t.path() + "/f/000007.sst", lsm::FileSystem::Kind::kTable);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->size(), small.size());
  std::string scratch;
  EXPECT_EQ(*(*f)->Read(0, small.size(), &scratch), small);
  EXPECT_TRUE((*f)->Read(0, small.size() + 1, &scratch).status().Is(Code::kCorruption));
  // Past the table, the slot is zeros (what a reader of the image sees).
  auto whole = lsm::NewRandomAccessFile(image);
  auto tail = (*whole)->Read(kGeometry.slot_bytes + small.size(), kGeometry.slot_bytes - small.size(), &scratch);
  EXPECT_EQ(*tail, std::string(kGeometry.slot_bytes - small.size(), '\0'));

  // Removing the table frees its slot; the name is gone.
  ASSERT_TRUE((*fs)->Remove(t.path() + "/f/000007.sst").ok());
  EXPECT_EQ(released, std::vector<uint32_t>{2});
  EXPECT_TRUE((*fs)->Open(t.path() + "/f/000007.sst", lsm::FileSystem::Kind::kTable).status().Is(Code::kNotFound));
}

TEST(SlotsTest, WhatDoesNotFitOrDoesNotAddUpIsRefused) {
  TempDir t;
  ASSERT_TRUE(t.ok());
  const std::string image = t.path() + "/f.slots";
  EXPECT_TRUE(CreateSlotImage(image, {.count = 2, .slot_bytes = 1000}).Is(Code::kInvalidArgument));
  ASSERT_TRUE(CreateSlotImage(image, kGeometry).ok());
  auto w = SlotWriter::Open(image, kGeometry);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE((*w)->Write(1, std::string(kGeometry.slot_bytes + 1, 'x')).Is(Code::kTooLarge));
  EXPECT_TRUE((*w)->Write(0, "x").Is(Code::kInvalidArgument));
  EXPECT_TRUE((*w)->Write(5, "x").Is(Code::kInvalidArgument));
  EXPECT_FALSE(SlotWriter::Open(image, {.count = 8, .slot_bytes = 16 << 10}).ok()) << "a geometry the image is not";

  auto fs = SlotFileSystem::Open(t.path() + "/f", image, kGeometry, nullptr);
  ASSERT_TRUE(fs.ok());
  // A follower writes no table: the slots are the head's.
  EXPECT_TRUE((*fs)->Create(t.path() + "/f/000009.sst", lsm::FileSystem::Kind::kTable).status().Is(Code::kNotSupported));
  EXPECT_TRUE((*fs)->Adopt(Meta(1, 10, 0)).Is(Code::kCorruption));
  EXPECT_TRUE((*fs)->Adopt(Meta(1, kGeometry.slot_bytes + 1, 1)).Is(Code::kCorruption));
  ASSERT_TRUE((*fs)->Adopt(Meta(1, 10, 3)).ok());
  EXPECT_TRUE((*fs)->Adopt(Meta(2, 10, 3)).Is(Code::kCorruption))
      << "a slot a live table holds is not shipped into";
  // The MANIFEST and friends are ordinary files in its directory.
  auto m = (*fs)->Create(t.path() + "/f/MANIFEST-000001", lsm::FileSystem::Kind::kLog);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto names = (*fs)->List(t.path() + "/f");
  ASSERT_TRUE(names.ok());
  EXPECT_NE(std::find(names->begin(), names->end(), "000001.sst"), names->end());
  EXPECT_NE(std::find(names->begin(), names->end(), "MANIFEST-000001"), names->end());
}

TEST(SlotMapTest, SlotsAreTakenAllOrNothingAndFreedOnlyByEveryFollower) {
  SlotMap map(4, 2);
  auto a = map.Acquire(3);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(map.free_slots(), 1u);
  EXPECT_TRUE(map.Acquire(2, 10).status().Is(Code::kNoSpace)) << "all or nothing";
  EXPECT_EQ(map.free_slots(), 1u);
  EXPECT_TRUE(map.Acquire(5).status().Is(Code::kNoSpace));
  // One follower's release is not enough; both free it.
  map.Release(0, (*a)[0]);
  EXPECT_EQ(map.free_slots(), 1u);
  map.Release(1, (*a)[0]);
  EXPECT_EQ(map.free_slots(), 2u);
  // A full pool stalls the head until a follower releases (T5).
  ASSERT_TRUE(map.Acquire(2).ok());
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    map.Release(0, (*a)[1]);
    map.Release(1, (*a)[1]);
  });
  auto waited = map.Acquire(1, 5000);
  releaser.join();
  ASSERT_TRUE(waited.ok());
  EXPECT_EQ((*waited)[0], (*a)[1]);
  // A dead follower's bits clear: what only it held is free.
  map.Release(0, (*a)[2]);
  EXPECT_EQ(map.free_slots(), 0u);
  map.RemoveFollower(1);
  EXPECT_GE(map.free_slots(), 1u);
}

}  // namespace
}  // namespace slip::rubble
