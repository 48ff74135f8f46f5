// The cost model's inputs as a file (docs/model.md): named CPU costs, each
// with its source, and the network a machine puts under them. Written by
// bench/model/model_calibrate on this machine; read by `slip sim --perf`.
#pragma once

#include <map>
#include <string>

#include "common/status.h"
#include "sim/cluster_sim.h"

namespace slip::sim {

struct MachineModel {
  runtime::CostModel costs;
  std::map<std::string, std::string> sources;  // input name -> where its number comes from
  runtime::Nanos one_way = 0;                  // per message, beyond the CPU
  double bandwidth = 0;                        // bytes per ns; 0: none charged
  bool software_nic = true;
  runtime::Nanos park_after = -1;  // threads spin this long, then park; -1: not given
  std::string provider;
};

// InvalidArgument naming the field when the file is not a model: a missing
// or unknown input, a negative number.
Result<MachineModel> ParseMachineModel(const std::string& json_text);
Result<MachineModel> LoadMachineModel(const std::string& path);

// This machine as the validation runs it: every process of the cluster and
// the client on one host of `cores` cores, threads parking after a few
// idle turns (slip server's ThreadRuntime: 8 spins), the model's network.
PerfOptions ThisMachine(const MachineModel& m, uint32_t cores);

}  // namespace slip::sim
