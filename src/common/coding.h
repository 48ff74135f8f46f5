// Little-endian fixed-width encode/decode for persistent and wire formats.
// memcpy keeps these free of alignment and strict-aliasing traps; compilers
// turn them into single moves on x86.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace slip {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "formats are little-endian and stored with memcpy");

template <typename T>
inline T LoadLE(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
inline void StoreLE(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

constexpr uint64_t AlignUp(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }
constexpr bool IsAligned(uint64_t n, uint64_t align) { return n % align == 0; }

}  // namespace slip
