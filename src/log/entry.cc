#include "log/entry.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>
#include <string>
#include <utility>

#include "common/coding.h"
#include "common/crc32c.h"

namespace slip::log {
namespace {

// Header field offsets (entry.h).
constexpr size_t kOffType = 0;
constexpr size_t kOffFormat = 1;
constexpr size_t kOffShard = 2;
constexpr size_t kOffCrc = 4;
constexpr size_t kOffVersionCnt = 8;
constexpr size_t kOffKeyLen = 16;
constexpr size_t kOffValueLen = 20;
constexpr size_t kOffBlockPayload = 24;
constexpr size_t kOffSeq = 28;
constexpr size_t kOffReserved = 30;
constexpr size_t kFirstWord = 8;

// kDel and kCommitVersion carry exactly this many value bytes.
constexpr uint32_t kFixedValueLen = 8;
// kSeal: token, covered length, reserved.
constexpr uint32_t kSealValueLen = 16;

// Largest block a 32-bit BlockBytes/encoded_bytes can describe.
constexpr uint64_t kMaxBlockBytes = (uint64_t{UINT32_MAX} / kAlign) * kAlign;

bool IsKnownType(uint8_t t) {
  return t == static_cast<uint8_t>(EntryType::kPut) || t == static_cast<uint8_t>(EntryType::kDel) ||
         t == static_cast<uint8_t>(EntryType::kCommitVersion) ||
         t == static_cast<uint8_t>(EntryType::kChecksum) || t == static_cast<uint8_t>(EntryType::kSeal);
}

uint64_t PaddedBlock(uint64_t chunk_len) { return AlignUp(kHeaderSize + chunk_len, kAlign); }

// Bytes of block `seq` for an entry of `total` payload bytes split at
// `block_payload` into `cnt` blocks; 0 for a seq past the end. 64-bit so
// hostile header values cannot overflow.
uint64_t ChunkLenOf(uint16_t cnt, uint64_t block_payload, uint16_t seq, uint64_t total) {
  if (cnt <= 1) return seq == 0 ? total : 0;
  const uint64_t offset = uint64_t{seq} * block_payload;
  if (seq >= cnt || offset >= total) return 0;
  return std::min(block_payload, total - offset);
}

// Shape rules shared by Validate (user input) and DecodeBlock (bytes): the
// store relies on a DEL's 8 metadata bytes and a COMMIT's 8-byte version, and
// an empty key would make every index lookup ambiguous. Empty string if fine.
std::string ShapeProblem(EntryType type, uint64_t key_len, uint64_t value_len) {
  switch (type) {
    case EntryType::kPut:
      if (key_len == 0) return "PUT with an empty key";
      return {};
    case EntryType::kDel:
      if (key_len == 0) return "DEL with an empty key";
      if (value_len != kFixedValueLen) {
        return "DEL must carry 8 value bytes, not " + std::to_string(value_len);
      }
      return {};
    case EntryType::kCommitVersion:
      if (key_len != 0) {
        return "COMMIT_VERSION must have no key, not " + std::to_string(key_len) + " bytes";
      }
      if (value_len != kFixedValueLen) {
        return "COMMIT_VERSION must carry an 8-byte version, not " + std::to_string(value_len) +
               " bytes";
      }
      return {};
    case EntryType::kChecksum:
      if (key_len != 0) return "CHECKSUM must have no key, not " + std::to_string(key_len) + " bytes";
      if (value_len != kFixedValueLen) {
        return "CHECKSUM must carry 8 bytes, not " + std::to_string(value_len) + " bytes";
      }
      return {};
    case EntryType::kSeal:
      if (key_len != 0) return "SEAL must have no key, not " + std::to_string(key_len) + " bytes";
      if (value_len != kSealValueLen) {
        return "SEAL must carry 16 bytes, not " + std::to_string(value_len) + " bytes";
      }
      return {};
  }
  return "unknown entry type " + std::to_string(static_cast<unsigned>(type));
}

const char* DecodeErrorName(DecodeError e) {
  switch (e) {
    case DecodeError::kEmpty:
      return "empty";
    case DecodeError::kTruncated:
      return "truncated";
    case DecodeError::kBadHeader:
      return "bad header";
    case DecodeError::kBadChecksum:
      return "bad checksum";
  }
  return "unknown";
}

// The message starts with the error's name so logs and tests can tell a
// never-written tail from a torn or corrupt block.
DecodeResult Fail(DecodeError e, const std::string& detail) {
  DecodeResult r;
  r.status = Status::Corruption(std::string(DecodeErrorName(e)) + ": log block " + detail);
  r.error = e;
  return r;
}

// CRC of a padded block whose first word is `word0` (crc field already zero)
// and whose remaining bytes are rest[0, n). Split so the encoder can checksum
// before its first word is stored.
uint32_t BlockCrc(const std::byte* word0, const std::byte* rest, size_t n) {
  return Crc32c(Crc32c(0, word0, kFirstWord), rest, n);
}

// Format 2's header check: 16 bits of CRC32C over the header's fields
// except the block crc and the check itself. `word0` holds bytes 0..7 (type,
// format, shard, crc), `rest` bytes 8..31.
uint16_t HeaderCheck(const std::byte* word0, const std::byte* rest) {
  uint32_t c = Crc32c(0, word0, kOffCrc);
  c = Crc32c(c, rest, kOffReserved - kFirstWord);
  return static_cast<uint16_t>(c ^ (c >> 16));
}

}  // namespace

uint32_t Layout::ChunkLen(uint16_t seq, uint64_t payload_len) const {
  return static_cast<uint32_t>(ChunkLenOf(cnt, block_payload, seq, payload_len));
}

uint32_t Layout::BlockBytes(uint16_t seq, uint64_t payload_len) const {
  return static_cast<uint32_t>(PaddedBlock(ChunkLen(seq, payload_len)));
}

Result<Layout> PlanEntry(size_t key_len, size_t value_len, size_t max_block_bytes) {
  if (max_block_bytes < 2 * kAlign || max_block_bytes % kAlign != 0) {
    return Status::InvalidArgument("max block size " + std::to_string(max_block_bytes) +
                                   " must be a multiple of 64 and at least 128");
  }
  // A maximum is only a bound: one beyond what the 32-bit size fields can
  // describe means "no tighter limit than the format's".
  const uint64_t max_block = std::min<uint64_t>(max_block_bytes, kMaxBlockBytes);
  if (key_len > UINT32_MAX || value_len > UINT32_MAX) {
    return Status::TooLarge("entry of " + std::to_string(key_len) + "+" +
                            std::to_string(value_len) +
                            " bytes exceeds the format's 32-bit length fields");
  }
  const uint64_t total = uint64_t{key_len} + value_len;
  const uint64_t room = max_block - kHeaderSize;
  Layout layout;
  if (total <= room) {
    layout.cnt = 1;
    layout.block_payload = static_cast<uint32_t>(total);
    layout.total_bytes = PaddedBlock(total);
    return layout;
  }
  // Every block but the last is full, so each is exactly max_block bytes
  // (room + header is a multiple of 64) and only the last one pads.
  const uint64_t cnt = (total + room - 1) / room;
  if (cnt > UINT16_MAX) {
    return Status::TooLarge("entry of " + std::to_string(total) + " bytes needs " +
                            std::to_string(cnt) + " blocks of " + std::to_string(max_block) +
                            " bytes; the limit is 65535");
  }
  layout.cnt = static_cast<uint16_t>(cnt);
  layout.block_payload = static_cast<uint32_t>(room);
  layout.total_bytes = (cnt - 1) * max_block + PaddedBlock(total - (cnt - 1) * room);
  return layout;
}

Status CheckSizes(size_t key_len, size_t value_len, const Limits& limits) {
  if (key_len > limits.max_key) {
    return Status::TooLarge("key of " + std::to_string(key_len) + " bytes exceeds the limit of " +
                            std::to_string(limits.max_key));
  }
  if (value_len > limits.max_value) {
    return Status::TooLarge("value of " + std::to_string(value_len) +
                            " bytes exceeds the limit of " + std::to_string(limits.max_value));
  }
  return Status::Ok();
}

Status Validate(const EntryMeta& meta, size_t key_len, size_t value_len, const Limits& limits) {
  if (!IsKnownType(static_cast<uint8_t>(meta.type))) {
    return Status::InvalidArgument("unknown entry type " +
                                   std::to_string(static_cast<unsigned>(meta.type)));
  }
  if (meta.version > kMaxVersion) {
    return Status::InvalidArgument("version " + std::to_string(meta.version) +
                                   " exceeds the maximum " + std::to_string(kMaxVersion));
  }
  SLIP_RETURN_IF_ERROR(CheckSizes(key_len, value_len, limits));
  std::string problem = ShapeProblem(meta.type, key_len, value_len);
  if (!problem.empty()) return Status::InvalidArgument(std::move(problem));
  return Status::Ok();
}

size_t EncodeBlock(const EntryMeta& meta, std::string_view key, std::string_view value,
                   const Layout& layout, uint16_t seq, std::byte* dst) {
  const uint64_t total = uint64_t{key.size()} + value.size();
  assert(meta.version <= kMaxVersion);
  assert(seq < layout.cnt);
  assert(layout.cnt == 1 ? layout.block_payload == total
                         : (total + layout.block_payload - 1) / layout.block_payload == layout.cnt);
  const uint64_t offset = uint64_t{seq} * layout.block_payload;
  const uint64_t chunk = ChunkLenOf(layout.cnt, layout.block_payload, seq, total);
  const size_t bytes = PaddedBlock(chunk);

  StoreLE<uint64_t>(dst + kOffVersionCnt,
                    (meta.version & kMaxVersion) | (uint64_t{layout.cnt} << 48));
  StoreLE<uint32_t>(dst + kOffKeyLen, static_cast<uint32_t>(key.size()));
  StoreLE<uint32_t>(dst + kOffValueLen, static_cast<uint32_t>(value.size()));
  StoreLE<uint32_t>(dst + kOffBlockPayload, layout.block_payload);
  StoreLE<uint16_t>(dst + kOffSeq, seq);

  // The chunk is payload [offset, offset+chunk) of key||value.
  std::byte* out = dst + kHeaderSize;
  const uint64_t end = offset + chunk;
  if (offset < key.size()) {
    const uint64_t n = std::min<uint64_t>(end, key.size()) - offset;
    std::memcpy(out, key.data() + offset, n);
    out += n;
  }
  if (end > key.size()) {
    const uint64_t from = std::max<uint64_t>(offset, key.size()) - key.size();
    const uint64_t n = end - key.size() - from;
    std::memcpy(out, value.data() + from, n);
    out += n;
  }
  // Padding is checksummed, and dst may hold an older entry's bytes.
  std::memset(out, 0, static_cast<size_t>(dst + bytes - out));

  std::byte word0[kFirstWord] = {};
  StoreLE<uint8_t>(word0 + kOffType, static_cast<uint8_t>(meta.type));
  StoreLE<uint8_t>(word0 + kOffFormat, kFormatVersion);
  StoreLE<uint16_t>(word0 + kOffShard, meta.shard);
  StoreLE<uint16_t>(dst + kOffReserved, HeaderCheck(word0, dst + kFirstWord));
  StoreLE<uint32_t>(word0 + kOffCrc, BlockCrc(word0, dst + kFirstWord, bytes - kFirstWord));
  // Everything else must be stored before the word that makes the block look
  // written: a scan of never-written (zero) space stops at a zero first word.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  std::memcpy(dst, word0, kFirstWord);
  return bytes;
}

std::vector<std::byte> EncodeEntry(const EntryMeta& meta, std::string_view key,
                                   std::string_view value, const Layout& layout) {
  std::vector<std::byte> out(layout.total_bytes);
  size_t pos = 0;
  for (uint16_t seq = 0; seq < layout.cnt; ++seq) {
    pos += EncodeBlock(meta, key, value, layout, seq, out.data() + pos);
  }
  assert(pos == out.size());
  return out;
}

BlockHeader PeekHeader(const std::byte* p) {
  const uint64_t version_cnt = LoadLE<uint64_t>(p + kOffVersionCnt);
  return BlockHeader{static_cast<EntryType>(LoadLE<uint8_t>(p + kOffType)),
                     LoadLE<uint16_t>(p + kOffShard),
                     version_cnt & kMaxVersion,
                     static_cast<uint16_t>(version_cnt >> 48),
                     LoadLE<uint16_t>(p + kOffSeq),
                     LoadLE<uint32_t>(p + kOffKeyLen),
                     LoadLE<uint32_t>(p + kOffValueLen),
                     LoadLE<uint32_t>(p + kOffBlockPayload)};
}

uint32_t BlockHeader::BlockBytes() const {
  const uint64_t total = uint64_t{key_len} + value_len;
  return static_cast<uint32_t>(PaddedBlock(ChunkLenOf(cnt, block_payload, seq, total)));
}

namespace {

// The header checks of DecodeBlock: OK with the block's padded size in
// *bytes, or the failure. REQUIRES: kHeaderSize readable bytes at p.
DecodeResult CheckHeader(const std::byte* p, const Limits& limits, uint64_t* bytes_out) {
  if (LoadLE<uint64_t>(p) == 0) return Fail(DecodeError::kEmpty, "never written");

  const BlockHeader h = PeekHeader(p);
  const uint8_t type = static_cast<uint8_t>(h.type);
  const uint8_t format = LoadLE<uint8_t>(p + kOffFormat);
  const uint16_t cnt = h.cnt, seq = h.seq;
  const uint32_t key_len = h.key_len, value_len = h.value_len, block_payload = h.block_payload;
  const uint16_t reserved = LoadLE<uint16_t>(p + kOffReserved);
  const uint64_t total = uint64_t{key_len} + value_len;

  if (!IsKnownType(type)) return Fail(DecodeError::kBadHeader, "type " + std::to_string(type));
  if (format == 1) {
    // Written before header checks: the field was reserved, always 0.
    if (reserved != 0) return Fail(DecodeError::kBadHeader, "reserved field set");
  } else if (format == kFormatVersion) {
    if (reserved != HeaderCheck(p, p + kFirstWord)) return Fail(DecodeError::kBadHeader, "header check");
  } else {
    return Fail(DecodeError::kBadHeader, "format " + std::to_string(format));
  }
  if (cnt == 0 || seq >= cnt) {
    return Fail(DecodeError::kBadHeader,
                "seq " + std::to_string(seq) + " of cnt " + std::to_string(cnt));
  }
  if (key_len > limits.max_key || value_len > limits.max_value) {
    return Fail(DecodeError::kBadHeader, "lengths " + std::to_string(key_len) + "+" +
                                             std::to_string(value_len) + " over the limits");
  }
  // One canonical split per (cnt, total): a single block carries everything,
  // otherwise cnt is exactly the number of block_payload-sized pieces.
  const bool split_ok = cnt == 1 ? block_payload == total
                                 : block_payload != 0 && block_payload < total &&
                                       (total + block_payload - 1) / block_payload == cnt;
  if (!split_ok) {
    return Fail(DecodeError::kBadHeader, "block_payload " + std::to_string(block_payload) +
                                             " inconsistent with cnt " + std::to_string(cnt) +
                                             " and " + std::to_string(total) + " payload bytes");
  }
  const std::string problem = ShapeProblem(static_cast<EntryType>(type), key_len, value_len);
  if (!problem.empty()) return Fail(DecodeError::kBadHeader, problem);

  const uint64_t chunk = ChunkLenOf(cnt, block_payload, seq, total);
  const uint64_t bytes = PaddedBlock(chunk);
  if (bytes > kMaxBlockBytes) {
    return Fail(DecodeError::kBadHeader, "of " + std::to_string(bytes) + " bytes is too large");
  }
  *bytes_out = bytes;
  return DecodeResult{};
}

}  // namespace

uint64_t IntactHeaderBlockBytes(std::span<const std::byte> buf, const Limits& limits) {
  if (buf.size() < kHeaderSize) return 0;
  uint64_t bytes = 0;
  if (!CheckHeader(buf.data(), limits, &bytes).status.ok()) return 0;
  // Format 1 headers carry no check: nothing vouches for their lengths.
  if (LoadLE<uint8_t>(buf.data() + kOffFormat) != kFormatVersion) return 0;
  return bytes;
}

DecodeResult DecodeBlock(std::span<const std::byte> buf, const Limits& limits) {
  if (buf.size() < kHeaderSize) {
    return Fail(DecodeError::kTruncated,
                "of " + std::to_string(buf.size()) + " bytes is shorter than its header");
  }
  const std::byte* p = buf.data();
  uint64_t bytes = 0;
  {
    DecodeResult h = CheckHeader(p, limits, &bytes);
    if (!h.status.ok()) return h;
  }
  const BlockHeader h = PeekHeader(p);
  const uint16_t cnt = h.cnt, seq = h.seq;
  const uint32_t block_payload = h.block_payload;
  const uint64_t total = uint64_t{h.key_len} + h.value_len;
  const uint64_t chunk = ChunkLenOf(cnt, block_payload, seq, total);
  if (bytes > buf.size()) {
    return Fail(DecodeError::kTruncated, "of " + std::to_string(bytes) + " bytes has only " +
                                             std::to_string(buf.size()) + " in the buffer");
  }
  std::byte word0[kFirstWord];
  std::memcpy(word0, p, kFirstWord);
  StoreLE<uint32_t>(word0 + kOffCrc, 0);
  const uint32_t stored = LoadLE<uint32_t>(p + kOffCrc);
  const uint32_t actual = BlockCrc(word0, p + kFirstWord, bytes - kFirstWord);
  if (stored != actual) {
    return Fail(DecodeError::kBadChecksum,
                "crc " + std::to_string(stored) + " != computed " + std::to_string(actual));
  }

  DecodeResult r;
  BlockView& b = r.block;
  static_cast<BlockHeader&>(b) = h;
  b.chunk_offset = uint64_t{seq} * block_payload;
  b.chunk = buf.subspan(kHeaderSize, chunk);
  b.encoded_bytes = static_cast<uint32_t>(bytes);
  return r;
}

// Clipped to what this block carries, so for a multi-block entry these give
// the piece of the key / value in this chunk rather than reading past it.
std::string_view BlockView::key() const {
  const uint64_t begin = chunk_offset;
  const uint64_t end = std::min<uint64_t>(chunk_offset + chunk.size(), key_len);
  if (begin >= end) return {};
  return {reinterpret_cast<const char*>(chunk.data()), static_cast<size_t>(end - begin)};
}

std::string_view BlockView::value() const {
  const uint64_t begin = std::max<uint64_t>(chunk_offset, key_len);
  const uint64_t end = chunk_offset + chunk.size();
  if (begin >= end) return {};
  return {reinterpret_cast<const char*>(chunk.data()) + (begin - chunk_offset),
          static_cast<size_t>(end - begin)};
}

Result<Assembler::Entry> Assembler::Add(const BlockView& block) {
  const auto id = std::make_pair(block.shard, block.version);
  const std::string name =
      "entry <" + std::to_string(block.shard) + ", " + std::to_string(block.version) + ">";
  const uint64_t total = uint64_t{block.key_len} + block.value_len;
  // Blocks normally come from DecodeBlock, but the payload copy below must
  // stay in bounds whatever a caller hands in.
  const bool self_consistent =
      block.seq < block.cnt &&
      block.chunk.size() == ChunkLenOf(block.cnt, block.block_payload, block.seq, total) &&
      block.chunk_offset == uint64_t{block.seq} * block.block_payload &&
      (block.cnt == 1 ? block.block_payload == total
                      : block.block_payload != 0 &&
                            (total + block.block_payload - 1) / block.block_payload == block.cnt);
  if (!self_consistent) {
    return Status::Corruption(name + ": block " + std::to_string(block.seq) + " is inconsistent");
  }

  auto it = pending_.find(id);
  if (it != pending_.end()) {
    const BlockView& f = it->second.first;
    if (f.type != block.type || f.cnt != block.cnt || f.key_len != block.key_len ||
        f.value_len != block.value_len || f.block_payload != block.block_payload) {
      return Status::Corruption(name + ": block " + std::to_string(block.seq) +
                                " disagrees with earlier blocks on type, cnt or lengths");
    }
  }
  if (block.single()) {
    return Entry{block.type, block.shard, block.version, std::string(block.key()),
                 std::string(block.value())};
  }
  if (it == pending_.end()) {
    Partial part;
    part.first = block;
    part.first.chunk = {};  // points into the caller's buffer; only metadata is kept
    part.payload.resize(total);
    part.have.assign(block.cnt, false);
    part.remaining = block.cnt;
    it = pending_.emplace(id, std::move(part)).first;
  }
  Partial& part = it->second;
  if (part.have[block.seq]) return Status::NotFound(name + ": duplicate block");
  std::memcpy(part.payload.data() + block.chunk_offset, block.chunk.data(), block.chunk.size());
  part.have[block.seq] = true;
  if (--part.remaining > 0) return Status::NotFound(name + " incomplete");

  Entry e{block.type, block.shard, block.version, std::move(part.payload), {}};
  e.value = e.key.substr(block.key_len);
  e.key.resize(block.key_len);
  pending_.erase(it);
  return e;
}

}  // namespace slip::log
