// RPC frame codec: how one request or response travels in one fabric message.
// Specification: docs/formats/wire.md.
//
// A frame is a 32-byte header followed by the payload, padded to 64 bytes
// (the multi-receive stride). The header carries the request id that pairs a
// response with its request, the method, the payload length and a CRC32C of
// the whole frame, so a receiver rejects a torn, truncated or malformed
// message with a clear error instead of acting on it.
//
// Header (little-endian):
//   off size field
//    0   4   magic      0x50524c53 ("SLRP")
//    4   1   version    1
//    5   1   kind       1 request, 2 response
//    6   2   method     request: method id; response: same as its request
//    8   8   request_id unique per (client endpoint, session)
//   16   4   payload_len
//   20   1   status     response: slip::Code; request: 0
//   21   1   flags      bit 0: a fragment of a larger payload; bit 1: its last one;
//                       bit 2: signed (below)
//   22   2   reserved   0
//   24   4   crc        CRC32C over the padded frame with this field = 0; signed: 0
//   28   4   offset     a fragment: where its bytes start in the whole payload; else 0
//
// A signed frame (an authenticated session, rpc/channel.h) carries, right
// after its payload, an 8-byte tag: SipHash-2-4 under the session key over
// the header and payload (auth/session_key.h). The tag replaces the CRC:
// it detects every accidental change a CRC would, and deliberate ones too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "auth/session_key.h"
#include "common/status.h"

namespace slip::rpc {

constexpr uint32_t kFrameMagic = 0x50524c53;
constexpr uint8_t kFrameVersion = 1;
constexpr size_t kFrameHeader = 32;
constexpr size_t kFrameAlign = 64;

enum class FrameKind : uint8_t { kRequest = 1, kResponse = 2 };

struct FrameHeader {
  FrameKind kind = FrameKind::kRequest;
  uint16_t method = 0;
  uint64_t request_id = 0;
  Code status = Code::kOk;
  // A payload larger than one frame travels as fragments, in order, each
  // naming its offset in the whole; the last one says so.
  bool fragment = false;
  bool last_fragment = false;
  uint32_t offset = 0;
};

constexpr size_t kFrameTag = 8;

// Bytes a frame with `payload_len` bytes occupies (padded).
size_t FrameSize(size_t payload_len, bool signed_frame = false);

// Encodes into `out` (resized to FrameSize). Fails with TooLarge when the
// payload exceeds `max_payload`. With `key`, the frame is signed under it.
Status EncodeFrame(const FrameHeader& h, std::string_view payload, size_t max_payload,
                   std::vector<std::byte>* out, const auth::SessionKey* key = nullptr);
// The same, appended after what `out` holds (whose size must be a multiple
// of 64): frames placed back to back form one batched message. `out` is
// unchanged on failure.
Status AppendFrame(const FrameHeader& h, std::string_view payload, size_t max_payload,
                   std::vector<std::byte>* out, const auth::SessionKey* key = nullptr);

struct DecodedFrame {
  FrameHeader header;
  std::span<const std::byte> payload;  // points into the input
  size_t frame_bytes = 0;              // padded size consumed
  // A signed frame: its tag, NOT yet checked (the receiver knows the key).
  bool signed_frame = false;
  uint64_t tag = 0;
  std::span<const std::byte> covered;  // the bytes the tag covers
};

// Decodes the frame at buf[0]. Corruption for anything malformed (bad magic,
// version, kind, reserved bits, length past the buffer, CRC mismatch);
// TooLarge when payload_len exceeds `max_payload`. Never reads past buf.
// A signed frame's tag is left to VerifyFrame.
Result<DecodedFrame> DecodeFrame(std::span<const std::byte> buf, size_t max_payload);

// True if `f` is signed and its tag is right under `key`.
bool VerifyFrame(const DecodedFrame& f, const auth::SessionKey& key);

// For a frame DecodeFrame refused: its header fields, when the first 32
// bytes still look like a header (magic, version, kind). Nothing here is
// checked by the CRC, so use it only to address an error answer (TooLarge,
// Corruption), never to act on the request.
std::optional<FrameHeader> PeekHeader(std::span<const std::byte> buf);

}  // namespace slip::rpc
