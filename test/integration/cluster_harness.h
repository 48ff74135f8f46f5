// What the real-process cluster tests share: running `slip`, naming
// design-parameterized tests, and the check that every acknowledged write
// is readable with its latest value and no deleted key comes back. A write
// whose outcome is unknown (the client gave up during a failover) may or may
// not have taken effect; whichever did, later checks build on it.
//
// Tests including this define SLIP_BINARY (the slip executable's path).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "slip/client.h"

namespace slip::integration {

// Runs `slip ARGS` quietly; its exit status.
inline int Slip(const std::string& args) {
  const std::string cmd = std::string(SLIP_BINARY) + " " + args + " >/dev/null 2>&1";
  return std::system(cmd.c_str());
}

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

// Puts and deletes (one in five) from `threads` threads over 300 keys until
// `stop`; `fault` runs once `fault_after` operations were done, and the load
// goes on for `after_fault` more operations.
inline void RunLoadWithFault(Client& c, AckedWrites& m, int fault_after, int after_fault,
                             const std::function<void()>& fault, int threads = 2) {
  std::atomic<bool> stop{false};
  auto load = [&](int t) {
    for (int i = 0; !stop; ++i) {
      const std::string key = "key" + std::to_string((i * 7 + t) % 300);
      const bool del = i % 5 == 4;
      const std::string value = "t" + std::to_string(t) + "-" + std::to_string(i);
      Status s = del ? c.Delete(key) : c.Put(key, value);
      m.Record(key, del ? std::nullopt : std::optional<std::string>(value), s, del);
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) workers.emplace_back(load, t);
  while (m.ops < fault_after) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  fault();
  const int at_fault = m.ops;
  while (m.ops < at_fault + after_fault) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop = true;
  for (auto& w : workers) w.join();
}

}  // namespace slip::integration
