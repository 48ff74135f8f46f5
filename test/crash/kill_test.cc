// A real process killed with SIGKILL mid-load, 20 times: after each kill the
// store file is recovered and every acknowledged operation checked.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include "common/random.h"
#include "crash/workload.h"
#include "store/store.h"

namespace slip::crashtest {
namespace {

struct Child {
  pid_t pid;
  int out;  // read end of the child's stdout
};

Child Spawn(const std::string& path, uint64_t seed) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    std::string s = std::to_string(seed);
    execl(SLIP_STORE_CHILD, SLIP_STORE_CHILD, path.c_str(), s.c_str(), nullptr);
    _exit(127);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

// Reads the child's reports until it has acknowledged `acks` operations (or
// exited), so each round does a fixed amount of work however slow the
// machine is; the kill then lands at an arbitrary point of the next op.
std::string ReadUntilAcks(int fd, uint64_t acks) {
  std::string all;
  uint64_t seen = 0;
  char buf[65536];
  ssize_t n;
  while (seen < acks && (n = read(fd, buf, sizeof buf)) > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == 'A' && (all.empty() ? i == 0 : (i > 0 ? buf[i - 1] : all.back()) == '\n')) ++seen;
    }
    all.append(buf, static_cast<size_t>(n));
  }
  return all;
}

std::string Drain(int fd, std::string all) {
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  close(fd);
  return all;
}

store::StoreOptions ChildOptions() {
  store::StoreOptions o;
  o.geometry.segment_size = 256 << 10;
  o.max_block_bytes = 16 << 10;
  o.limits.max_key = 1024;
  return o;
}

TEST(KillTest, TwentySigkillsLoseNoAcknowledgedWrite) {
  auto dir = std::filesystem::temp_directory_path() / ("slip_kill_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "pm").string();
  std::map<std::string, std::optional<std::string>> acked;  // key -> latest acked state
  Random rng(2026);
  uint64_t total_acked = 0;

  for (int round = 0; round < 20; ++round) {
    const uint64_t seed = 1000 + round;
    Child c = Spawn(path, seed);
    // Let it acknowledge a random number of operations, then kill it mid-load.
    std::string out = ReadUntilAcks(c.out, 50 + rng.Uniform(3000));
    ASSERT_EQ(kill(c.pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(c.pid, &status, 0), c.pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited on its own with status " << status;
    std::istringstream lines(Drain(c.out, std::move(out)));

    // Ops acknowledged update the model; the one in flight may or may not apply.
    int64_t in_flight = -1;  // index of the op reported started, not acked
    std::string tag;
    uint64_t index;
    std::string result;
    while (lines >> tag >> index) {
      if (tag == "I") {
        in_flight = static_cast<int64_t>(index);
      } else {
        lines >> result;
        Op op = MakeOp(seed, index);
        if (op.is_delete) {
          acked[op.key] = std::nullopt;  // "notfound" also means absent
        } else {
          acked[op.key] = op.value;
        }
        in_flight = -1;
        ++total_acked;
      }
    }

    auto region = pm::PmRegion::OpenFile(path, 0, {});
    ASSERT_TRUE(region.ok()) << region.status().ToString();
    auto store = store::Store::Open(region->get(), ChildOptions());
    ASSERT_TRUE(store.ok()) << "round " << round << ": " << store.status().ToString();
    std::optional<Op> maybe;
    if (in_flight >= 0) maybe = MakeOp(seed, static_cast<uint64_t>(in_flight));
    for (auto& [key, want] : acked) {
      auto got = (*store)->Get(key);
      ASSERT_TRUE(got.ok() || got.status().Is(Code::kNotFound)) << got.status().ToString();
      std::optional<std::string> state = got.ok() ? std::optional<std::string>(*got) : std::nullopt;
      if (state == want) continue;
      ASSERT_TRUE(maybe && maybe->key == key &&
                  state == (maybe->is_delete ? std::nullopt : std::optional(maybe->value)))
          << "round " << round << ": " << key << " lost its acknowledged state";
      want = state;  // the in-flight op took effect
    }
    if (maybe && !acked.count(maybe->key)) {
      auto got = (*store)->Get(maybe->key);
      if (got.ok()) acked[maybe->key] = *got;
    }
  }
  EXPECT_GT(total_acked, 200u) << "the children did too little work to test anything";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace slip::crashtest
