// Merging a KVS node's log segment into the pool index (docs/papers/
// dinomo.md §4): the pool's merge threads apply each segment's entries in
// log order, so the index ends pointing at the newest entry of every key.
// A shared key's entries are not applied: its cell decides which is
// current (dinomo/cell.h), and the merge only reports whether it is.
//
// A node writes its log sequentially and acknowledges a batch only once
// every earlier batch of its log completed (on RDMA an RC queue pair fails
// every write after a failed one), so the first block that does not decode
// ends what was ever acknowledged: the merge stops there. Merging again
// from an earlier point — after the pool crashed mid-merge — changes
// nothing (PoolIndex::Apply is version-conditional).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "dinomo/pool_index.h"
#include "log/entry.h"
#include "pm/region.h"

namespace slip::dinomo {

struct MergeResult {
  uint64_t end = 0;           // segment-relative offset the walk stopped at
  uint64_t entries = 0;       // entries walked
  uint64_t applied = 0;       // of which the index now points at (and did not before)
  bool torn = false;          // stopped at a block that is neither whole nor empty
  // Stopped at `end` because the index had no room for that entry (NoSpace):
  // grow the index and merge on from `end` (the pool does).
  bool index_full = false;
  // Entries no longer pointed at: the entries the index let go of, and the
  // walked ones it did not take (a newer version was already indexed). The
  // segments' garbage counters.
  std::vector<IndexPointer> garbage;
  // Entries of shared keys their cell's word pointed at when merged: live
  // while it still does (the pool's sweep notices when it moves on).
  struct CellLive {
    uint64_t cell = 0;  // the cell's region offset
    IndexPointer entry;
  };
  std::vector<CellLive> cell_live;
};

// Merges [from, segment_bytes) of the segment at region offset `segment`.
// InvalidArgument when the segment does not lie in the region; Corruption
// (with what was merged so far in the index) when a block is a kind a
// node's log never holds. A full index stops the walk with index_full set
// and everything walked so far counted (its garbage included).
Result<MergeResult> MergeSegment(const pm::PmRegion& region, PoolIndex& index, uint64_t segment,
                                 uint64_t segment_bytes, uint64_t from, const log::Limits& limits = {});

}  // namespace slip::dinomo
