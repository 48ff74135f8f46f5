#include "dinomo/shared_nothing.h"

#include <cstring>
#include <vector>

#include "log/entry.h"

namespace slip::dinomo {

Result<CopyResult> CopyKeys(Pool& from, pm::PmRegion& from_region, Pool& to, pm::PmRegion& to_region,
                            uint32_t writer, const std::function<bool(std::string_view key)>& moving) {
  std::vector<IndexPointer> pointers;
  from.index().ForEachPointer([&](IndexPointer p) { pointers.push_back(p); });
  CopyResult out;
  uint64_t segment = 0, tail = 0;
  auto seal = [&]() -> Status {
    if (segment == 0) return Status::Ok();
    to_region.Persist(to_region.at(segment), tail);
    SLIP_ASSIGN_OR_RETURN(MergeResult m, to.Seal(writer, segment, tail));
    if (m.torn || m.end != tail) return Status::Corruption("a copied segment did not merge whole");
    segment = 0;
    return Status::Ok();
  };
  for (const IndexPointer& p : pointers) {
    if (p.bytes > from_region.size() || p.offset > from_region.size() - p.bytes) {
      return Status::Corruption("an index pointer leaves the partition");
    }
    const std::span<const std::byte> block(from_region.at(p.offset), p.bytes);
    // The index points only at whole entries (a segment is freed only once
    // nothing points into it): anything else is damage, not something to skip.
    auto d = log::DecodeBlock(block, from.limits());
    if (!d.status.ok() || !d.block.single()) {
      return Status::Corruption("the index points at no whole entry at offset " + std::to_string(p.offset));
    }
    if (!moving(d.block.key())) continue;
    if (p.bytes > to.segment_bytes()) return Status::TooLarge("an entry larger than a segment of the new partition");
    if (segment == 0 || tail + p.bytes > to.segment_bytes()) {
      SLIP_RETURN_IF_ERROR(seal());
      SLIP_ASSIGN_OR_RETURN(segment, to.Allocate(writer));
      tail = 0;
    }
    std::memcpy(to_region.at(segment + tail), block.data(), p.bytes);
    tail += p.bytes;
    ++out.keys;
    out.tombstones += d.block.type == log::EntryType::kDel;
    out.bytes += p.bytes;
  }
  SLIP_RETURN_IF_ERROR(seal());
  return out;
}

}  // namespace slip::dinomo
