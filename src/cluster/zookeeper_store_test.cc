// The ConfigStore contract against a real ZooKeeper server that the test
// starts itself (zk_test_server.h), plus what only ZooKeeper has: sessions
// (a crashed holder's lease ends with its session) and an unreachable
// ensemble.
#include "cluster/zookeeper_store.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "cluster/store_test_util.h"
#include "cluster/zk_test_server.h"

namespace slip::cluster {
namespace {

using Clock = std::chrono::steady_clock;

class ZooKeeperStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    missing_ = testing::ZkTestServer::MissingPrerequisite();
    if (!missing_.empty()) return;
    auto s = testing::ZkTestServer::Start();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (!missing_.empty()) GTEST_SKIP() << "no ZooKeeper server to start: " << missing_;
    ASSERT_NE(server_, nullptr);
    root_ = std::string("/slip-test/") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  ZooKeeperStoreOptions Options() const {
    ZooKeeperStoreOptions o;
    o.connect = server_->connect();
    o.root = root_;
    return o;
  }
  std::unique_ptr<ConfigStore> Open(ZooKeeperStoreOptions o) {
    auto s = OpenZooKeeperStore(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  testing::OpenFn Opener() {
    return [this] { return Open(Options()); };
  }

  static inline std::string missing_;
  static inline testing::ZkTestServer* server_ = nullptr;
  std::string root_;
};

TEST_F(ZooKeeperStoreTest, CompareAndSwap) { testing::CheckCas(Opener()); }

TEST_F(ZooKeeperStoreTest, SessionsRacingCasExactlyOneWins) {
  testing::CheckCasRace(Opener(), 4, 10);
}

TEST_F(ZooKeeperStoreTest, Watch) { testing::CheckWatch(Opener()); }

TEST_F(ZooKeeperStoreTest, LeaseHandover) { testing::CheckLeaseHandover(Opener()); }

TEST_F(ZooKeeperStoreTest, LeaseExpiryBoundedBySession) {
  ZooKeeperStoreOptions o = Options();
  o.session_timeout = 60 * runtime::kSecond;  // the server clamps to 20 ticks = 10 s
  auto s = Open(o);
  Result<Lease> l = s->AcquireLease("cm", "alpha", 100 * runtime::kSecond, 1000);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_LE(l->expiry, 1000 + 10 * runtime::kSecond) << "no longer than the negotiated session";
  l = s->AcquireLease("cm2", "alpha", 5, 1000);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->expiry, 1005) << "nor longer than the ttl asked for";
}

// The holder process dies without a word: its lease stays until ZooKeeper
// expires the session, then another can take it, with a higher epoch.
TEST_F(ZooKeeperStoreTest, LeaseOfKilledHolderIsTakenAfterSessionExpiry) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();  // before this process opens any session
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(ready[0]);
    ZooKeeperStoreOptions o = Options();
    o.session_timeout = 1 * runtime::kSecond;
    auto s = OpenZooKeeperStore(o);
    if (!s.ok()) _exit(2);
    auto l = (*s)->AcquireLease("cm", "doomed", runtime::kSecond, 0);
    if (!l.ok()) _exit(3);
    const uint64_t epoch = l->epoch;
    if (write(ready[1], &epoch, sizeof epoch) != sizeof epoch) _exit(4);
    for (;;) pause();
  }
  close(ready[1]);
  uint64_t doomed_epoch = 0;
  ASSERT_EQ(read(ready[0], &doomed_epoch, sizeof doomed_epoch),
            static_cast<ssize_t>(sizeof doomed_epoch));
  close(ready[0]);
  auto s = Open(Options());
  Status busy = s->AcquireLease("cm", "heir", runtime::kSecond, 0).status();
  EXPECT_TRUE(busy.Is(Code::kBusy)) << busy.ToString();
  EXPECT_NE(busy.message().find("doomed"), std::string::npos);

  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  const auto killed = Clock::now();
  Result<Lease> heir = Status::Busy();
  while (Clock::now() - killed < std::chrono::seconds(10)) {
    heir = s->AcquireLease("cm", "heir", runtime::kSecond, 0);
    if (!heir.status().Is(Code::kBusy)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(heir.ok()) << heir.status().ToString();
  EXPECT_GT(heir->epoch, doomed_epoch);
  const double waited = std::chrono::duration<double>(Clock::now() - killed).count();
  RecordProperty("takeover_seconds", std::to_string(waited));
  EXPECT_LT(waited, 6.0);
}

TEST_F(ZooKeeperStoreTest, UnreachableIsUnavailableWithinTheConnectTimeout) {
  ZooKeeperStoreOptions o;
  // A loopback port nobody listens on: the server's, after we kill a second one.
  auto other = testing::ZkTestServer::Start();
  ASSERT_TRUE(other.ok());
  o.connect = (*other)->connect();
  (*other)->Kill();
  o.connect_timeout = 500 * runtime::kMillisecond;
  const auto t0 = Clock::now();
  auto s = OpenZooKeeperStore(o);
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.status().Is(Code::kUnavailable)) << s.status().ToString();
  EXPECT_NE(s.status().message().find("not reachable"), std::string::npos);
  EXPECT_LT(took, 3.0);
  EXPECT_TRUE(OpenZooKeeperStore({}).status().Is(Code::kInvalidArgument));
  o.root = "no-slash";
  EXPECT_TRUE(OpenZooKeeperStore(o).status().Is(Code::kInvalidArgument));
}

TEST_F(ZooKeeperStoreTest, ServerLostMeansUnavailableNotAHang) {
  auto own = testing::ZkTestServer::Start();
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  ZooKeeperStoreOptions o = Options();
  o.connect = (*own)->connect();
  o.connect_timeout = 500 * runtime::kMillisecond;
  auto s = Open(o);
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->CompareAndSwap(kNoVersion, testing::TestConfig(1)).ok());
  (*own)->Kill();
  const auto t0 = Clock::now();
  Result<VersionedConfig> r = s->Load();
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_TRUE(r.status().Is(Code::kUnavailable)) << r.status().ToString();
  EXPECT_LT(took, 5.0);
}

}  // namespace
}  // namespace slip::cluster
