// DINOMO's pool messages (docs/formats/kv_messages.md "The pool"): a KVS
// node asks the pool, two-sidedly, where things are and for segments of
// its log, and tells it when a segment is done; everything else — index
// reads, entry reads, log writes — is one-sided.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace slip::proto {

// POOL_LAYOUT, POOL_ALLOCATE: the node asking and its token (the epoch it
// works in). POOL_MERGE_ALL: the node that is gone and the epoch from which
// it is fenced. KN_RELEASE (proto/kv.h): the node asking and the term it
// is to serve.
struct PoolNodeRequest {
  uint32_t node = 0;
  uint64_t epoch = 0;
};

struct PoolLayoutResponse {
  // The pool's region as registered for one-sided READ and WRITE.
  uint64_t region_addr = 0, region_key = 0, region_len = 0;
  // The index (dinomo/pool_index.h): home bucket b at table_offset + 64 b,
  // overflow bucket k at overflow_offset + 64 k (region offsets).
  uint64_t table_offset = 0, overflow_offset = 0;
  uint32_t num_buckets = 0;
  uint64_t segment_bytes = 0;
  std::string_view address;  // the pool's endpoint for one-sided access
  // The region is an ordinary file: bytes written one-sidedly are durable
  // only after POOL_PERSIST covers them.
  bool persist_by_request = false;
};

// POOL_PERSIST: the node, its token, and a range of its open segment.
struct PoolPersistRequest {
  uint32_t node = 0;
  uint64_t epoch = 0;
  uint64_t offset = 0;  // region offset
  uint64_t bytes = 0;
};
// POOL_INDEX's answer (request: PoolNodeRequest): the index's place, as
// in PoolLayoutResponse.
struct PoolIndexResponse {
  uint64_t table_offset = 0, overflow_offset = 0;
  uint32_t num_buckets = 0;
};
std::string Encode(const PoolIndexResponse& r);
// Corruption when num_buckets is not a power of two or the table does not
// fit `region_len`.
Result<PoolIndexResponse> DecodePoolIndexResponse(std::span<const std::byte> buf, uint64_t region_len);

std::string Encode(const PoolPersistRequest& r);
Result<PoolPersistRequest> DecodePoolPersistRequest(std::span<const std::byte> buf);

struct PoolAllocateResponse {
  uint64_t segment = 0;  // region offset of the node's new segment
};

struct PoolSealRequest {
  uint32_t node = 0;
  uint64_t epoch = 0;  // the node's token
  uint64_t segment = 0;
  uint64_t end = 0;  // bytes written from the segment's start
};

// POOL_SEAL and POOL_MERGE_ALL, once merged.
struct PoolMergedResponse {
  uint64_t entries = 0;  // entries walked
  uint64_t applied = 0;  // of which the index now points at
};

// CLOVER_INSERT: the node, its token, and the log block of the first
// version of a key it wrote (region offset and padded size). The answer:
// the block the key's chain starts at now (the node's, or an earlier one).
struct CloverInsertRequest {
  uint32_t node = 0;
  uint64_t epoch = 0;
  uint64_t offset = 0;
  uint32_t bytes = 0;
};
struct CloverHeadResponse {
  uint64_t offset = 0;
  uint32_t bytes = 0;
};

std::string Encode(const CloverInsertRequest& r);
std::string Encode(const CloverHeadResponse& r);
Result<CloverInsertRequest> DecodeCloverInsertRequest(std::span<const std::byte> buf);
Result<CloverHeadResponse> DecodeCloverHeadResponse(std::span<const std::byte> buf);

// POOL_SHARE, POOL_UNSHARE: the node, its token and the key.
struct PoolKeyRequest {
  uint32_t node = 0;
  uint64_t epoch = 0;
  std::string_view key;
};
std::string Encode(const PoolKeyRequest& r);
struct PoolKeysResponse {
  std::vector<std::string> keys;
};
std::string Encode(const PoolKeysResponse& r);
Result<PoolKeysResponse> DecodePoolKeysResponse(std::span<const std::byte> buf);
Result<PoolKeyRequest> DecodePoolKeyRequest(std::span<const std::byte> buf);

// POOL_ADOPT (DINOMO-N): the node, the term it will serve, the cluster's
// shard count and the shards whose keys move into its partition. The
// answer: what was copied.
struct PoolAdoptRequest {
  uint32_t node = 0;
  uint64_t epoch = 0;
  uint32_t num_shards = 0;
  std::vector<uint32_t> shards;
};
struct PoolAdoptResponse {
  uint64_t keys = 0, bytes = 0;
};
std::string Encode(const PoolAdoptRequest& r);
std::string Encode(const PoolAdoptResponse& r);
// InvalidArgument for a shard not below num_shards.
Result<PoolAdoptRequest> DecodePoolAdoptRequest(std::span<const std::byte> buf);
Result<PoolAdoptResponse> DecodePoolAdoptResponse(std::span<const std::byte> buf);

std::string Encode(const PoolNodeRequest& r);
std::string Encode(const PoolLayoutResponse& r);
std::string Encode(const PoolAllocateResponse& r);
std::string Encode(const PoolSealRequest& r);
std::string Encode(const PoolMergedResponse& r);
Result<PoolNodeRequest> DecodePoolNodeRequest(std::span<const std::byte> buf);
// Corruption when the index does not fit the registered region.
Result<PoolLayoutResponse> DecodePoolLayoutResponse(std::span<const std::byte> buf);
Result<PoolAllocateResponse> DecodePoolAllocateResponse(std::span<const std::byte> buf);
Result<PoolSealRequest> DecodePoolSealRequest(std::span<const std::byte> buf);
Result<PoolMergedResponse> DecodePoolMergedResponse(std::span<const std::byte> buf);

}  // namespace slip::proto
