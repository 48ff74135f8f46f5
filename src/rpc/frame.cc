#include "rpc/frame.h"

#include <cstring>
#include <string>

#include "common/coding.h"
#include "common/crc32c.h"

namespace slip::rpc {
namespace {
constexpr uint8_t kFlagFragment = 1;
constexpr uint8_t kFlagLast = 2;
constexpr uint8_t kFlagSigned = 4;
}  // namespace

size_t FrameSize(size_t payload_len, bool signed_frame) {
  return AlignUp(kFrameHeader + payload_len + (signed_frame ? kFrameTag : 0), kFrameAlign);
}

Status EncodeFrame(const FrameHeader& h, std::string_view payload, size_t max_payload,
                   std::vector<std::byte>* out, const auth::SessionKey* key) {
  out->clear();
  return AppendFrame(h, payload, max_payload, out, key);
}

Status AppendFrame(const FrameHeader& h, std::string_view payload, size_t max_payload,
                   std::vector<std::byte>* out, const auth::SessionKey* key) {
  if (payload.size() > max_payload || payload.size() > UINT32_MAX) {
    return Status::TooLarge("RPC payload of " + std::to_string(payload.size()) +
                            " bytes exceeds the limit of " + std::to_string(max_payload));
  }
  const size_t at = out->size();
  const size_t size = FrameSize(payload.size(), key != nullptr);
  out->resize(at + size);
  std::byte* p = out->data() + at;
  // resize() zero-fills the new bytes: reserved fields and padding are 0.
  StoreLE<uint32_t>(p, kFrameMagic);
  StoreLE<uint8_t>(p + 4, kFrameVersion);
  StoreLE<uint8_t>(p + 5, static_cast<uint8_t>(h.kind));
  StoreLE<uint16_t>(p + 6, h.method);
  StoreLE<uint64_t>(p + 8, h.request_id);
  StoreLE<uint32_t>(p + 16, static_cast<uint32_t>(payload.size()));
  StoreLE<uint8_t>(p + 20, static_cast<uint8_t>(h.status));
  uint8_t flags = key != nullptr ? kFlagSigned : 0;
  if (h.fragment) {
    flags |= static_cast<uint8_t>(kFlagFragment | (h.last_fragment ? kFlagLast : 0));
    StoreLE<uint32_t>(p + 28, h.offset);
  }
  StoreLE<uint8_t>(p + 21, flags);
  if (!payload.empty()) std::memcpy(p + kFrameHeader, payload.data(), payload.size());
  if (key != nullptr) {
    const size_t covered = kFrameHeader + payload.size();
    StoreLE<uint64_t>(p + covered, auth::Tag(*key, p, covered));
  } else {
    StoreLE<uint32_t>(p + 24, Crc32c(0, p, size));
  }
  return Status::Ok();
}

Result<DecodedFrame> DecodeFrame(std::span<const std::byte> buf, size_t max_payload) {
  if (buf.size() < kFrameHeader) {
    return Status::Corruption("RPC frame truncated: " + std::to_string(buf.size()) + " bytes");
  }
  const std::byte* p = buf.data();
  if (LoadLE<uint32_t>(p) != kFrameMagic) return Status::Corruption("RPC frame: bad magic");
  if (LoadLE<uint8_t>(p + 4) != kFrameVersion) {
    return Status::Corruption("RPC frame: unsupported version " +
                              std::to_string(LoadLE<uint8_t>(p + 4)));
  }
  const uint8_t kind = LoadLE<uint8_t>(p + 5);
  if (kind != 1 && kind != 2) return Status::Corruption("RPC frame: bad kind");
  const uint8_t flags = LoadLE<uint8_t>(p + 21);
  const bool fragment = (flags & kFlagFragment) != 0;
  const bool signed_frame = (flags & kFlagSigned) != 0;
  if ((flags & ~(kFlagFragment | kFlagLast | kFlagSigned)) != 0 || (!fragment && (flags & kFlagLast) != 0) ||
      LoadLE<uint16_t>(p + 22) != 0 || (!fragment && LoadLE<uint32_t>(p + 28) != 0)) {
    return Status::Corruption("RPC frame: reserved bits set");
  }
  const uint8_t status = LoadLE<uint8_t>(p + 20);
  if (status > static_cast<uint8_t>(Code::kUnauthenticated) || (kind == 1 && status != 0)) {
    return Status::Corruption("RPC frame: bad status byte");
  }
  const uint64_t len = LoadLE<uint32_t>(p + 16);
  if (len > max_payload) {
    return Status::TooLarge("RPC payload of " + std::to_string(len) +
                            " bytes exceeds the limit of " + std::to_string(max_payload));
  }
  const size_t size = FrameSize(len, signed_frame);
  if (size > buf.size()) return Status::Corruption("RPC frame: length runs past the message");
  DecodedFrame f;
  if (signed_frame) {
    if (LoadLE<uint32_t>(p + 24) != 0) return Status::Corruption("RPC frame: a signed frame with a CRC");
    f.signed_frame = true;
    f.covered = buf.subspan(0, kFrameHeader + len);
    f.tag = LoadLE<uint64_t>(p + kFrameHeader + len);
  } else {
    // CRC over the frame with the crc field taken as zero.
    const uint32_t zero = 0;
    uint32_t crc = Crc32c(0, p, 24);
    crc = Crc32c(crc, &zero, 4);
    crc = Crc32c(crc, p + 28, size - 28);
    if (crc != LoadLE<uint32_t>(p + 24)) return Status::Corruption("RPC frame: checksum mismatch");
  }
  f.header.kind = static_cast<FrameKind>(kind);
  f.header.method = LoadLE<uint16_t>(p + 6);
  f.header.request_id = LoadLE<uint64_t>(p + 8);
  f.header.status = static_cast<Code>(status);
  f.header.fragment = fragment;
  f.header.last_fragment = (flags & kFlagLast) != 0;
  f.header.offset = fragment ? LoadLE<uint32_t>(p + 28) : 0;
  f.payload = buf.subspan(kFrameHeader, len);
  f.frame_bytes = size;
  return f;
}

std::optional<FrameHeader> PeekHeader(std::span<const std::byte> buf) {
  if (buf.size() < kFrameHeader) return std::nullopt;
  const std::byte* p = buf.data();
  const uint8_t kind = LoadLE<uint8_t>(p + 5);
  if (LoadLE<uint32_t>(p) != kFrameMagic || LoadLE<uint8_t>(p + 4) != kFrameVersion ||
      (kind != 1 && kind != 2)) {
    return std::nullopt;
  }
  FrameHeader h;
  h.kind = static_cast<FrameKind>(kind);
  h.method = LoadLE<uint16_t>(p + 6);
  h.request_id = LoadLE<uint64_t>(p + 8);
  const uint8_t status = LoadLE<uint8_t>(p + 20);
  h.status = status <= static_cast<uint8_t>(Code::kUnauthenticated) ? static_cast<Code>(status)
                                                                    : Code::kCorruption;
  return h;
}

bool VerifyFrame(const DecodedFrame& f, const auth::SessionKey& key) {
  return f.signed_frame && auth::TagsEqual(f.tag, auth::Tag(key, f.covered.data(), f.covered.size()));
}

}  // namespace slip::rpc
