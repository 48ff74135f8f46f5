#include "bench/driver/kv_target.h"
#include "pm/region.h"

namespace slip::bench {

std::string DurabilityOfPath(const std::string& path) {
  return pm::OnMemoryFilesystem(path) ? "memory" : "file";
}

}  // namespace slip::bench
