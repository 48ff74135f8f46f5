#include "cluster/config_store.h"
#include "cluster/store_test_util.h"

namespace slip::cluster {
namespace {

class MemoryStoreTest : public ::testing::Test {
 protected:
  testing::OpenFn Opener() {
    return [state = state_] { return OpenMemoryStore(state); };
  }
  std::shared_ptr<MemoryStoreState> state_ = NewMemoryStoreState();
};

TEST_F(MemoryStoreTest, CompareAndSwap) { testing::CheckCas(Opener()); }
TEST_F(MemoryStoreTest, ThreadsRacingCasExactlyOneWins) { testing::CheckCasRace(Opener(), 6, 25); }
TEST_F(MemoryStoreTest, Watch) { testing::CheckWatch(Opener()); }
TEST_F(MemoryStoreTest, LeaseHandover) { testing::CheckLeaseHandover(Opener()); }

TEST_F(MemoryStoreTest, LeasesFollowTheCallersClock) {
  auto s = OpenMemoryStore(state_);
  ASSERT_TRUE(s->AcquireLease("node-1", "a", 100, 1000).ok());
  EXPECT_TRUE(s->AcquireLease("node-1", "b", 100, 1099).status().Is(Code::kBusy));
  auto b = s->AcquireLease("node-1", "b", 100, 1100);  // expired at 1100
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->expiry, 1200);
  // A lease from a clock that went back (expiry more than two ttls ahead) is void.
  EXPECT_TRUE(s->AcquireLease("node-1", "c", 100, 50).ok());
}

TEST_F(MemoryStoreTest, SeparateStatesShareNothing) {
  auto a = OpenMemoryStore(state_);
  auto b = OpenMemoryStore(NewMemoryStoreState());
  ASSERT_TRUE(a->CompareAndSwap(kNoVersion, testing::TestConfig(1)).ok());
  EXPECT_TRUE(b->Load().status().Is(Code::kNotFound));
}

}  // namespace
}  // namespace slip::cluster
