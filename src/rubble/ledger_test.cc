// The head's slot ledger (rubble/ledger.h): a slot is handed out again only
// once no follower can still read it — not while a follower's report is
// missing or too old to trust, not while it is listed, not for a follower
// that has not applied the edit it went into, never while the head's own
// version names it.
#include "rubble/ledger.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

namespace slip::rubble {
namespace {

lsm::VersionEdit Adding(uint64_t id, std::vector<std::pair<uint64_t, uint32_t>> tables) {
  lsm::VersionEdit e;
  e.id = id;
  for (auto [number, slot] : tables) {
    lsm::FileMeta f;
    f.number = number;
    f.slot = slot;
    e.added.push_back({0, f});
  }
  return e;
}

TEST(SlotLedgerTest, AFollowerWithoutATrustedReportHoldsEverySlot) {
  SlotLedger l(4);
  EXPECT_EQ(l.free_slots(), 4u);
  l.AddFollower(7, /*required=*/10);
  EXPECT_EQ(l.free_slots(), 0u) << "nothing is known of follower 7 yet";
  l.Report(7, 1, {}, 9);
  EXPECT_EQ(l.free_slots(), 0u) << "a report from before the edit it was taken on at is not trusted";
  l.Report(7, 2, {2}, 10);
  EXPECT_EQ(l.free_slots(), 3u);
  EXPECT_TRUE(Status::NoSpace("").Is(l.Acquire(4, 10).status().code())) << "slot 2 is still read";
  l.RemoveFollower(7);
  EXPECT_EQ(l.free_slots(), 4u);
}

TEST(SlotLedgerTest, ASlotIsHeldUntilItsEditIsLoggedAndAppliedByEveryFollower) {
  SlotLedger l(3);
  l.AddFollower(1, 0);
  l.AddFollower(2, 0);
  l.Report(1, 1, {}, 0);
  l.Report(2, 1, {}, 0);
  auto got = l.Acquire(1);
  ASSERT_TRUE(got.ok());
  const uint32_t slot = got->front();
  EXPECT_EQ(l.free_slots(), 2u) << "handed out, its edit not logged";
  l.Logged(Adding(5, {{40, slot}}));
  // Follower 1 reports before applying edit 5: the slot is not listed, but
  // the table is on its way to it.
  l.Report(1, 2, {}, 4);
  l.Report(2, 2, {slot}, 5);
  EXPECT_EQ(l.free_slots(), 2u);
  l.Report(1, 3, {slot}, 5);
  // The table is deleted (edit 6): follower 2 lets go at once, follower 1
  // only later (a reader still had it).
  l.Report(2, 3, {}, 6);
  EXPECT_EQ(l.free_slots(), 2u);
  l.Report(1, 2, {}, 6);
  EXPECT_EQ(l.free_slots(), 2u) << "an older report than the last taken is ignored";
  l.Report(1, 4, {}, 6);
  EXPECT_EQ(l.free_slots(), 3u);
}

TEST(SlotLedgerTest, TheHeadsOwnTablesKeepTheirSlots) {
  SlotLedger l(3);
  l.SetOwn({1, 3});
  auto got = l.Acquire(1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->front(), 2u);
  EXPECT_TRUE(l.Acquire(1, 10).status().Is(Code::kNoSpace));
  EXPECT_TRUE(l.Acquire(4).status().Is(Code::kNoSpace)) << "more than the pool holds fails at once";
}

TEST(SlotLedgerTest, AcquireWaitsForAReleaseAndCloseWakesIt) {
  SlotLedger l(2);
  l.AddFollower(1, 0);
  l.Report(1, 1, {1, 2}, 0);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    l.Report(1, 2, {1}, 0);
  });
  auto got = l.Acquire(1);
  releaser.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->front(), 2u);
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    l.Close();
  });
  EXPECT_TRUE(l.Acquire(1).status().Is(Code::kAborted));
  closer.join();
}

}  // namespace
}  // namespace slip::rubble
