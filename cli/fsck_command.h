// `slip fsck`: checks a stopped node's store for damage on the media —
// what a recovery would find (docs/design-notes.md "Damage on the media"),
// on a private copy, so the check changes nothing on disk.
#pragma once

#include <cstdint>
#include <string>

namespace slip::cli {

struct FsckOptions {
  std::string dir;        // the cluster directory, with `node`
  uint32_t node = 0;
  std::string zookeeper;  // where the configuration is, when not in `dir`
  std::string file;       // or the PM file itself
};

// 0: no damage; 1: damage found (listed on stdout); 2: the check could not
// run (the file is missing, ...).
int RunFsck(const FsckOptions& o);

}  // namespace slip::cli
