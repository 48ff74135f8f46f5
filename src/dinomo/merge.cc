#include "dinomo/merge.h"

#include <atomic>

#include "dinomo/cell.h"
#include "runtime/cost.h"

namespace slip::dinomo {

Result<MergeResult> MergeSegment(const pm::PmRegion& region, PoolIndex& index, uint64_t segment,
                                 uint64_t segment_bytes, uint64_t from, const log::Limits& limits) {
  if (segment % log::kAlign != 0 || segment + segment_bytes > region.size() || from > segment_bytes ||
      from % log::kAlign != 0) {
    return Status::InvalidArgument("segment [" + std::to_string(segment) + ", +" + std::to_string(segment_bytes) +
                                   ") from " + std::to_string(from) + " does not lie in the pool");
  }
  MergeResult r;
  uint64_t pos = from;
  // Persisted together once the walk ends (and before the caller marks
  // the segment merged): a crash before then merges the segment again.
  PendingLines pending;
  struct PersistAtExit {
    PoolIndex& index;
    PendingLines& pending;
    ~PersistAtExit() { index.Persist(pending); }
  } persist_at_exit{index, pending};
  while (pos < segment_bytes) {
    auto d = log::DecodeBlock({region.at(segment + pos), segment_bytes - pos}, limits);
    if (!d.status.ok()) {
      r.torn = d.error != log::DecodeError::kEmpty;
      break;
    }
    const log::BlockView& b = d.block;
    if (!b.single() || (b.type != log::EntryType::kPut && b.type != log::EntryType::kDel)) {
      r.end = pos;
      return Status::Corruption("a node's log holds only single-block PUT and DEL entries; offset " +
                                std::to_string(pos) + " of segment " + std::to_string(segment) + " does not");
    }
    const IndexPointer p{segment + pos, b.encoded_bytes};
    auto applied = index.Apply(p, &pending);
    if (!applied.ok() && applied.status().Is(Code::kNoSpace)) {
      r.index_full = true;
      break;
    }
    SLIP_ASSIGN_OR_RETURN(PoolIndex::Applied a, std::move(applied));
    runtime::Charge(runtime::Cost::kMerge, b.encoded_bytes);  // the block's decode (its CRC) and the index update
    ++r.entries;
    if (a.shared) {
      const uint64_t word = std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(region.at(a.shared->offset + kCellWordOffset)))
                                .load(std::memory_order_acquire);
      if (word == p.Encode()) {
        r.cell_live.push_back({a.shared->offset, p});
      } else {
        r.garbage.push_back(p);
      }
    } else if (a.applied) {
      ++r.applied;
      if (a.displaced) r.garbage.push_back(*a.displaced);
    } else if (!a.current) {
      r.garbage.push_back(p);
    }
    pos += b.encoded_bytes;
  }
  r.end = pos;
  return r;
}

}  // namespace slip::dinomo
