// Log entry codec: the one on-media (and on-wire) record format shared by
// every log — a worker's t-log, a server's b-log, the cleaner's log — and by
// every replication protocol. Specification: docs/formats/log_entry.md.
//
// An entry is one or more *blocks*. Each block is a 32-byte header followed by
// a chunk of the entry's payload (key bytes, then value bytes), zero-padded to
// a multiple of 64 bytes. Every block repeats the entry's metadata and carries
// its own CRC32C, so a block is self-validating wherever it lands (blocks of
// one entry may arrive out of order and non-adjacent, as MTU-split messages
// do in a Rowan b-log). ⟨shard, version⟩ identifies an entry; it is complete
// once `cnt` valid blocks with distinct `seq` are present.
//
// Header (little-endian):
//   off size field
//    0   1   type          EntryType, never 0 (so a block's first 8 bytes are
//                          never zero: zero marks never-written space)
//    1   1   format        kFormatVersion
//    2   2   shard         shard id
//    4   4   crc           CRC32C of the whole padded block with this field = 0
//    8   8   version|cnt   bits 0..47 version, bits 48..63 cnt (blocks, >= 1)
//   16   4   key_len       of the whole entry
//   20   4   value_len     of the whole entry
//   24   4   block_payload payload bytes carried by every block but the last
//                          (== key_len + value_len when cnt == 1)
//   28   2   seq           0 .. cnt-1
//   30   2   hdr_check     16 bits of CRC32C over bytes 0..3 and 8..29
//                          (format 2; format 1 wrote 0 here)
// Block `seq` carries payload bytes [seq*block_payload,
// min((seq+1)*block_payload, key_len+value_len)).
//
// Types: kPut (key + value), kDel (key; value is 8 bytes of node-local
// metadata, see store/), kCommitVersion (no key; value is an 8-byte
// little-endian committed version for `shard`), kChecksum (no key; 8 value
// bytes: a Tailwind running checksum, see replication/tailwind/format.h),
// kSeal (no key; 16 value bytes: a sender's credential, replication/seal.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace slip::log {

// Persisted: never renumber. 0 is reserved for "no entry".
// kChecksum: a Tailwind running checksum (no key; value = 4-byte CRC32C over
// every earlier non-checksum block header of the buffer, never 0, then 4 zero
// bytes); it ends each one-sided transfer (replication/tailwind/format.h).
// kSeal: the credential that starts a message in a shared receive log (no
// key; 16 value bytes: an 8-byte send token, the 4-byte length of the rest
// of the message, 4 zero bytes; replication/seal.h). Walked over, never
// indexed.
enum class EntryType : uint8_t { kPut = 1, kDel = 2, kCommitVersion = 3, kChecksum = 4, kSeal = 5 };

// Format 2 fills the header's last two bytes with a header check; blocks of
// format 1 (the field reserved, 0) still decode.
constexpr uint8_t kFormatVersion = 2;
constexpr size_t kHeaderSize = 32;
constexpr size_t kAlign = 64;
constexpr uint64_t kMaxVersion = (uint64_t{1} << 48) - 1;

struct Limits {
  uint32_t max_key = 64 * 1024;            // bytes, inclusive
  uint32_t max_value = 16 * 1024 * 1024;   // bytes, inclusive
};

struct EntryMeta {
  EntryType type = EntryType::kPut;
  uint16_t shard = 0;
  uint64_t version = 0;  // <= kMaxVersion
};

// How an entry of given sizes is split into blocks for a maximum block size
// (header + chunk + padding), e.g. the fabric MTU or the store's block limit.
struct Layout {
  uint16_t cnt = 1;
  uint32_t block_payload = 0;
  uint64_t total_bytes = 0;  // sum of every block's padded size

  uint32_t ChunkLen(uint16_t seq, uint64_t payload_len) const;
  uint32_t BlockBytes(uint16_t seq, uint64_t payload_len) const;  // padded
};

// REQUIRES: max_block_bytes >= 128 and a multiple of 64. Fails with TooLarge
// when the entry would need more than 65535 blocks.
Result<Layout> PlanEntry(size_t key_len, size_t value_len, size_t max_block_bytes);

// Checks sizes against limits and the version range; the single place that
// turns bad user input into a clear error (TooLarge / InvalidArgument).
Status Validate(const EntryMeta& meta, size_t key_len, size_t value_len, const Limits& limits);
// Only the size limits of Validate (TooLarge), for messages that carry keys
// and values before they become entries.
Status CheckSizes(size_t key_len, size_t value_len, const Limits& limits);

// Writes block `seq` of the entry to dst, which must have
// layout.BlockBytes(seq, key.size()+value.size()) bytes. Returns bytes written.
// The first 8 bytes are written last, so a reader that sees a non-zero first
// word on a never-written region at least sees a complete header store order
// on x86 (durability still needs Persist).
size_t EncodeBlock(const EntryMeta& meta, std::string_view key, std::string_view value,
                   const Layout& layout, uint16_t seq, std::byte* dst);

// Encodes all blocks back to back (a contiguous entry).
std::vector<std::byte> EncodeEntry(const EntryMeta& meta, std::string_view key,
                                   std::string_view value, const Layout& layout);

// A block's header fields.
struct BlockHeader {
  EntryType type;
  uint16_t shard;
  uint64_t version;
  uint16_t cnt;
  uint16_t seq;
  uint32_t key_len;
  uint32_t value_len;
  uint32_t block_payload;

  // Padded size of this block (header + its chunk of key||value).
  uint32_t BlockBytes() const;
};

// Reads a header without any check: only for blocks this process wrote or a
// scan already accepted (DecodeBlock is the checked path). REQUIRES: 32
// readable bytes at p.
BlockHeader PeekHeader(const std::byte* p);

// A decoded block; `chunk` points into the caller's buffer.
struct BlockView : BlockHeader {
  uint64_t chunk_offset;  // offset of chunk within key||value
  std::span<const std::byte> chunk;
  uint32_t encoded_bytes;  // padded size of this block in the buffer

  bool single() const { return cnt == 1; }
  // For single-block entries: the key and value.
  std::string_view key() const;
  std::string_view value() const;
};

// Why a block failed to decode: Corruption with one of these in the message
// prefix, so tests and the recovery scan can tell "never written" from "torn".
enum class DecodeError : uint8_t {
  kEmpty = 1,        // first 8 bytes are zero: never-written space
  kTruncated,        // buffer shorter than the header or the padded block
  kBadHeader,        // type/format/reserved/cnt/seq/lengths inconsistent or over limits
  kBadChecksum,      // CRC mismatch: torn or corrupt
};

struct DecodeResult {
  Status status;           // OK or Corruption
  DecodeError error{};     // valid when !status.ok()
  BlockView block{};       // valid when status.ok()
};

// Decodes the block starting at buf[0]. Never reads past buf, never crashes
// on arbitrary bytes.
DecodeResult DecodeBlock(std::span<const std::byte> buf, const Limits& limits);

// The padded size of the block at buf[0] when its header is intact — its
// header check (format 2) holds and every field is consistent — even if its
// body fails the CRC (a transfer cut short); 0 otherwise. A scan of space
// with holes (receive segments) steps over such a block whole instead of
// looking inside it, where a value could hold bytes that look like a block.
uint64_t IntactHeaderBlockBytes(std::span<const std::byte> buf, const Limits& limits);

// Reassembles multi-block entries from blocks seen in any order (duplicates
// are ignored; a block whose metadata disagrees with earlier blocks of the
// same ⟨shard, version⟩ is reported as Corruption).
class Assembler {
 public:
  struct Entry {
    EntryType type;
    uint16_t shard;
    uint64_t version;
    std::string key;
    std::string value;
  };

  // Adds a decoded block; returns the whole entry once its last missing block
  // arrives, NotFound while still incomplete.
  Result<Entry> Add(const BlockView& block);
  size_t pending() const { return pending_.size(); }

 private:
  struct Partial {
    BlockView first;
    std::string payload;
    std::vector<bool> have;
    uint16_t remaining;
  };
  std::map<std::pair<uint16_t, uint64_t>, Partial> pending_;
};

}  // namespace slip::log
