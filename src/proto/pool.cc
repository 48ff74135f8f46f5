#include "proto/pool.h"

#include "proto/codec.h"

namespace slip::proto {

using internal::Finish;
using internal::Reader;
using internal::Writer;

// PoolNodeRequest: node u32 | epoch u64
std::string Encode(const PoolNodeRequest& r) {
  Writer w(12);
  w.Put<uint32_t>(r.node);
  w.Put<uint64_t>(r.epoch);
  return w.Take();
}

Result<PoolNodeRequest> DecodePoolNodeRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  PoolNodeRequest r;
  r.node = rd.Get<uint32_t>();
  r.epoch = rd.Get<uint64_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool request"));
  return r;
}

// PoolLayoutResponse: region_addr u64 | region_key u64 | region_len u64 |
//   table_offset u64 | overflow_offset u64 | num_buckets u32 |
//   segment_bytes u64 | address_len u32 | address | persist_by_request u8
std::string Encode(const PoolLayoutResponse& r) {
  Writer w(65 + r.address.size());
  w.Put<uint64_t>(r.region_addr);
  w.Put<uint64_t>(r.region_key);
  w.Put<uint64_t>(r.region_len);
  w.Put<uint64_t>(r.table_offset);
  w.Put<uint64_t>(r.overflow_offset);
  w.Put<uint32_t>(r.num_buckets);
  w.Put<uint64_t>(r.segment_bytes);
  w.Put<uint32_t>(static_cast<uint32_t>(r.address.size()));
  w.Bytes(r.address);
  w.Put<uint8_t>(r.persist_by_request ? 1 : 0);
  return w.Take();
}

Result<PoolLayoutResponse> DecodePoolLayoutResponse(std::span<const std::byte> buf) {
  Reader rd(buf);
  PoolLayoutResponse r;
  r.region_addr = rd.Get<uint64_t>();
  r.region_key = rd.Get<uint64_t>();
  r.region_len = rd.Get<uint64_t>();
  r.table_offset = rd.Get<uint64_t>();
  r.overflow_offset = rd.Get<uint64_t>();
  r.num_buckets = rd.Get<uint32_t>();
  r.segment_bytes = rd.Get<uint64_t>();
  const uint32_t address_len = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption("pool layout response shorter than its header");
  if (address_len > 1024) return Status::Corruption("pool layout response: address too long");
  r.address = rd.Bytes(address_len);
  const uint8_t persist = rd.Get<uint8_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool layout response"));
  if (persist > 1) return Status::Corruption("pool layout response: persist flag is neither 0 nor 1");
  r.persist_by_request = persist == 1;
  if (r.num_buckets == 0 || (r.num_buckets & (r.num_buckets - 1)) != 0 || r.table_offset % 64 != 0 ||
      r.table_offset > r.region_len || r.num_buckets > (r.region_len - r.table_offset) / 64 ||
      r.overflow_offset > r.region_len || r.segment_bytes == 0) {
    return Status::Corruption("pool layout response: the index does not fit the pool's region");
  }
  return r;
}

// PoolAllocateResponse: segment u64
std::string Encode(const PoolAllocateResponse& r) {
  Writer w(8);
  w.Put<uint64_t>(r.segment);
  return w.Take();
}

Result<PoolAllocateResponse> DecodePoolAllocateResponse(std::span<const std::byte> buf) {
  Reader rd(buf);
  PoolAllocateResponse r;
  r.segment = rd.Get<uint64_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool allocate response"));
  return r;
}

// PoolSealRequest: node u32 | epoch u64 | segment u64 | end u64
std::string Encode(const PoolSealRequest& r) {
  Writer w(28);
  w.Put<uint32_t>(r.node);
  w.Put<uint64_t>(r.epoch);
  w.Put<uint64_t>(r.segment);
  w.Put<uint64_t>(r.end);
  return w.Take();
}

Result<PoolSealRequest> DecodePoolSealRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  PoolSealRequest r;
  r.node = rd.Get<uint32_t>();
  r.epoch = rd.Get<uint64_t>();
  r.segment = rd.Get<uint64_t>();
  r.end = rd.Get<uint64_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool seal request"));
  return r;
}

// PoolMergedResponse: entries u64 | applied u64
std::string Encode(const PoolMergedResponse& r) {
  Writer w(16);
  w.Put<uint64_t>(r.entries);
  w.Put<uint64_t>(r.applied);
  return w.Take();
}

Result<PoolMergedResponse> DecodePoolMergedResponse(std::span<const std::byte> buf) {
  Reader rd(buf);
  PoolMergedResponse r;
  r.entries = rd.Get<uint64_t>();
  r.applied = rd.Get<uint64_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool merged response"));
  if (r.applied > r.entries) return Status::Corruption("pool merged response: more applied than walked");
  return r;
}

// CloverInsertRequest: node u32 | epoch u64 | offset u64 | bytes u32
std::string Encode(const CloverInsertRequest& r) {
  Writer w(24);
  w.Put<uint32_t>(r.node);
  w.Put<uint64_t>(r.epoch);
  w.Put<uint64_t>(r.offset);
  w.Put<uint32_t>(r.bytes);
  return w.Take();
}

Result<CloverInsertRequest> DecodeCloverInsertRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  CloverInsertRequest r;
  r.node = rd.Get<uint32_t>();
  r.epoch = rd.Get<uint64_t>();
  r.offset = rd.Get<uint64_t>();
  r.bytes = rd.Get<uint32_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "clover insert request"));
  return r;
}

// CloverHeadResponse: offset u64 | bytes u32
std::string Encode(const CloverHeadResponse& r) {
  Writer w(12);
  w.Put<uint64_t>(r.offset);
  w.Put<uint32_t>(r.bytes);
  return w.Take();
}

Result<CloverHeadResponse> DecodeCloverHeadResponse(std::span<const std::byte> buf) {
  Reader rd(buf);
  CloverHeadResponse r;
  r.offset = rd.Get<uint64_t>();
  r.bytes = rd.Get<uint32_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "clover head response"));
  return r;
}

// PoolKeyRequest: node u32 | epoch u64 | key_len u32 | key
std::string Encode(const PoolKeyRequest& r) {
  Writer w(16 + r.key.size());
  w.Put<uint32_t>(r.node);
  w.Put<uint64_t>(r.epoch);
  w.Put<uint32_t>(static_cast<uint32_t>(r.key.size()));
  w.Bytes(r.key);
  return w.Take();
}

Result<PoolKeyRequest> DecodePoolKeyRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  PoolKeyRequest r;
  r.node = rd.Get<uint32_t>();
  r.epoch = rd.Get<uint64_t>();
  const uint32_t len = rd.Get<uint32_t>();
  r.key = rd.Bytes(len);
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool key request"));
  return r;
}

// PoolKeysResponse: count u32 | (key_len u32 | key) * count
std::string Encode(const PoolKeysResponse& r) {
  size_t bytes = 4;
  for (const std::string& k : r.keys) bytes += 4 + k.size();
  Writer w(bytes);
  w.Put<uint32_t>(static_cast<uint32_t>(r.keys.size()));
  for (const std::string& k : r.keys) {
    w.Put<uint32_t>(static_cast<uint32_t>(k.size()));
    w.Bytes(k);
  }
  return w.Take();
}

Result<PoolKeysResponse> DecodePoolKeysResponse(std::span<const std::byte> buf) {
  Reader rd(buf);
  PoolKeysResponse r;
  const uint32_t n = rd.Get<uint32_t>();
  // Each key takes at least its 4-byte length: a count past that is corrupt.
  if (n > buf.size() / 4) return Status::Corruption("pool keys response: " + std::to_string(n) + " keys");
  for (uint32_t i = 0; i < n && rd.ok(); ++i) {
    const uint32_t len = rd.Get<uint32_t>();
    r.keys.emplace_back(rd.Bytes(len));
  }
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool keys response"));
  return r;
}

// PoolAdoptRequest: node u32 | epoch u64 | num_shards u32 | count u32 | shard u32 * count
std::string Encode(const PoolAdoptRequest& r) {
  Writer w(20 + 4 * r.shards.size());
  w.Put<uint32_t>(r.node);
  w.Put<uint64_t>(r.epoch);
  w.Put<uint32_t>(r.num_shards);
  w.Put<uint32_t>(static_cast<uint32_t>(r.shards.size()));
  for (uint32_t s : r.shards) w.Put<uint32_t>(s);
  return w.Take();
}

Result<PoolAdoptRequest> DecodePoolAdoptRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  PoolAdoptRequest r;
  r.node = rd.Get<uint32_t>();
  r.epoch = rd.Get<uint64_t>();
  r.num_shards = rd.Get<uint32_t>();
  const uint32_t n = rd.Get<uint32_t>();
  if (n > buf.size() / 4) return Status::Corruption("pool adopt request: " + std::to_string(n) + " shards");
  for (uint32_t i = 0; i < n && rd.ok(); ++i) r.shards.push_back(rd.Get<uint32_t>());
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool adopt request"));
  for (uint32_t s : r.shards) {
    if (s >= r.num_shards) return Status::InvalidArgument("pool adopt request: shard " + std::to_string(s) + " of " +
                                                          std::to_string(r.num_shards));
  }
  return r;
}

// PoolAdoptResponse: keys u64 | bytes u64
std::string Encode(const PoolAdoptResponse& r) {
  Writer w(16);
  w.Put<uint64_t>(r.keys);
  w.Put<uint64_t>(r.bytes);
  return w.Take();
}

Result<PoolAdoptResponse> DecodePoolAdoptResponse(std::span<const std::byte> buf) {
  Reader rd(buf);
  PoolAdoptResponse r;
  r.keys = rd.Get<uint64_t>();
  r.bytes = rd.Get<uint64_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool adopt response"));
  return r;
}

// PoolPersistRequest: node u32 | epoch u64 | offset u64 | bytes u64
std::string Encode(const PoolPersistRequest& r) {
  Writer w(28);
  w.Put<uint32_t>(r.node);
  w.Put<uint64_t>(r.epoch);
  w.Put<uint64_t>(r.offset);
  w.Put<uint64_t>(r.bytes);
  return w.Take();
}

Result<PoolPersistRequest> DecodePoolPersistRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  PoolPersistRequest r;
  r.node = rd.Get<uint32_t>();
  r.epoch = rd.Get<uint64_t>();
  r.offset = rd.Get<uint64_t>();
  r.bytes = rd.Get<uint64_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool persist request"));
  return r;
}

// PoolIndexResponse: table_offset u64 | overflow_offset u64 | num_buckets u32
std::string Encode(const PoolIndexResponse& r) {
  Writer w(20);
  w.Put<uint64_t>(r.table_offset);
  w.Put<uint64_t>(r.overflow_offset);
  w.Put<uint32_t>(r.num_buckets);
  return w.Take();
}

Result<PoolIndexResponse> DecodePoolIndexResponse(std::span<const std::byte> buf, uint64_t region_len) {
  Reader rd(buf);
  PoolIndexResponse r;
  r.table_offset = rd.Get<uint64_t>();
  r.overflow_offset = rd.Get<uint64_t>();
  r.num_buckets = rd.Get<uint32_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "pool index response"));
  if (r.num_buckets == 0 || (r.num_buckets & (r.num_buckets - 1)) != 0 || r.table_offset % 64 != 0 ||
      r.table_offset > region_len || r.num_buckets > (region_len - r.table_offset) / 64 ||
      r.overflow_offset > region_len) {
    return Status::Corruption("pool index response: the index does not fit the pool's region");
  }
  return r;
}

}  // namespace slip::proto
