// The cost model's inputs as a file (docs/model.md): named CPU costs, each
// with its source, and the network a machine puts under them. Written by
// bench/model/model_calibrate on this machine; the papers' testbeds
// (bench/model/paper-*.json, sim/testbeds.h) are written by hand in the same
// format, with their machines and every constant's source besides. Read by
// `slip sim --perf`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/cluster_sim.h"

namespace slip::sim {

struct MachineModel {
  runtime::CostModel costs;
  // Every constant the file gives, by name: the inputs ("store_put"), then
  // "network.one_way_ns", "machines.node_cores", "runtime.park_after_ns"...
  std::vector<std::string> constants;
  // Constant name -> where its number comes from ("" or absent: not said;
  // this machine's calibration gives sources for its inputs only).
  std::map<std::string, std::string> sources;
  runtime::Nanos one_way = 0;                  // per message, beyond the CPU
  double bandwidth = 0;                        // bytes per ns; 0: none charged
  runtime::Nanos nic_service = -1;             // target NIC per packet; -1: not given
  bool software_nic = true;
  // Threads spin this long, then park; negative: they never park (a
  // testbed's dedicated polling cores) — or, when the file gives no
  // "runtime.park_after_ns", not measured (ThisMachine then assumes a few
  // microseconds).
  runtime::Nanos park_after = -1;
  // "runtime.migration_cost_ns": the hosts' scheduler (PerfOptions); 0 when
  // the file does not give it.
  runtime::Nanos migration_cost = 0;
  // A testbed's machines (0: not given): cores per storage node and per
  // client machine, and how many client machines.
  uint32_t node_cores = 0, client_cores = 0, client_hosts = 0;
  // A pool design's testbed: the pool machine's cores (0: not given).
  uint32_t pool_cores = 0;
  std::string provider;

  bool Gives(const std::string& constant) const;
  // The constants the file gives without a source.
  std::vector<std::string> Unsourced() const;
};

// InvalidArgument naming the field when the file is not a model: a missing
// or unknown input, a negative number (but park_after_ns, where negative
// means polling), a "sources" entry naming no constant of its section.
Result<MachineModel> ParseMachineModel(const std::string& json_text);
Result<MachineModel> LoadMachineModel(const std::string& path);

// Sets one input from "NAME=PER_OP_NS" or "NAME=PER_OP_NS/PER_BYTE_NS" (a
// sensitivity run: `slip sim --perf ... --input rpc_call=50`); its source
// becomes the override. InvalidArgument for an unknown name or a number
// that is not a finite non-negative one.
Status OverrideInput(MachineModel& m, std::string_view spec);

// What every performance run takes from a model: its step costs and its
// network (one-way latency, bandwidth, whether the NIC is software).
PerfOptions FromModel(const MachineModel& m);

// This machine as the validation runs it: every process of the cluster and
// the client on one host of `cores` cores, threads parking after a few
// idle turns (slip server's ThreadRuntime: 8 spins), the model's network.
PerfOptions ThisMachine(const MachineModel& m, uint32_t cores);

}  // namespace slip::sim
