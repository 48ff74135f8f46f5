// Key hashing: 64-bit xxh3 of the key bytes. Shards own ranges of this hash
// and the index derives its bucket and tag from it, so it must never change
// for data at rest.
#pragma once

#include <cstdint>
#include <string_view>

namespace slip {

uint64_t HashKey(std::string_view key);

}  // namespace slip
