// Helpers shared by the store's tests (store_test.cc, receive_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/random.h"
#include "pm/region.h"
#include "store/store.h"

namespace slip::store::testing {

inline std::unique_ptr<pm::PmRegion> MakeRegion(size_t size) {
  auto r = pm::PmRegion::Anonymous(size, {});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

inline StoreOptions SmallOptions() {
  StoreOptions o;
  o.geometry.segment_size = 64 << 10;
  o.geometry.num_shards = 4;
  o.max_block_bytes = 8192;
  o.limits.max_key = 1024;
  o.limits.max_value = 1 << 20;
  o.num_writers = 2;
  return o;
}

inline std::string Value(Random& rng, size_t n) {
  std::string v(n, '\0');
  for (auto& c : v) c = static_cast<char>('a' + rng.Uniform(26));
  return v;
}

}  // namespace slip::store::testing
