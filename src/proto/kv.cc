#include "proto/kv.h"

#include <cstring>

#include "common/coding.h"
#include "proto/codec.h"

namespace slip::proto {
namespace {

using internal::Finish;
using internal::Reader;
using internal::Writer;

// Reads Writer::KeyValue's tail and requires the message to end there.
Status ReadKeyValue(Reader& rd, const log::Limits& limits, const char* what,
                    std::string_view* key, std::string_view* value) {
  const uint32_t key_len = rd.Get<uint32_t>();
  const uint32_t value_len = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption(std::string(what) + " shorter than its header");
  SLIP_RETURN_IF_ERROR(log::CheckSizes(key_len, value_len, limits));
  *key = rd.Bytes(key_len);
  *value = rd.Bytes(value_len);
  return Finish(rd, what);
}

// An entry inside a message: version u64 | shard u16 | type u8 | pad u8 |
// key_len u32 | value_len u32 | key | value.
void PutEntry(Writer& w, const log::EntryMeta& meta, std::string_view key, std::string_view value) {
  w.Put<uint64_t>(meta.version);
  w.Put<uint16_t>(meta.shard);
  w.Put<uint8_t>(static_cast<uint8_t>(meta.type));
  w.Put<uint8_t>(0);
  w.KeyValue(key, value);
}

Status GetEntry(Reader& rd, const log::Limits& limits, const std::string& what,
                log::EntryMeta* meta, std::string_view* key, std::string_view* value) {
  meta->version = rd.Get<uint64_t>();
  meta->shard = rd.Get<uint16_t>();
  const uint8_t type = rd.Get<uint8_t>();
  const uint8_t pad = rd.Get<uint8_t>();
  const uint32_t key_len = rd.Get<uint32_t>();
  const uint32_t value_len = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption(what + " shorter than its header");
  if (pad != 0) return Status::Corruption(what + ": reserved byte set");
  if (type != static_cast<uint8_t>(log::EntryType::kPut) &&
      type != static_cast<uint8_t>(log::EntryType::kDel)) {
    return Status::Corruption(what + ": entry type " + std::to_string(type) +
                              " is neither PUT nor DEL");
  }
  meta->type = static_cast<log::EntryType>(type);
  if (meta->version == 0 || meta->version > log::kMaxVersion) {
    return Status::Corruption(what + ": version out of range");
  }
  SLIP_RETURN_IF_ERROR(log::CheckSizes(key_len, value_len, limits));
  *key = rd.Bytes(key_len);
  *value = rd.Bytes(value_len);
  if (!rd.ok()) return Status::Corruption(what + " shorter than its key and value");
  if (key->empty()) return Status::Corruption(what + ": empty key");
  if (meta->type == log::EntryType::kDel && !value->empty()) {
    return Status::Corruption(what + ": DEL with a value");
  }
  return Status::Ok();
}

}  // namespace

const char* MethodName(uint16_t method) {
  switch (static_cast<Method>(method)) {
    case Method::kPut: return "PUT";
    case Method::kGet: return "GET";
    case Method::kDel: return "DEL";
    case Method::kErdaGrant: return "ERDA_GRANT";
    case Method::kErdaReserve: return "ERDA_RESERVE";
    case Method::kErdaCommit: return "ERDA_COMMIT";
    case Method::kPutIf: return "PUT_IF";
    case Method::kReplicate: return "REPLICATE";
    case Method::kShardTail: return "SHARD_TAIL";
    case Method::kReplOpen: return "REPL_OPEN";
    case Method::kReplClose: return "REPL_CLOSE";
    case Method::kReplPersist: return "REPL_PERSIST";
    case Method::kMigrateBegin: return "MIGRATE_BEGIN";
    case Method::kMigrateFetch: return "MIGRATE_FETCH";
    case Method::kMigratePush: return "MIGRATE_PUSH";
    case Method::kGetConfig: return "GET_CONFIG";
    case Method::kStats: return "STATS";
    case Method::kPoolLayout: return "POOL_LAYOUT";
    case Method::kPoolAllocate: return "POOL_ALLOCATE";
    case Method::kPoolSeal: return "POOL_SEAL";
    case Method::kPoolMergeAll: return "POOL_MERGE_ALL";
    case Method::kKnRelease: return "KN_RELEASE";
    case Method::kCloverInsert: return "CLOVER_INSERT";
    case Method::kPoolPersist: return "POOL_PERSIST";
    case Method::kPoolIndex: return "POOL_INDEX";
    case Method::kPoolShare: return "POOL_SHARE";
    case Method::kPoolUnshare: return "POOL_UNSHARE";
    case Method::kPoolShared: return "POOL_SHARED";
    case Method::kPoolAdopt: return "POOL_ADOPT";
    case Method::kRubbleApply: return "RUBBLE_APPLY";
    case Method::kRubbleLink: return "RUBBLE_LINK";
    case Method::kRubbleSeed: return "RUBBLE_SEED";
    case Method::kRubbleSlots: return "RUBBLE_SLOTS";
  }
  return "UNKNOWN";
}

// KvRequest: term u64 | shard u32 | key_len u32 | value_len u32 | key | value
std::string Encode(const KvRequest& r) {
  Writer w(20 + r.key.size() + r.value.size());
  w.Put<uint64_t>(r.term);
  w.Put<uint32_t>(r.shard);
  w.KeyValue(r.key, r.value);
  return w.Take();
}

Result<KvRequest> DecodeKvRequest(std::span<const std::byte> buf, const log::Limits& limits) {
  Reader rd(buf);
  KvRequest r;
  r.term = rd.Get<uint64_t>();
  r.shard = rd.Get<uint32_t>();
  SLIP_RETURN_IF_ERROR(ReadKeyValue(rd, limits, "KV request", &r.key, &r.value));
  if (r.key.empty()) return Status::InvalidArgument("empty key");
  return r;
}

// PutIfRequest: condition u8 | KvRequest
std::string Encode(const PutIfRequest& r) {
  std::string s(1, static_cast<char>(r.condition));
  s += Encode(r.kv);
  return s;
}

Result<PutIfRequest> DecodePutIfRequest(std::span<const std::byte> buf, const log::Limits& limits) {
  if (buf.empty()) return Status::Corruption("PUT_IF request: no condition");
  const auto c = static_cast<uint8_t>(buf[0]);
  if (c != static_cast<uint8_t>(PutCondition::kIfAbsent) && c != static_cast<uint8_t>(PutCondition::kIfPresent)) {
    return Status::Corruption("PUT_IF request: unknown condition " + std::to_string(c));
  }
  PutIfRequest r;
  r.condition = static_cast<PutCondition>(c);
  SLIP_ASSIGN_OR_RETURN(r.kv, DecodeKvRequest(buf.subspan(1), limits));
  return r;
}

// KvResponse: term u64 | version u64 | value_len u32 | value
std::string Encode(const KvResponse& r) {
  Writer w(20 + r.value.size());
  w.Put<uint64_t>(r.term);
  w.Put<uint64_t>(r.version);
  w.Put<uint32_t>(static_cast<uint32_t>(r.value.size()));
  w.Bytes(r.value);
  return w.Take();
}

Result<KvResponse> DecodeKvResponse(std::span<const std::byte> buf, const log::Limits& limits) {
  Reader rd(buf);
  KvResponse r;
  r.term = rd.Get<uint64_t>();
  r.version = rd.Get<uint64_t>();
  const uint32_t value_len = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption("KV response shorter than its header");
  SLIP_RETURN_IF_ERROR(log::CheckSizes(0, value_len, limits));
  r.value = rd.Bytes(value_len);
  SLIP_RETURN_IF_ERROR(Finish(rd, "KV response"));
  return r;
}

// ReplicateRequest: term u64 | version u64 | shard u16 | type u8 | pad u8 |
//                   key_len u32 | value_len u32 | key | value
std::string Encode(const ReplicateRequest& r) {
  Writer w(28 + r.key.size() + r.value.size());
  w.Put<uint64_t>(r.term);
  PutEntry(w, r.meta, r.key, r.value);
  return w.Take();
}

Result<ReplicateRequest> DecodeReplicateRequest(std::span<const std::byte> buf,
                                                const log::Limits& limits) {
  Reader rd(buf);
  ReplicateRequest r;
  r.term = rd.Get<uint64_t>();
  SLIP_RETURN_IF_ERROR(GetEntry(rd, limits, "replicate request", &r.meta, &r.key, &r.value));
  SLIP_RETURN_IF_ERROR(Finish(rd, "replicate request"));
  return r;
}

}  // namespace slip::proto

namespace slip::proto {

// ShardTailRequest: term u64 | shard u32 | pad u32 | min_version u64 | skip u64
std::string Encode(const ShardTailRequest& r) {
  Writer w(32);
  w.Put<uint64_t>(r.term);
  w.Put<uint32_t>(r.shard);
  w.Put<uint32_t>(0);
  w.Put<uint64_t>(r.min_version);
  w.Put<uint64_t>(r.skip);
  return w.Take();
}

Result<ShardTailRequest> DecodeShardTailRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  ShardTailRequest r;
  r.term = rd.Get<uint64_t>();
  r.shard = rd.Get<uint32_t>();
  const uint32_t pad = rd.Get<uint32_t>();
  r.min_version = rd.Get<uint64_t>();
  r.skip = rd.Get<uint64_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "shard tail request"));
  if (pad != 0) return Status::Corruption("shard tail request: reserved bytes set");
  return r;
}

// ShardTailResponse: term u64 | max_version u64 | walked u64 | more u8 |
//                    pad 3 | count u32 | entries
std::string Encode(const ShardTailResponse& r) {
  size_t bytes = 32;
  for (const auto& e : r.entries) bytes += 20 + e.key.size() + e.value.size();
  Writer w(bytes);
  w.Put<uint64_t>(r.term);
  w.Put<uint64_t>(r.max_version);
  w.Put<uint64_t>(r.walked);
  w.Put<uint8_t>(r.more ? 1 : 0);
  w.Put<uint8_t>(0);
  w.Put<uint16_t>(0);
  w.Put<uint32_t>(static_cast<uint32_t>(r.entries.size()));
  for (const auto& e : r.entries) PutEntry(w, e.meta, e.key, e.value);
  return w.Take();
}

Result<ShardTailResponse> DecodeShardTailResponse(std::span<const std::byte> buf,
                                                  const log::Limits& limits) {
  Reader rd(buf);
  ShardTailResponse r;
  r.term = rd.Get<uint64_t>();
  r.max_version = rd.Get<uint64_t>();
  r.walked = rd.Get<uint64_t>();
  const uint8_t more = rd.Get<uint8_t>();
  const uint8_t pad8 = rd.Get<uint8_t>();
  const uint16_t pad16 = rd.Get<uint16_t>();
  const uint32_t count = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption("shard tail response shorter than its header");
  if (more > 1 || pad8 != 0 || pad16 != 0) {
    return Status::Corruption("shard tail response: bad flags");
  }
  r.more = more == 1;
  // Each entry takes at least 21 bytes: a count beyond that is a lie.
  if (count > buf.size() / 21) return Status::Corruption("shard tail response: bad entry count");
  r.entries.resize(count);
  for (auto& e : r.entries) {
    SLIP_RETURN_IF_ERROR(GetEntry(rd, limits, "shard tail entry", &e.meta, &e.key, &e.value));
  }
  SLIP_RETURN_IF_ERROR(Finish(rd, "shard tail response"));
  return r;
}

// ReplOpenRequest: term u64 | sender u32 | buffer u8 | pad 3
std::string Encode(const ReplOpenRequest& r) {
  Writer w(16);
  w.Put<uint64_t>(r.term);
  w.Put<uint32_t>(r.sender);
  w.Put<uint8_t>(static_cast<uint8_t>(r.buffer));
  w.Put<uint8_t>(0);
  w.Put<uint16_t>(0);
  return w.Take();
}

Result<ReplOpenRequest> DecodeReplOpenRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  ReplOpenRequest r;
  r.term = rd.Get<uint64_t>();
  r.sender = rd.Get<uint32_t>();
  const uint8_t buffer = rd.Get<uint8_t>();
  const uint8_t pad8 = rd.Get<uint8_t>();
  const uint16_t pad16 = rd.Get<uint16_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "replication open request"));
  if (buffer > static_cast<uint8_t>(ReplBuffer::kPrivate)) {
    return Status::Corruption("replication open request: unknown buffer kind " + std::to_string(buffer));
  }
  if (pad8 != 0 || pad16 != 0) return Status::Corruption("replication open request: reserved bytes set");
  r.buffer = static_cast<ReplBuffer>(buffer);
  return r;
}

// ReplOpenResponse: term u64 | mem_addr u64 | mem_key u64 | mem_len u64 |
//   flush_offset u64 | buffer_offset u64 | buffer_len u64 | buffer_id u32 |
//   flags u32 (bit 0: persist_by_request) | incarnation u64 | send_token u64 |
//   address_len u32 | address
std::string Encode(const ReplOpenResponse& r) {
  Writer w(92 + r.address.size());
  w.Put<uint64_t>(r.term);
  w.Put<uint64_t>(r.mem_addr);
  w.Put<uint64_t>(r.mem_key);
  w.Put<uint64_t>(r.mem_len);
  w.Put<uint64_t>(r.flush_offset);
  w.Put<uint64_t>(r.buffer_offset);
  w.Put<uint64_t>(r.buffer_len);
  w.Put<uint32_t>(r.buffer_id);
  w.Put<uint32_t>(r.persist_by_request ? 1u : 0u);
  w.Put<uint64_t>(r.incarnation);
  w.Put<uint64_t>(r.send_token);
  w.Put<uint32_t>(static_cast<uint32_t>(r.address.size()));
  w.Bytes(r.address);
  return w.Take();
}

// ReplPersistRequest: incarnation u64
std::string Encode(const ReplPersistRequest& r) {
  Writer w(8);
  w.Put<uint64_t>(r.incarnation);
  return w.Take();
}

Result<ReplPersistRequest> DecodeReplPersistRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  ReplPersistRequest r;
  r.incarnation = rd.Get<uint64_t>();
  if (!rd.ok()) return Status::Corruption("replication persist request shorter than 8 bytes");
  SLIP_RETURN_IF_ERROR(Finish(rd, "replication persist request"));
  return r;
}

Result<ReplOpenResponse> DecodeReplOpenResponse(std::span<const std::byte> buf) {
  Reader rd(buf);
  ReplOpenResponse r;
  r.term = rd.Get<uint64_t>();
  r.mem_addr = rd.Get<uint64_t>();
  r.mem_key = rd.Get<uint64_t>();
  r.mem_len = rd.Get<uint64_t>();
  r.flush_offset = rd.Get<uint64_t>();
  r.buffer_offset = rd.Get<uint64_t>();
  r.buffer_len = rd.Get<uint64_t>();
  r.buffer_id = rd.Get<uint32_t>();
  const uint32_t flags = rd.Get<uint32_t>();
  r.incarnation = rd.Get<uint64_t>();
  r.send_token = rd.Get<uint64_t>();
  const uint32_t address_len = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption("replication open response shorter than its header");
  if (flags & ~1u) return Status::Corruption("replication open response: unknown flags");
  r.persist_by_request = (flags & 1u) != 0;
  if (address_len > 1024) return Status::Corruption("replication open response: address too long");
  r.address = rd.Bytes(address_len);
  SLIP_RETURN_IF_ERROR(Finish(rd, "replication open response"));
  // Every range must lie inside the registration: a lie here would make the
  // sender write outside the buffer it was given.
  if (r.flush_offset >= r.mem_len || r.buffer_offset > r.mem_len ||
      r.buffer_len > r.mem_len - r.buffer_offset) {
    return Status::Corruption("replication open response: buffer outside the registered memory");
  }
  return r;
}

// ReplCloseRequest: term u64 | sender u32 | buffer_id u32 | used u64
std::string Encode(const ReplCloseRequest& r) {
  Writer w(24);
  w.Put<uint64_t>(r.term);
  w.Put<uint32_t>(r.sender);
  w.Put<uint32_t>(r.buffer_id);
  w.Put<uint64_t>(r.used);
  return w.Take();
}

Result<ReplCloseRequest> DecodeReplCloseRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  ReplCloseRequest r;
  r.term = rd.Get<uint64_t>();
  r.sender = rd.Get<uint32_t>();
  r.buffer_id = rd.Get<uint32_t>();
  r.used = rd.Get<uint64_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "replication close request"));
  return r;
}

// ---------------------------------------------------------------------------
// erda

// ErdaGrantRequest: term u64 | shard u32
std::string Encode(const ErdaGrantRequest& r) {
  Writer w(12);
  w.Put<uint64_t>(r.term);
  w.Put<uint32_t>(r.shard);
  return w.Take();
}

Result<ErdaGrantRequest> DecodeErdaGrantRequest(std::span<const std::byte> buf) {
  Reader rd(buf);
  ErdaGrantRequest r;
  r.term = rd.Get<uint64_t>();
  r.shard = rd.Get<uint32_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "erda grant request"));
  return r;
}

// ErdaGrantResponse: term u64 | grant_ns u64 | max_read_ns u64 | area_addr u64 |
//   area_key u64 | area_len u64 | area_offset u64 | table_addr u64 |
//   table_key u64 | table_len u64 | num_buckets u32 | max_entry_bytes u32 |
//   address_len u32 | address
std::string Encode(const ErdaGrantResponse& r) {
  Writer w(96 + r.address.size());
  w.Put<uint64_t>(r.term);
  w.Put<uint64_t>(r.grant_ns);
  w.Put<uint64_t>(r.max_read_ns);
  w.Put<uint64_t>(r.area_addr);
  w.Put<uint64_t>(r.area_key);
  w.Put<uint64_t>(r.area_len);
  w.Put<uint64_t>(r.area_offset);
  w.Put<uint64_t>(r.table_addr);
  w.Put<uint64_t>(r.table_key);
  w.Put<uint64_t>(r.table_len);
  w.Put<uint32_t>(r.num_buckets);
  w.Put<uint32_t>(r.max_entry_bytes);
  w.Put<uint32_t>(static_cast<uint32_t>(r.address.size()));
  w.Bytes(r.address);
  return w.Take();
}

Result<ErdaGrantResponse> DecodeErdaGrantResponse(std::span<const std::byte> buf) {
  Reader rd(buf);
  ErdaGrantResponse r;
  r.term = rd.Get<uint64_t>();
  r.grant_ns = rd.Get<uint64_t>();
  r.max_read_ns = rd.Get<uint64_t>();
  r.area_addr = rd.Get<uint64_t>();
  r.area_key = rd.Get<uint64_t>();
  r.area_len = rd.Get<uint64_t>();
  r.area_offset = rd.Get<uint64_t>();
  r.table_addr = rd.Get<uint64_t>();
  r.table_key = rd.Get<uint64_t>();
  r.table_len = rd.Get<uint64_t>();
  r.num_buckets = rd.Get<uint32_t>();
  r.max_entry_bytes = rd.Get<uint32_t>();
  const uint32_t address_len = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption("erda grant response shorter than its header");
  if (address_len > 1024) return Status::Corruption("erda grant response: address too long");
  r.address = rd.Bytes(address_len);
  SLIP_RETURN_IF_ERROR(Finish(rd, "erda grant response"));
  // The client reads windows of two buckets inside the table; no table
  // (0 buckets, 0 bytes): this design's clients write one-sidedly only.
  const bool no_table = r.num_buckets == 0 && r.table_len == 0;
  if (!no_table && (r.num_buckets < 2 || uint64_t{r.num_buckets} * 64 > r.table_len)) {
    return Status::Corruption("erda grant response: the bucket table does not fit its registration");
  }
  return r;
}

// ErdaReserveRequest: term u64 | shard u32 | key_len u32 | value_len u32 | key
std::string Encode(const ErdaReserveRequest& r) {
  Writer w(20 + r.key.size());
  w.Put<uint64_t>(r.term);
  w.Put<uint32_t>(r.shard);
  w.Put<uint32_t>(static_cast<uint32_t>(r.key.size()));
  w.Put<uint32_t>(r.value_len);
  w.Bytes(r.key);
  return w.Take();
}

Result<ErdaReserveRequest> DecodeErdaReserveRequest(std::span<const std::byte> buf, const log::Limits& limits) {
  Reader rd(buf);
  ErdaReserveRequest r;
  r.term = rd.Get<uint64_t>();
  r.shard = rd.Get<uint32_t>();
  const uint32_t key_len = rd.Get<uint32_t>();
  r.value_len = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption("erda reserve request shorter than its header");
  SLIP_RETURN_IF_ERROR(log::CheckSizes(key_len, r.value_len, limits));
  r.key = rd.Bytes(key_len);
  SLIP_RETURN_IF_ERROR(Finish(rd, "erda reserve request"));
  if (r.key.empty()) return Status::InvalidArgument("empty key");
  return r;
}

// ErdaReserveResponse: term u64 | version u64 | reservation u64 | area_offset u64 | write_within_ns u64
std::string Encode(const ErdaReserveResponse& r) {
  Writer w(40);
  w.Put<uint64_t>(r.term);
  w.Put<uint64_t>(r.version);
  w.Put<uint64_t>(r.reservation);
  w.Put<uint64_t>(r.area_offset);
  w.Put<uint64_t>(r.write_within_ns);
  return w.Take();
}

Result<ErdaReserveResponse> DecodeErdaReserveResponse(std::span<const std::byte> buf) {
  Reader rd(buf);
  ErdaReserveResponse r;
  r.term = rd.Get<uint64_t>();
  r.version = rd.Get<uint64_t>();
  r.reservation = rd.Get<uint64_t>();
  r.area_offset = rd.Get<uint64_t>();
  r.write_within_ns = rd.Get<uint64_t>();
  SLIP_RETURN_IF_ERROR(Finish(rd, "erda reserve response"));
  if (r.version == 0 || r.version > log::kMaxVersion) return Status::Corruption("erda reserve response: version out of range");
  if (r.area_offset % log::kAlign != 0) return Status::Corruption("erda reserve response: misaligned place");
  return r;
}

// ErdaCommitRequest: term u64 | shard u32 | reservation u64 | key_len u32 | key
std::string Encode(const ErdaCommitRequest& r) {
  Writer w(24 + r.key.size());
  w.Put<uint64_t>(r.term);
  w.Put<uint32_t>(r.shard);
  w.Put<uint64_t>(r.reservation);
  w.Put<uint32_t>(static_cast<uint32_t>(r.key.size()));
  w.Bytes(r.key);
  return w.Take();
}

Result<ErdaCommitRequest> DecodeErdaCommitRequest(std::span<const std::byte> buf, const log::Limits& limits) {
  Reader rd(buf);
  ErdaCommitRequest r;
  r.term = rd.Get<uint64_t>();
  r.shard = rd.Get<uint32_t>();
  r.reservation = rd.Get<uint64_t>();
  const uint32_t key_len = rd.Get<uint32_t>();
  if (!rd.ok()) return Status::Corruption("erda commit request shorter than its header");
  SLIP_RETURN_IF_ERROR(log::CheckSizes(key_len, 0, limits));
  r.key = rd.Bytes(key_len);
  SLIP_RETURN_IF_ERROR(Finish(rd, "erda commit request"));
  if (r.key.empty()) return Status::InvalidArgument("empty key");
  return r;
}

}  // namespace slip::proto
