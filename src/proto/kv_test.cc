#include "proto/kv.h"

#include <gtest/gtest.h>

#include "common/random.h"

namespace slip::proto {
namespace {

log::Limits Small() {
  log::Limits l;
  l.max_key = 256;
  l.max_value = 4096;
  return l;
}

TEST(KvProtoTest, RoundTrips) {
  KvRequest q{7, 3, "key", "value bytes"};
  std::string b = Encode(q);
  auto d = DecodeKvRequest(AsBytes(b), Small());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->term, 7u);
  EXPECT_EQ(d->shard, 3u);
  EXPECT_EQ(d->key, "key");
  EXPECT_EQ(d->value, "value bytes");

  KvResponse p{9, 1234, "v"};
  b = Encode(p);
  auto dp = DecodeKvResponse(AsBytes(b), Small());
  ASSERT_TRUE(dp.ok());
  EXPECT_EQ(dp->term, 9u);
  EXPECT_EQ(dp->version, 1234u);
  EXPECT_EQ(dp->value, "v");

  ReplicateRequest r{5, {log::EntryType::kDel, 12, log::kMaxVersion}, "gone", ""};
  b = Encode(r);
  auto dr = DecodeReplicateRequest(AsBytes(b), Small());
  ASSERT_TRUE(dr.ok()) << dr.status().ToString();
  EXPECT_EQ(dr->meta.type, log::EntryType::kDel);
  EXPECT_EQ(dr->meta.shard, 12u);
  EXPECT_EQ(dr->meta.version, log::kMaxVersion);
  EXPECT_EQ(dr->key, "gone");
}

TEST(KvProtoTest, EveryTruncationAndExtensionIsRefused) {
  const std::string req = Encode(KvRequest{1, 2, "k", "value"});
  const std::string rep = Encode(ReplicateRequest{1, {log::EntryType::kPut, 0, 5}, "k", "v"});
  const std::string res = Encode(KvResponse{1, 2, "abc"});
  for (size_t n = 0; n < req.size(); ++n) {
    EXPECT_TRUE(DecodeKvRequest(AsBytes(req.substr(0, n)), Small()).status().Is(Code::kCorruption)) << n;
  }
  for (size_t n = 0; n < rep.size(); ++n) {
    EXPECT_TRUE(DecodeReplicateRequest(AsBytes(rep.substr(0, n)), Small()).status().Is(Code::kCorruption)) << n;
  }
  for (size_t n = 0; n < res.size(); ++n) {
    EXPECT_TRUE(DecodeKvResponse(AsBytes(res.substr(0, n)), Small()).status().Is(Code::kCorruption)) << n;
  }
  EXPECT_TRUE(DecodeKvRequest(AsBytes(req + "x"), Small()).status().Is(Code::kCorruption));
  EXPECT_TRUE(DecodeReplicateRequest(AsBytes(rep + "x"), Small()).status().Is(Code::kCorruption));
  EXPECT_TRUE(DecodeKvResponse(AsBytes(res + "x"), Small()).status().Is(Code::kCorruption));
}

TEST(KvProtoTest, OversizedAndNonsensicalFieldsAreClearErrors) {
  EXPECT_TRUE(DecodeKvRequest(AsBytes(Encode(KvRequest{1, 0, std::string(257, 'k'), ""})), Small())
                  .status().Is(Code::kTooLarge));
  EXPECT_TRUE(DecodeKvRequest(AsBytes(Encode(KvRequest{1, 0, "k", std::string(4097, 'v')})), Small())
                  .status().Is(Code::kTooLarge));
  EXPECT_TRUE(DecodeKvRequest(AsBytes(Encode(KvRequest{1, 0, "", "v"})), Small())
                  .status().Is(Code::kInvalidArgument));
  // A header that claims 4 GiB must be refused before anything is read.
  std::string huge = Encode(KvRequest{1, 0, "k", ""});
  huge[16] = huge[17] = huge[18] = huge[19] = '\xff';
  EXPECT_TRUE(DecodeKvRequest(AsBytes(huge), Small()).status().Is(Code::kTooLarge));

  auto rep = [](log::EntryType t, uint64_t v, std::string_view value) {
    return Encode(ReplicateRequest{1, {t, 0, v}, "k", value});
  };
  EXPECT_TRUE(DecodeReplicateRequest(AsBytes(rep(log::EntryType::kCommitVersion, 3, "")), Small())
                  .status().Is(Code::kCorruption));
  EXPECT_TRUE(DecodeReplicateRequest(AsBytes(rep(log::EntryType::kPut, 0, "v")), Small())
                  .status().Is(Code::kCorruption));
  EXPECT_TRUE(DecodeReplicateRequest(AsBytes(rep(log::EntryType::kPut, log::kMaxVersion + 1, "v")), Small())
                  .status().Is(Code::kCorruption));
  EXPECT_TRUE(DecodeReplicateRequest(AsBytes(rep(log::EntryType::kDel, 3, "v")), Small())
                  .status().Is(Code::kCorruption));
}

TEST(KvProtoTest, RandomBytesNeverCrashTheDecoders) {
  Random rng(3);
  int accepted = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string b(rng.Uniform(64), '\0');
    for (auto& c : b) c = static_cast<char>(rng.Uniform(4) == 0 ? rng.Next() : rng.Uniform(3));
    accepted += DecodeKvRequest(AsBytes(b), Small()).ok();
    accepted += DecodeKvResponse(AsBytes(b), Small()).ok();
    accepted += DecodeReplicateRequest(AsBytes(b), Small()).ok();
    accepted += DecodeShardTailRequest(AsBytes(b)).ok();
    accepted += DecodeShardTailResponse(AsBytes(b), Small()).ok();
  }
  // Some inputs are valid by chance (e.g. short zero-length responses); the
  // point is that none of the others crashed or read out of bounds (ASan).
  EXPECT_GT(accepted, 0);
}

TEST(KvProtoTest, ShardTailRoundTripAndMalformedInput) {
  ShardTailRequest q{3, 7, 100, 12};
  std::string b = Encode(q);
  auto dq = DecodeShardTailRequest(AsBytes(b));
  ASSERT_TRUE(dq.ok());
  EXPECT_EQ(dq->shard, 7u);
  EXPECT_EQ(dq->min_version, 100u);
  EXPECT_EQ(dq->skip, 12u);
  for (size_t n = 0; n < b.size(); ++n) {
    EXPECT_FALSE(DecodeShardTailRequest(AsBytes(b.substr(0, n))).ok());
  }

  ShardTailResponse r;
  r.term = 3;
  r.max_version = 200;
  r.walked = 40;
  r.more = true;
  r.entries.push_back({{log::EntryType::kPut, 7, 150}, "a", "value"});
  r.entries.push_back({{log::EntryType::kDel, 7, 151}, "b", ""});
  b = Encode(r);
  auto dr = DecodeShardTailResponse(AsBytes(b), Small());
  ASSERT_TRUE(dr.ok()) << dr.status().ToString();
  EXPECT_TRUE(dr->more);
  EXPECT_EQ(dr->walked, 40u);
  ASSERT_EQ(dr->entries.size(), 2u);
  EXPECT_EQ(dr->entries[0].value, "value");
  EXPECT_EQ(dr->entries[1].meta.type, log::EntryType::kDel);
  for (size_t n = 0; n < b.size(); ++n) {
    EXPECT_FALSE(DecodeShardTailResponse(AsBytes(b.substr(0, n)), Small()).ok()) << n;
  }
  EXPECT_FALSE(DecodeShardTailResponse(AsBytes(b + "z"), Small()).ok());
  // A count claiming billions of entries is refused before any allocation.
  std::string lie = b;
  lie[28] = lie[29] = lie[30] = '\x7f';
  EXPECT_TRUE(DecodeShardTailResponse(AsBytes(lie), Small()).status().Is(Code::kCorruption));
}

}  // namespace
}  // namespace slip::proto

namespace slip::proto {
namespace {

TEST(KvProtoTest, ReplOpenResponseRoundTripsWithItsPersistFlag) {
  for (bool persist : {false, true}) {
    ReplOpenResponse r;
    r.term = 9;
    r.mem_addr = 0x1000;
    r.mem_key = 77;
    r.mem_len = 1 << 20;
    r.flush_offset = 64;
    r.buffer_id = 3;
    r.buffer_offset = 4096;
    r.buffer_len = 65536;
    r.persist_by_request = persist;
    r.address = "fabric-address";
    const std::string bytes = Encode(r);
    auto d = DecodeReplOpenResponse(AsBytes(bytes));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->persist_by_request, persist);
    EXPECT_EQ(d->buffer_offset, 4096u);
    EXPECT_EQ(d->address, "fabric-address");
    // Every truncation is refused; an unknown flag bit too.
    for (size_t n = 0; n < bytes.size(); ++n) {
      EXPECT_FALSE(DecodeReplOpenResponse(AsBytes(std::string_view(bytes).substr(0, n))).ok()) << n;
    }
    std::string flagged = bytes;
    flagged[60] = static_cast<char>(flagged[60] | 2);  // flags
    EXPECT_TRUE(DecodeReplOpenResponse(AsBytes(flagged)).status().Is(Code::kCorruption));
  }
}

// erda's direct-access messages: round trips, every truncation refused,
// and the fields a client trusts checked (a table that does not fit its
// registration, a misaligned place, an out-of-range version).
TEST(ErdaMessagesTest, RoundTripAndTruncationsAreRefused) {
  log::Limits limits;
  ErdaGrantResponse g;
  g.term = 4;
  g.grant_ns = 1000;
  g.max_read_ns = 500;
  g.area_addr = 0x10000;
  g.area_key = 9;
  g.area_len = 1 << 20;
  g.area_offset = 4096;
  g.table_addr = 0x20000;
  g.table_key = 10;
  g.table_len = 64 * 1024;
  g.num_buckets = 1024;
  g.max_entry_bytes = 8192;
  g.address = "addr";
  const std::string gb = Encode(g);
  auto gd = DecodeErdaGrantResponse(AsBytes(gb));
  ASSERT_TRUE(gd.ok()) << gd.status().ToString();
  EXPECT_EQ(gd->num_buckets, 1024u);
  EXPECT_EQ(gd->area_offset, 4096u);
  EXPECT_EQ(gd->address, "addr");
  for (size_t n = 0; n < gb.size(); ++n) EXPECT_FALSE(DecodeErdaGrantResponse(AsBytes(std::string_view(gb).substr(0, n))).ok()) << n;
  g.num_buckets = 1025;  // one bucket past the registration
  EXPECT_TRUE(DecodeErdaGrantResponse(AsBytes(Encode(g))).status().Is(Code::kCorruption));
  g.num_buckets = 0;  // buckets but no table
  EXPECT_TRUE(DecodeErdaGrantResponse(AsBytes(Encode(g))).status().Is(Code::kCorruption));
  g.table_len = 0;  // no table at all (erda-raw: one-sided writes only)
  EXPECT_TRUE(DecodeErdaGrantResponse(AsBytes(Encode(g))).ok());

  const std::string rb = Encode(ErdaReserveRequest{4, 2, 100, "key"});
  auto rd = DecodeErdaReserveRequest(AsBytes(rb), limits);
  ASSERT_TRUE(rd.ok());
  EXPECT_EQ(rd->value_len, 100u);
  EXPECT_EQ(rd->key, "key");
  for (size_t n = 0; n < rb.size(); ++n) EXPECT_FALSE(DecodeErdaReserveRequest(AsBytes(std::string_view(rb).substr(0, n)), limits).ok());
  EXPECT_TRUE(DecodeErdaReserveRequest(AsBytes(Encode(ErdaReserveRequest{4, 2, limits.max_value + 1, "key"})), limits)
                  .status().Is(Code::kTooLarge));
  EXPECT_FALSE(DecodeErdaReserveRequest(AsBytes(Encode(ErdaReserveRequest{4, 2, 1, ""})), limits).ok());

  const std::string sb = Encode(ErdaReserveResponse{4, 17, 3, 128, 50});
  auto sd = DecodeErdaReserveResponse(AsBytes(sb));
  ASSERT_TRUE(sd.ok());
  EXPECT_EQ(sd->version, 17u);
  EXPECT_EQ(sd->area_offset, 128u);
  EXPECT_TRUE(DecodeErdaReserveResponse(AsBytes(Encode(ErdaReserveResponse{4, 17, 3, 100, 50}))).status().Is(Code::kCorruption));
  EXPECT_TRUE(DecodeErdaReserveResponse(AsBytes(Encode(ErdaReserveResponse{4, 0, 3, 128, 50}))).status().Is(Code::kCorruption));

  const std::string cb = Encode(ErdaCommitRequest{4, 2, 3, "key"});
  auto cd = DecodeErdaCommitRequest(AsBytes(cb), limits);
  ASSERT_TRUE(cd.ok());
  EXPECT_EQ(cd->reservation, 3u);
  for (size_t n = 0; n < cb.size(); ++n) EXPECT_FALSE(DecodeErdaCommitRequest(AsBytes(std::string_view(cb).substr(0, n)), limits).ok());
  EXPECT_TRUE(DecodeErdaCommitRequest(AsBytes(cb + "x"), limits).status().Is(Code::kCorruption));

  auto grd = DecodeErdaGrantRequest(AsBytes(Encode(ErdaGrantRequest{4, 2})));
  ASSERT_TRUE(grd.ok());
  EXPECT_EQ(grd->shard, 2u);
  EXPECT_EQ(std::string(MethodName(static_cast<uint16_t>(Method::kErdaCommit))), "ERDA_COMMIT");
}

}  // namespace
}  // namespace slip::proto
