#include "log/entry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/coding.h"
#include "common/crc32c.h"
#include "common/random.h"

namespace slip::log {
namespace {

using Bytes = std::vector<std::byte>;

constexpr size_t kWord = 8;

std::string RandomString(Random& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng.Next());
  return s;
}

std::string AsString(std::span<const std::byte> s) {
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

std::string Le64(uint64_t v) {
  std::string s(8, '\0');
  StoreLE<uint64_t>(s.data(), v);
  return s;
}

// CRC as the spec defines it, independent of the codec: the whole padded
// block with bytes [4, 8) taken as zero.
uint32_t SpecCrc(const std::byte* block, size_t n) {
  Bytes copy(block, block + n);
  std::memset(copy.data() + 4, 0, 4);
  return Crc32c(0, copy.data(), n);
}

// The header check of format 2, from the spec in entry.h: CRC32C over bytes
// 0..3 and 8..29, folded to 16 bits (high half XOR low half).
uint16_t SpecHeaderCheck(const std::byte* block) {
  Bytes h(block, block + 4);
  h.insert(h.end(), block + 8, block + 30);
  const uint32_t c = Crc32c(0, h.data(), h.size());
  return static_cast<uint16_t>(c ^ (c >> 16));
}

// Rewrites the header check and the stored CRC so a hand-edited header
// reaches the check under test.
void Reseal(std::byte* block, size_t n) {
  StoreLE<uint16_t>(block + 30, SpecHeaderCheck(block));
  StoreLE<uint32_t>(block + 4, SpecCrc(block, n));
}

struct Encoded {
  Layout layout;
  Bytes bytes;
  std::vector<size_t> offsets;  // of each block
};

Encoded Encode(const EntryMeta& meta, std::string_view key, std::string_view value,
               size_t max_block) {
  Encoded e;
  auto layout = PlanEntry(key.size(), value.size(), max_block);
  EXPECT_TRUE(layout.ok()) << layout.status().ToString();
  if (!layout.ok()) return e;
  e.layout = *layout;
  e.bytes = EncodeEntry(meta, key, value, e.layout);
  size_t pos = 0;
  for (uint16_t seq = 0; seq < e.layout.cnt; ++seq) {
    e.offsets.push_back(pos);
    pos += e.layout.BlockBytes(seq, key.size() + value.size());
  }
  EXPECT_EQ(pos, e.bytes.size());
  return e;
}

bool Equal(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

// ---------------------------------------------------------------------------
// Layout

TEST(PlanEntryTest, SingleBlockPadsToSixtyFour) {
  struct Case {
    size_t payload;
    uint64_t bytes;
  };
  for (Case c : {Case{0, 64}, Case{1, 64}, Case{31, 64}, Case{32, 64}, Case{33, 128}, Case{95, 128},
                 Case{96, 128}, Case{97, 192}, Case{4064, 4096}}) {
    auto l = c.payload == 0 ? PlanEntry(0, 0, 4096) : PlanEntry(1, c.payload - 1, 4096);
    ASSERT_TRUE(l.ok());
    EXPECT_EQ(l->cnt, 1);
    EXPECT_EQ(l->block_payload, c.payload);
    EXPECT_EQ(l->total_bytes, c.bytes) << "payload " << c.payload;
    EXPECT_EQ(l->BlockBytes(0, c.payload), c.bytes);
    EXPECT_EQ(l->ChunkLen(0, c.payload), c.payload);
  }
}

TEST(PlanEntryTest, MultiBlockFillsEveryBlockButTheLast) {
  // 4096-byte blocks carry 4064 payload bytes each.
  auto l = PlanEntry(10, 10000, 4096);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->cnt, 3);
  EXPECT_EQ(l->block_payload, 4064u);
  EXPECT_EQ(l->ChunkLen(0, 10010), 4064u);
  EXPECT_EQ(l->ChunkLen(1, 10010), 4064u);
  EXPECT_EQ(l->ChunkLen(2, 10010), 10010u - 2 * 4064);
  EXPECT_EQ(l->BlockBytes(0, 10010), 4096u);
  EXPECT_EQ(l->BlockBytes(2, 10010), AlignUp(32 + 10010 - 2 * 4064, 64));
  EXPECT_EQ(l->total_bytes, 2 * 4096 + AlignUp(32 + 10010 - 2 * 4064, 64));

  // Exactly fits one block / just spills into a second.
  l = PlanEntry(1, 4063, 4096);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->cnt, 1);
  EXPECT_EQ(l->total_bytes, 4096u);
  l = PlanEntry(1, 4064, 4096);
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->cnt, 2);
  EXPECT_EQ(l->total_bytes, 4096u + 64);

  // Sums agree for many sizes.
  for (size_t max_block : {128u, 192u, 4096u}) {
    for (size_t total = 0; total < 3000; total += 7) {
      auto p = PlanEntry(0, total, max_block);
      ASSERT_TRUE(p.ok());
      uint64_t bytes = 0, payload = 0;
      for (uint16_t s = 0; s < p->cnt; ++s) {
        EXPECT_LE(p->BlockBytes(s, total), max_block);
        EXPECT_EQ(p->BlockBytes(s, total) % kAlign, 0u);
        bytes += p->BlockBytes(s, total);
        payload += p->ChunkLen(s, total);
      }
      EXPECT_EQ(bytes, p->total_bytes);
      EXPECT_EQ(payload, total);
    }
  }
}

TEST(PlanEntryTest, RejectsBadBlockSizesAndTooManyBlocks) {
  for (size_t bad : {0u, 32u, 64u, 100u, 130u, 4095u}) {
    EXPECT_TRUE(PlanEntry(1, 1, bad).status().Is(Code::kInvalidArgument)) << bad;
  }
  EXPECT_TRUE(PlanEntry(1, 1, 128).ok());
  // 128-byte blocks carry 96 bytes: 65535 blocks is the most an entry may use.
  auto at_limit = PlanEntry(0, 96u * 65535, 128);
  ASSERT_TRUE(at_limit.ok());
  EXPECT_EQ(at_limit->cnt, 65535);
  EXPECT_TRUE(PlanEntry(0, 96u * 65535 + 1, 128).status().Is(Code::kTooLarge));
  EXPECT_TRUE(PlanEntry(size_t{1} << 33, 1, 4096).status().Is(Code::kTooLarge));
  // A maximum beyond what the 32-bit size fields describe is just a loose bound.
  auto huge = PlanEntry(1, 1 << 20, size_t{1} << 40);
  ASSERT_TRUE(huge.ok());
  EXPECT_EQ(huge->cnt, 1);
}

// ---------------------------------------------------------------------------
// Validate

TEST(ValidateTest, SizesAndVersionAndShape) {
  const Limits lim;
  const EntryMeta put{EntryType::kPut, 3, 1};
  EXPECT_TRUE(Validate(put, 1, 0, lim).ok());
  EXPECT_TRUE(Validate(put, lim.max_key, lim.max_value, lim).ok());

  Status s = Validate(put, 10, 17000000, lim);
  EXPECT_TRUE(s.Is(Code::kTooLarge));
  EXPECT_EQ(s.message(), "value of 17000000 bytes exceeds the limit of 16777216");
  s = Validate(put, lim.max_key + 1, 1, lim);
  EXPECT_TRUE(s.Is(Code::kTooLarge));
  EXPECT_EQ(s.message(), "key of 65537 bytes exceeds the limit of 65536");
  EXPECT_TRUE(Validate(put, 5, 100, Limits{4, 1000}).Is(Code::kTooLarge));
  EXPECT_TRUE(Validate(put, 4, 1001, Limits{4, 1000}).Is(Code::kTooLarge));

  EXPECT_TRUE(Validate({EntryType::kPut, 0, kMaxVersion}, 1, 1, lim).ok());
  s = Validate({EntryType::kPut, 0, kMaxVersion + 1}, 1, 1, lim);
  EXPECT_TRUE(s.Is(Code::kInvalidArgument));
  EXPECT_NE(s.message().find("version"), std::string::npos) << s.message();
  EXPECT_TRUE(Validate({EntryType::kPut, 0, UINT64_MAX}, 1, 1, lim).Is(Code::kInvalidArgument));

  EXPECT_TRUE(Validate(put, 0, 5, lim).Is(Code::kInvalidArgument));
  EXPECT_TRUE(Validate({EntryType::kDel, 0, 1}, 0, 8, lim).Is(Code::kInvalidArgument));
  EXPECT_TRUE(Validate({EntryType::kDel, 0, 1}, 3, 8, lim).ok());
  EXPECT_TRUE(Validate({EntryType::kDel, 0, 1}, 3, 7, lim).Is(Code::kInvalidArgument));
  EXPECT_TRUE(Validate({EntryType::kDel, 0, 1}, 3, 0, lim).Is(Code::kInvalidArgument));
  EXPECT_TRUE(Validate({EntryType::kCommitVersion, 0, 1}, 0, 8, lim).ok());
  EXPECT_TRUE(Validate({EntryType::kCommitVersion, 0, 1}, 1, 8, lim).Is(Code::kInvalidArgument));
  EXPECT_TRUE(Validate({EntryType::kCommitVersion, 0, 1}, 0, 9, lim).Is(Code::kInvalidArgument));
  EXPECT_TRUE(Validate({static_cast<EntryType>(0), 0, 1}, 1, 1, lim).Is(Code::kInvalidArgument));
  EXPECT_TRUE(Validate({static_cast<EntryType>(4), 0, 1}, 1, 1, lim).Is(Code::kInvalidArgument));
}

// ---------------------------------------------------------------------------
// Encoding

// The byte layout, written out by hand from the table in entry.h.
TEST(EncodeTest, MatchesTheSpecByteForByte) {
  const EntryMeta meta{EntryType::kPut, 0x1234, 0xA1B2C3D4E5F6ull};
  Encoded e = Encode(meta, "k1", "hello", 4096);
  ASSERT_EQ(e.bytes.size(), 64u);
  Bytes want(64, std::byte{0});
  want[0] = std::byte{1};
  want[1] = std::byte{2};
  StoreLE<uint16_t>(&want[2], 0x1234);
  StoreLE<uint64_t>(&want[8], 0xA1B2C3D4E5F6ull | (uint64_t{1} << 48));
  StoreLE<uint32_t>(&want[16], 2);
  StoreLE<uint32_t>(&want[20], 5);
  StoreLE<uint32_t>(&want[24], 7);
  std::memcpy(&want[32], "k1hello", 7);
  StoreLE<uint16_t>(&want[30], SpecHeaderCheck(want.data()));
  StoreLE<uint32_t>(&want[4], SpecCrc(want.data(), 64));
  EXPECT_EQ(e.bytes, want);

  // 128-byte blocks carry 96 payload bytes: 210 bytes split 96 + 96 + 18.
  Random rng(1);
  const std::string key = RandomString(rng, 10), value = RandomString(rng, 200);
  const std::string payload = key + value;
  e = Encode({EntryType::kPut, 9, 77}, key, value, 128);
  ASSERT_EQ(e.bytes.size(), 128u + 128 + 64);
  for (uint16_t seq = 0; seq < 3; ++seq) {
    const std::byte* b = e.bytes.data() + seq * 128;
    const size_t chunk = seq < 2 ? 96 : 18;
    const size_t n = seq < 2 ? 128 : 64;
    EXPECT_EQ(LoadLE<uint8_t>(b), 1);
    EXPECT_EQ(LoadLE<uint8_t>(b + 1), kFormatVersion);
    EXPECT_EQ(LoadLE<uint16_t>(b + 2), 9);
    EXPECT_EQ(LoadLE<uint32_t>(b + 4), SpecCrc(b, n));
    EXPECT_EQ(LoadLE<uint64_t>(b + 8), 77 | (uint64_t{3} << 48));
    EXPECT_EQ(LoadLE<uint32_t>(b + 16), 10u);
    EXPECT_EQ(LoadLE<uint32_t>(b + 20), 200u);
    EXPECT_EQ(LoadLE<uint32_t>(b + 24), 96u);
    EXPECT_EQ(LoadLE<uint16_t>(b + 28), seq);
    EXPECT_EQ(LoadLE<uint16_t>(b + 30), SpecHeaderCheck(b));
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(b + 32), chunk),
              payload.substr(seq * 96, chunk));
    for (size_t i = 32 + chunk; i < n; ++i) EXPECT_EQ(b[i], std::byte{0}) << "padding " << i;
  }
}

TEST(EncodeTest, EncodeBlockZeroesPaddingOverOldBytes) {
  Random rng(2);
  for (size_t vlen : {0u, 1u, 20u, 31u, 100u, 5000u}) {
    const std::string key = "key", value = RandomString(rng, vlen);
    const EntryMeta meta{EntryType::kPut, 5, 42};
    auto layout = PlanEntry(key.size(), value.size(), 4096);
    ASSERT_TRUE(layout.ok());
    Bytes clean = EncodeEntry(meta, key, value, *layout);
    Bytes dirty(layout->total_bytes, std::byte{0xA5});
    size_t pos = 0;
    for (uint16_t seq = 0; seq < layout->cnt; ++seq) {
      const size_t n = EncodeBlock(meta, key, value, *layout, seq, dirty.data() + pos);
      EXPECT_EQ(n, layout->BlockBytes(seq, key.size() + value.size()));
      pos += n;
    }
    EXPECT_EQ(pos, dirty.size());
    EXPECT_EQ(dirty, clean) << "value " << vlen;
  }
}

// ---------------------------------------------------------------------------
// Round trips

void CheckRoundTrip(const EntryMeta& meta, const std::string& key, const std::string& value,
                    size_t max_block) {
  SCOPED_TRACE("type " + std::to_string(static_cast<int>(meta.type)) + " shard " +
               std::to_string(meta.shard) + " version " + std::to_string(meta.version) + " key " +
               std::to_string(key.size()) + " value " + std::to_string(value.size()) +
               " max_block " + std::to_string(max_block));
  ASSERT_TRUE(Validate(meta, key.size(), value.size(), Limits{}).ok());
  Encoded e = Encode(meta, key, value, max_block);
  ASSERT_EQ(e.bytes.size(), e.layout.total_bytes);
  const uint64_t total = key.size() + value.size();
  const std::string payload = key + value;
  Assembler asm_;
  bool done = false;
  for (uint16_t seq = 0; seq < e.layout.cnt; ++seq) {
    const size_t off = e.offsets[seq];
    auto d = DecodeBlock(std::span(e.bytes).subspan(off), Limits{});
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    const BlockView& b = d.block;
    EXPECT_EQ(b.type, meta.type);
    EXPECT_EQ(b.shard, meta.shard);
    EXPECT_EQ(b.version, meta.version);
    EXPECT_EQ(b.cnt, e.layout.cnt);
    EXPECT_EQ(b.seq, seq);
    EXPECT_EQ(b.key_len, key.size());
    EXPECT_EQ(b.value_len, value.size());
    EXPECT_EQ(b.block_payload, e.layout.block_payload);
    EXPECT_EQ(b.encoded_bytes, e.layout.BlockBytes(seq, total));
    EXPECT_LE(b.encoded_bytes, max_block);
    EXPECT_EQ(b.encoded_bytes % kAlign, 0u);
    EXPECT_EQ(b.chunk.data(), e.bytes.data() + off + kHeaderSize);
    EXPECT_EQ(AsString(b.chunk), payload.substr(b.chunk_offset, e.layout.ChunkLen(seq, total)));
    for (size_t i = kHeaderSize + b.chunk.size(); i < b.encoded_bytes; ++i) {
      ASSERT_EQ(e.bytes[off + i], std::byte{0}) << "padding byte " << i;
    }
    if (b.single()) {
      EXPECT_EQ(b.key(), key);
      EXPECT_EQ(b.value(), value);
    }
    auto r = asm_.Add(b);
    if (seq + 1 < e.layout.cnt) {
      EXPECT_TRUE(r.status().Is(Code::kNotFound));
    } else {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->type, meta.type);
      EXPECT_EQ(r->shard, meta.shard);
      EXPECT_EQ(r->version, meta.version);
      EXPECT_EQ(r->key, key);
      EXPECT_EQ(r->value, value);
      done = true;
    }
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(asm_.pending(), 0u);
}

TEST(RoundTripTest, PutAcrossSizesVersionsShards) {
  Random rng(3);
  std::vector<size_t> totals = {31,  32,   33,   95,   96,   97,   159,  160,  161,  223, 224,
                                225, 4063, 4064, 4065, 4127, 4128, 4129, 8127, 8128, 8129};
  for (size_t key_len : {1u, 5u, 31u}) {
    std::vector<size_t> values = {0, 1, 2, 3, 100 * 1024};
    for (size_t t : totals) {
      if (t >= key_len) values.push_back(t - key_len);
    }
    for (size_t vlen : values) {
      const std::string key = RandomString(rng, key_len), value = RandomString(rng, vlen);
      for (size_t max_block : {128u, 4096u, 1u << 20}) {
        for (uint64_t version : {uint64_t{0}, uint64_t{1}, kMaxVersion}) {
          for (uint16_t shard : {uint16_t{0}, uint16_t{65535}}) {
            CheckRoundTrip({EntryType::kPut, shard, version}, key, value, max_block);
          }
        }
      }
    }
  }
}

TEST(RoundTripTest, DelAndCommitVersion) {
  Random rng(4);
  for (size_t max_block : {128u, 4096u}) {
    for (uint64_t version : {uint64_t{0}, uint64_t{1}, kMaxVersion}) {
      for (uint16_t shard : {uint16_t{0}, uint16_t{65535}}) {
        for (size_t key_len : {1u, 2u, 23u, 24u, 25u, 87u, 88u, 89u, 4000u}) {
          CheckRoundTrip({EntryType::kDel, shard, version}, RandomString(rng, key_len),
                         std::string(8, '\0'), max_block);
          CheckRoundTrip({EntryType::kDel, shard, version}, RandomString(rng, key_len),
                         RandomString(rng, 8), max_block);
        }
        CheckRoundTrip({EntryType::kCommitVersion, shard, version}, "", Le64(version), max_block);
      }
    }
  }
}

// How a recovery scan walks a segment: blocks back to back, then zeros.
TEST(RoundTripTest, ScanStopsAtNeverWrittenSpace) {
  Random rng(5);
  Bytes seg(64 * 1024, std::byte{0});
  size_t pos = 0;
  std::vector<std::string> values;
  for (int i = 0; i < 20; ++i) {
    values.push_back(RandomString(rng, rng.Uniform(600)));
    Encoded e = Encode({EntryType::kPut, 1, static_cast<uint64_t>(i)}, "k", values.back(), 256);
    std::memcpy(seg.data() + pos, e.bytes.data(), e.bytes.size());
    pos += e.bytes.size();
  }
  size_t scan = 0, entries = 0;
  Assembler asm_;
  DecodeResult d;
  while (true) {
    d = DecodeBlock(std::span(seg).subspan(scan), Limits{});
    if (!d.status.ok()) break;
    scan += d.block.encoded_bytes;
    auto r = asm_.Add(d.block);
    if (r.ok()) {
      EXPECT_EQ(r->value, values[r->version]);
      ++entries;
    }
  }
  EXPECT_EQ(scan, pos);
  EXPECT_EQ(entries, 20u);
  EXPECT_EQ(d.error, DecodeError::kEmpty);
  EXPECT_TRUE(d.status.Is(Code::kCorruption));
}

// ---------------------------------------------------------------------------
// Decode errors

DecodeError ErrorOf(const Bytes& b, const Limits& lim = Limits{}) {
  auto d = DecodeBlock(b, lim);
  EXPECT_FALSE(d.status.ok());
  EXPECT_TRUE(d.status.Is(Code::kCorruption)) << d.status.ToString();
  return d.error;
}

TEST(DecodeTest, EmptyAndTruncated) {
  EXPECT_EQ(ErrorOf(Bytes{}), DecodeError::kTruncated);
  EXPECT_EQ(ErrorOf(Bytes(31, std::byte{0})), DecodeError::kTruncated);
  EXPECT_EQ(ErrorOf(Bytes(32, std::byte{0})), DecodeError::kEmpty);
  EXPECT_EQ(ErrorOf(Bytes(4096, std::byte{0})), DecodeError::kEmpty);
  auto d = DecodeBlock(Bytes(64, std::byte{0}), Limits{});
  EXPECT_EQ(d.status.message().rfind("empty", 0), 0u) << d.status.message();

  Random rng(6);
  for (size_t vlen : {10u, 200u}) {
    Encoded e = Encode({EntryType::kPut, 1, 2}, "key", RandomString(rng, vlen), 4096);
    for (size_t n = 0; n < e.bytes.size(); ++n) {
      Bytes cut(e.bytes.begin(), e.bytes.begin() + n);  // exact size: ASan sees any over-read
      auto r = DecodeBlock(cut, Limits{});
      ASSERT_FALSE(r.status.ok()) << n;
      EXPECT_EQ(r.error, DecodeError::kTruncated) << n;
      EXPECT_EQ(r.status.message().rfind("truncated", 0), 0u) << r.status.message();
    }
    EXPECT_TRUE(DecodeBlock(e.bytes, Limits{}).status.ok());
  }
}

TEST(DecodeTest, EachHeaderRuleIsChecked) {
  Random rng(7);
  const std::string key = "key", value = RandomString(rng, 60);
  const Bytes good = Encode({EntryType::kPut, 3, 9}, key, value, 4096).bytes;  // 63 B payload
  ASSERT_EQ(good.size(), 128u);
  ASSERT_TRUE(DecodeBlock(good, Limits{}).status.ok());

  auto with = [&](auto edit) {
    Bytes b = good;
    edit(b.data());
    Reseal(b.data(), b.size());  // so only the header rule can object
    return b;
  };
  auto bad_header = [&](const Bytes& b, const Limits& lim = Limits{}) {
    auto d = DecodeBlock(b, lim);
    EXPECT_EQ(d.error, DecodeError::kBadHeader) << d.status.ToString();
    EXPECT_EQ(d.status.message().rfind("bad header", 0), 0u) << d.status.message();
  };
  auto set_cnt = [](std::byte* p, uint64_t cnt) {
    StoreLE<uint64_t>(p + 8, (LoadLE<uint64_t>(p + 8) & kMaxVersion) | (cnt << 48));
  };

  bad_header(with([](std::byte* p) { p[0] = std::byte{0}; }));
  bad_header(with([](std::byte* p) { p[0] = std::byte{5}; }));
  bad_header(with([](std::byte* p) { p[0] = std::byte{0xFF}; }));
  bad_header(with([](std::byte* p) { p[1] = std::byte{0}; }));
  bad_header(with([](std::byte* p) { p[1] = std::byte{3}; }));
  // A header check that does not match (the block CRC resealed over it).
  auto with_check = [&](uint16_t check, uint8_t format) {
    Bytes b = good;
    b[1] = std::byte{format};
    StoreLE<uint16_t>(b.data() + 30, check);
    StoreLE<uint32_t>(b.data() + 4, SpecCrc(b.data(), b.size()));
    return b;
  };
  const uint16_t right = SpecHeaderCheck(good.data());
  bad_header(with_check(right ^ 1, kFormatVersion));
  bad_header(with_check(right ^ 0x8000, kFormatVersion));
  // Format 1 (before header checks) still decodes, with the field 0.
  EXPECT_TRUE(DecodeBlock(with_check(0, 1), Limits{}).status.ok());
  bad_header(with_check(1, 1));
  bad_header(with([&](std::byte* p) { set_cnt(p, 0); }));
  bad_header(with([](std::byte* p) { StoreLE<uint16_t>(p + 28, 1); }));  // seq == cnt
  bad_header(good, Limits{2, 1000});                                     // key over limit
  bad_header(good, Limits{100, 59});                                     // value over limit
  EXPECT_TRUE(DecodeBlock(good, Limits{3, 60}).status.ok());             // limits inclusive
  // block_payload must match: cnt 1 carries everything ...
  bad_header(with([](std::byte* p) { StoreLE<uint32_t>(p + 24, 62); }));
  bad_header(with([](std::byte* p) { StoreLE<uint32_t>(p + 24, 64); }));
  bad_header(with([](std::byte* p) { StoreLE<uint32_t>(p + 24, 0); }));
  // ... and cnt > 1 is exactly ceil(total / block_payload).
  bad_header(with([&](std::byte* p) {
    set_cnt(p, 2);
    StoreLE<uint32_t>(p + 24, 0);
  }));
  bad_header(with([&](std::byte* p) {
    set_cnt(p, 2);
    StoreLE<uint32_t>(p + 24, 63);
  }));
  bad_header(with([&](std::byte* p) {
    set_cnt(p, 2);
    StoreLE<uint32_t>(p + 24, 100);
  }));
  bad_header(with([&](std::byte* p) {
    set_cnt(p, 2);
    StoreLE<uint32_t>(p + 24, 23);
  }));
  bad_header(with([&](std::byte* p) {
    set_cnt(p, 3);
    StoreLE<uint32_t>(p + 24, 20);
  }));
  bad_header(with([&](std::byte* p) {
    set_cnt(p, 2);
    StoreLE<uint32_t>(p + 24, 10);
  }));
  bad_header(with([&](std::byte* p) {
    set_cnt(p, 65535);
    StoreLE<uint32_t>(p + 24, 1);
  }));
  // Shape: PUT needs a key; DEL a key and 8 value bytes; COMMIT no key and 8 bytes.
  bad_header(with([](std::byte* p) {
    StoreLE<uint32_t>(p + 16, 0);
    StoreLE<uint32_t>(p + 20, 63);
  }));
  bad_header(with([](std::byte* p) { p[0] = std::byte{2}; }));  // DEL with 60 value bytes
  bad_header(with([](std::byte* p) { p[0] = std::byte{3}; }));  // COMMIT with a key
  bad_header(with([](std::byte* p) {
    p[0] = std::byte{3};
    StoreLE<uint32_t>(p + 16, 0);
    StoreLE<uint32_t>(p + 20, 7);
    StoreLE<uint32_t>(p + 24, 7);
  }));

  // An intact header whose body does not match the CRC is a checksum
  // failure (and IntactHeaderBlockBytes vouches for its size); an edited
  // header fails its header check first; resealed, the edit is simply a
  // different valid block.
  Bytes torn = good;
  torn[40] ^= std::byte{1};
  auto d = DecodeBlock(torn, Limits{});
  EXPECT_EQ(d.error, DecodeError::kBadChecksum);
  EXPECT_EQ(d.status.message().rfind("bad checksum", 0), 0u) << d.status.message();
  EXPECT_EQ(IntactHeaderBlockBytes(torn, Limits{}), good.size());
  Bytes b = good;
  StoreLE<uint16_t>(b.data() + 2, 4);  // another shard
  bad_header(b);
  EXPECT_EQ(IntactHeaderBlockBytes(b, Limits{}), 0u);
  Reseal(b.data(), b.size());
  d = DecodeBlock(b, Limits{});
  ASSERT_TRUE(d.status.ok());
  EXPECT_EQ(d.block.shard, 4);
}

TEST(DecodeTest, LengthsPastTheBufferAreTruncatedNotRead) {
  // Maximal lengths within the limits: the block claims ~16 MiB but the
  // buffer is 128 bytes.
  Bytes b(128, std::byte{0});
  b[0] = std::byte{1};
  b[1] = std::byte{1};
  const Limits lim;
  StoreLE<uint64_t>(b.data() + 8, uint64_t{1} << 48);
  StoreLE<uint32_t>(b.data() + 16, lim.max_key);
  StoreLE<uint32_t>(b.data() + 20, lim.max_value);
  StoreLE<uint32_t>(b.data() + 24, lim.max_key + lim.max_value);
  EXPECT_EQ(ErrorOf(b), DecodeError::kTruncated);
  // Huge lengths with permissive limits: 64-bit bounds math, no wraparound.
  const Limits open{UINT32_MAX, UINT32_MAX};
  StoreLE<uint32_t>(b.data() + 16, UINT32_MAX);
  StoreLE<uint32_t>(b.data() + 20, UINT32_MAX);
  StoreLE<uint64_t>(b.data() + 8, uint64_t{2} << 48);
  StoreLE<uint32_t>(b.data() + 24, UINT32_MAX);
  EXPECT_EQ(ErrorOf(b, open), DecodeError::kBadHeader);  // a block over 4 GiB
  StoreLE<uint64_t>(b.data() + 8, uint64_t{3} << 48);
  StoreLE<uint32_t>(b.data() + 24, 0xAAAAAAAB);
  StoreLE<uint16_t>(b.data() + 28, 2);
  EXPECT_EQ(ErrorOf(b, open), DecodeError::kTruncated);
}

// ---------------------------------------------------------------------------
// Bit flips

TEST(CorruptionTest, EverySingleBitFlipIsDetected) {
  Random rng(8);
  struct Case {
    EntryMeta meta;
    std::string key, value;
    size_t max_block;
  };
  std::vector<Case> cases = {
      {{EntryType::kPut, 1, 5}, "key", RandomString(rng, 29), 4096},  // 64 B, no padding
      {{EntryType::kPut, 1, 5}, "k", RandomString(rng, 10), 4096},    // 64 B, 21 B padding
      {{EntryType::kPut, 2, kMaxVersion}, "key", RandomString(rng, 57), 4096},             // 128 B
      {{EntryType::kPut, 65535, 0}, RandomString(rng, 40), RandomString(rng, 110), 4096},  // 192 B
      {{EntryType::kDel, 7, 1}, "gone", std::string(8, '\0'), 4096},
      {{EntryType::kCommitVersion, 7, 99}, "", Le64(99), 4096},
      {{EntryType::kPut, 3, 3}, RandomString(rng, 10), RandomString(rng, 200), 128},  // 3 blocks
  };
  for (const Case& c : cases) {
    Encoded e = Encode(c.meta, c.key, c.value, c.max_block);
    SCOPED_TRACE("entry of " + std::to_string(e.bytes.size()) + " bytes");
    // Slack after the entry lets a flipped length reach the CRC check.
    Bytes image = e.bytes;
    image.resize(e.bytes.size() + 256, std::byte{0});
    for (size_t bit = 0; bit < e.bytes.size() * 8; ++bit) {
      const size_t byte = bit / 8;
      image[byte] ^= std::byte(1u << (bit % 8));
      const size_t blk =
          std::upper_bound(e.offsets.begin(), e.offsets.end(), byte) - e.offsets.begin() - 1;
      const size_t off = e.offsets[blk];
      auto d = DecodeBlock(std::span(image).subspan(off), Limits{});
      EXPECT_FALSE(d.status.ok()) << "bit " << bit;
      if (LoadLE<uint64_t>(image.data() + off) == 0) {
        EXPECT_EQ(d.error, DecodeError::kEmpty);
      }
      // The other blocks are untouched and still decode.
      for (size_t o : e.offsets) {
        if (o != off) {
          EXPECT_TRUE(DecodeBlock(std::span(image).subspan(o), Limits{}).status.ok());
        }
      }
      image[byte] ^= std::byte(1u << (bit % 8));
    }
  }
}

// ---------------------------------------------------------------------------
// Torn writes at 8-byte granularity (the PM crash model)

struct TearCase {
  std::string name;
  Encoded fresh;  // what is being written
  Bytes old;      // what the region held before
  bool old_valid = false;
};

// A torn image's verdict, block by block: a block decodes iff its bytes are
// exactly the new block or (when the old contents were an entry) the old one.
void ExpectVerdict(const TearCase& c, const Bytes& image, const std::string& what) {
  for (size_t i = 0; i < c.fresh.offsets.size(); ++i) {
    const size_t off = c.fresh.offsets[i];
    const size_t end = i + 1 < c.fresh.offsets.size() ? c.fresh.offsets[i + 1] : image.size();
    const auto blk = std::span(image).subspan(off, end - off);
    const bool is_new = Equal(blk, std::span(c.fresh.bytes).subspan(off, end - off));
    const bool is_old = c.old_valid && Equal(blk, std::span(c.old).subspan(off, end - off));
    auto d = DecodeBlock(std::span(image).subspan(off), Limits{});
    ASSERT_EQ(d.status.ok(), is_new || is_old)
        << c.name << ": " << what << ", block " << i << ": " << d.status.ToString();
    if (LoadLE<uint64_t>(blk.data()) == 0) {
      ASSERT_EQ(d.error, DecodeError::kEmpty) << c.name << ": " << what;
    }
    if (d.status.ok()) {
      const Bytes& src = is_new ? c.fresh.bytes : c.old;
      ASSERT_EQ(d.block.chunk.data() - image.data(), static_cast<ptrdiff_t>(off + kHeaderSize));
      ASSERT_TRUE(
          Equal(d.block.chunk, std::span(src).subspan(off + kHeaderSize, d.block.chunk.size())));
    }
  }
}

std::vector<TearCase> TearCases() {
  Random rng(9);
  std::vector<TearCase> cases;
  struct Shape {
    size_t key, value, max_block;
  };
  // Single blocks of 64, 128, 192, 448 and 4096 bytes; a 3-block entry.
  for (Shape s : {Shape{3, 29, 4096}, Shape{8, 60, 4096}, Shape{16, 130, 4096},
                  Shape{16, 400, 4096}, Shape{16, 4048, 4096}, Shape{10, 200, 128}}) {
    const std::string key = RandomString(rng, s.key);
    const EntryMeta meta{EntryType::kPut, 12, 1000};
    Encoded fresh = Encode(meta, key, RandomString(rng, s.value), s.max_block);
    const std::string size = std::to_string(fresh.bytes.size()) + " B";

    cases.push_back({"zeros/" + size, fresh, Bytes(fresh.bytes.size(), std::byte{0}), false});
    Bytes junk(fresh.bytes.size());
    for (auto& b : junk) b = std::byte(rng.Next());
    cases.push_back({"garbage/" + size, fresh, junk, false});
    // The reused-log case: an older entry of the same size, same key and shard.
    Encoded older =
        Encode({EntryType::kPut, 12, 900}, key, RandomString(rng, s.value), s.max_block);
    EXPECT_EQ(older.bytes.size(), fresh.bytes.size());
    cases.push_back({"older entry/" + size, fresh, older.bytes, true});
  }
  return cases;
}

Bytes Mix(const TearCase& c, const std::vector<bool>& take_new) {
  Bytes image = c.old;
  for (size_t w = 0; w < take_new.size(); ++w) {
    if (take_new[w]) std::memcpy(&image[w * kWord], &c.fresh.bytes[w * kWord], kWord);
  }
  return image;
}

TEST(TearTest, OneOldWordIsRejected) {
  for (const TearCase& c : TearCases()) {
    const size_t words = c.fresh.bytes.size() / kWord;
    for (size_t w = 0; w < words; ++w) {
      std::vector<bool> take_new(words, true);
      take_new[w] = false;
      ExpectVerdict(c, Mix(c, take_new), "old word " + std::to_string(w));
      if (HasFatalFailure()) return;
    }
  }
}

TEST(TearTest, PrefixWritesAreRejectedUntilComplete) {
  for (const TearCase& c : TearCases()) {
    const size_t words = c.fresh.bytes.size() / kWord;
    // Store order in address order, and EncodeBlock's order (each block's
    // words 1.. first, its first word last).
    std::vector<size_t> linear(words), encoder;
    for (size_t w = 0; w < words; ++w) linear[w] = w;
    for (size_t i = 0; i < c.fresh.offsets.size(); ++i) {
      const size_t first = c.fresh.offsets[i] / kWord;
      const size_t end = i + 1 < c.fresh.offsets.size() ? c.fresh.offsets[i + 1] / kWord : words;
      for (size_t w = first + 1; w < end; ++w) encoder.push_back(w);
      encoder.push_back(first);
    }
    for (const auto* order : {&linear, &encoder}) {
      std::vector<bool> take_new(words, false);
      ExpectVerdict(c, Mix(c, take_new), "nothing written");
      for (size_t k = 0; k < words; ++k) {
        take_new[(*order)[k]] = true;
        ExpectVerdict(c, Mix(c, take_new), "stopped after " + std::to_string(k + 1) + " words");
        if (HasFatalFailure()) return;
      }
      // Completed: every block decodes as the new entry.
      const Bytes complete = Mix(c, take_new);
      EXPECT_EQ(complete, c.fresh.bytes);
      for (size_t off : c.fresh.offsets) {
        EXPECT_TRUE(DecodeBlock(std::span(complete).subspan(off), Limits{}).status.ok());
      }
    }
  }
}

TEST(TearTest, RandomWordMixesAreRejected) {
  Random rng(10);
  for (const TearCase& c : TearCases()) {
    const size_t words = c.fresh.bytes.size() / kWord;
    const int trials = words > 256 ? 2000 : 10000;
    for (int t = 0; t < trials; ++t) {
      // Vary the density so nearly-complete and barely-started tears both occur.
      const double p = rng.NextDouble();
      std::vector<bool> take_new(words);
      for (size_t w = 0; w < words; ++w) take_new[w] = rng.Bernoulli(p);
      ExpectVerdict(c, Mix(c, take_new), "random mix " + std::to_string(t));
      if (HasFatalFailure()) return;
    }
  }
}

// ---------------------------------------------------------------------------
// Assembler

struct Piece {
  int entry;
  Bytes block;  // one encoded block, on its own
};

std::vector<Piece> Split(int entry, const Encoded& e) {
  std::vector<Piece> out;
  for (size_t i = 0; i < e.offsets.size(); ++i) {
    const size_t end = i + 1 < e.offsets.size() ? e.offsets[i + 1] : e.bytes.size();
    out.push_back({entry, Bytes(e.bytes.begin() + e.offsets[i], e.bytes.begin() + end)});
  }
  return out;
}

template <typename T>
void Shuffle(std::vector<T>& v, Random& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.Uniform(i)]);
}

TEST(AssemblerTest, ShuffledDuplicatedInterleavedBlocks) {
  for (size_t max_block : {128u, 4096u}) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      SCOPED_TRACE("max_block " + std::to_string(max_block) + " seed " + std::to_string(seed));
      Random rng(seed);
      struct Want {
        EntryMeta meta;
        std::string key, value;
      };
      // Same version in two shards and two versions in one shard: ⟨shard,
      // version⟩ is the identity, not either alone.
      std::vector<Want> want = {
          {{EntryType::kPut, 7, 100}, RandomString(rng, 20), RandomString(rng, 1000)},
          {{EntryType::kPut, 7, 101}, RandomString(rng, 20), RandomString(rng, 100 * 1024)},
          {{EntryType::kPut, 8, 100}, RandomString(rng, 50), RandomString(rng, 5000)},
          {{EntryType::kDel, 8, 101}, RandomString(rng, 300), RandomString(rng, 8)},
      };
      std::vector<Piece> order;
      std::vector<size_t> blocks_of;
      for (size_t i = 0; i < want.size(); ++i) {
        Encoded e = Encode(want[i].meta, want[i].key, want[i].value, max_block);
        blocks_of.push_back(e.offsets.size());
        for (Piece& p : Split(static_cast<int>(i), e)) order.push_back(std::move(p));
      }
      Shuffle(order, rng);
      // Where each entry's last distinct block lands; duplicates go before it
      // (after it they would rightly start a new, incomplete entry).
      std::vector<size_t> last(want.size(), 0);
      for (size_t i = 0; i < order.size(); ++i) last[order[i].entry] = i;
      std::vector<std::vector<Bytes>> dups_after(order.size());
      size_t dups = 0;
      for (size_t i = 0; i < order.size(); ++i) {
        const size_t stop = last[order[i].entry];
        if (i < stop && rng.Bernoulli(0.4)) {
          dups_after[rng.Range(i, stop - 1)].push_back(order[i].block);
          ++dups;
        }
      }
      if (max_block == 128) {
        EXPECT_GT(dups, 100u);
      }

      Assembler asm_;
      std::vector<int> completed(want.size(), 0);
      auto feed = [&](Bytes block, int entry, bool expect_done) {
        // Decode from a private copy that dies right after Add: the assembler
        // must have copied what it needs (ASan checks).
        auto d = DecodeBlock(block, Limits{});
        ASSERT_TRUE(d.status.ok()) << d.status.ToString();
        auto r = asm_.Add(d.block);
        block.clear();
        block.shrink_to_fit();
        if (!expect_done) {
          ASSERT_TRUE(r.status().Is(Code::kNotFound)) << r.status().ToString();
          return;
        }
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        const Want& w = want[entry];
        EXPECT_EQ(r->type, w.meta.type);
        EXPECT_EQ(r->shard, w.meta.shard);
        EXPECT_EQ(r->version, w.meta.version);
        EXPECT_EQ(r->key, w.key);
        EXPECT_EQ(r->value, w.value);
        ++completed[entry];
      };
      for (size_t i = 0; i < order.size(); ++i) {
        const bool done = i == last[order[i].entry];
        feed(order[i].block, order[i].entry, done);
        if (HasFatalFailure()) return;
        for (Bytes& dup : dups_after[i]) {
          feed(std::move(dup), order[i].entry, false);
          if (HasFatalFailure()) return;
        }
      }
      for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(completed[i], 1) << "entry " << i;
      EXPECT_EQ(asm_.pending(), 0u);
    }
  }
}

TEST(AssemblerTest, SingleBlockEntriesCompleteAtOnce) {
  Assembler asm_;
  Encoded e = Encode({EntryType::kCommitVersion, 4, 77}, "", Le64(77), 4096);
  auto d = DecodeBlock(e.bytes, Limits{});
  ASSERT_TRUE(d.status.ok());
  for (int i = 0; i < 2; ++i) {  // a second copy is simply another complete entry
    auto r = asm_.Add(d.block);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->type, EntryType::kCommitVersion);
    EXPECT_EQ(r->key, "");
    EXPECT_EQ(r->value, Le64(77));
    EXPECT_EQ(asm_.pending(), 0u);
  }
}

TEST(AssemblerTest, DisagreeingBlocksAreCorruption) {
  Random rng(11);
  const std::string key = RandomString(rng, 200);
  const std::string value = RandomString(rng, 1000);
  const EntryMeta meta{EntryType::kPut, 2, 50};
  Encoded e = Encode(meta, key, value, 128);
  ASSERT_GT(e.offsets.size(), 3u);
  std::vector<Piece> pieces = Split(0, e);
  auto view = [](const Bytes& b) {
    auto d = DecodeBlock(b, Limits{});
    EXPECT_TRUE(d.status.ok()) << d.status.ToString();
    return d.block;
  };

  Assembler asm_;
  EXPECT_TRUE(asm_.Add(view(pieces[0].block)).status().Is(Code::kNotFound));

  // Same ⟨shard, version⟩, different value length (hence cnt may match or not).
  for (size_t vlen : {999u, 1001u, 1096u}) {
    for (const Piece& p : Split(1, Encode(meta, key, RandomString(rng, vlen), 128))) {
      BlockView b = view(p.block);
      if (b.seq == 0) continue;
      EXPECT_TRUE(asm_.Add(b).status().Is(Code::kCorruption)) << vlen << " seq " << b.seq;
    }
  }
  // Same lengths, different type.
  Encoded del =
      Encode({EntryType::kDel, 2, 50}, RandomString(rng, 1192), RandomString(rng, 8), 128);
  Encoded put = Encode(meta, RandomString(rng, 1192), RandomString(rng, 8), 128);
  // Different block size (hence block_payload) for the same entry.
  Encoded wide = Encode(meta, key, value, 256);
  {
    Assembler a2;
    EXPECT_TRUE(a2.Add(view(Split(0, put)[0].block)).status().Is(Code::kNotFound));
    EXPECT_TRUE(a2.Add(view(Split(0, del)[1].block)).status().Is(Code::kCorruption));
  }
  EXPECT_TRUE(asm_.Add(view(Split(0, wide)[1].block)).status().Is(Code::kCorruption));
  // A single-block entry claiming the same identity.
  Encoded single = Encode(meta, "k", "v", 4096);
  EXPECT_TRUE(asm_.Add(view(single.bytes)).status().Is(Code::kCorruption));

  // The rejected blocks did not disturb the real entry.
  for (size_t i = 1; i < pieces.size(); ++i) {
    auto r = asm_.Add(view(pieces[i].block));
    if (i + 1 < pieces.size()) {
      EXPECT_TRUE(r.status().Is(Code::kNotFound)) << r.status().ToString();
    } else {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->key, key);
      EXPECT_EQ(r->value, value);
    }
  }
  EXPECT_EQ(asm_.pending(), 0u);
}

TEST(AssemblerTest, InconsistentHandMadeViewIsRefused) {
  Encoded e = Encode({EntryType::kPut, 1, 1}, "key", std::string(500, 'v'), 128);
  auto d = DecodeBlock(std::span(e.bytes).subspan(e.offsets[1]), Limits{});
  ASSERT_TRUE(d.status.ok());
  Assembler asm_;
  BlockView b = d.block;
  b.chunk_offset += 1;
  EXPECT_TRUE(asm_.Add(b).status().Is(Code::kCorruption));
  b = d.block;
  b.chunk = b.chunk.first(b.chunk.size() - 1);
  EXPECT_TRUE(asm_.Add(b).status().Is(Code::kCorruption));
  b = d.block;
  b.seq = b.cnt;
  EXPECT_TRUE(asm_.Add(b).status().Is(Code::kCorruption));
  EXPECT_EQ(asm_.pending(), 0u);
}

// ---------------------------------------------------------------------------
// Fuzz

TEST(FuzzTest, RandomBuffersNeverDecode) {
  Random rng(12);
  const Limits lim;
  int by_error[5] = {};
  for (int i = 0; i < 100000; ++i) {
    Bytes buf(rng.Uniform(301));
    for (auto& b : buf) b = std::byte(rng.Next());
    const int mode = static_cast<int>(rng.Uniform(4));
    if (mode == 1 && buf.size() >= kHeaderSize) {
      // A plausible single-block header, so the CRC is what must object.
      std::byte* p = buf.data();
      const uint8_t type = static_cast<uint8_t>(rng.Range(1, 3));
      uint32_t key_len = static_cast<uint32_t>(rng.Range(1, 200));
      uint32_t value_len = static_cast<uint32_t>(rng.Uniform(200));
      if (type != 1) value_len = 8;
      if (type == 3) key_len = 0;
      p[0] = std::byte{type};
      p[1] = std::byte{kFormatVersion};
      StoreLE<uint64_t>(p + 8, (rng.Next() & kMaxVersion) | (uint64_t{1} << 48));
      StoreLE<uint32_t>(p + 16, key_len);
      StoreLE<uint32_t>(p + 20, value_len);
      StoreLE<uint32_t>(p + 24, key_len + value_len);
      StoreLE<uint16_t>(p + 28, 0);
      StoreLE<uint16_t>(p + 30, SpecHeaderCheck(p));
    } else if (mode == 2 && buf.size() >= kHeaderSize) {
      // A plausible block of a multi-block entry.
      std::byte* p = buf.data();
      const uint32_t bp = static_cast<uint32_t>(rng.Range(1, 300));
      const uint16_t cnt = static_cast<uint16_t>(rng.Range(2, 6));
      const uint32_t total = bp * (cnt - 1) + static_cast<uint32_t>(rng.Range(1, bp));
      p[0] = std::byte{1};
      p[1] = std::byte{kFormatVersion};
      StoreLE<uint64_t>(p + 8, (rng.Next() & kMaxVersion) | (uint64_t{cnt} << 48));
      StoreLE<uint32_t>(p + 16, 1);
      StoreLE<uint32_t>(p + 20, total - 1);
      StoreLE<uint32_t>(p + 24, bp);
      StoreLE<uint16_t>(p + 28, static_cast<uint16_t>(rng.Uniform(cnt)));
      StoreLE<uint16_t>(p + 30, SpecHeaderCheck(p));
    } else if (mode == 3) {
      // A real entry with 1..4 bytes changed, then cut or padded with junk.
      Encoded e = Encode({EntryType::kPut, static_cast<uint16_t>(rng.Next()), rng.Uniform(1000)},
                         RandomString(rng, rng.Range(1, 40)), RandomString(rng, rng.Uniform(200)),
                         rng.Bernoulli(0.5) ? 128 : 4096);
      const size_t first = e.offsets.size() > 1 ? e.offsets[1] : e.bytes.size();
      Bytes b(e.bytes.begin(), e.bytes.begin() + first);
      const size_t changes = rng.Range(1, 4);
      std::vector<size_t> at;
      while (at.size() < changes) {
        const size_t pos = rng.Uniform(b.size());
        if (std::find(at.begin(), at.end(), pos) == at.end()) at.push_back(pos);
      }
      for (size_t pos : at) b[pos] ^= std::byte(rng.Range(1, 255));
      b.resize(rng.Range(0, b.size() + 64), std::byte(rng.Next()));
      buf = std::move(b);
    }
    auto d = DecodeBlock(buf, lim);
    ASSERT_FALSE(d.status.ok()) << "buffer " << i << " of " << buf.size() << " bytes";
    ASSERT_TRUE(d.status.Is(Code::kCorruption));
    ASSERT_GE(static_cast<int>(d.error), 1);
    ASSERT_LE(static_cast<int>(d.error), 4);
    ++by_error[static_cast<int>(d.error)];
  }
  // Every outcome is exercised, the checksum path most of all.
  EXPECT_GT(by_error[static_cast<int>(DecodeError::kTruncated)], 1000);
  EXPECT_GT(by_error[static_cast<int>(DecodeError::kBadHeader)], 1000);
  EXPECT_GT(by_error[static_cast<int>(DecodeError::kBadChecksum)], 20000);
  Bytes zeros(100, std::byte{0});
  EXPECT_EQ(DecodeBlock(zeros, lim).error, DecodeError::kEmpty);
}

}  // namespace
}  // namespace slip::log
