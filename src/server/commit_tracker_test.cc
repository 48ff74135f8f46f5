#include "server/commit_tracker.h"

#include <gtest/gtest.h>

#include "common/hash.h"

namespace slip::server {
namespace {

TEST(CommitTracker, OutOfOrderAcksNeverRunAheadOfAnUnacknowledgedVersion) {
  CommitTracker t;
  for (uint64_t v = 1; v <= 4; ++v) t.Begin(0, v);
  EXPECT_EQ(t.CommitVersion(0), 0u);
  t.Acked(0, 3);
  t.Acked(0, 4);
  EXPECT_EQ(t.CommitVersion(0), 0u) << "1 and 2 are still in flight";
  t.Acked(0, 1);
  EXPECT_EQ(t.CommitVersion(0), 1u);
  t.Acked(0, 2);
  EXPECT_EQ(t.CommitVersion(0), 4u);
  EXPECT_EQ(t.CommitVersion(1), 0u) << "shards are independent";
}

TEST(CommitTracker, AnAbandonedVersionHoldsUntilThePromotionReconcilesIt) {
  CommitTracker t;
  t.Begin(2, 1);
  t.Begin(2, 2);
  t.Begin(2, 3);
  t.Acked(2, 1);
  t.Abandoned(2, 2);  // on some backups only
  t.Acked(2, 3);
  EXPECT_EQ(t.CommitVersion(2), 1u);
  t.Begin(2, 4);
  t.Acked(2, 4);
  EXPECT_EQ(t.CommitVersion(2), 1u);
  // Promoted again (gather and scatter): everything up to 10 is everywhere,
  // but a write still in flight keeps holding.
  t.Begin(2, 5);
  t.Promoted(2, 10);
  EXPECT_EQ(t.CommitVersion(2), 4u);
  t.Acked(2, 5);
  EXPECT_EQ(t.CommitVersion(2), 10u);
}

TEST(CommitTracker, EachVersionIsPublishedOnceUnlessItsRecordFailed) {
  CommitTracker t;
  EXPECT_FALSE(t.TakeNewCommitVersion(0)) << "nothing to publish at 0";
  t.Begin(0, 7);
  t.Acked(0, 7);
  EXPECT_EQ(t.TakeNewCommitVersion(0), 7u);
  EXPECT_FALSE(t.TakeNewCommitVersion(0));
  t.Unpublish(0);
  EXPECT_EQ(t.TakeNewCommitVersion(0), 7u);
  // With a step, a record waits until the version moved far enough.
  for (uint64_t v = 8; v <= 10; ++v) {
    t.Begin(0, v);
    t.Acked(0, v);
  }
  EXPECT_FALSE(t.TakeNewCommitVersion(0, 4));
  t.Begin(0, 11);
  t.Acked(0, 11);
  EXPECT_EQ(t.TakeNewCommitVersion(0, 4), 11u);
}

TEST(CommitKey, EachShardHasAReservedKeyOfItsOwn) {
  constexpr uint32_t kShards = 12;
  const std::vector<std::string> keys = CommitKeys(kShards);
  ASSERT_EQ(keys.size(), kShards);
  for (uint32_t s = 0; s < kShards; ++s) {
    const std::string& k = keys[s];
    EXPECT_EQ(ShardOfHash(HashKey(k), kShards), s);
    EXPECT_TRUE(IsReservedKey(k));
  }
  EXPECT_FALSE(IsReservedKey("slip:commit:0"));
  EXPECT_FALSE(IsReservedKey(std::string_view("\0sli", 4)));
  EXPECT_EQ(DecodeCommitVersion(EncodeCommitVersion(123456789)), 123456789u);
  EXPECT_FALSE(DecodeCommitVersion("short"));
}

}  // namespace
}  // namespace slip::server
