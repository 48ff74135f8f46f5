#include "sim/perf_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
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
    // The simulator charges whole nanoseconds per step: a fraction would
    // be dropped without a word.
    if (per_op != std::floor(per_op)) {
      return Status::InvalidArgument("model: input \"" + name + "\": per_op_ns is whole nanoseconds, not " +
                                     in["per_op_ns"].dump());
    }
    m.costs[c] = {static_cast<runtime::Nanos>(per_op), per_byte};
    m.constants.push_back(name);
    m.sources[name] = in.value("source", "");
  }
  for (const auto& [name, _] : inputs.items()) {
    if (!m.sources.count(name)) return Status::InvalidArgument("model: unknown input \"" + name + "\"");
  }
  // A section's numbers, each recorded as a constant "section.name" with
  // the source its "sources" object gives it.
  auto section = [&doc, &m](const char* name) -> Result<const nlohmann::json*> {
    if (!doc.contains(name)) return static_cast<const nlohmann::json*>(nullptr);
    const auto& sec = doc[name];
    if (!sec.is_object()) return Status::InvalidArgument(std::string("model: \"") + name + "\" is not an object");
    for (const auto& [key, value] : sec.items()) {
      if (key == "sources" || key == "source") continue;
      const std::string constant = std::string(name) + "." + key;
      if (!value.is_number() && !value.is_boolean()) {
        return Status::InvalidArgument("model: \"" + constant + "\" is not a number");
      }
      m.constants.push_back(constant);
      m.sources[constant] = "";
    }
    if (sec.contains("sources")) {
      if (!sec["sources"].is_object()) return Status::InvalidArgument(std::string("model: ") + name + ".sources is not an object");
      for (const auto& [key, value] : sec["sources"].items()) {
        const std::string constant = std::string(name) + "." + key;
        if (!m.sources.count(constant) || !value.is_string()) {
          return Status::InvalidArgument("model: a source for \"" + constant + "\", which the file does not give");
        }
        m.sources[constant] = value.get<std::string>();
      }
    }
    return &sec;
  };
  auto number = [](const nlohmann::json& sec, const char* key, double otherwise) {
    return sec.contains(key) && sec[key].is_number() ? sec[key].get<double>() : otherwise;
  };
  auto network = section("network");
  if (!network.ok()) return network.status();
  if (const nlohmann::json* n = *network) {
    m.one_way = static_cast<runtime::Nanos>(number(*n, "one_way_ns", 0));
    m.bandwidth = number(*n, "bandwidth_bytes_per_ns", 0);
    m.nic_service = static_cast<runtime::Nanos>(number(*n, "nic_service_ns", -1));
    m.software_nic = n->value("software_nic", true);
    if (m.one_way < 0 || m.bandwidth < 0 || (n->contains("nic_service_ns") && m.nic_service < 0)) {
      return Status::InvalidArgument("model: negative network figure");
    }
  }
  auto machines = section("machines");
  if (!machines.ok()) return machines.status();
  if (const nlohmann::json* h = *machines) {
    const double node = number(*h, "node_cores", 0), client = number(*h, "client_cores", 0),
                 hosts = number(*h, "client_hosts", 0), pool = number(*h, "pool_cores", 0);
    if (node < 0 || client < 0 || hosts < 0 || pool < 0) {
      return Status::InvalidArgument("model: negative machine figure");
    }
    m.pool_cores = static_cast<uint32_t>(pool);
    m.node_cores = static_cast<uint32_t>(node);
    m.client_cores = static_cast<uint32_t>(client);
    m.client_hosts = static_cast<uint32_t>(hosts);
  }
  if (doc.contains("runtime") && doc["runtime"].is_object()) {
    const auto& r = doc["runtime"];
    m.park_after = static_cast<runtime::Nanos>(r.value("park_after_ns", -1.0));
    if (r.contains("park_after_ns")) {
      m.constants.push_back("runtime.park_after_ns");
      m.sources["runtime.park_after_ns"] = r.value("source", "");
    }
    if (r.contains("migration_cost_ns")) {
      const double v = number(r, "migration_cost_ns", -1);
      if (v < 0 || v != std::floor(v)) {
        return Status::InvalidArgument("model: runtime.migration_cost_ns must be whole nanoseconds, 0 or more");
      }
      m.migration_cost = static_cast<runtime::Nanos>(v);
      m.constants.push_back("runtime.migration_cost_ns");
      m.sources["runtime.migration_cost_ns"] = r.value("migration_cost_source", "");
    }
  }
  m.provider = doc.value("provider", "");
  return m;
}

bool MachineModel::Gives(const std::string& constant) const {
  return std::find(constants.begin(), constants.end(), constant) != constants.end();
}

std::vector<std::string> MachineModel::Unsourced() const {
  std::vector<std::string> out;
  for (const std::string& c : constants) {
    auto it = sources.find(c);
    if (it == sources.end() || it->second.empty()) out.push_back(c);
  }
  return out;
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

Status OverrideInput(MachineModel& m, std::string_view spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument("input override '" + std::string(spec) + "' is not NAME=NS or NAME=NS/NS_PER_BYTE");
  }
  const std::string name(spec.substr(0, eq));
  const std::string value(spec.substr(eq + 1));
  size_t c = 0;
  while (c < runtime::kCostCount && runtime::CostName(static_cast<runtime::Cost>(c)) != name) ++c;
  if (c == runtime::kCostCount) return Status::InvalidArgument("input override: no input named '" + name + "'");
  auto number = [&](const std::string& text, double* out) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < 0) return false;
    *out = v;
    return true;
  };
  runtime::CostInput& in = m.costs.inputs[c];
  const size_t slash = value.find('/');
  double per_op = 0, per_byte = in.per_byte;
  if (!number(value.substr(0, slash), &per_op) ||
      (slash != std::string::npos && !number(value.substr(slash + 1), &per_byte))) {
    return Status::InvalidArgument("input override '" + std::string(spec) + "': want non-negative numbers of ns");
  }
  in.per_op = static_cast<runtime::Nanos>(std::llround(per_op));
  in.per_byte = per_byte;
  m.sources[name] = "overridden on the command line: " + std::string(spec);
  return Status::Ok();
}

PerfOptions FromModel(const MachineModel& m) {
  PerfOptions p;
  p.costs = m.costs;
  p.one_way = m.one_way;
  p.bandwidth = m.bandwidth;
  p.software_nic = m.software_nic;
  p.migration_cost = m.migration_cost;
  return p;
}

PerfOptions ThisMachine(const MachineModel& m, uint32_t cores) {
  PerfOptions p = FromModel(m);
  p.shared_host = true;
  p.host_cores = cores;
  // slip server's threads spin 8 empty loop turns, then park: measured by
  // the calibration when the file says; else a few microseconds.
  p.park_after = m.park_after >= 0 ? m.park_after : 5 * runtime::kMicrosecond;
  return p;
}

}  // namespace slip::sim
