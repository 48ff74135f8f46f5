// Seeded, reproducible randomness. Protocol and test code draw only from a
// Random they were handed (never rand(), never std::random_device), so a
// seed reproduces a run exactly.
#pragma once

#include <cstdint>

namespace slip {

// xoshiro256** seeded through splitmix64: fast, 2^256 period, good quality.
class Random {
 public:
  explicit Random(uint64_t seed) {
    for (auto& w : s_) w = SplitMix(seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n); n > 0. Lemire's multiply-shift (bias < 2^-64 * n).
  uint64_t Uniform(uint64_t n) {
    __extension__ using U128 = unsigned __int128;
    return static_cast<uint64_t>((static_cast<U128>(Next()) * n) >> 64);
  }
  // Uniform in [lo, hi].
  uint64_t Range(uint64_t lo, uint64_t hi) { return lo + Uniform(hi - lo + 1); }
  // True with probability p.
  bool Bernoulli(double p) { return NextDouble() < p; }
  // Uniform in [0, 1).
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

}  // namespace slip
