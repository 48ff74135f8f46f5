// CRC32C (Castagnoli), the checksum of every log entry, wire message and
// on-media header. Uses the SSE4.2 crc32 instruction when the CPU has it
// (checked once at run time), else a table-driven software fallback with
// identical results.
#pragma once

#include <cstddef>
#include <cstdint>

namespace slip {

// Extends `crc` (0 to start) over data[0, n). Crc32c(Crc32c(0,a),b) == Crc32c(0,ab).
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

// True when the hardware path is in use (reported by benchmarks).
bool Crc32cIsHardware();

}  // namespace slip
