// DINOMO-N, the paper's shared-nothing baseline (docs/papers/dinomo.md §4c;
// it stands in for AsymNVM): every KVS node has a private partition of the
// pool — its own index and log segments, a dinomo::Pool of its own — and its
// data path is DINOMO's (DAC, batched logs, merges) against that partition
// only. Ownership cannot move without the data: when keys change owner, the
// newest entry of each (tombstones included, so a stale copy the new owner
// held from an earlier time cannot come back) is copied from the old owner's
// partition into the new owner's log and merged there. That copy is what
// DINOMO's shared pool saves a reconfiguration.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "common/status.h"
#include "dinomo/pool.h"
#include "pm/region.h"

namespace slip::dinomo {

struct CopyResult {
  uint64_t keys = 0;        // entries copied (tombstones included)
  uint64_t tombstones = 0;  // of which deletes
  uint64_t bytes = 0;       // log bytes written into the new partition
};

// Copies the newest entry of every key `moving` selects from partition
// `from` (its logs merged: MergeAll its nodes first) into partition `to` as
// node `writer`'s log, and merges it there. Entries keep their versions, so
// a later write by the new owner (a higher epoch) still wins. Run on the
// pools' side (a DPM thread): local memory, no round trips.
Result<CopyResult> CopyKeys(Pool& from, pm::PmRegion& from_region, Pool& to, pm::PmRegion& to_region,
                            uint32_t writer, const std::function<bool(std::string_view key)>& moving);

}  // namespace slip::dinomo
