// Keyring: the cluster secret, as the keys a cluster accepts and the one it
// opens sessions with. Every connection between slip processes proves
// knowledge of a key (rpc/channel.h "Authentication"); rotation is a change
// of keyring that never leaves two processes without a common key
// (docs/security.md "Rotation").
//
// On disk (the cluster directory's `secret`, mode 0600, owner only):
//   # comment
//   current <id> <64 hex digits>
//   accept <id> <64 hex digits>
// exactly one `current`, any number of `accept`, ids distinct and non-zero.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace slip::auth {

constexpr size_t kKeyBytes = 32;

struct Key {
  uint32_t id = 0;
  std::array<uint8_t, kKeyBytes> bytes{};
};

class Keyring {
 public:
  // A keyring with one fresh random key (id 1).
  static Keyring Generate();
  // REQUIRES: `current` among `keys`, ids distinct and non-zero (checked by Parse).
  Keyring(std::vector<Key> keys, uint32_t current) : keys_(std::move(keys)), current_(current) {}

  static Result<Keyring> Parse(std::string_view text);
  std::string Serialize() const;

  const Key& current() const { return *Find(current_); }
  // A key the cluster accepts, or null.
  const Key* Find(uint32_t id) const;
  const std::vector<Key>& keys() const { return keys_; }

  // Rotation steps (each a new keyring; see docs/security.md).
  // 1. A fresh key accepted beside the current one (id one past the highest).
  Keyring WithNewKey() const;
  // 2. `id` becomes current (it must be accepted already).
  Result<Keyring> WithCurrent(uint32_t id) const;
  // 3. Every key but the current one dropped.
  Keyring OnlyCurrent() const;

 private:
  std::vector<Key> keys_;
  uint32_t current_ = 0;
};

// The cluster directory's secret file.
std::string SecretPath(const std::string& cluster_dir);

// Reads a keyring file; refuses one that others could read or write (mode
// other than 0600/0400) or that another user owns.
Result<Keyring> ReadKeyringFile(const std::string& path);
// Writes atomically (temporary file, fsync, rename) with mode 0600.
Status WriteKeyringFile(const std::string& path, const Keyring& keys);

// Cryptographically random bytes (the kernel's generator, via libsodium).
void RandomBytes(void* out, size_t n);

}  // namespace slip::auth
