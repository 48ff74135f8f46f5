#include "replication/design.h"

#include <string>

namespace slip::replication {

const std::vector<Protocol>& AllProtocols() {
  static const std::vector<Protocol> all = {Protocol::kRpc,   Protocol::kRowan, Protocol::kRWrite,
                                            Protocol::kBatch, Protocol::kShare, Protocol::kTailwind};
  return all;
}

const char* DesignName(Protocol p) {
  switch (p) {
    case Protocol::kRpc: return "rpc-kv";
    case Protocol::kRowan: return "rowan-kv";
    case Protocol::kRWrite: return "rwrite-kv";
    case Protocol::kBatch: return "batch-kv";
    case Protocol::kShare: return "share-kv";
    case Protocol::kTailwind: return "tailwind";
  }
  return "unknown";
}

Result<Protocol> ParseDesign(std::string_view name) {
  std::string known;
  for (Protocol p : AllProtocols()) {
    if (name == DesignName(p)) return p;
    known += known.empty() ? "" : ", ";
    known += DesignName(p);
  }
  return Status::InvalidArgument("unknown design '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace slip::replication
