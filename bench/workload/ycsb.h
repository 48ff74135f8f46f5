// YCSB key choosers (Cooper et al., SoCC'10; the reference ZipfianGenerator
// and ScrambledZipfianGenerator, after Gray et al. SIGMOD'94). Header-only so
// the CLI and benchmark drivers share one definition.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "common/random.h"

namespace slip::ycsb {

// Zipfian over [0, n) with skew theta (YCSB default 0.99): item 0 is hottest.
class Zipfian {
 public:
  Zipfian(uint64_t n, double theta = 0.99) : Zipfian(n, theta, Zeta(n, theta)) {}
  // With zeta(n, theta) given (it is O(n) to compute).
  Zipfian(uint64_t n, double theta, double zetan) : n_(n), theta_(theta) {
    zetan_ = zetan;
    zeta2_ = Zeta(2, theta);
    alpha_ = 1.0 / (1.0 - theta);
    eta_ = (1 - std::pow(2.0 / static_cast<double>(n), 1 - theta)) / (1 - zeta2_ / zetan_);
  }
  uint64_t Next(Random& rng) const {
    double u = rng.NextDouble();
    double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
    auto v = static_cast<uint64_t>(static_cast<double>(n_) * std::pow(eta_ * u - eta_ + 1, alpha_));
    return v < n_ ? v : n_ - 1;
  }
  uint64_t n() const { return n_; }

 private:
  static double Zeta(uint64_t n, double theta) {
    double sum = 0;
    for (uint64_t i = 1; i <= n; ++i) sum += 1.0 / std::pow(static_cast<double>(i), theta);
    return sum;
  }
  uint64_t n_;
  double theta_, zetan_, zeta2_, alpha_, eta_;
};

// YCSB's ScrambledZipfianGenerator: a zipfian over a fixed 10^10 items
// (YCSB's ITEM_COUNT), hashed (FNV-1a 64, as Utils.fnvhash64) onto the n
// records. So the hottest record gets 1/zeta(10^10, theta) of the draws
// (3.8% at theta 0.99), whatever n is, and hot records are spread over the
// key space.
class ScrambledZipfian {
 public:
  static constexpr uint64_t kItemCount = 10'000'000'000ull;
  explicit ScrambledZipfian(uint64_t n, double theta = 0.99)
      : n_(n), zipf_(kItemCount, theta, ZetaOfItemCount(theta)) {}
  uint64_t Next(Random& rng) const { return Fnv64(zipf_.Next(rng)) % n_; }

  // zeta(10^10, theta): YCSB's constant for 0.99; otherwise the first 10^6
  // terms exactly plus the Euler-Maclaurin integral of the rest (relative
  // error < 1e-9, far below sampling noise).
  static double ZetaOfItemCount(double theta) {
    if (theta == 0.99) return 26.46902820178302;
    constexpr uint64_t m = 1'000'000;
    double sum = 0;
    for (uint64_t i = 1; i <= m; ++i) sum += 1.0 / std::pow(static_cast<double>(i), theta);
    const double a = static_cast<double>(m) + 0.5, b = static_cast<double>(kItemCount) + 0.5;
    return sum + (std::pow(b, 1 - theta) - std::pow(a, 1 - theta)) / (1 - theta);
  }

  static uint64_t Fnv64(uint64_t v) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int i = 0; i < 8; ++i) {
      h ^= v & 0xFF;
      h *= 1099511628211ull;
      v >>= 8;
    }
    return h;
  }

 private:
  uint64_t n_;
  Zipfian zipf_;
};

// YCSB key naming: "user" + hash of the record number.
inline std::string KeyName(uint64_t i) {
  return "user" + std::to_string(ScrambledZipfian::Fnv64(i));
}

}  // namespace slip::ycsb
