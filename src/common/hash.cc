#include "common/hash.h"

#include <xxhash.h>

namespace slip {

uint64_t HashKey(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

}  // namespace slip
