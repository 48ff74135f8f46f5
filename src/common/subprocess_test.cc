#include "common/subprocess.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace slip::subprocess {
namespace {

using std::chrono::milliseconds;

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()))).string();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

SpawnOptions Command(std::vector<std::string> argv, Lifetime lifetime = Lifetime::kChild, int output_fd = -1) {
  SpawnOptions o;
  o.argv = std::move(argv);
  o.lifetime = lifetime;
  o.output_fd = output_fd;
  return o;
}

pid_t ParentOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  char state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

TEST(Subprocess, ExitStatusAndOutputReachTheCaller) {
  const std::string out = TempPath("subprocess_out");
  auto pid = Spawn({.argv = {"/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"},
                    .output = out, .truncate_output = true});
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  auto st = Wait(*pid, milliseconds(10000));
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(WIFEXITED(*st));
  EXPECT_EQ(WEXITSTATUS(*st), 3);
  EXPECT_EQ(ReadFile(out), "to-stdout\nto-stderr\n");
  EXPECT_FALSE(Alive(*pid));
  std::filesystem::remove(out);
}

TEST(Subprocess, AppendsUnlessToldToTruncate) {
  const std::string out = TempPath("subprocess_append");
  for (int i = 0; i < 2; ++i) {
    auto pid = Spawn({.argv = {"/bin/echo", "line"}, .output = out});
    ASSERT_TRUE(pid.ok());
    ASSERT_TRUE(Wait(*pid, milliseconds(10000)).ok());
  }
  EXPECT_EQ(ReadFile(out), "line\nline\n");
  std::filesystem::remove(out);
}

TEST(Subprocess, AMissingProgramExitsWith127AndBadInputIsRefused) {
  auto pid = Spawn(Command({"/nonexistent/program"}));
  ASSERT_TRUE(pid.ok());
  auto st = Wait(*pid, milliseconds(10000));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(WEXITSTATUS(*st), 127);

  EXPECT_TRUE(Spawn({}).status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(Spawn({.argv = {"/bin/true"}, .output = "/dev/null/x"}).status().Is(Code::kIoError));
}

TEST(Subprocess, WaitTimesOutOnARunningChild) {
  auto pid = Spawn(Command({"/bin/sleep", "30"}));
  ASSERT_TRUE(pid.ok());
  EXPECT_TRUE(Wait(*pid, milliseconds(50)).status().Is(Code::kTimeout));
  EXPECT_TRUE(Alive(*pid));
  ASSERT_TRUE(Kill(*pid).ok());
  EXPECT_FALSE(Alive(*pid));
  EXPECT_TRUE(Kill(*pid).Is(Code::kNotFound));
}

TEST(Subprocess, StopTermsThenKillsOneThatIgnoresTerm) {
  auto polite = Spawn(Command({"/bin/sleep", "30"}));
  ASSERT_TRUE(polite.ok());
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(Stop(*polite, milliseconds(10000)).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));  // SIGTERM sufficed
  EXPECT_FALSE(Alive(*polite));

  // The shell ignores TERM and execs nothing, so only SIGKILL ends it.
  const std::string ready = TempPath("subprocess_ready");
  std::filesystem::remove(ready);
  auto stubborn = Spawn(Command({"/bin/sh", "-c", "trap '' TERM; touch " + ready + "; while :; do sleep 0.05; done"}));
  ASSERT_TRUE(stubborn.ok());
  while (!std::filesystem::exists(ready)) std::this_thread::sleep_for(milliseconds(5));
  ASSERT_TRUE(Stop(*stubborn, milliseconds(100)).ok());
  EXPECT_FALSE(Alive(*stubborn));
  EXPECT_TRUE(Stop(*stubborn, milliseconds(100)).ok());  // not running: nothing to do
  std::filesystem::remove(ready);
}

TEST(Subprocess, ADetachedProcessIsNotOurChildAndCanBeKilled) {
  auto pid = Spawn(Command({"/bin/sleep", "30"}, Lifetime::kDetached));
  ASSERT_TRUE(pid.ok());
  ASSERT_TRUE(Alive(*pid));
  EXPECT_NE(ParentOf(*pid), ::getpid());
  // Not our child: waitpid cannot see it, yet Alive and Kill work by pid.
  int status;
  EXPECT_EQ(::waitpid(*pid, &status, WNOHANG), -1);
  ASSERT_TRUE(Kill(*pid).ok());
  EXPECT_FALSE(Alive(*pid));
}

TEST(Subprocess, AnExitedChildIsReapedByAlive) {
  auto pid = Spawn(Command({"/bin/true"}));
  ASSERT_TRUE(pid.ok());
  while (Alive(*pid)) std::this_thread::sleep_for(milliseconds(1));
  // Reaped: no zombie of ours is left behind.
  int status;
  EXPECT_EQ(::waitpid(*pid, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(Subprocess, OutputCanGoToADescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto pid = Spawn(Command({"/bin/echo", "through a pipe"}, Lifetime::kChild, fds[1]));
  ::close(fds[1]);
  ASSERT_TRUE(pid.ok());
  char buf[64] = {};
  ssize_t n = ::read(fds[0], buf, sizeof(buf) - 1);
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, n), "through a pipe\n");
  ASSERT_TRUE(Wait(*pid, milliseconds(10000)).ok());
}

}  // namespace
}  // namespace slip::subprocess
