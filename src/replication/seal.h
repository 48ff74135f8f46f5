// Seal: the credential that starts every message a sender puts in a
// backup's *shared* receive log (rowan-kv's b-log, the erda family's).
//
// A Send into a multi-receive buffer names no sender, and anyone who can
// reach the endpoint can Send: a CRC proves only that the bytes are whole,
// not who wrote them. So a backup hands each sender a random 64-bit send
// token in its answer to REPL_OPEN — over the authenticated control path,
// and only to a node that is a primary of a shard this node backs up — and
// the sender starts each message with a one-block SEAL carrying it. The
// backup's NIC role checks the seal of every message it drains and erases
// a message whose token it did not grant, or revoked when the sender lost
// its role (BackupLog::Fence): such bytes are never digested. The token is
// the two-sided counterpart of a memory key — a capability that is secret
// from whoever cannot read the fabric (docs/security.md, "Fencing").
//
// Layout: one 64-byte log block (log/entry.h) of type kSeal, no key, value
// = token (8 B LE) | covered (4 B LE: bytes of the message after the seal)
// | 4 zero bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace slip::replication {

constexpr size_t kSealBytes = 64;

// Writes the seal for a message of `covered` bytes after it to dst[0, 64).
void EncodeSeal(uint64_t token, uint32_t covered, std::byte* dst);

// The token of `message` when it starts with a whole seal that covers
// exactly the rest of it (multi-receive completions report the padded
// length, and every block is padded, so the two agree); nullopt otherwise.
std::optional<uint64_t> ReadSeal(std::span<const std::byte> message);

}  // namespace slip::replication
