#include "rpc/frame.h"

#include <gtest/gtest.h>

#include <string>

#include "common/random.h"

namespace slip::rpc {
namespace {

std::string AsString(std::span<const std::byte> s) {
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

TEST(FrameTest, RoundTrip) {
  for (size_t len : {0u, 1u, 31u, 32u, 33u, 100u, 4000u}) {
    std::string payload(len, 'p');
    FrameHeader h{FrameKind::kResponse, 7, 0x1122334455667788ull, Code::kNotFound};
    std::vector<std::byte> buf;
    ASSERT_TRUE(EncodeFrame(h, payload, 1 << 20, &buf).ok());
    EXPECT_EQ(buf.size() % kFrameAlign, 0u);
    auto f = DecodeFrame(buf, 1 << 20);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_EQ(f->header.kind, FrameKind::kResponse);
    EXPECT_EQ(f->header.method, 7);
    EXPECT_EQ(f->header.request_id, 0x1122334455667788ull);
    EXPECT_EQ(f->header.status, Code::kNotFound);
    EXPECT_EQ(AsString(f->payload), payload);
    EXPECT_EQ(f->frame_bytes, buf.size());
  }
}

TEST(FrameTest, OversizedPayloadIsRefusedBothWays) {
  std::vector<std::byte> buf;
  EXPECT_TRUE(EncodeFrame({}, std::string(1000, 'x'), 999, &buf).Is(Code::kTooLarge));
  ASSERT_TRUE(EncodeFrame({}, std::string(1000, 'x'), 1000, &buf).ok());
  EXPECT_TRUE(DecodeFrame(buf, 999).status().Is(Code::kTooLarge));
}

TEST(FrameTest, EveryBitFlipAndTruncationIsRejected) {
  std::vector<std::byte> buf;
  ASSERT_TRUE(EncodeFrame({FrameKind::kRequest, 3, 42, Code::kOk}, "hello rpc", 4096, &buf).ok());
  for (size_t bit = 0; bit < buf.size() * 8; ++bit) {
    auto bad = buf;
    bad[bit / 8] ^= std::byte(1u << (bit % 8));
    EXPECT_FALSE(DecodeFrame(bad, 4096).ok()) << "bit " << bit;
  }
  for (size_t n = 0; n < buf.size(); ++n) {
    EXPECT_FALSE(DecodeFrame(std::span(buf).first(n), 4096).ok()) << "length " << n;
  }
}

TEST(FrameTest, RandomBytesNeverDecode) {
  Random rng(8);
  for (int i = 0; i < 100000; ++i) {
    std::vector<std::byte> junk(rng.Uniform(300));
    for (auto& b : junk) b = std::byte(rng.Next());
    if (rng.Bernoulli(0.5) && junk.size() >= 4) {  // get past the magic check sometimes
      junk[0] = std::byte{0x53}; junk[1] = std::byte{0x4c}; junk[2] = std::byte{0x52}; junk[3] = std::byte{0x50};
    }
    EXPECT_FALSE(DecodeFrame(junk, 1 << 20).ok());
  }
}

// PeekHeader reads a refused frame's header for an error answer, but only
// when it still looks like one; a payload flip leaves it readable.
TEST(FrameTest, PeekHeaderOnlyWhenTheHeaderLooksRight) {
  std::vector<std::byte> buf;
  ASSERT_TRUE(EncodeFrame({FrameKind::kRequest, 7, 0x1234, Code::kOk}, "payload", 4096, &buf).ok());
  auto flipped = buf;
  flipped[40] ^= std::byte{1};
  ASSERT_TRUE(DecodeFrame(flipped, 4096).status().Is(Code::kCorruption));
  auto h = PeekHeader(flipped);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->request_id, 0x1234u);
  EXPECT_EQ(h->method, 7);
  EXPECT_EQ(h->kind, FrameKind::kRequest);
  EXPECT_TRUE(DecodeFrame(buf, 3).status().Is(Code::kTooLarge));
  EXPECT_TRUE(PeekHeader(buf).has_value());
  auto bad_magic = buf;
  bad_magic[0] ^= std::byte{1};
  EXPECT_FALSE(PeekHeader(bad_magic).has_value());
  auto bad_kind = buf;
  bad_kind[5] = std::byte{9};
  EXPECT_FALSE(PeekHeader(bad_kind).has_value());
  EXPECT_FALSE(PeekHeader(std::span(buf).first(31)).has_value());
}

// A signed frame: the tag replaces the CRC, covers header and payload, and
// only the right key verifies it.
TEST(FrameTest, SignedFramesVerifyOnlyUnderTheirKeyAndDetectEveryFlip) {
  auth::SessionKey key, other;
  key.bytes[3] = 9;
  other.bytes[3] = 10;
  for (size_t len : {0u, 24u, 25u, 100u, 3000u}) {
    std::vector<std::byte> buf;
    FrameHeader h{FrameKind::kRequest, 9, (uint64_t{5} << 40) | 77, Code::kOk};
    ASSERT_TRUE(EncodeFrame(h, std::string(len, 's'), 1 << 20, &buf, &key).ok());
    EXPECT_EQ(buf.size(), FrameSize(len, true));
    auto f = DecodeFrame(buf, 1 << 20);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_TRUE(f->signed_frame);
    EXPECT_EQ(f->payload.size(), len);
    EXPECT_TRUE(VerifyFrame(*f, key));
    EXPECT_FALSE(VerifyFrame(*f, other));
    for (size_t i = 0; i < kFrameHeader + len + kFrameTag; ++i) {
      if (i >= 24 && i < 28) continue;  // the crc field: must stay 0, checked below
      std::vector<std::byte> bad = buf;
      bad[i] ^= std::byte{0x20};
      auto g = DecodeFrame(bad, 1 << 20);
      EXPECT_TRUE(!g.ok() || !VerifyFrame(*g, key)) << "flip at " << i << " of " << len;
    }
    std::vector<std::byte> crc = buf;
    crc[24] = std::byte{1};
    EXPECT_FALSE(DecodeFrame(crc, 1 << 20).ok());
  }
  // An unsigned frame never verifies.
  std::vector<std::byte> plain;
  ASSERT_TRUE(EncodeFrame({FrameKind::kRequest, 9, 1, Code::kOk}, "p", 100, &plain).ok());
  auto f = DecodeFrame(plain, 100);
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(VerifyFrame(*f, key));
}

}  // namespace
}  // namespace slip::rpc
