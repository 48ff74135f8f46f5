// A single-node workload run: the store in-process, N writer threads issuing
// a YCSB-style mix, figures printed at the end. This is `slip bench` until the
// cluster and the full benchmark harness exist.
#pragma once

#include <cstdint>
#include <string>

namespace slip::cli {

struct LocalBenchOptions {
  std::string workload = "a";        // load | a | b | c
  std::string distribution = "zipfian";
  double seconds = 5;
  uint32_t threads = 2;
  uint64_t records = 100000;
  uint32_t value_size = 100;
  std::string dir;                   // empty: anonymous PM with cache-line flushes
  uint64_t region_mb = 1024;
  uint64_t seed = 1;
};

int RunLocalBench(const LocalBenchOptions& o);

}  // namespace slip::cli
