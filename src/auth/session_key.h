// What an authenticated RPC session runs on: a key derived per session from
// the cluster key both ends hold and a nonce from each end, and a 64-bit
// tag per frame under it (docs/formats/wire.md "Authentication").
//
// Derivation: HMAC-SHA256(cluster key, "slip-session-v1" | key id |
// client nonce | server nonce | session id | client address), first 16
// bytes. Tag: SipHash-2-4 under that key: a PRF made for short inputs,
// about 0.6 ns a byte here (bench/results/2026-11-26-trust.md; the CRC it
// replaces costs a tenth of that); a forger without the session key succeeds
// with probability 2^-64 per attempt, and a session key tells nothing of the
// cluster key or of any other session's.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "auth/keyring.h"

namespace slip::auth {

constexpr size_t kNonceBytes = 16;
using Nonce = std::array<uint8_t, kNonceBytes>;

struct SessionKey {
  std::array<uint8_t, 16> bytes{};
};

SessionKey DeriveSessionKey(const Key& key, const Nonce& client_nonce, const Nonce& server_nonce,
                            uint32_t session, std::string_view client_address);

uint64_t Tag(const SessionKey& key, const void* data, size_t len);

// Compares without an early exit, so timing tells nothing of where tags differ.
bool TagsEqual(uint64_t a, uint64_t b);

}  // namespace slip::auth
