#include "auth/session_key.h"

#include <sodium.h>

#include "common/coding.h"

namespace slip::auth {

SessionKey DeriveSessionKey(const Key& key, const Nonce& client_nonce, const Nonce& server_nonce,
                            uint32_t session, std::string_view client_address) {
  static constexpr char kLabel[] = "slip-session-v1";
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, key.bytes.data(), key.bytes.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const uint8_t*>(kLabel), sizeof(kLabel) - 1);
  std::byte ids[8];
  StoreLE<uint32_t>(ids, key.id);
  StoreLE<uint32_t>(ids + 4, session);
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const uint8_t*>(ids), sizeof(ids));
  crypto_auth_hmacsha256_update(&st, client_nonce.data(), client_nonce.size());
  crypto_auth_hmacsha256_update(&st, server_nonce.data(), server_nonce.size());
  crypto_auth_hmacsha256_update(&st, reinterpret_cast<const uint8_t*>(client_address.data()),
                                client_address.size());
  uint8_t mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&st, mac);
  SessionKey k;
  std::copy(mac, mac + k.bytes.size(), k.bytes.begin());
  sodium_memzero(mac, sizeof(mac));
  return k;
}

uint64_t Tag(const SessionKey& key, const void* data, size_t len) {
  static_assert(crypto_shorthash_siphash24_KEYBYTES == 16 && crypto_shorthash_siphash24_BYTES == 8);
  uint8_t out[8];
  crypto_shorthash_siphash24(out, static_cast<const uint8_t*>(data), len, key.bytes.data());
  return LoadLE<uint64_t>(reinterpret_cast<const std::byte*>(out));
}

bool TagsEqual(uint64_t a, uint64_t b) { return (a ^ b) == 0; }  // one compare, no early exit

}  // namespace slip::auth
