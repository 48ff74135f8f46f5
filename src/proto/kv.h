// The KV service's messages: what clients and nodes say to each other inside
// RPC frames (rpc/frame.h carries the method, request id and status).
// Specification: docs/formats/kv_messages.md.
//
// Every request carries the sender's configuration term and the shard it
// believes the key belongs to, so a node can refuse a request routed with a
// stale map (StaleTerm) instead of acting on it. Every response carries the
// node's term, so the client knows whether to refresh its routing.
//
// Encoding: little-endian, fixed fields then variable bytes; lengths are
// checked against the buffer and the configured limits before anything is
// trusted. Decoded messages are views into the input buffer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "log/entry.h"

namespace slip::proto {

// Every process of a cluster (nodes and clients) agrees on the largest
// message: libfabric multi-receive buffers retire by it (OfiOptions), so it
// is a deployment-wide constant. A call or answer larger than one frame
// travels as fragments (docs/formats/wire.md "Fragments"), up to
// kMaxCallPayload: the store's largest value and key with room for the
// request's own fields (or a promotion page holding one such entry).
inline constexpr size_t kMaxMessage = 64 << 10;
inline constexpr size_t kMaxCallPayload = (16 << 20) + (128 << 10);

// RPC method ids. Persisted nowhere, but part of the wire: never renumber.
enum class Method : uint16_t {
  kPut = 1,
  kGet = 2,
  kDel = 3,
  kErdaGrant = 4,    // client -> primary: read a shard one-sidedly (erda)
  kErdaReserve = 5,  // client -> primary: a version and a place for an entry (erda)
  kErdaCommit = 6,   // client -> primary: the entry landed; replicate, publish (erda)
  kPutIf = 7,        // client -> primary: a PUT only if the key has a value (or has none)
  kReplicate = 16,  // primary -> backup (the rpc replication protocol)
  kShardTail = 17,  // new primary -> replica: entries above a version (promotion)
  kReplOpen = 18,   // primary -> backup: where to write entries one-sidedly
  kReplClose = 19,  // primary -> backup: that buffer is full
  kReplPersist = 20,  // primary -> backup: make what landed persistent (file-backed backups)
  // A primary's move (docs/papers/rowan.md §3.7), target -> source:
  // MIGRATE_BEGIN (ShardTailRequest; skip and min_version 0) is answered once
  // the source serves nothing of the shard any more: KvResponse with the
  // shard's version and, as value, its CommitVersion (EncodeCommitVersion).
  // MIGRATE_FETCH (KvRequest without value) is a GET the target did not
  // find yet: ShardTailResponse holding the source's entry of the key (a
  // tombstone too), or none.
  kMigrateBegin = 21,
  kMigrateFetch = 22,
  // MIGRATE_PUSH (ShardTailRequest: term, shard, skip): the source writes
  // the next page of the shard's entries into the target's PM one-sidedly
  // (its replicator, as to a backup) and answers once they landed:
  // ShardTailResponse with the cursor (walked, more) and no entries.
  // NotSupported from a source whose design replicates by RPC.
  kMigratePush = 23,
  kGetConfig = 32,  // anyone -> node: the node's current configuration
  kStats = 33,      // anyone -> node: per-role CPU time and counters (JSON)
  // DINOMO's pool (proto/pool.h)
  kPoolLayout = 48,    // KVS node -> pool: where the index and segments are
  kPoolAllocate = 49,  // KVS node -> pool: a segment for its log
  kPoolSeal = 50,      // KVS node -> pool: merge my segment up to here
  kPoolMergeAll = 51,  // anyone -> pool: merge a departed node's open segments
  // DINOMO's KVS nodes among themselves: answered once the node serves
  // nothing of a term before the one asked about (PoolNodeRequest: asker, term).
  kKnRelease = 52,
  // Clover's metadata server (the pool): a key's first version becomes its
  // chain head unless it has one (proto/pool.h, dinomo/clover.h).
  kCloverInsert = 53,
  // KVS node -> pool: make what landed in its segment durable (a pool whose
  // region is an ordinary file: one-sided writes reach only the page cache).
  kPoolPersist = 54,
  // KVS node -> pool: where the index is now (after it met a moved bucket).
  kPoolIndex = 55,
  // KVS node -> pool: make a key shared (its indirect cell), or no longer
  // (PoolKeyRequest; POOL_SHARE answers CloverHeadResponse: the cell).
  kPoolShare = 56,
  kPoolUnshare = 57,
  // KVS node -> pool: the keys shared now (PoolNodeRequest; PoolKeysResponse).
  kPoolShared = 58,
  // DINOMO-N: a KVS node -> pool: copy the newest entries of these shards'
  // keys from every other node's partition into mine (PoolAdoptRequest).
  kPoolAdopt = 59,
  // RubbleDB's chains (rubble/wire.h, server/rubble_server.h):
  kRubbleApply = 64,  // member -> its successor: a write or a version edit
  kRubbleLink = 65,   // head -> follower: where its slot image is (or: start over)
  kRubbleSeed = 66,   // head -> follower: part of its seed (version and MemTables)
  kRubbleSlots = 67,  // follower -> head: the slots it holds, up to an edit
};

const char* MethodName(uint16_t method);

// PUT / GET / DEL from a client to a shard's primary.
struct KvRequest {
  uint64_t term = 0;
  uint32_t shard = 0;
  std::string_view key;
  std::string_view value;  // PUT only; empty otherwise
};

// PUT_IF: a KvRequest written only if the key's committed state meets the
// condition; answered KvResponse with version 0 (nothing written) when not.
enum class PutCondition : uint8_t { kIfAbsent = 1, kIfPresent = 2 };
struct PutIfRequest {
  PutCondition condition = PutCondition::kIfAbsent;
  KvRequest kv;
};

// A primary's answer. For GET, the value; for PUT/DEL, the version assigned.
// The outcome (OK, NotFound, StaleTerm, ...) travels in the frame status.
struct KvResponse {
  uint64_t term = 0;
  uint64_t version = 0;
  std::string_view value;
};

// One log entry a primary replicates to a backup.
struct ReplicateRequest {
  uint64_t term = 0;
  log::EntryMeta meta;  // type kPut or kDel, shard, version
  std::string_view key;
  std::string_view value;  // empty for kDel
};

// Promotion and re-replication: "send me your entries of `shard` with
// version > min_version", `skip` entries into the walk (stable while the
// shard is blocked; a new backup applies concurrent writes by version).
struct ShardTailRequest {
  uint64_t term = 0;
  uint32_t shard = 0;
  uint64_t min_version = 0;
  uint64_t skip = 0;
};

struct TailEntry {
  log::EntryMeta meta;
  std::string_view key;
  std::string_view value;
};

// Up to a size budget of entries; `more` when the walk did not finish.
struct ShardTailResponse {
  uint64_t term = 0;
  uint64_t max_version = 0;  // the replica's shard version counter
  uint64_t walked = 0;       // entries walked (the next request's skip)
  bool more = false;
  std::vector<TailEntry> entries;
};

// The one-sided designs' control path (replication/backup_log.h). A primary
// asks each backup once for its replication endpoint and, for the designs
// that write at addresses they choose (rwrite, batch, share, tailwind), for
// a private buffer; it closes a buffer when the next entry does not fit.
enum class ReplBuffer : uint8_t {
  kNone = 0,     // rowan: Send into the backup's shared multi-receive log
  kPrivate = 1,  // a segment only this sender writes, at offsets it picks
};

struct ReplOpenRequest {
  uint64_t term = 0;
  uint32_t sender = 0;  // the primary's node id
  ReplBuffer buffer = ReplBuffer::kNone;
};

struct ReplOpenResponse {
  uint64_t term = 0;
  // The backup's registered PM (fabric::RemoteMemory's fields) and where in
  // it the buffer is; flush_offset is a byte the sender Reads after its
  // writes: the Read's completion means they are persistent.
  uint64_t mem_addr = 0, mem_key = 0, mem_len = 0;
  uint64_t flush_offset = 0;
  uint32_t buffer_id = 0;  // the segment, for CLOSE (kPrivate only)
  uint64_t buffer_offset = 0, buffer_len = 0;
  // The flush Read alone does not make landed bytes persistent here (PM in a
  // file on a real filesystem, which only msync makes durable): after the
  // Read the sender asks with REPL_PERSIST, and acknowledges on its answer.
  bool persist_by_request = false;
  // Names the backup process that answered: REPL_PERSIST carries it, and a
  // restarted backup (whose page cache lost what the old one received)
  // refuses a request meant for its predecessor.
  uint64_t incarnation = 0;
  // A shared receive log (kNone): the token every message must start with
  // (replication/seal.h); 0 for private buffers.
  uint64_t send_token = 0;
  std::string_view address;  // the backup's replication endpoint
};

// REPL_PERSIST: the incarnation (ReplOpenResponse) the sender wrote to.
struct ReplPersistRequest {
  uint64_t incarnation = 0;
};

struct ReplCloseRequest {
  uint64_t term = 0;
  uint32_t sender = 0;
  uint32_t buffer_id = 0;
  uint64_t used = 0;  // bytes written from the buffer's start
};

// The erda design's direct access (docs/papers/erda.md §6): clients read a
// primary's index words and entries one-sidedly and write entries into
// places it reserved. Errors travel as a KvResponse, as for PUT and GET.

// ERDA_GRANT: may the client read `shard` one-sidedly, and where.
struct ErdaGrantRequest {
  uint64_t term = 0;
  uint32_t shard = 0;
};

struct ErdaGrantResponse {
  uint64_t term = 0;
  // One-sided reads of the shard are valid until this long after the
  // client *sent* the request (the node's lease bounds it: a node that
  // may have been replaced must not be read).
  uint64_t grant_ns = 0;
  // A GET whose READs took longer than this must ask the server instead:
  // the entry it found may sit in a segment freed and reused meanwhile.
  uint64_t max_read_ns = 0;
  // The node's data area (fabric::RemoteMemory's fields), and the store
  // region offset of its byte 0 (index words count from the region's start).
  uint64_t area_addr = 0, area_key = 0, area_len = 0;
  uint64_t area_offset = 0;
  // The bucket table (all 0 where clients do not read one-sidedly).
  uint64_t table_addr = 0, table_key = 0, table_len = 0;
  uint32_t num_buckets = 0;
  // The largest entry (one log block) a client may write one-sidedly.
  uint32_t max_entry_bytes = 0;
  std::string_view address;  // the node's one-sided endpoint
};

// ERDA_RESERVE: a version and a place for one PUT entry of `key`.
struct ErdaReserveRequest {
  uint64_t term = 0;
  uint32_t shard = 0;
  uint32_t value_len = 0;
  std::string_view key;
};

struct ErdaReserveResponse {
  uint64_t term = 0;
  uint64_t version = 0;      // goes into the entry's header
  uint64_t reservation = 0;  // names it in ERDA_COMMIT
  uint64_t area_offset = 0;  // where to write the entry, in the data area
  // The client must have posted its write within this long after it sent
  // the reservation, or not write at all (the place is then reclaimed).
  uint64_t write_within_ns = 0;
};

// ERDA_COMMIT: the entry reserved for `key` landed. Answered by a
// KvResponse with the version once it is replicated and published.
struct ErdaCommitRequest {
  uint64_t term = 0;
  uint32_t shard = 0;
  uint64_t reservation = 0;
  std::string_view key;
};

std::string Encode(const ErdaGrantRequest& r);
std::string Encode(const ErdaGrantResponse& r);
std::string Encode(const ErdaReserveRequest& r);
std::string Encode(const ErdaReserveResponse& r);
std::string Encode(const ErdaCommitRequest& r);
Result<ErdaGrantRequest> DecodeErdaGrantRequest(std::span<const std::byte> buf);
Result<ErdaGrantResponse> DecodeErdaGrantResponse(std::span<const std::byte> buf);
Result<ErdaReserveRequest> DecodeErdaReserveRequest(std::span<const std::byte> buf, const log::Limits& limits);
Result<ErdaReserveResponse> DecodeErdaReserveResponse(std::span<const std::byte> buf);
Result<ErdaCommitRequest> DecodeErdaCommitRequest(std::span<const std::byte> buf, const log::Limits& limits);

std::string Encode(const KvRequest& r);
std::string Encode(const PutIfRequest& r);
std::string Encode(const KvResponse& r);
std::string Encode(const ReplicateRequest& r);
std::string Encode(const ShardTailRequest& r);
std::string Encode(const ShardTailResponse& r);

std::string Encode(const ReplOpenRequest& r);
std::string Encode(const ReplOpenResponse& r);
std::string Encode(const ReplCloseRequest& r);
std::string Encode(const ReplPersistRequest& r);

// Corruption for a malformed buffer (short, trailing bytes, bad lengths or
// type); TooLarge for a key or value over `limits`. Never reads past buf.
Result<KvRequest> DecodeKvRequest(std::span<const std::byte> buf, const log::Limits& limits);
Result<PutIfRequest> DecodePutIfRequest(std::span<const std::byte> buf, const log::Limits& limits);
Result<KvResponse> DecodeKvResponse(std::span<const std::byte> buf, const log::Limits& limits);
Result<ReplicateRequest> DecodeReplicateRequest(std::span<const std::byte> buf,
                                                const log::Limits& limits);
Result<ShardTailRequest> DecodeShardTailRequest(std::span<const std::byte> buf);
Result<ReplOpenRequest> DecodeReplOpenRequest(std::span<const std::byte> buf);
Result<ReplOpenResponse> DecodeReplOpenResponse(std::span<const std::byte> buf);
Result<ReplPersistRequest> DecodeReplPersistRequest(std::span<const std::byte> buf);
Result<ReplCloseRequest> DecodeReplCloseRequest(std::span<const std::byte> buf);
Result<ShardTailResponse> DecodeShardTailResponse(std::span<const std::byte> buf,
                                                  const log::Limits& limits);

inline std::span<const std::byte> AsBytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace slip::proto
