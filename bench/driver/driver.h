// The benchmark driver: runs one YCSB workload (bench/workload) against one
// KvTarget and measures it.
//
//   load     untimed: records [0, records) inserted by all threads (skipped
//            for the "load" workload, whose run *is* the inserts)
//   warm-up  the workload runs, nothing is recorded
//   measure  the workload runs for `seconds`; an op counts if it completes
//            inside the window, and throughput = ops counted / window length
//
// Closed loop (rate == 0): each thread issues its next op as soon as the
// previous one returns — peak throughput; latency is service time.
// Open loop (rate > 0): thread i's n-th op is *intended* at t0 + n/rate. If
// the target falls behind, the thread sends late, but latency is still taken
// from the intended time, so queueing the target causes is charged to it
// (no coordinated omission: Tene, "How NOT to measure latency").
//
// Pipelined (depth > 1, closed loop): each thread keeps `depth` operations
// in flight through the session's asynchronous calls and issues the next as
// soon as one completes; latency is from issue to completion.
//
// RMW (workload f) is a Get then a Put of the same key, timed as one op.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "bench/driver/host_cpu.h"
#include "bench/driver/kv_target.h"
#include "bench/workload/workload.h"
#include "common/histogram.h"

namespace slip::bench {

inline constexpr int kNumOpTypes = 5;  // indexed by ycsb::OpType

struct DriverOptions {
  ycsb::WorkloadSpec workload;  // from ycsb::StandardWorkload, possibly overridden
  uint32_t threads = 2;
  double seconds = 10;          // measured window
  double warmup = 2;            // excluded from every figure
  double rate = 0;              // open loop: ops/s per thread; 0 = closed loop
  // Closed loop only: operations each thread keeps in flight through the
  // target's asynchronous calls (1: one at a time, synchronous calls).
  uint32_t depth = 1;
  uint64_t seed = 1;
  // Progress line on stderr every few seconds when the run (warm-up +
  // measure) is longer than this; < 0 never.
  double progress_after_seconds = 10;
  // Set (e.g. from a SIGINT handler) to end the run early: RunWorkload then
  // returns Aborted and the caller's destructors stop servers and remove
  // temp directories. May be null.
  const std::atomic<bool>* cancel = nullptr;
};

// Everything a run measured. Figures a target could not measure are nullopt.
struct RunReport {
  std::string design;            // KvTarget::name()
  std::string target_description;
  std::string durability;        // KvTarget::Durability()
  DriverOptions options;

  double measured_seconds = 0;   // length of the measured window
  uint64_t ops = 0;              // completed inside the window (all types)
  uint64_t errors = 0;           // ops that failed (other than an expected NotFound)
  uint64_t not_found = 0;        // reads of records that were absent
  std::string first_error;       // the first failure, for the summary
  double throughput_ops = 0;     // ops / measured_seconds

  std::array<Histogram, kNumOpTypes> latency_ns;  // per ycsb::OpType

  // This process over the measured window: the driver threads and what the
  // target runs in it (a client library's I/O threads, an in-process engine).
  double client_cpu_us = 0;
  RoleCpu cpu_us_per_op;         // target roles
  // The whole host over the measured window (/proc/stat): every process on
  // it, the target's servers and strangers alike. nullopt: not measured.
  std::optional<HostCpuShare> host_cpu;
  std::optional<double> rtts_per_op, fabric_bytes_per_op, pm_bytes_per_op, dlwa;
  std::optional<RpcSends> rpc_sends_per_op;

  double client_cpu_us_per_op() const { return ops ? client_cpu_us / static_cast<double>(ops) : 0; }
};

// Runs the load, warm-up and measured phases. Fails (nothing measured) if the
// target cannot connect, the load fails, or the workload needs an operation
// the target lacks (scan); individual op failures during the run are counted
// in RunReport::errors instead.
Result<RunReport> RunWorkload(KvTarget& target, const DriverOptions& options);

}  // namespace slip::bench
