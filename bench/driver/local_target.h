// The `local` target: one node's Store in this process (no replication, no
// network) — the ceiling any replicated design is measured against.
//
// PM is anonymous memory persisted with cache-line flushes (clwb where the
// CPU has it), or a file under `dir` (msync, or MAP_SYNC + flushes on DAX).
// Each driver thread is one store writer (its own t-log). A background
// cleaner thread owned by the target runs CleanStep() whenever the store
// asks for it, so cleaning CPU is measured as the "clean" role instead of
// hiding in the client threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bench/driver/kv_target.h"

namespace slip::bench {

struct LocalTargetOptions {
  uint32_t threads = 2;        // store writers (one per driver thread)
  // PM size. Anonymous memory is only touched as used; the load workload's
  // inserts must fit (about 200 B each with 100 B values).
  uint64_t region_mb = 4096;
  std::string dir;             // empty: anonymous PM with cache-line flushes
};

Result<std::unique_ptr<KvTarget>> MakeLocalTarget(const LocalTargetOptions& options);

}  // namespace slip::bench
