// What every fuzz target defines (fuzz/targets/<name>.cc):
//   LLVMFuzzerTestOneInput — libFuzzer's entry: decode the bytes, check the
//     decoder's promises (never crash, never read past the input, what
//     decodes re-encodes to something that decodes the same), abort on a
//     broken promise;
//   SlipFuzzSeeds — valid inputs to start from (`fuzz_<name> --write-seeds
//     DIR` in the replay build writes them; fuzz/README.md).
// Targets that cover several decoders take the first byte as a selector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
std::vector<std::string> SlipFuzzSeeds();

namespace slip::fuzz {

// A broken promise: say which and abort (libFuzzer keeps the input).
[[noreturn]] inline void Fail(const char* what) {
  std::fprintf(stderr, "fuzz: %s\n", what);
  std::abort();
}
inline void Check(bool ok, const char* what) {
  if (!ok) Fail(what);
}

inline std::span<const std::byte> Bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}
inline std::span<const std::byte> Bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// The decoder's round-trip promise: what decodes re-encodes to bytes that
// decode, and re-encode to the same bytes. `in` is what `decode` takes;
// `encode` returns a std::string.
template <typename In, typename Decode, typename Encode>
void RoundTrip(In in, Decode decode, Encode encode) {
  auto a = decode(in);
  if (!a.ok()) return;
  const std::string e1 = encode(*a);
  auto b = decode(In(reinterpret_cast<const typename In::value_type*>(e1.data()), e1.size()));
  Check(b.ok(), "a re-encoded message does not decode");
  Check(encode(*b) == e1, "a message re-encodes differently");
}

// A seed for a selector target: the selector byte, then the body.
inline std::string Tagged(uint8_t selector, std::string_view body) {
  return std::string(1, static_cast<char>(selector)) + std::string(body);
}

}  // namespace slip::fuzz
