// What the real-process cluster tests share: running `slip`, naming
// design-parameterized tests, and the check that every acknowledged write
// is readable with its latest value and no deleted key comes back. A write
// whose outcome is unknown (the client gave up during a failover) may or may
// not have taken effect; whichever did, later checks build on it.
//
// Tests including this define SLIP_BINARY (the slip executable's path).
#pragma once

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster/config_access.h"
#include "slip/client.h"

namespace slip::integration {

// Runs `slip ARGS` quietly; its exit status. A command that hangs is
// killed after 200 s (status 124, or 137 if it ignored the TERM): the test
// then fails with its logs printed instead of running into ctest's timeout
// with nothing said.
inline int Slip(const std::string& args) {
  const std::string cmd = "timeout -k 10 200 " + std::string(SLIP_BINARY) + " " + args + " >/dev/null 2>&1";
  return std::system(cmd.c_str());
}

// `n` consecutive loopback ports free a moment ago, outside the kernel's
// ephemeral range: a port in it can be taken between this look and the
// server's bind by any connection on the machine (tests running beside
// this one connect all the time) — RESP port 34571 was, in a CI run.
inline uint16_t FreePortRange(int n) {
  int lo = 32768, hi = 60999;  // Linux's default, if the file says nothing
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &lo, &hi) != 2) lo = 32768, hi = 60999;
    std::fclose(f);
  }
  // Below the range if there is room there, else above it.
  const int first = lo - 10000 >= 2000 + n ? 10000 : hi + 1;
  const int span = (first == 10000 ? lo : 65536) - first - n;
  if (span <= 0) return 0;
  std::mt19937 rng(static_cast<uint32_t>(::getpid()));
  for (int attempt = 0; attempt < 200; ++attempt) {
    const uint16_t base = static_cast<uint16_t>(first + static_cast<int>(rng() % static_cast<uint32_t>(span)));
    bool free = true;
    for (int i = 0; i < n && free; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(base + i));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      ::close(fd);
    }
    if (free) return base;
  }
  return 0;
}

// Runs a shell command; its standard output (and exit status in *status).
inline std::string Shell(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = ::pclose(p);
  if (status != nullptr) *status = rc;
  return out;
}

// Waits until every node of the cluster in `dir` is up and every shard has
// its full replication factor with no backup still being seeded: only then
// does losing one node leave every shard a complete replica to fail over
// to. On a loaded machine nodes can lose their first leases while starting
// and come back as new, syncing backups; a kill before they caught up would
// leave shards with no replica to promote. Returns a description of what is
// missing at the deadline, or "" once healthy.
inline std::string WaitFullyReplicated(const std::string& dir,
                                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  auto store = cluster::OpenConfigStore(dir, "");
  if (!store.ok()) return "config store: " + store.status().ToString();
  const auto end = std::chrono::steady_clock::now() + timeout;
  std::string missing;
  while (true) {
    auto c = (*store)->Load();
    if (!c.ok()) return "config: " + c.status().ToString();
    missing.clear();
    for (const auto& [id, n] : c->config.nodes) {
      if (n.state != cluster::NodeState::kUp) missing += " node " + std::to_string(id) + " not up;";
    }
    for (size_t s = 0; s < c->config.shards.size(); ++s) {
      const auto& r = c->config.shards[s];
      if (r.backups.size() + 1 < c->config.replication_factor || !r.syncing.empty()) {
        missing += " shard " + std::to_string(s) + " has " + std::to_string(r.backups.size()) + " backups (" +
                   std::to_string(r.syncing.size()) + " syncing);";
      }
    }
    if (missing.empty()) return "";
    if (std::chrono::steady_clock::now() >= end) return "in term " + std::to_string(c->config.term) + ":" + missing;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// On a failing test, prints the last lines of every log in `dir`/logs when
// it goes out of scope (also after an ASSERT returned early): CI keeps the
// test's output, not the cluster directory.
class TailLogsOnFailure {
 public:
  explicit TailLogsOnFailure(std::string dir) : dir_(std::move(dir)) {}
  ~TailLogsOnFailure() {
    if (!::testing::Test::HasFailure()) return;
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir_ + "/logs", ec)) {
      std::ifstream in(f.path());
      std::deque<std::string> last;
      for (std::string line; std::getline(in, line);) {
        last.push_back(std::move(line));
        if (last.size() > 15) last.pop_front();
      }
      std::printf("--- last lines of %s\n", f.path().c_str());
      for (const auto& line : last) std::printf("  %s\n", line.c_str());
    }
  }

 private:
  const std::string dir_;
};

// "rowan-kv" -> "rowan_kv": a design as a gtest parameter name.
inline std::string DesignParamName(const ::testing::TestParamInfo<std::string>& p) {
  std::string n = p.param;
  for (auto& c : n) {
    if (c == '-' || c == '/' || c == '@') c = '_';
  }
  return n;
}

struct AckedWrites {
  std::mutex mu;
  std::map<std::string, std::optional<std::string>> acked;            // nullopt: deleted
  std::map<std::string, std::set<std::optional<std::string>>> maybe;  // unknown outcomes
  std::atomic<int> ops{0}, unknown{0};
  std::atomic<int> rounds{0};  // RunLoadWithFault calls so far

  void Record(const std::string& key, std::optional<std::string> value, const Status& s, bool del) {
    std::lock_guard<std::mutex> lock(mu);
    if (s.ok() || (del && s.Is(Code::kNotFound))) {
      acked[key] = std::move(value);
      maybe[key].clear();
    } else {
      ++unknown;
      maybe[key].insert(std::move(value));
    }
    ++ops;
  }

  // Reads every key written so far through `c`; a failed expectation names
  // the key and `when`.
  void Check(Client& c, const char* when) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [key, want] : acked) {
      auto got = c.Get(key);
      ASSERT_TRUE(got.ok() || got.status().Is(Code::kNotFound))
          << when << ": " << key << ": " << got.status().ToString();
      std::optional<std::string> state = got.ok() ? std::optional<std::string>(*got) : std::nullopt;
      if (state == want) continue;
      ASSERT_TRUE(maybe[key].count(state)) << when << ": " << key << " is " << (state ? *state : "absent")
                                           << ", acknowledged " << (want ? *want : "absent");
      want = state;
      maybe[key].clear();
    }
  }
};

// Values of given sizes under "sized-<n>" (fragments, pieces, the limits):
// written once, read back after every fault.
struct SizedValues {
  std::map<std::string, std::string> values;

  void Write(Client& c, std::initializer_list<size_t> sizes) {
    for (size_t n : sizes) {
      std::string v(n, '\0');
      for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + n) >> 3);
      const std::string key = "sized-" + std::to_string(n);
      Status s = c.Put(key, v);
      ASSERT_TRUE(s.ok()) << key << ": " << s.ToString();
      values[key] = std::move(v);
    }
  }
  void Check(Client& c, const char* when) const {
    for (const auto& [key, v] : values) {
      auto got = c.Get(key);
      ASSERT_TRUE(got.ok()) << key << " " << when << ": " << got.status().ToString();
      EXPECT_TRUE(*got == v) << key << " changed " << when;
    }
  }
};

// Puts and deletes (one in five) from `threads` threads over 300 keys until
// `stop`; `fault` runs once `fault_after` operations were done, and the load
// goes on for `after_fault` more operations. Each thread writes keys of its
// own: AckedWrites learns the order of a key's writes from the order they
// are recorded, which for two threads' overlapping writes of one key need
// not be the order the node applied them (a DINOMO node batched
// "t1-325, t0-368" while the threads recorded t0's first: a false "lost
// write").
inline void RunLoadWithFault(Client& c, AckedWrites& m, int fault_after, int after_fault,
                             const std::function<void()>& fault, int threads = 2) {
  std::atomic<bool> stop{false};
  // Values unique over every load a test runs: an old value coming back is
  // never mistaken for a new write of the same bytes.
  const int round = m.rounds++;
  auto load = [&](int t) {
    for (int i = 0; !stop; ++i) {
      const int per_thread = 300 / threads;
      const std::string key = "key" + std::to_string((i * 7) % per_thread * threads + t);
      const bool del = i % 5 == 4;
      const std::string value = "r" + std::to_string(round) + "t" + std::to_string(t) + "-" + std::to_string(i);
      Status s = del ? c.Delete(key) : c.Put(key, value);
      m.Record(key, del ? std::nullopt : std::optional<std::string>(value), s, del);
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(load, t);
  while (m.ops < fault_after) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  fault();
  const int at_fault = m.ops;
  const int ok_at_fault = m.ops - m.unknown;
  // Bounded: a cluster left without a replica to promote fails every op
  // only after the client's deadline, and `after_fault` of those would take
  // hours. Fail with the counts instead of hanging.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (m.ops < at_fault + after_fault && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop = true;
  for (auto& w : workers) w.join();
  EXPECT_GE(m.ops, at_fault + after_fault) << "the load stalled after the fault: " << m.ops - at_fault
                                           << " operations in 120 s, " << (m.ops - m.unknown) - ok_at_fault
                                           << " of them acknowledged";
}

}  // namespace slip::integration
