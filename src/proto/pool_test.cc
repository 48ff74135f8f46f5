// DINOMO's pool messages (proto/pool.h): round trips, and every truncation
// and inconsistency refused.
#include "proto/pool.h"

#include <gtest/gtest.h>

#include "proto/kv.h"

namespace slip::proto {
namespace {

template <typename Decode>
void EveryPrefixFails(const std::string& bytes, Decode decode) {
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(decode(AsBytes(std::string_view(bytes).substr(0, n))).ok()) << n;
  EXPECT_FALSE(decode(AsBytes(bytes + "x")).ok()) << "trailing bytes";
}

TEST(PoolMessagesTest, RoundTripAndRefuseWhatDoesNotParse) {
  const std::string nb = Encode(PoolNodeRequest{7, 3});
  EXPECT_EQ(DecodePoolNodeRequest(AsBytes(nb))->node, 7u);
  EXPECT_EQ(DecodePoolNodeRequest(AsBytes(nb))->epoch, 3u);
  EveryPrefixFails(nb, DecodePoolNodeRequest);

  PoolLayoutResponse l{0x1000, 9, 1 << 20, 4160, 4160 + 64 * 64, 64, 64 << 10, "pool-address"};
  const std::string lb = Encode(l);
  auto ld = DecodePoolLayoutResponse(AsBytes(lb));
  ASSERT_TRUE(ld.ok()) << ld.status().ToString();
  EXPECT_EQ(ld->num_buckets, 64u);
  EXPECT_EQ(ld->table_offset, 4160u);
  EXPECT_EQ(ld->address, "pool-address");
  EveryPrefixFails(lb, DecodePoolLayoutResponse);
  l.num_buckets = 48;  // not a power of two
  EXPECT_TRUE(DecodePoolLayoutResponse(AsBytes(Encode(l))).status().Is(Code::kCorruption));
  l.num_buckets = 1 << 20;  // past the region
  EXPECT_TRUE(DecodePoolLayoutResponse(AsBytes(Encode(l))).status().Is(Code::kCorruption));

  const std::string ab = Encode(PoolAllocateResponse{1 << 16});
  EXPECT_EQ(DecodePoolAllocateResponse(AsBytes(ab))->segment, 1u << 16);
  EveryPrefixFails(ab, DecodePoolAllocateResponse);

  const std::string sb = Encode(PoolSealRequest{3, 2, 65536, 4096});
  auto sd = DecodePoolSealRequest(AsBytes(sb));
  ASSERT_TRUE(sd.ok());
  EXPECT_EQ(sd->node, 3u);
  EXPECT_EQ(sd->epoch, 2u);
  EXPECT_EQ(sd->segment, 65536u);
  EXPECT_EQ(sd->end, 4096u);
  EveryPrefixFails(sb, DecodePoolSealRequest);

  const std::string mb = Encode(PoolMergedResponse{10, 4});
  EXPECT_EQ(DecodePoolMergedResponse(AsBytes(mb))->applied, 4u);
  EveryPrefixFails(mb, DecodePoolMergedResponse);
  EXPECT_FALSE(DecodePoolMergedResponse(AsBytes(Encode(PoolMergedResponse{1, 2}))).ok());
  EXPECT_STREQ(MethodName(static_cast<uint16_t>(Method::kPoolSeal)), "POOL_SEAL");
}

TEST(PoolMessagesTest, SharedKeyMessagesRoundTripAndRefuseWhatDoesNotParse) {
  const std::string key("h\0t", 3);
  const std::string kb = Encode(PoolKeyRequest{4, 9, key});
  auto kd = DecodePoolKeyRequest(AsBytes(kb));
  ASSERT_TRUE(kd.ok()) << kd.status().ToString();
  EXPECT_EQ(kd->node, 4u);
  EXPECT_EQ(kd->epoch, 9u);
  EXPECT_EQ(kd->key, key);
  EveryPrefixFails(kb, DecodePoolKeyRequest);

  const std::string lb = Encode(PoolKeysResponse{{"a", "", key}});
  auto ld = DecodePoolKeysResponse(AsBytes(lb));
  ASSERT_TRUE(ld.ok()) << ld.status().ToString();
  EXPECT_EQ(ld->keys, (std::vector<std::string>{"a", "", key}));
  EveryPrefixFails(lb, DecodePoolKeysResponse);
  EXPECT_TRUE(DecodePoolKeysResponse(AsBytes(Encode(PoolKeysResponse{}))).ok());
  std::string huge = Encode(PoolKeysResponse{});
  huge[3] = '\x7f';  // a count no buffer of this size holds
  EXPECT_TRUE(DecodePoolKeysResponse(AsBytes(huge)).status().Is(Code::kCorruption));
  EXPECT_STREQ(MethodName(static_cast<uint16_t>(Method::kPoolShare)), "POOL_SHARE");
  EXPECT_STREQ(MethodName(static_cast<uint16_t>(Method::kPoolShared)), "POOL_SHARED");
}

TEST(PoolMessagesTest, AdoptMessagesRoundTripAndRefuseWhatDoesNotParse) {
  const std::string ab = Encode(PoolAdoptRequest{3, 7, 24, {0, 5, 23}});
  auto ad = DecodePoolAdoptRequest(AsBytes(ab));
  ASSERT_TRUE(ad.ok()) << ad.status().ToString();
  EXPECT_EQ(ad->node, 3u);
  EXPECT_EQ(ad->epoch, 7u);
  EXPECT_EQ(ad->num_shards, 24u);
  EXPECT_EQ(ad->shards, (std::vector<uint32_t>{0, 5, 23}));
  EveryPrefixFails(ab, DecodePoolAdoptRequest);
  EXPECT_TRUE(DecodePoolAdoptRequest(AsBytes(Encode(PoolAdoptRequest{3, 7, 24, {24}}))).status().Is(
      Code::kInvalidArgument))
      << "a shard past the count";
  const std::string rb = Encode(PoolAdoptResponse{12, 4096});
  EXPECT_EQ(DecodePoolAdoptResponse(AsBytes(rb))->bytes, 4096u);
  EveryPrefixFails(rb, DecodePoolAdoptResponse);
  EXPECT_STREQ(MethodName(static_cast<uint16_t>(Method::kPoolAdopt)), "POOL_ADOPT");
}

}  // namespace
}  // namespace slip::proto
