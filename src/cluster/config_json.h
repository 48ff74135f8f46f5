// The JSON tree form of a ClusterConfig, for code in cluster/ that embeds a
// configuration in a larger document (the embedded store's file). Private to
// the module: nothing outside cluster/ should depend on nlohmann's types.
#pragma once

#include <nlohmann/json.hpp>

#include "cluster/cluster_config.h"

namespace slip::cluster::internal {

nlohmann::json ToJson(const ClusterConfig& config);
// Corruption (or NotSupported for another format version) for anything but
// a valid configuration; never throws.
Result<ClusterConfig> FromJson(const nlohmann::json& j);

// Serialises without throwing: invalid UTF-8 in strings is replaced.
std::string Dump(const nlohmann::json& j, int indent);

// Typed field access that reports, never throws.
Result<uint64_t> GetUint(const nlohmann::json& obj, const char* field, uint64_t max);
Result<std::string> GetString(const nlohmann::json& obj, const char* field);
// Corruption if `obj` has a member not in `allowed`.
Status OnlyFields(const nlohmann::json& obj, std::initializer_list<const char*> allowed,
                  std::string_view what);

}  // namespace slip::cluster::internal
