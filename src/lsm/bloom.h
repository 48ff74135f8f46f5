// Bloom filters over the user keys of an SST (docs/formats/lsm_sst.md):
// `bits_per_key` bits per key and k = round(bits_per_key x ln 2) probes,
// derived by double hashing from one 64-bit hash of the key (Kirsch and
// Mitzenmacher), so a probe costs no further hashing. At 10 bits per key
// about 1% of absent keys pass; a present key always does.
//
// A filter is its bit array followed by one byte, k. A filter this code did
// not write (k above 30: reserved) passes every key, as no filter would.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace slip::lsm {

class BloomFilterPolicy {
 public:
  explicit BloomFilterPolicy(int bits_per_key = 10);
  std::string Create(const std::vector<std::string_view>& keys) const;
  bool MayContain(std::string_view filter, std::string_view key) const;
  int probes() const { return k_; }

 private:
  int bits_per_key_;
  int k_;
};

}  // namespace slip::lsm
