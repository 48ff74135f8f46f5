#include "lsm/bloom.h"

#include <algorithm>
#include <cmath>

#include "common/hash.h"

namespace slip::lsm {

BloomFilterPolicy::BloomFilterPolicy(int bits_per_key)
    : bits_per_key_(std::max(bits_per_key, 1)),
      k_(std::clamp(static_cast<int>(std::lround(bits_per_key_ * 0.69)), 1, 30)) {}

std::string BloomFilterPolicy::Create(const std::vector<std::string_view>& keys) const {
  // At least 64 bits: a tiny filter's false-positive rate would be high.
  const size_t bits = std::max<size_t>(keys.size() * static_cast<size_t>(bits_per_key_), 64);
  const size_t bytes = (bits + 7) / 8;
  std::string filter(bytes + 1, '\0');
  const uint64_t n = bytes * 8;
  for (std::string_view key : keys) {
    const uint64_t h = HashKey(key);
    uint64_t probe = h;
    const uint64_t delta = (h >> 33) | (h << 31) | 1;  // odd: visits every bit position mod a power of two
    for (int i = 0; i < k_; ++i) {
      const uint64_t bit = probe % n;
      filter[bit / 8] = static_cast<char>(static_cast<uint8_t>(filter[bit / 8]) | (1u << (bit % 8)));
      probe += delta;
    }
  }
  filter[bytes] = static_cast<char>(k_);
  return filter;
}

bool BloomFilterPolicy::MayContain(std::string_view filter, std::string_view key) const {
  if (filter.size() < 2) return true;
  const auto k = static_cast<uint8_t>(filter.back());
  if (k == 0 || k > 30) return true;
  const uint64_t n = (filter.size() - 1) * 8;
  const uint64_t h = HashKey(key);
  uint64_t probe = h;
  const uint64_t delta = (h >> 33) | (h << 31) | 1;
  for (int i = 0; i < k; ++i) {
    const uint64_t bit = probe % n;
    if ((static_cast<uint8_t>(filter[bit / 8]) & (1u << (bit % 8))) == 0) return false;
    probe += delta;
  }
  return true;
}

}  // namespace slip::lsm
