#include "sim/perf_model.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace slip::sim {

Result<MachineModel> ParseMachineModel(const std::string& json_text) {
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Status::InvalidArgument("model: not a JSON object");
  if (!doc.contains("inputs") || !doc["inputs"].is_object()) return Status::InvalidArgument("model: no \"inputs\" object");
  MachineModel m;
  const auto& inputs = doc["inputs"];
  for (size_t i = 0; i < runtime::kCostCount; ++i) {
    const auto c = static_cast<runtime::Cost>(i);
    const std::string name(runtime::CostName(c));
    if (!inputs.contains(name)) return Status::InvalidArgument("model: input \"" + name + "\" is missing");
    const auto& in = inputs[name];
    if (!in.is_object() || !in.contains("per_op_ns") || !in["per_op_ns"].is_number() ||
        !in.contains("per_byte_ns") || !in["per_byte_ns"].is_number()) {
      return Status::InvalidArgument("model: input \"" + name + "\" needs numbers per_op_ns and per_byte_ns");
    }
    const double per_op = in["per_op_ns"].get<double>(), per_byte = in["per_byte_ns"].get<double>();
    if (per_op < 0 || per_byte < 0) return Status::InvalidArgument("model: input \"" + name + "\" is negative");
    m.costs[c] = {static_cast<runtime::Nanos>(per_op), per_byte};
    m.sources[name] = in.value("source", "");
  }
  for (const auto& [name, _] : inputs.items()) {
    if (!m.sources.count(name)) return Status::InvalidArgument("model: unknown input \"" + name + "\"");
  }
  if (doc.contains("network")) {
    const auto& n = doc["network"];
    m.one_way = static_cast<runtime::Nanos>(n.value("one_way_ns", 0.0));
    m.bandwidth = n.value("bandwidth_bytes_per_ns", 0.0);
    m.software_nic = n.value("software_nic", true);
    if (m.one_way < 0 || m.bandwidth < 0) return Status::InvalidArgument("model: negative network figure");
  }
  if (doc.contains("runtime") && doc["runtime"].is_object()) {
    m.park_after = static_cast<runtime::Nanos>(doc["runtime"].value("park_after_ns", -1.0));
  }
  m.provider = doc.value("provider", "");
  return m;
}

Result<MachineModel> LoadMachineModel(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::NotFound("model file " + path + " cannot be read");
  std::stringstream ss;
  ss << f.rdbuf();
  auto m = ParseMachineModel(ss.str());
  if (!m.ok()) return Status::InvalidArgument(path + ": " + m.status().message());
  return m;
}

PerfOptions ThisMachine(const MachineModel& m, uint32_t cores) {
  PerfOptions p;
  p.costs = m.costs;
  p.shared_host = true;
  p.host_cores = cores;
  // slip server's threads spin 8 empty loop turns, then park: measured by
  // the calibration when the file says; else a few microseconds.
  p.park_after = m.park_after >= 0 ? m.park_after : 5 * runtime::kMicrosecond;
  p.one_way = m.one_way;
  p.bandwidth = m.bandwidth;
  p.software_nic = m.software_nic;
  return p;
}

}  // namespace slip::sim
