// The deterministic workload shared by the SIGKILL crash test's child and
// parent: both derive every key and value from (seed, op index), so the
// parent can recompute exactly what an acknowledged operation wrote.
#pragma once

#include <cstdint>
#include <string>

#include "common/random.h"

namespace slip::crashtest {

constexpr int kKeys = 200;

struct Op {
  bool is_delete;
  std::string key;
  std::string value;  // empty for deletes
};

inline Op MakeOp(uint64_t seed, uint64_t index) {
  Random rng(seed * 1000003 + index);
  Op op;
  op.is_delete = rng.Bernoulli(0.25);
  op.key = "key" + std::to_string(rng.Uniform(kKeys));
  if (!op.is_delete) {
    size_t n = rng.Bernoulli(0.02) ? 20000 + rng.Uniform(40000) : 1 + rng.Uniform(300);
    op.value.resize(n);
    for (auto& c : op.value) c = static_cast<char>('!' + rng.Uniform(90));
  }
  return op;
}

}  // namespace slip::crashtest
