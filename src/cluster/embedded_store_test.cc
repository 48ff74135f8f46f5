#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sys/file.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <fstream>
#include <random>
#include <thread>

#include "cluster/config_store.h"
#include "cluster/store_test_util.h"

namespace slip::cluster {
namespace {

namespace fs = std::filesystem;

class EmbeddedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/slip-cluster-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    dir_ += "/store";  // the store creates it
  }
  void TearDown() override { fs::remove_all(fs::path(dir_).parent_path()); }

  std::unique_ptr<ConfigStore> Open() {
    EmbeddedStoreOptions o;
    o.dir = dir_;
    o.watch_interval = 5 * runtime::kMillisecond;
    Result<std::unique_ptr<ConfigStore>> s = OpenEmbeddedStore(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  testing::OpenFn Opener() {
    return [this] { return Open(); };
  }
  void WriteRaw(const std::string& name, const std::string& data) {
    std::ofstream(dir_ + "/" + name, std::ios::trunc) << data;
  }

  std::string dir_;
};

TEST_F(EmbeddedStoreTest, CompareAndSwap) { testing::CheckCas(Opener()); }

TEST_F(EmbeddedStoreTest, ThreadsRacingCasExactlyOneWins) {
  testing::CheckCasRace(Opener(), 6, 25);
}

TEST_F(EmbeddedStoreTest, Watch) { testing::CheckWatch(Opener()); }

// A change made through another instance (another process, in real use)
// wakes nothing in `watcher`'s instance but its own watch mechanism. The
// recheck is an hour: only inotify or the watch_interval poll finds it.
void ExpectAnotherWritersChangesSeen(ConfigStore& watcher, ConfigStore& writer, uint64_t version, int changes) {
  for (int i = 0; i < changes; ++i) {
    std::promise<void> fired;
    ASSERT_TRUE(watcher.Watch(version, [&] { fired.set_value(); }).ok());
    auto f = fired.get_future();
    // Files other than the configuration come and go (a lease renewal):
    // they may wake the watcher, which finds nothing changed.
    ASSERT_TRUE(writer.AcquireLease("n", "h", runtime::kSecond, runtime::kSecond).ok());
    EXPECT_EQ(f.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
    Result<VersionedConfig> now = writer.Load();
    ASSERT_TRUE(now.ok());
    Result<uint64_t> v = writer.CompareAndSwap(version, testing::TestConfig(now->config.term + 1));
    ASSERT_TRUE(v.ok());
    version = *v;
    ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "change " << i;
  }
}

// Where the directory cannot be watched, the watcher polls.
TEST_F(EmbeddedStoreTest, WatchByPolling) {
  EmbeddedStoreOptions o;
  o.dir = dir_;
  o.inotify = false;
  o.watch_interval = 5 * runtime::kMillisecond;
  o.recheck_interval = 3600 * runtime::kSecond;
  testing::CheckWatch([&] { return std::move(OpenEmbeddedStore(o)).value(); });
  auto a = std::move(OpenEmbeddedStore(o)).value();
  auto b = std::move(OpenEmbeddedStore(o)).value();
  ExpectAnotherWritersChangesSeen(*a, *b, a->Load()->version, 3);
}

// inotify reports another store's change at once: neither poll finds it.
TEST_F(EmbeddedStoreTest, WatchSeesAnotherWritersChangeWithoutPolling) {
  EmbeddedStoreOptions o;
  o.dir = dir_;
  o.watch_interval = 3600 * runtime::kSecond;
  o.recheck_interval = 3600 * runtime::kSecond;
  auto a = std::move(OpenEmbeddedStore(o)).value();
  auto b = std::move(OpenEmbeddedStore(o)).value();
  Result<uint64_t> v = b->CompareAndSwap(kNoVersion, testing::TestConfig(1));
  ASSERT_TRUE(v.ok());
  ExpectAnotherWritersChangesSeen(*a, *b, *v, 4);
}

// The directory moved away under a pending watch: the watch fires (the file
// is gone). Moved back, changes are still seen though neither the hourly
// recheck nor the hourly poll comes: the watcher watches the directory
// again at its next look (the next Watch's).
TEST_F(EmbeddedStoreTest, WatchSurvivesItsDirectoryMovingAway) {
  EmbeddedStoreOptions o;
  o.dir = dir_;
  o.watch_interval = 3600 * runtime::kSecond;
  o.recheck_interval = 3600 * runtime::kSecond;
  auto a = std::move(OpenEmbeddedStore(o)).value();
  Result<uint64_t> v = a->CompareAndSwap(kNoVersion, testing::TestConfig(1));
  ASSERT_TRUE(v.ok());
  std::promise<void> fired;
  ASSERT_TRUE(a->Watch(*v, [&] { fired.set_value(); }).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  fs::rename(dir_, dir_ + ".moved");
  EXPECT_EQ(fired.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  fs::rename(dir_ + ".moved", dir_);
  auto b = std::move(OpenEmbeddedStore(o)).value();
  ExpectAnotherWritersChangesSeen(*a, *b, *v, 3);
}

TEST_F(EmbeddedStoreTest, LeaseHandover) { testing::CheckLeaseHandover(Opener()); }

TEST_F(EmbeddedStoreTest, OpenRejectsBadOptions) {
  EXPECT_TRUE(OpenEmbeddedStore({}).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(OpenEmbeddedStore({.dir = dir_, .recheck_interval = 0}).status().Is(Code::kInvalidArgument));
  WriteRaw("", "");  // no-op; dir_ does not exist yet
  const std::string file = fs::path(dir_).parent_path() / "plain";
  std::ofstream(file) << "x";
  EmbeddedStoreOptions o;
  o.dir = file;
  EXPECT_FALSE(OpenEmbeddedStore(o).ok());
}

// Processes, not threads: flock must serialise separate processes too.
TEST_F(EmbeddedStoreTest, ProcessesRacingCasExactlyOneWins) {
  ASSERT_TRUE(Open()->CompareAndSwap(kNoVersion, testing::TestConfig(1)).ok());
  constexpr int kProcs = 4;
  for (int round = 0; round < 8; round++) {
    const uint64_t version = Open()->Load()->version;
    const uint64_t term = static_cast<uint64_t>(round) + 2;
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    std::vector<pid_t> kids;
    for (int i = 0; i < kProcs; i++) {
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        close(go[1]);
        char c;
        if (read(go[0], &c, 1) != 0) _exit(3);  // wait for the starting gun (EOF)
        EmbeddedStoreOptions o;
        o.dir = dir_;
        auto s = OpenEmbeddedStore(o);
        if (!s.ok()) _exit(4);
        auto r = (*s)->CompareAndSwap(version, testing::TestConfig(term, "#" + std::to_string(i)));
        _exit(r.ok() ? 0 : r.status().Is(Code::kAborted) ? 1 : 2);
      }
      kids.push_back(pid);
    }
    close(go[0]);
    close(go[1]);  // all children start at once
    int wins = 0, winner = -1;
    for (int i = 0; i < kProcs; i++) {
      int st = 0;
      ASSERT_EQ(waitpid(kids[static_cast<size_t>(i)], &st, 0), kids[static_cast<size_t>(i)]);
      ASSERT_TRUE(WIFEXITED(st));
      const int code = WEXITSTATUS(st);
      ASSERT_TRUE(code == 0 || code == 1) << "child " << i << " exit " << code;
      if (code == 0) {
        wins++;
        winner = i;
      }
    }
    ASSERT_EQ(wins, 1) << "round " << round;
    Result<VersionedConfig> now = Open()->Load();
    ASSERT_TRUE(now.ok());
    EXPECT_EQ(now->config, testing::TestConfig(term, "#" + std::to_string(winner)));
  }
}

// A writer killed at any moment leaves the old or the new configuration,
// never a torn or missing one.
TEST_F(EmbeddedStoreTest, KilledWriterLeavesAWholeConfig) {
  ASSERT_TRUE(Open()->CompareAndSwap(kNoVersion, testing::TestConfig(1)).ok());
  std::mt19937 rng(7);
  uint64_t last_version = 1;
  for (int i = 0; i < 15; i++) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      EmbeddedStoreOptions o;
      o.dir = dir_;
      auto s = OpenEmbeddedStore(o);
      if (!s.ok()) _exit(4);
      for (;;) {  // write as fast as possible until killed
        auto cur = (*s)->Load();
        if (!cur.ok()) _exit(5);
        if (!(*s)->CompareAndSwap(cur->version, testing::TestConfig(cur->config.term + 1)).ok()) _exit(6);
      }
    }
    usleep(2000 + rng() % 20000);
    kill(pid, SIGKILL);
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(st)) << "writer failed on its own: exit " << WEXITSTATUS(st);
    Result<VersionedConfig> now = Open()->Load();
    ASSERT_TRUE(now.ok()) << now.status().ToString();
    EXPECT_GE(now->version, last_version);
    EXPECT_EQ(now->config.term, now->version) << "term and version rise together here";
    last_version = now->version;
  }
  // A stale temp file from a crash is ignored and overwritten.
  WriteRaw("cluster.json.tmp", "{ torn");
  auto s = Open();
  Result<VersionedConfig> now = s->Load();
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(s->CompareAndSwap(now->version, testing::TestConfig(now->config.term + 1)).ok());
}

TEST_F(EmbeddedStoreTest, CorruptFileIsReportedNeverOverwritten) {
  auto s = Open();
  ASSERT_TRUE(s->CompareAndSwap(kNoVersion, testing::TestConfig(1)).ok());
  const std::vector<std::string> bad = {
      "", "{", "[]", "{\"format\": \"slipstream.config_store\"}",
      "{\"format\": \"slipstream.config_store\", \"format_version\": 1, \"version\": 0, \"config\": {}}",
      "{\"format\": \"slipstream.config_store\", \"format_version\": 1, \"version\": 3, \"config\": {}}",
      "{\"format\": \"slipstream.config_store\", \"format_version\": 1, \"version\": 3}",
      "{\"format\": \"other\", \"format_version\": 1, \"version\": 3}",
  };
  for (const std::string& text : bad) {
    WriteRaw("cluster.json", text);
    Result<VersionedConfig> r = s->Load();
    EXPECT_TRUE(r.status().Is(Code::kCorruption)) << text << " -> " << r.status().ToString();
    EXPECT_FALSE(s->CompareAndSwap(3, testing::TestConfig(9)).ok());
    std::ifstream in(dir_ + "/cluster.json");
    std::string still((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(still, text) << "CAS overwrote an unreadable file";
  }
  WriteRaw("cluster.json", "{\"format\": \"slipstream.config_store\", \"format_version\": 2}");
  EXPECT_TRUE(s->Load().status().Is(Code::kNotSupported));
}

// Leases on the caller's clock: expire, are stolen after expiry only, and
// the old holder learns it lost them.
TEST_F(EmbeddedStoreTest, LeaseExpiryAndSteal) {
  auto a = Open(), b = Open();
  Result<Lease> la = a->AcquireLease("cm", "alpha", 100, 1000);
  ASSERT_TRUE(la.ok());
  EXPECT_EQ(la->expiry, 1100);
  EXPECT_TRUE(b->AcquireLease("cm", "beta", 100, 1050).status().Is(Code::kBusy));
  Result<Lease> ra = a->RenewLease(*la, 100, 1060);
  ASSERT_TRUE(ra.ok());
  EXPECT_EQ(ra->expiry, 1160);
  EXPECT_TRUE(b->AcquireLease("cm", "beta", 100, 1159).status().Is(Code::kBusy));
  Result<Lease> lb = b->AcquireLease("cm", "beta", 100, 1160);  // expired exactly now
  ASSERT_TRUE(lb.ok()) << lb.status().ToString();
  EXPECT_GT(lb->epoch, la->epoch);
  EXPECT_TRUE(a->RenewLease(*ra, 100, 1170).status().Is(Code::kAborted));
  EXPECT_TRUE(a->AcquireLease("cm", "alpha", 100, 1170).status().Is(Code::kBusy));

  // Expired but not taken: renewing still fails (the holder cannot know
  // what happened meanwhile); acquiring again gives a new epoch.
  Result<Lease> late = b->RenewLease(*lb, 100, 1300);
  EXPECT_TRUE(late.status().Is(Code::kAborted)) << late.status().ToString();
  Result<Lease> lb2 = b->AcquireLease("cm", "beta", 100, 1300);
  ASSERT_TRUE(lb2.ok());
  EXPECT_GT(lb2->epoch, lb->epoch);

  // A clock that went back (a reboot with CLOCK_MONOTONIC): an expiry more
  // than two ttls ahead cannot be real, so the lease is free.
  Result<Lease> after_reboot = a->AcquireLease("cm", "alpha", 100, 5);
  ASSERT_TRUE(after_reboot.ok()) << after_reboot.status().ToString();
  EXPECT_GT(after_reboot->epoch, lb2->epoch);

  // Lease state is durable across store instances (and processes).
  auto c = Open();
  EXPECT_TRUE(c->AcquireLease("cm", "gamma", 100, 50).status().Is(Code::kBusy));
  EXPECT_TRUE(c->RenewLease(*after_reboot, 100, 50).ok()) << "any instance can renew for the holder";
}

// A renewal takes its lease's lock, not the configuration's: it must not
// queue behind a configuration change's fsyncs (on a loaded disk those took
// longer than a lease, and live holders lost theirs).
TEST_F(EmbeddedStoreTest, RenewalDoesNotWaitForAConfigurationChange) {
  auto s = Open();
  Result<Lease> l = s->AcquireLease("node-0", "n0", runtime::kSecond, 1000);
  ASSERT_TRUE(l.ok());
  const int fd = ::open((dir_ + "/cluster.lock").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // a CAS in progress, as far as the store can tell
  auto renewed = std::async(std::launch::async, [&] { return s->RenewLease(*l, runtime::kSecond, 2000); });
  const bool done = renewed.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  ::close(fd);  // releases the lock, so a renewal that waited finishes
  EXPECT_TRUE(done) << "the renewal waited for the configuration's lock";
  Result<Lease> r = renewed.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->expiry, 2000 + runtime::kSecond);
}

// Renewals go to a file of their own, not fsync'd. One torn by a crash is
// ignored (the expiry granted on acquiring stands), and one of an earlier
// epoch never lengthens a later holder's lease.
TEST_F(EmbeddedStoreTest, RenewalFileCountsOnlyWhenWholeAndOfTheLeasesEpoch) {
  auto a = Open(), b = Open();
  Result<Lease> la = a->AcquireLease("cm", "alpha", 100, 1000);
  ASSERT_TRUE(la.ok());
  Result<Lease> ra = a->RenewLease(*la, 100, 1060);
  ASSERT_TRUE(ra.ok());
  EXPECT_TRUE(b->AcquireLease("cm", "beta", 100, 1150).status().Is(Code::kBusy)) << "another store sees the renewal";

  WriteRaw("lease-cm.renewal", "{\"epoch\": ");  // torn
  Result<Lease> lb = b->AcquireLease("cm", "beta", 100, 1100);  // the acquired expiry, 1100
  ASSERT_TRUE(lb.ok()) << lb.status().ToString();
  EXPECT_GT(lb->epoch, la->epoch);

  WriteRaw("lease-cm.renewal", "{\"epoch\": " + std::to_string(la->epoch) + ", \"expiry_ns\": 1250}");
  EXPECT_TRUE(a->RenewLease(*ra, 100, 1150).status().Is(Code::kAborted)) << "alpha's epoch is over";
  Result<Lease> again = a->AcquireLease("cm", "alpha", 100, 1210);  // beta's lease ended at 1200
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_GT(again->epoch, lb->epoch);

  // One that cannot be read at all is an error, not an earlier expiry:
  // that could hand a live holder's lease to another.
  fs::remove(dir_ + "/lease-cm.renewal");
  fs::create_directory(dir_ + "/lease-cm.renewal");
  EXPECT_TRUE(b->AcquireLease("cm", "beta", 100, 5000).status().Is(Code::kIoError));
}

}  // namespace
}  // namespace slip::cluster
