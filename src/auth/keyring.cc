#include "auth/keyring.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace slip::auth {
namespace {

void InitSodium() {
  // Idempotent and thread-safe; fails only without a random source.
  static const int once = sodium_init();
  (void)once;
}

std::string Hex(const std::array<uint8_t, kKeyBytes>& b) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t v : b) {
    s += digits[v >> 4];
    s += digits[v & 15];
  }
  return s;
}

bool FromHex(std::string_view s, std::array<uint8_t, kKeyBytes>* out) {
  if (s.size() != 2 * kKeyBytes) return false;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < kKeyBytes; ++i) {
    const int hi = nibble(s[2 * i]), lo = nibble(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

Key FreshKey(uint32_t id) {
  Key k;
  k.id = id;
  RandomBytes(k.bytes.data(), k.bytes.size());
  return k;
}

}  // namespace

void RandomBytes(void* out, size_t n) {
  InitSodium();
  randombytes_buf(out, n);
}

Keyring Keyring::Generate() { return Keyring({FreshKey(1)}, 1); }

const Key* Keyring::Find(uint32_t id) const {
  for (const Key& k : keys_) {
    if (k.id == id) return &k;
  }
  return nullptr;
}

Result<Keyring> Keyring::Parse(std::string_view text) {
  std::vector<Key> keys;
  uint32_t current = 0;
  int line_no = 0;
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const auto where = [&] { return "secret file line " + std::to_string(line_no) + ": "; };
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string kind, id_text, hex, extra;
    words >> kind >> id_text >> hex;
    if (kind != "current" && kind != "accept") {
      return Status::InvalidArgument(where() + "expected `current` or `accept`");
    }
    if (words >> extra) return Status::InvalidArgument(where() + "unexpected text after the key");
    Key k;
    char* end = nullptr;
    errno = 0;
    const unsigned long id = std::strtoul(id_text.c_str(), &end, 10);
    if (id_text.empty() || *end != '\0' || errno != 0 || id == 0 || id > UINT32_MAX) {
      return Status::InvalidArgument(where() + "key id must be a number from 1 to 4294967295");
    }
    k.id = static_cast<uint32_t>(id);
    if (!FromHex(hex, &k.bytes)) {
      return Status::InvalidArgument(where() + "a key is " + std::to_string(2 * kKeyBytes) + " hex digits");
    }
    for (const Key& o : keys) {
      if (o.id == k.id) return Status::InvalidArgument(where() + "key id " + id_text + " appears twice");
    }
    if (kind == "current") {
      if (current != 0) return Status::InvalidArgument(where() + "a second `current` key");
      current = k.id;
    }
    keys.push_back(k);
  }
  if (current == 0) return Status::InvalidArgument("secret file: no `current` key");
  return Keyring(std::move(keys), current);
}

std::string Keyring::Serialize() const {
  std::string s =
      "# Slipstream cluster secret: every connection between the cluster's processes proves it knows\n"
      "# one of these keys. Keep this file readable by its owner only (mode 0600).\n";
  for (const Key& k : keys_) {
    s += (k.id == current_ ? "current " : "accept ") + std::to_string(k.id) + " " + Hex(k.bytes) + "\n";
  }
  return s;
}

Keyring Keyring::WithNewKey() const {
  uint32_t top = 0;
  for (const Key& k : keys_) top = std::max(top, k.id);
  std::vector<Key> keys = keys_;
  keys.push_back(FreshKey(top + 1));
  return Keyring(std::move(keys), current_);
}

Result<Keyring> Keyring::WithCurrent(uint32_t id) const {
  if (Find(id) == nullptr) return Status::InvalidArgument("key " + std::to_string(id) + " is not accepted yet");
  return Keyring(keys_, id);
}

Keyring Keyring::OnlyCurrent() const { return Keyring({current()}, current_); }

std::string SecretPath(const std::string& cluster_dir) { return cluster_dir + "/secret"; }

Result<Keyring> ReadKeyringFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return Status::NotFound("no secret file at " + path);
    return Status::IoError("cannot open " + path + ": " + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::IoError("cannot stat " + path + ": " + std::strerror(e));
  }
  if ((st.st_mode & 077) != 0 || st.st_uid != ::geteuid()) {
    ::close(fd);
    return Status::InvalidArgument("refusing the secret file " + path +
                                   ": it must belong to this user and be readable by no one else (chmod 600)");
  }
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) {
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > (1 << 20)) {
      ::close(fd);
      return Status::InvalidArgument(path + " is too large for a secret file");
    }
  }
  const int e = errno;
  ::close(fd);
  if (n < 0) return Status::IoError("cannot read " + path + ": " + std::strerror(e));
  return Keyring::Parse(text);
}

Status WriteKeyringFile(const std::string& path, const Keyring& keys) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("cannot create " + tmp + ": " + std::strerror(errno));
  const std::string text = keys.Serialize();
  bool ok = ::fchmod(fd, 0600) == 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  const int e = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Status::IoError("cannot write " + path + ": " + std::strerror(ok ? errno : e));
  }
  return Status::Ok();
}

}  // namespace slip::auth
