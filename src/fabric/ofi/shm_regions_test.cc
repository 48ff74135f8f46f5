#include "fabric/ofi/shm_regions.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "fabric/ofi/doorbell.h"
#include "fabric/ofi/ofi_fabric.h"
#include "fabric/ofi/ofi_test_util.h"
#include "fabric/ofi/region_lock.h"

namespace slip::fabric::ofi_internal {
namespace {

namespace fs = std::filesystem;

class ShmRegionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Short: a doorbell's socket path (the directory and an endpoint's name)
    // must fit 108 bytes.
    static int n = 0;
    dir_ = fs::temp_directory_path() / ("shmrt." + std::to_string(::getpid()) + "." + std::to_string(n++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Touch(const std::string& name) { std::ofstream(dir_ / name) << "x"; }
  std::set<std::string> Files() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.insert(e.path().filename().string());
    return out;
  }
  fs::path dir_;
};

TEST_F(ShmRegionsTest, SweepRemovesOnlyUnheldClaims) {
  // A process that is gone: its lock file, nobody holding it, and regions.
  Touch("slip-shm.11.7.lock");
  Touch("slip-shm.11.7:0:0");
  Touch("slip-shm.11.7:0:1");
  // A live one: its lock held (here by this test, through its own fd).
  Touch("slip-shm.12.8.lock");
  Touch("slip-shm.12.8:0:0");
  const int held = ::open((dir_ / "slip-shm.12.8.lock").c_str(), O_RDONLY);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  // Never claimed (no lock file), and another program's region.
  Touch("slip-shm.13.9:0:0");
  Touch("4242:0:0");
  // A name that only starts like the orphan's.
  Touch("slip-shm.11.77:0:0");

  EXPECT_EQ(SweepOrphanShmRegions(dir_.string()), 3u);
  EXPECT_EQ(Files(), (std::set<std::string>{"slip-shm.12.8.lock", "slip-shm.12.8:0:0", "slip-shm.13.9:0:0",
                                            "4242:0:0", "slip-shm.11.77:0:0"}));
  ::close(held);  // the live one dies: the next sweep takes its files
  EXPECT_EQ(SweepOrphanShmRegions(dir_.string()), 2u);
  EXPECT_EQ(Files(), (std::set<std::string>{"slip-shm.13.9:0:0", "4242:0:0", "slip-shm.11.77:0:0"}));
  EXPECT_EQ(SweepOrphanShmRegions((dir_ / "absent").string()), 0u);
}

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

// Only addresses of our own shm endpoints have doorbells, and no address
// can name a file outside the directory.
TEST_F(ShmRegionsTest, DoorbellPathsAreOnlyOurEndpointsInTheDirectory) {
  auto p = DoorbellPath("fi_shm://slip-shm.5.6:0:2", "/d");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(*p, "/d/slip-shm.5.6:0:2.bell");
  auto nul = DoorbellPath(std::string_view("slip-shm.5.6:0:2\0", 17), "/d");
  ASSERT_TRUE(nul.ok());
  EXPECT_EQ(*nul, "/d/slip-shm.5.6:0:2.bell");
  for (std::string_view bad : {"", "fi_shm://", "4242:0:0", "slip-shm./../../etc/passwd", "slip-shm.1 2",
                               "xslip-shm.1.2:0:0"}) {
    EXPECT_FALSE(DoorbellPath(bad, "/d").ok()) << bad;
    EXPECT_EQ(OpenDoorbell(bad, dir_.string()), -1) << bad;
  }
}

// A region's header as libfabric 1.17 writes it (region_lock.h): watched
// only when it reads that way, and its lock word read as it changes.
TEST_F(ShmRegionsTest, ARegionLockIsWatchedOnlyInTheKnownLayout) {
  const std::string name = "slip-shm.5.6:0:2";
  auto write_header = [&](uint8_t version, int32_t pid, uint64_t total, int32_t lock, size_t file_bytes) {
    std::string bytes(file_bytes, '\0');
    if (file_bytes >= 0x30) {
      bytes[0] = static_cast<char>(version);
      std::memcpy(&bytes[4], &pid, 4);
      std::memcpy(&bytes[kShmRegionLockOffset], &lock, 4);
      std::memcpy(&bytes[0x28], &total, 8);
    }
    std::ofstream(dir_ / name, std::ios::binary | std::ios::trunc) << bytes;
  };
  const std::string address = "fi_shm://" + name;
  EXPECT_EQ(RegionLockWatch::Open(address, dir_.string()), nullptr) << "no region file";
  write_header(4, 77, 8192, 1, 8192);
  auto watch = RegionLockWatch::Open(address, dir_.string());
  ASSERT_NE(watch, nullptr);
  EXPECT_FALSE(watch->Held());
  {
    // Another process taking it: the same page, seen through the watch.
    const int fd = ::open((dir_ / name).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const int32_t held = 0;
    ASSERT_EQ(::pwrite(fd, &held, 4, kShmRegionLockOffset), 4);
    EXPECT_TRUE(watch->Held());
    const int32_t spun = -1;  // a waiter's decrement
    ASSERT_EQ(::pwrite(fd, &spun, 4, kShmRegionLockOffset), 4);
    EXPECT_TRUE(watch->Held());
    ::close(fd);
  }
  write_header(5, 77, 8192, 1, 8192);
  EXPECT_EQ(RegionLockWatch::Open(address, dir_.string()), nullptr) << "another region version";
  write_header(4, 0, 8192, 1, 8192);
  EXPECT_EQ(RegionLockWatch::Open(address, dir_.string()), nullptr) << "no owner";
  write_header(4, 77, 4096, 1, 8192);
  EXPECT_EQ(RegionLockWatch::Open(address, dir_.string()), nullptr) << "a size that is not the file's";
  write_header(4, 77, 100, 1, 100);
  EXPECT_EQ(RegionLockWatch::Open(address, dir_.string()), nullptr) << "shorter than a header page";
  write_header(4, 77, 8192, 1, 8192);
  EXPECT_EQ(RegionLockWatch::Open("fi_shm://someone-else:0:2", dir_.string()), nullptr) << "not ours";
}

// Rung, its fd is readable until drained; it is gone with its endpoint, and
// ringing it then (or many times at once) blocks nothing and raises nothing.
TEST_F(ShmRegionsTest, ADoorbellIsRungDrainedAndRemoved) {
  const std::string address = "fi_shm://slip-shm.31.4:0:1";
  Touch("slip-shm.31.4:0:1.bell");  // a dead endpoint's leftover, not a socket
  EXPECT_EQ(OpenDoorbell(address, dir_.string()), -1) << "rang a file nobody listens on";
  auto bell = Doorbell::Create(address, dir_.string());
  ASSERT_TRUE(bell.ok()) << bell.status().ToString();
  const int rope = OpenDoorbell(address, dir_.string());
  ASSERT_GE(rope, 0);
  EXPECT_FALSE(Readable((*bell)->fd()));
  Ring(rope);
  EXPECT_TRUE(Readable((*bell)->fd()));
  (*bell)->Drain();
  EXPECT_FALSE(Readable((*bell)->fd()));
  for (int i = 0; i < 100000; ++i) Ring(rope);  // far past the queue's length: never blocks
  EXPECT_TRUE(Readable((*bell)->fd()));
  (*bell)->Drain();
  EXPECT_FALSE(Readable((*bell)->fd()));
  bell->reset();
  EXPECT_FALSE(fs::exists(dir_ / "slip-shm.31.4:0:1.bell"));
  Ring(rope);  // its endpoint is gone: refused, quietly
  ::close(rope);
  EXPECT_EQ(OpenDoorbell(address, dir_.string()), -1);
}

// A killed process leaves its doorbells with its regions; the sweep takes
// them with the regions.
TEST_F(ShmRegionsTest, SweepRemovesADeadEndpointsDoorbell) {
  Touch("slip-shm.41.5.lock");
  Touch("slip-shm.41.5:0:0");
  auto bell = Doorbell::Create("slip-shm.41.5:0:0", dir_.string());
  ASSERT_TRUE(bell.ok()) << bell.status().ToString();
  EXPECT_EQ(SweepOrphanShmRegions(dir_.string()), 3u);
  EXPECT_EQ(Files(), std::set<std::string>{});
}

TEST_F(ShmRegionsTest, ClaimIsHeldForTheProcessAndSweepsFirst) {
  Touch("slip-shm.21.1.lock");
  Touch("slip-shm.21.1:0:3");
  auto name = ClaimShmName(dir_.string());
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  EXPECT_TRUE(name->starts_with("slip-shm." + std::to_string(::getpid()) + "."));
  auto again = ClaimShmName(dir_.string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *name);
  EXPECT_EQ(Files(), std::set<std::string>{*name + ".lock"});  // the orphan went with the claim

  // Held: another open file cannot take the lock, and a sweep keeps it.
  const int probe = ::open((dir_ / (*name + ".lock")).c_str(), O_RDONLY);
  ASSERT_GE(probe, 0);
  EXPECT_NE(::flock(probe, LOCK_EX | LOCK_NB), 0);
  ::close(probe);
  EXPECT_EQ(SweepOrphanShmRegions(dir_.string()), 0u);
  EXPECT_TRUE(fs::exists(dir_ / (*name + ".lock")));
}

TEST_F(ShmRegionsTest, ClaimInAMissingDirectoryIsAnError) {
  auto name = ClaimShmName((dir_ / "absent").string());
  EXPECT_FALSE(name.ok());
}

std::set<std::string> RegionsOf(pid_t pid) {
  std::set<std::string> out;
  const std::string stem = "slip-shm." + std::to_string(pid) + ".";
  for (const auto& e : fs::directory_iterator("/dev/shm")) {
    const std::string n = e.path().filename().string();
    if (n.starts_with(stem)) out.insert(n);
  }
  return out;
}

// The leak itself: a process with shm endpoints killed with SIGKILL, whose
// region files the provider could not unlink, cleaned by the next sweep.
TEST(ShmRegionsProcessTest, KilledProcessRegionsAreSwept) {
  if (!fs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  auto probe = OpenOfiFabric(FabricOptions{.provider = "shm", .node_address = ""});
  if (!probe.ok()) GTEST_SKIP() << probe.status().ToString();
  auto child = fabric::testing::ChildTarget::Spawn("shm");
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  const pid_t pid = child->pid();
  const std::set<std::string> files = RegionsOf(pid);
  size_t regions = 0;
  for (const std::string& f : files) regions += f.find(':') != std::string::npos ? 1 : 0;
  EXPECT_GE(regions, 1u) << "the child's endpoint region is named after its claim";
  EXPECT_EQ(files.size(), regions + 1) << "one lock file";

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);  // dead, not reaped
  EXPECT_EQ(RegionsOf(pid), files) << "SIGKILL skips the provider's cleanup";
  EXPECT_GE(SweepOrphanShmRegions("/dev/shm"), files.size());
  EXPECT_TRUE(RegionsOf(pid).empty());
}

}  // namespace
}  // namespace slip::fabric::ofi_internal
