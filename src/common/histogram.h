// Latency histogram with bounded relative error (HDR-style log-linear
// buckets): values are grouped by their power of two, and each power into
// 64 linear sub-buckets, so any recorded value is reported within 1/64
// (1.6%) of itself. Fixed memory, O(1) record, mergeable across threads.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace slip {

class Histogram {
 public:
  static constexpr int kSubBits = 6;
  static constexpr int kSub = 1 << kSubBits;

  void Record(uint64_t v) {
    ++counts_[Bucket(v)];
    ++total_;
    if (v > max_) max_ = v;
    if (v < min_) min_ = v;
    sum_ += v;
  }
  void Merge(const Histogram& o) {
    for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
    sum_ += o.sum_;
    if (o.max_ > max_) max_ = o.max_;
    if (o.min_ < min_) min_ = o.min_;
  }

  uint64_t count() const { return total_; }
  uint64_t sum() const { return sum_; }
  // Recorded values at or below v (to its bucket's precision: a bucket
  // counts when its upper edge is <= v).
  uint64_t CountAtOrBelow(uint64_t v) const {
    uint64_t n = 0;
    for (size_t i = 0; i < counts_.size() && UpperEdge(i) <= v; ++i) n += counts_[i];
    return n;
  }
  uint64_t max() const { return total_ ? max_ : 0; }
  uint64_t min() const { return total_ ? min_ : 0; }
  double mean() const { return total_ ? static_cast<double>(sum_) / static_cast<double>(total_) : 0; }

  // The value at quantile q in [0, 1] (upper edge of its bucket, capped at max).
  uint64_t Percentile(double q) const {
    if (total_ == 0) return 0;
    auto rank = static_cast<uint64_t>(q * static_cast<double>(total_ - 1)) + 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= rank) {
        uint64_t hi = UpperEdge(i);
        return hi < max_ ? hi : max_;
      }
    }
    return max_;
  }

 private:
  static size_t Bucket(uint64_t v) {
    if (v < kSub) return static_cast<size_t>(v);
    int msb = 63 - std::countl_zero(v);
    int shift = msb - kSubBits;
    return static_cast<size_t>((shift + 1) * kSub + static_cast<int>((v >> shift) & (kSub - 1)));
  }
  static uint64_t UpperEdge(size_t b) {
    if (b < kSub) return b;
    int shift = static_cast<int>(b / kSub) - 1;
    uint64_t base = (uint64_t{kSub} + (b % kSub)) << shift;
    return base + ((uint64_t{1} << shift) - 1);
  }

  std::array<uint64_t, (64 - kSubBits + 1) * kSub> counts_{};
  uint64_t total_ = 0, sum_ = 0, max_ = 0, min_ = UINT64_MAX;
};

}  // namespace slip
