// MediaModel: Optane's 256 B media lines and per-DIMM write-combining
// buffers, as a counter of device-level write amplification (DLWA).
// docs/papers/rowan.md §6.2; DESIGN.md "pm/".
//
// Optane writes its media in 256 B XPLines. A DIMM combines 64 B writes in a
// small buffer (the XPBuffer); a line leaves it (media write of 256 B, plus a
// 256 B read-modify-write if not all four 64 B sub-blocks were written) when
// it is evicted. Many interleaved write streams thrash the buffer, so each
// 64 B write costs a whole 256 B line: DLWA up to 4x. Rowan's point is that
// one sequential stream per server keeps DLWA at ~1.
//
// The model: `dimms` DIMMs with `interleave`-byte interleaving (3 x 4 KiB by
// default), each an LRU buffer of `lines_per_dimm` lines (42, calibrated in
// the note against the paper's Fig. 2: 2.48x at 144 streams of 64 B). Feed it
// every PM write (offset, length); it rounds to 64 B sub-blocks.
//
// Not thread-safe: one model per emulated server, fed from one place (the
// simulator, or under a lock).
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

namespace slip::pm {

struct MediaModelOptions {
  uint32_t dimms = 3;
  uint64_t interleave = 4096;
  uint32_t lines_per_dimm = 42;
};

struct MediaStats {
  uint64_t requested_bytes = 0;  // 64 B sub-blocks written x 64
  uint64_t media_write_bytes = 0;
  uint64_t media_read_bytes = 0;  // read-modify-write of partial lines
  uint64_t evictions = 0;
  double dlwa() const {
    return requested_bytes ? static_cast<double>(media_write_bytes) / static_cast<double>(requested_bytes)
                           : 0.0;
  }
};

class MediaModel {
 public:
  static constexpr uint64_t kLine = 256;
  static constexpr uint64_t kSubBlock = 64;

  explicit MediaModel(MediaModelOptions options = {});

  // A write of [offset, offset + len) reached the DIMMs.
  void Write(uint64_t offset, uint64_t len);
  // Writes back every buffered line (e.g. at the end of a run, so the
  // totals include lines still combining).
  void Drain();

  const MediaStats& stats() const { return stats_; }
  const MediaModelOptions& options() const { return options_; }

 private:
  struct Dimm {
    // Most recently used at the front; map gives O(1) lookup.
    std::list<std::pair<uint64_t, uint8_t>> lru;  // (line address, sub-block mask)
    std::unordered_map<uint64_t, std::list<std::pair<uint64_t, uint8_t>>::iterator> where;
  };
  void WriteSubBlock(uint64_t offset);
  void Evict(uint8_t mask);

  MediaModelOptions options_;
  std::vector<Dimm> dimms_;
  MediaStats stats_;
};

}  // namespace slip::pm
