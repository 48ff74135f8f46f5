// ClusterConfig: the cluster configuration of docs/papers/rowan.md §3.6–3.8 as a
// value — term, membership, shard map, migration list — plus the pure
// functions the configuration manager (CM) computes new configurations with.
// Nothing here does I/O or reads a clock; ConfigStore (config_store.h)
// persists configurations. Format: docs/formats/cluster_config.md.
//
// Sharding: shard s of N owns the 64-bit key hashes
//   [RangeStart(s, N), RangeStart(s + 1, N)),  RangeStart(s, N) = ceil(s * 2^64 / N),
// i.e. ShardOf(h) = floor(h * N / 2^64), exactly as Store::ShardOf and
// RoutingTable::ShardOf compute it. Never change this mapping for data at rest.
//
// Invariants of a valid configuration (Validate() checks all of them):
//   - at least one shard, 1 <= replication_factor <= number of members;
//   - syncing backups are distinct backups of their shard;
//   - every shard has 1..replication_factor distinct replicas (primary first,
//     then ordered backups), all members; fewer than replication_factor means
//     the shard is under-replicated (no spare live node after a failure);
//   - a replica on a down node occurs only as a shard's *sole* replica: the
//     shard's last copy is on that node and it is unavailable until the node
//     returns (Reassign never discards the last copy of a shard);
//   - a leaving node holds no replica, and only UsesPool designs have one;
//   - a UsesPool design's node ids are at most kMaxPoolNodeId;
//   - a node's worker entries, if any, are at most kMaxWorkerEntries, none
//     empty, the first its address;
//   - a migration names an existing shard and up members, at most one per
//     shard. A primary's move: `to` is the primary and `from` holds no
//     replica (the map shows the shard where it is going). A backup's move:
//     `to` is a syncing backup and `from` a complete backup, which stays
//     until `to` is seeded (the shard then has one replica more than the
//     replication factor).
//
// Value type: copy freely; not synchronised.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/hash.h"
#include "common/status.h"

namespace slip::cluster {

using NodeId = uint32_t;   // same as replication::NodeId
using ShardId = uint32_t;

// Stored by name in the JSON format; the numbers are not persisted.
// kLeaving: a node of a UsesPool design being removed (RemoveOwner): alive,
// owns nothing, and leaves the membership once it has let go of everything
// it served (docs/papers/dinomo.md §5b).
enum class NodeState : uint8_t { kUp, kDown, kLeaving };

struct NodeInfo {
  std::string address;  // how to reach the node, e.g. "10.0.0.7:7100" (opaque here)
  NodeState state = NodeState::kUp;
  // The entry of each of the node's request workers, in worker order (the
  // first is `address`): a write about shard s goes to
  // workers[WorkerOfShard(s, num_shards, size)], a range of shards each,
  // a GET to each entry in turn (server/worker_pool.h). Empty: every
  // request goes to `address`.
  std::vector<std::string> workers;
  // Where requests enter, in worker order (rpc::RpcPeers::SetEntries).
  std::vector<std::string> Entries() const { return workers.empty() ? std::vector<std::string>{address} : workers; }
  bool operator==(const NodeInfo&) const = default;
};

struct ShardReplicas {
  NodeId primary = 0;
  std::vector<NodeId> backups;  // ordered: the first one not syncing is promoted
  // Backups still being seeded with the shard (a subset of `backups`, as
  // server::ShardReplicas::syncing): they receive every new write but lack
  // older entries, so they are never promoted. MarkSynced clears them.
  std::vector<NodeId> syncing;
  bool operator==(const ShardReplicas&) const = default;
};

// A shard moving from one node to another (docs/papers/rowan.md §3.7).
enum class MigrationState : uint8_t {
  kPending,  // configuration published; the target has not got the source's version yet
  kCopying,  // the target serves the shard and receives the source's entries
  kDone,     // every entry copied; the CM still has to tell `from` to free the shard
};

struct Migration {
  ShardId shard = 0;
  NodeId from = 0;
  NodeId to = 0;
  MigrationState state = MigrationState::kPending;
  bool operator==(const Migration&) const = default;
};

struct ClusterConfig {
  uint64_t term = 0;  // rises with every change; requests carry it (fencing)
  uint32_t replication_factor = 1;  // target replicas per shard, primary included
  // How primaries replicate (replication/design.h names): every node of a
  // cluster must run the same one, so it lives here, fixed at creation.
  std::string design = "rpc-kv";
  // The libfabric provider every process of the cluster talks over (tcp,
  // shm, verbs): node addresses are in its format, so clients and nodes
  // take it from here. Fixed at creation.
  std::string provider = "tcp";
  // The durability class of the nodes' PM (PmClassName): dram (PM emulated
  // in memory: survives process crashes), dax (real PM, cache-line flushes)
  // or file (survives power loss: msync on every replica). Empty in
  // configurations written before it was recorded: nodes infer it from
  // where their PM files live. Fixed at creation.
  std::string pm;
  // Designs whose data lives in a shared pool (UsesPool: dinomo): the pool
  // process's fabric address, hex-encoded; empty until it has published
  // one, and always for the other designs.
  std::string pool;
  // UsesPool designs: hot keys shared through the pool's indirect cells
  // (selective replication, docs/papers/dinomo.md §4d) — key to its
  // secondary owners, up members serving it besides its shard's owner. A
  // key listed here stays shared when its last secondary fails (it is
  // dropped from the list); leaving the list de-replicates it.
  std::map<std::string, std::vector<NodeId>> shared;
  std::map<NodeId, NodeInfo> nodes;  // membership, ordered by id
  std::vector<ShardReplicas> shards;  // index = shard id
  std::vector<Migration> migrations;

  uint32_t num_shards() const { return static_cast<uint32_t>(shards.size()); }
  // REQUIRES: num_shards() > 0.
  ShardId ShardOf(uint64_t hash) const;
  // Primary first, then the backups in promotion order. REQUIRES: shard < num_shards().
  std::vector<NodeId> Replicas(ShardId shard) const;
  // Shards per node as primary and as backup (nodes holding none included).
  std::map<NodeId, uint32_t> PrimaryCounts() const;
  std::map<NodeId, uint32_t> BackupCounts() const;

  // OK, or InvalidArgument naming the first broken invariant (see above).
  Status Validate() const;

  bool operator==(const ClusterConfig&) const = default;
};

// First hash of `shard`'s range; RangeStart(N, N) is 2^64 and so not
// representable — the last shard ends at the top of the hash space.
// REQUIRES: num_shards > 0, shard < num_shards.
uint64_t RangeStart(ShardId shard, uint32_t num_shards);

// The initial configuration (term 1) for `nodes` (all taken as up), `num_shards`
// shards with `rf` replicas each. Deterministic: the same input gives the same
// map on every machine. Primaries go round-robin over the nodes in id order.
// In each full round of `n` shards, backup j of primary p is p + offset_j
// (mod n) with the same distinct non-zero offsets for every p, the first
// offset advancing each round: every node gets one primary and rf-1 backups
// per round, and a node's primaries have each other node as first backup in
// turn, so its failure spreads promotions instead of piling them on one
// neighbour. A partial last round is filled greedily (fewest replicas, then
// rarest first-backup pairing). With num_shards >= nodes and rf >= 2 every
// node is primary for some shards and backup for others; per-node primary
// and replica counts differ by at most one (tested for 3..8 nodes, rf 1..3,
// 1..100 shards).
// InvalidArgument if there are no nodes, an address is empty, num_shards is
// 0, or rf is 0 or above the number of nodes.
Result<ClusterConfig> Place(const std::map<NodeId, std::string>& nodes, uint32_t num_shards,
                            uint32_t rf);

// The configuration that follows `config` when node `failed` is declared dead
// (docs/papers/rowan.md §3.6 step 1): term + 1, `failed` marked down, and
//   - a migration involving `failed` is removed; a primary's move is rolled
//     back first (`from` primary again) unless it is done — then failover
//     proceeds as usual (of a backup's move, the survivor stays);
//   - where `failed` was primary, the first backup that is not syncing (all
//     backups are live in a valid config) becomes primary; the remaining
//     backups keep their order;
//   - every shard that lost a replica gets a replacement backup, appended
//     last and listed as syncing: the live node holding the fewest replicas
//     (then fewest primaries, then lowest id) that is not already a replica of
//     the shard. With no such node the shard stays under-replicated;
//   - a shard with no complete copy left but `failed` (its only replica, or
//     only syncing backups besides) keeps `failed` as sole replica (the data
//     is there; the incomplete backups are dropped) and is unavailable until
//     the node returns.
// InvalidArgument if `config` is invalid or `failed` is not an up member.
Result<ClusterConfig> Reassign(const ClusterConfig& config, NodeId failed);

// Whether `design` keeps its data in a shared pool rather than on its nodes
// (dinomo; dinomo-s, the same with shortcut-only caches; clover; docs/papers/
// dinomo.md): a shard's "primary" is then the node that owns its keys, it has no backups (replication_factor 1), and a
// failed owner's shards move to live nodes with no data copied.
bool UsesPool(std::string_view design);
// Whether `design` replicates each shard in a chain of LSM engines
// (rubble, and its baseline rubble-all-compact: RubbleDB, docs/papers/
// rubbledb.md): the primary is the chain's
// head and takes writes, the backups follow in order — syncing ones last —
// and the last backup not syncing answers reads.
bool UsesChain(std::string_view design);
// The reader of a chain design's shard: its last backup not syncing (the
// primary when there is none).
NodeId ChainTail(const ShardReplicas& shard);

// A chain design's node `node` starts again with what it had on disk
// (it was not declared failed): term + 1, and every replica that has to
// be seeded again is syncing — its own follower replicas (a follower keeps
// its MemTables in memory only), moved behind the complete backups, and
// every backup of the shards it heads (a restarted head recovers its
// writes into new tables and MemTables, which its followers' no longer
// match). InvalidArgument if `config` is invalid or `node` is not an up member.
Result<ClusterConfig> Resync(const ClusterConfig& config, NodeId node);

// Whether any up node serves any key in `design` (clover): shards' owners
// are then only placement, and clients pick a node at random.
bool AnyNodeServes(std::string_view design);
// The largest node id a pool design takes: the pool keeps a token per node
// id (dinomo::Pool::kMaxNodes) and log entries name their writer in 16 bits.
inline constexpr NodeId kMaxPoolNodeId = 499;
// The most request workers a node advertises entries for (a sanity bound:
// every client connects to each).
inline constexpr size_t kMaxWorkerEntries = 256;

// Reassign for UsesPool designs: term + 1, `failed` down, and each shard it
// owned given to the live node owning the fewest shards (then lowest id).
// With no live node left a shard stays with `failed` (stranded) until it
// returns (ReturnWithData). InvalidArgument as Reassign.
Result<ClusterConfig> ReassignOwners(const ClusterConfig& config, NodeId failed);

// The rebalancing of a UsesPool design (docs/papers/dinomo.md §5b): term + 1
// with the fewest shards moved so that every node of `live` (up members the
// caller knows to be alive) owns as many as any other, give or take one, and
// leaving nodes own none. Shards of up nodes outside `live` (booting, or
// dead but not yet declared so) stay where they are. nullopt when nothing
// has to move (also when `live` holds no up member).
std::optional<ClusterConfig> BalanceOwners(const ClusterConfig& config, const std::set<NodeId>& live);

// `node` joins a UsesPool design's cluster at `address`: term + 1, a new up
// member owning nothing (BalanceOwners gives it shards). InvalidArgument if
// it is a member already, or the design keeps no pool.
Result<ClusterConfig> JoinOwner(const ClusterConfig& config, NodeId node, const std::string& address);

// Up member `node` of a UsesPool design is to leave: term + 1, `node`
// leaving, its shards spread over the other up members by BalanceOwners.
// InvalidArgument if it is not an up member or no other up member is left
// to take its shards.
Result<ClusterConfig> RemoveOwner(const ClusterConfig& config, NodeId node);

// A leaving `node` that has let go of everything is dropped from the
// membership: term + 1. InvalidArgument unless it is leaving.
Result<ClusterConfig> DropLeaving(const ClusterConfig& config, NodeId node);
// The longest key that may be shared: a KV key's limit (log::Limits).
inline constexpr size_t kMaxSharedKeyBytes = 64 * 1024;
// `config` (a UsesPool design) with `key` shared by its shard's owner and
// `secondaries` (up members), term + 1; replaces an earlier list of the key.
Result<ClusterConfig> ShareKey(const ClusterConfig& config, const std::string& key, std::vector<NodeId> secondaries);
// `config` with `key` no longer shared, term + 1. InvalidArgument if it is not.
Result<ClusterConfig> UnshareKey(const ClusterConfig& config, const std::string& key);
// Whether `node` serves `key` in `config` besides the key's shard's owner.
bool SharesKey(const ClusterConfig& config, const std::string& key, NodeId node);

// The configuration after `backup` finished being seeded with `shard`
// (its primary reported so): term + 1, `backup` no longer syncing; when it
// was the target of a backup's move, the source leaves the replica set and
// the migration ends.
// InvalidArgument if `config` is invalid or `backup` is not a syncing backup
// of `shard`.
Result<ClusterConfig> MarkSynced(const ClusterConfig& config, ShardId shard, NodeId backup);

// Whether `design` moves shards between live nodes by copying them
// (StartMigration): the sharded primary-backup designs, erda's included
// (a target grants no one-sided reads of a shard until its copy is done;
// a source hands over once its grants ran out). Not the pool designs
// (their owners move without copying) nor the chains (rubble).
bool MovesShards(std::string_view design);

// Whether `m` moves its shard's primary (else one of its backups).
bool MovesPrimary(const ClusterConfig& config, const Migration& m);

// The target of a primary's move holds every entry the source had: term +
// 1, the migration removed (the source then frees the shard). A backup's
// move ends in MarkSynced instead. InvalidArgument if there is no such move.
Result<ClusterConfig> FinishMigration(const ClusterConfig& config, ShardId shard, NodeId to);

// The configuration after down node `node` returns EMPTY (its store wiped:
// a node evicted or restarted rejoins without data, since its entries may
// predate deletes whose tombstones are gone elsewhere): term + 1, the node
// up, and every under-replicated shard topped up with syncing backups as in
// Reassign. InvalidArgument if `node` is not a down member, or held a
// stranded shard's last copy (that copy is gone with the wipe).
Result<ClusterConfig> Rejoin(const ClusterConfig& config, NodeId node);

// The configuration after down node `node` returns WITH its data because it
// holds a stranded shard's last copy (Reassign kept the shard on it): term +
// 1, the node up, and every under-replicated shard — its stranded ones
// first of all — topped up with syncing backups as in Reassign. Without the
// top-up a stranded shard stayed without backups even with live nodes to
// spare. InvalidArgument if `node` is not a down member or is primary of no
// shard (a node without a last copy must Rejoin empty).
Result<ClusterConfig> ReturnWithData(const ClusterConfig& config, NodeId node);

// JSON (docs/formats/cluster_config.md), with a format version. Encode
// requires nothing of the config; Decode accepts only well-formed, *valid*
// configurations of a known format version and reports anything else as
// Corruption (NotSupported for an unknown format version). Never throws.
std::string EncodeJson(const ClusterConfig& config);
Result<ClusterConfig> DecodeJson(std::string_view text);

// The newest format this build reads and writes. Version 2 added
// nodes[].workers; a document without worker entries is still written as
// version 1, which every earlier build reads.
inline constexpr uint32_t kConfigFormatVersion = 2;

std::string_view NodeStateName(NodeState s);
std::string_view MigrationStateName(MigrationState s);

}  // namespace slip::cluster
