// Every benchmark target by name: what `slip bench --target NAME` runs.
// To add a design: implement a KvTarget, add its name to TargetNames() and a
// branch to MakeTarget() (targets.cc); the driver, reports, `bench compare`
// and bench/plot need nothing else.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/driver/kv_target.h"

namespace slip::bench {

struct TargetConfig {
  std::string name;           // one of TargetNames()
  uint32_t threads = 2;       // driver threads that will Connect()
  std::string dir;            // local: PM file DIR/pm; rocksdb: DIR/rocksdb; empty = temp/anonymous
  uint64_t region_mb = 4096;  // local: PM size
  std::string provider = "tcp";  // replicated designs: the libfabric provider of a cluster they start
  uint64_t pm_mb = 256;          // replicated designs: PM per node of a cluster they start
};

const std::vector<std::string>& TargetNames();
// One of TargetNames(), or "<design>/<workers>" (a replicated design whose
// servers run that many request workers, 1..32).
bool IsTargetName(const std::string& name);

// Builds (and for servers, starts) the target. InvalidArgument for an unknown
// name; NotFound when a server binary is missing.
Result<std::unique_ptr<KvTarget>> MakeTarget(const TargetConfig& config);

}  // namespace slip::bench
