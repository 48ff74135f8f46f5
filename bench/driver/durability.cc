#include <sys/statfs.h>

#include <filesystem>

#include "bench/driver/kv_target.h"

namespace slip::bench {

std::string DurabilityOfPath(const std::string& path) {
  constexpr long kTmpfsMagic = 0x01021994, kRamfsMagic = 0x858458f6;
  // The path itself may not exist yet: its nearest existing ancestor decides.
  std::filesystem::path p = std::filesystem::absolute(path);
  std::error_code ec;
  while (!p.empty() && !std::filesystem::exists(p, ec) && p != p.root_path()) p = p.parent_path();
  struct statfs fs {};
  if (::statfs(p.c_str(), &fs) != 0) return "file";
  const long type = static_cast<long>(fs.f_type);
  return type == kTmpfsMagic || type == kRamfsMagic ? "memory" : "file";
}

}  // namespace slip::bench
