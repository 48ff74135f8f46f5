#include "pm/media_model.h"

#include <algorithm>

namespace slip::pm {

MediaModel::MediaModel(MediaModelOptions options)
    : options_(options), dimms_(std::max<uint32_t>(options.dimms, 1)) {
  if (options_.lines_per_dimm == 0) options_.lines_per_dimm = 1;
  if (options_.interleave < kLine) options_.interleave = kLine;
}

void MediaModel::Write(uint64_t offset, uint64_t len) {
  if (len == 0) return;
  const uint64_t first = offset / kSubBlock * kSubBlock;
  const uint64_t end = (offset + len + kSubBlock - 1) / kSubBlock * kSubBlock;
  for (uint64_t sb = first; sb < end; sb += kSubBlock) WriteSubBlock(sb);
}

void MediaModel::WriteSubBlock(uint64_t offset) {
  stats_.requested_bytes += kSubBlock;
  const uint64_t line = offset / kLine;
  const auto bit = static_cast<uint8_t>(1u << ((offset % kLine) / kSubBlock));
  Dimm& d = dimms_[(offset / options_.interleave) % dimms_.size()];
  auto it = d.where.find(line);
  if (it != d.where.end()) {
    it->second->second |= bit;
    d.lru.splice(d.lru.begin(), d.lru, it->second);  // now most recent
    return;
  }
  if (d.lru.size() >= options_.lines_per_dimm) {
    Evict(d.lru.back().second);
    d.where.erase(d.lru.back().first);
    d.lru.pop_back();
  }
  d.lru.emplace_front(line, bit);
  d.where[line] = d.lru.begin();
}

void MediaModel::Evict(uint8_t mask) {
  ++stats_.evictions;
  stats_.media_write_bytes += kLine;
  // A partly written line is merged with the media's old contents first.
  if (mask != 0xF) stats_.media_read_bytes += kLine;
}

void MediaModel::Drain() {
  for (Dimm& d : dimms_) {
    for (auto& [line, mask] : d.lru) Evict(mask);
    d.lru.clear();
    d.where.clear();
  }
}

}  // namespace slip::pm
