// The cluster configuration as the configuration store holds it
// (docs/formats/cluster_config.md): JSON from a file or ZooKeeper node that
// anyone with write access could have edited. Only valid configurations
// decode; what decodes re-encodes stably.
#include "cluster/cluster_config.h"
#include "fuzz/fuzz.h"

using namespace slip;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto c = cluster::DecodeJson(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!c.ok()) return 0;
  const std::string e1 = cluster::EncodeJson(*c);
  auto d = cluster::DecodeJson(e1);
  fuzz::Check(d.ok(), "a re-encoded configuration does not decode");
  fuzz::Check(cluster::EncodeJson(*d) == e1, "a configuration re-encodes differently");
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  std::vector<std::string> seeds;
  for (uint32_t rf : {1u, 3u}) {
    std::map<cluster::NodeId, std::string> nodes;
    for (uint32_t i = 0; i < 4; ++i) nodes[i] = "addr" + std::to_string(i);
    auto c = cluster::Place(nodes, 8, rf);
    if (c.ok()) seeds.push_back(cluster::EncodeJson(*c));
  }
  return seeds;
}
