// What a benchmark run reports, as JSON and as text.
//
// The JSON object has exactly these fields, for every target (DESIGN.md
// "What every run reports"); a figure the target could not measure is null,
// never estimated, so reports of different designs line up field by field:
//
//   design, workload, parameters{...}, throughput_ops,
//   latency_us{read,update,insert,scan,rmw: {p50,p90,p99,p999,max} | null},
//   cpu_us_per_op{worker,backup_worker,nic,control,digest,clean,client},
//   rtts_per_op, fabric_bytes_per_op, pm_bytes_per_op, dlwa,
//   rpc_sends_per_op{client_frames,client_messages,server_frames,server_messages} | null,
//   host_cpu{busy,softirq,idle,steal} | null
//
// `parameters` records the inputs (threads, seconds, rate, records, sizes,
// distribution, seed, ...) and the target's one-line description.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/driver/driver.h"

namespace slip::bench {

nlohmann::json ReportJson(const RunReport& r);

// "CPU model, N cores, compiler, assertions on/off": printed before runs and
// stored in every report's parameters (figures from a 2-core shared box and
// from a testbed must not be confused).
std::string HostDescription();

// The field names every report carries (the schema test checks them).
const std::vector<const char*>& ReportFields();
const std::vector<const char*>& CpuRoles();  // cpu_us_per_op keys, "client" last

// Human-readable summary: throughput, latency per op type, CPU per op.
void PrintSummary(std::FILE* out, const RunReport& r);
// One row per run, ratios relative to the first run.
void PrintComparison(std::FILE* out, const std::vector<RunReport>& runs);

}  // namespace slip::bench
