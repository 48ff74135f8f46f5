// `slip bench`: one YCSB workload against one target, or `slip bench compare`
// against several in turn, with a summary on stdout and optionally the JSON
// report (bench/driver/report.h) in a file.
//
//   slip bench --target redis-wait --workload a --threads 2 --seconds 10
//   slip bench compare --targets local,rocksdb,redis --workload b --json out.json
//
// Targets are listed in bench/driver/targets.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace slip::bench {

struct BenchCommandOptions {
  std::string target = "local";
  std::vector<std::string> targets;  // set by `bench compare --targets a,b,c`
  std::string workload = "a";        // load, a..f (case-insensitive)
  std::string distribution;          // empty: the workload's own (zipfian; latest for d)
  double theta = 0.99;               // zipfian skew
  uint64_t records = 100000;         // loaded before the run
  std::string sizes = "fixed";       // fixed | zippydb | up2x | udb
  uint32_t value_size = 100;         // with --sizes fixed
  uint32_t threads = 2;
  double seconds = 10;               // measured
  double warmup = 2;                 // excluded
  double rate = 0;                   // open loop, ops/s per thread; 0 = closed loop
  std::string json;                  // write the report(s) here
  uint64_t seed = 1;
  std::string dir;                   // local: PM file DIR/pm; rocksdb: DIR/rocksdb (default: temp/anonymous)
  uint64_t region_mb = 4096;         // local: PM size
  std::string provider = "tcp";      // replicated designs: of the cluster it starts
  uint64_t pm_mb = 256;              // replicated designs: PM per node of the cluster it starts
  uint32_t depth = 1;                // closed loop: ops in flight per thread
};

// Registers `bench` (and `bench compare`) on `app`, filling *o.
void AddBenchCommand(CLI::App& app, BenchCommandOptions* o);

// Runs what *o asks; prints a summary; returns the exit status (0 ok, 1 run
// failed or reported errors, 2 bad arguments). Errors are one line on stderr.
int RunBenchCommand(const BenchCommandOptions& o);

}  // namespace slip::bench
