// The LSM engine (issue "RubbleDB"; docs/lsm.md): writes go to a WAL and a
// MemTable; a full MemTable is sealed and flushed to an SST at level 0;
// leveled compactions merge a level's files into the next, one version edit
// each, logged in the MANIFEST. Reads look at the MemTables, then level 0
// newest first, then one file per deeper level.
//
// Threads: any number of callers. Writers share WAL syncs (group commit:
// the writer at the head of the queue writes everyone's batch and syncs
// once). Reads take no lock but a pointer copy. Flushes and compactions run
// on two background threads — or, with `background = false`, in the writer
// that needs them, which makes a run deterministic (tests drive the engine
// through every failure point that way).
//
// Failures: an I/O error in the WAL, a flush or a compaction stops all
// further writes with that error (reads go on); reopening recovers every
// write whose Write returned OK with `sync` (and what the crash spared of
// the rest, in order — never a later write without an earlier one).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "lsm/cache.h"
#include "lsm/file_system.h"
#include "lsm/memtable.h"
#include "lsm/merge.h"
#include "lsm/table.h"
#include "lsm/version.h"
#include "lsm/wal.h"

namespace slip::lsm {

struct DbOptions {
  // Files go through `fs` when set (a MemFileSystem in tests), else through
  // a POSIX file system over `dir`.
  FileSystem* fs = nullptr;
  bool direct_io = true;  // tables, on a POSIX file system that allows it

  size_t memtable_bytes = 4 << 20;  // seal a MemTable at this size
  int max_immutables = 1;           // sealed MemTables waiting for flush before writes wait
  uint64_t target_file_bytes = 4 << 20;
  int l0_compaction_trigger = 4;  // files at level 0
  int l0_slowdown = 8;            // each write waits 1 ms from here
  int l0_stop = 12;               // writes wait for compaction from here
  uint64_t level1_bytes = 16 << 20;
  int level_multiplier = 10;
  int levels = 5;  // 2 .. kLevels

  TableOptions table;                 // block size, restart interval, Bloom bits (its cache is set by the Db)
  size_t block_cache_bytes = 64 << 20;

  bool wal = true;
  bool background = true;

  // RubbleDB (docs/lsm.md "Replication"). A chain's head is an ordinary
  // engine with two hooks; the replicas behind it are followers.
  //
  // Head: for each edit that adds tables, once they are written and synced
  // and before the edit is logged: ship them and set each added file's slot.
  // `contents[i]` is added file i's bytes (empty for a table moved down a
  // level: it keeps its slot). An error fails the job (and stops writes) —
  // except Busy in an engine without background threads (the simulator
  // runs engines so, and their hooks never wait): the job is put off, its
  // tables dropped, and the next seal, Flush or WaitForIdle tries again.
  using ShipTables = std::function<Status(VersionEdit* edit, const std::vector<std::string_view>& contents)>;
  ShipTables ship_tables;
  // Head: each edit once logged and installed, in id order.
  using EditLogged = std::function<void(const VersionEdit&)>;
  EditLogged edit_logged;
  // Follower: never flushes or compacts; takes writes by ApplyReplicated
  // and versions by InstallEdit, after Seed. With `wal`, it logs what it
  // applies, per MemTable (NNNNNN.rlog, synced before each call returns,
  // removed with the MemTable): a replica that was a follower recovers
  // them when it opens as a head. `adopt_table`
  // makes an added table openable through `fs` before it is opened (maps
  // its number to the slot the head shipped it into).
  bool follower = false;
  std::function<Status(const FileMeta&)> adopt_table;
};

struct WriteOptions {
  bool sync = true;  // the WAL is synced before Write returns
  // The batch keeps its sequence, which must be the next one (a replica
  // of an all-compact chain writes at its head's sequences, so a write
  // resent to it is recognised, and it can take over as head). Else
  // InvalidArgument, and nothing is written.
  bool given_sequence = false;
};

// Where the head put a batch: what a follower needs to put it in the same
// place — the same sequences in the same MemTable.
struct WriteTicket {
  uint64_t sequence = 0;        // the batch's first op's
  uint64_t memtable = 0;        // the MemTable it went into
  uint64_t memtable_first = 0;  // that MemTable's first sequence
};

// What a follower's call made take effect, in order: the writes now
// readable (their first sequences) and the edits applied (their ids). Only
// these may be passed down the chain (or, at the tail, acknowledged): a
// write or edit held for later is not, so a successor never has what its
// predecessor might drop.
struct Applied {
  std::vector<uint64_t> writes, edits;
};

// What a follower starts from: the head's version, its MemTables' ids and
// first sequences and their writes up to `last_sequence`. Writes after it
// and edits after the version's follow.
struct FollowerSeed {
  VersionEdit version;  // a snapshot edit
  struct Mem {
    uint64_t id = 0, first_sequence = 0;
    std::vector<std::pair<uint64_t, WriteBatch::Op>> entries;  // (sequence, op)
  };
  std::vector<Mem> mems;  // oldest first; the last is the active one
  uint64_t last_sequence = 0;
};

class Db {
 public:
  // Opens (creating if missing) the database in `dir`: replays the
  // MANIFEST, then the WALs it does not cover into level 0, and removes
  // files no version names. Corruption when the MANIFEST is damaged before
  // its end (a torn last edit is the crash's and is dropped).
  static Result<std::unique_ptr<Db>> Open(const std::string& dir, const DbOptions& options);
  // Waits for the background jobs running to end (queued ones are dropped:
  // their data is in the WAL).
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  Status Put(std::string_view key, std::string_view value, const WriteOptions& o = {});
  Status Delete(std::string_view key, const WriteOptions& o = {});
  // All of `batch` or none of it (its sequence is assigned here; `ticket`
  // says where it went).
  Status Write(WriteBatch batch, const WriteOptions& o = {}, WriteTicket* ticket = nullptr);

  // Head: what a new follower starts from (consistent: every write up to
  // its last_sequence and every edit up to its version's).
  Result<FollowerSeed> SeedFollower();
  // Follower: starts from the head's seed. Once only.
  Status Seed(const FollowerSeed& seed);
  // Follower: applies a batch the head wrote (its sequence set) in the
  // MemTable the ticket names, or holds it until that MemTable is the
  // active one. A MemTable is sealed once it holds every sequence below the
  // next one's first (which the first write of the next one tells).
  // `applied` gets what this call made take effect (this write, held ones
  // it released, held edits that could then apply). A write it has already
  // (resent after a failure) is reported again and changes nothing.
  // `sync` false: its replica log is left for SyncLogs() (one sync for
  // many calls; nothing it applied may be passed on before that).
  Status ApplyReplicated(WriteBatch batch, const WriteTicket& ticket, Applied* applied = nullptr, bool sync = true);
  // Follower: applies `edit` once every edit before it is applied and — a
  // flush's — once the MemTable it holds is sealed here (then drops that
  // MemTable unflushed); holds it until then. An edit applied already
  // changes nothing (and is reported applied again).
  Status InstallEdit(VersionEdit edit, Applied* applied = nullptr, bool sync = true);
  // Makes every write taken so far durable: a head's WAL (writes made with
  // WriteOptions::sync false), a follower's replica log (calls made with
  // `sync` false).
  Status SyncLogs();
  // Follower: becomes the chain's head (its head failed): drops what it
  // holds (never readable, so never acknowledged), flushes its MemTables
  // into tables of its own (through `fs`, which must take them now) and
  // ships them with `ship`, then takes writes, flushes and compacts. Busy
  // (an engine without background threads whose `ship` put the flush off):
  // promoted, but the MemTables it had are still to be flushed — Flush()
  // until it succeeds before anything is acknowledged as written here.
  using ShipTables = DbOptions::ShipTables;
  using EditLogged = DbOptions::EditLogged;
  Status Promote(ShipTables ship, EditLogged logged);

  // NotFound when the key has no value.
  Result<std::string> Get(std::string_view key);
  // Up to `count` entries with key >= `start`, in key order, at one point
  // in time.
  Status Scan(std::string_view start, size_t count, std::vector<std::pair<std::string, std::string>>* out);

  // Seals the MemTable (if it holds anything) and waits until every sealed
  // one is in a table.
  Status Flush();
  // Waits until no flush or compaction is due.
  Status WaitForIdle();
  // Flushes, then merges each level whole into the next, down to the last:
  // every key's older versions and deleted keys are gone after it.
  Status CompactAll();

  struct Stats {
    uint64_t writes = 0, write_groups = 0, wal_bytes = 0;
    uint64_t flushes = 0, compactions = 0, trivial_moves = 0;
    uint64_t flush_bytes = 0;                                  // table bytes flushes wrote
    uint64_t compaction_read_bytes = 0, compaction_write_bytes = 0;  // table bytes compactions read, wrote
    uint64_t flush_cpu_ns = 0, compaction_cpu_ns = 0;  // CPU of the threads running the jobs, during them
    uint64_t stall_us = 0;                              // writers waiting for a flush or compaction
    uint64_t files[kLevels] = {};
    uint64_t level_bytes[kLevels] = {};
    uint64_t cache_hits = 0, cache_misses = 0;
    uint64_t last_sequence = 0;
    bool direct_io = false;
    uint64_t held_writes = 0, held_edits = 0;  // follower: waiting for their turn
    uint64_t memtable = 0;                     // the active MemTable's id
  };
  Stats stats() const;
  // The current version (files per level, edits applied): tests compare it.
  Version version() const;

 private:
  struct TableFile;
  struct Levels;
  struct Mem;
  struct View;
  struct Writer;
  struct Compaction;

  Db(std::string dir, const DbOptions& options, std::unique_ptr<FileSystem> owned_fs);
  Status Recover();
  Status StartFollower();
  Status ReplayWals(const std::vector<uint64_t>& replica_logs, const std::vector<uint64_t>& wals);
  std::string ReplicaLogPath(uint64_t mem_id) const;
  // Follower (with a WAL): appends what it applies to the log of the
  // MemTable it went into; synced before ApplyReplicated, InstallEdit or
  // Seed return. A flush's edit removes the logs of the MemTables it drops.
  Status LogApplied(uint64_t mem_id, const WriteBatch& batch);
  Status SyncReplicaLog();
  void RemoveReplicaLogs(uint64_t through_mem_id);
  Status ApplyHeldAndSync(std::unique_lock<std::mutex>& l, Applied* applied, bool sync);

  Status Flush(std::unique_lock<std::mutex>& l);
  Status MakeRoomForWrite(std::unique_lock<std::mutex>& l, bool force);
  Status SealMemTable(std::unique_lock<std::mutex>& l);
  // The jobs: called with `l` held; they drop it while they work.
  Status FlushOldest(std::unique_lock<std::mutex>& l);
  Status CompactOnce(std::unique_lock<std::mutex>& l, bool* did);
  void BackgroundLoop(bool flusher);
  // Runs due work in the calling thread (background = false).
  Status RunDueWork(std::unique_lock<std::mutex>& l);

  std::optional<Compaction> PickCompaction() const;
  std::optional<Compaction> WholeLevel(int level) const;
  // The next level's files overlapping the inputs, and whether any deeper
  // file does.
  void AddOverlaps(Compaction* c) const;
  Status RunCompaction(std::unique_lock<std::mutex>& l, const Compaction& c);
  // Writes sorted entries as tables of about target_file_bytes, never
  // splitting one user key's versions over two.
  // With `contents`, also each table's bytes (a head ships them from memory).
  Status WriteTables(const std::vector<EntrySource*>& sources, const CompactionOptions& co, std::vector<FileMeta>* out,
                     std::vector<std::string>* contents = nullptr);
  Result<std::shared_ptr<TableFile>> OpenTable(const FileMeta& meta);
  // A job's new tables, opened (each with its shipping copy from `contents`).
  Status OpenOutputs(const std::vector<FileMeta>& out, std::vector<std::string>* contents,
                     std::vector<std::shared_ptr<TableFile>>* added);
  // Logs `edit` (its id assigned here) and installs the version with
  // `files` added. Called with `l` held; drops it while the MANIFEST syncs.
  // A follower's edit keeps the head's id and fields (`as_given`).
  Status LogAndApply(std::unique_lock<std::mutex>& l, VersionEdit edit,
                     std::vector<std::shared_ptr<TableFile>> added, bool as_given = false);
  // Follower: applies what is held while its turn has come.
  Status ApplyHeld(std::unique_lock<std::mutex>& l, Applied* applied = nullptr);
  void AddToMem(Mem* mem, const WriteBatch& b);
  void MarkApplied(uint64_t sequence, uint64_t ops);  // REQUIRES: mu_ held
  Status NewManifest(const Version& base);
  void InstallView();  // REQUIRES: mu_ held
  std::shared_ptr<const View> CurrentView() const;
  bool CompactionDue() const;  // REQUIRES: mu_ held
  uint64_t MaxBytes(int level) const;
  std::string TablePath(uint64_t number) const;
  std::string WalPath(uint64_t number) const;
  void RemoveObsoleteFiles();

  const std::string dir_;
  const DbOptions options_;
  std::unique_ptr<FileSystem> owned_fs_;
  FileSystem* const fs_;
  std::unique_ptr<BlockCache> cache_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // background threads wait for work
  std::condition_variable done_cv_;  // writers and waiters wait for a job to end
  std::deque<Writer*> writers_;
  std::shared_ptr<Mem> mem_;
  std::deque<std::shared_ptr<Mem>> imm_;  // sealed, oldest first
  std::unique_ptr<WritableFile> wal_;
  Version version_;
  std::shared_ptr<const Levels> levels_;  // the open tables of version_
  std::shared_ptr<const View> view_;
  std::unique_ptr<WritableFile> manifest_;
  uint64_t manifest_number_ = 0;
  uint64_t next_file_ = 2;
  uint64_t next_mem_id_ = 1;
  std::string compact_pointer_[kLevels];  // where each level's next compaction starts
  std::mutex edit_mu_;                    // one edit logged at a time
  std::atomic<uint64_t> last_sequence_{0};  // the newest write readers see
  Status bg_error_;
  bool flushing_ = false, compacting_ = false, manual_ = false, shutting_down_ = false;
  Stats stats_;
  std::vector<std::thread> threads_;
  // Follower: writes of MemTables after the active one, the first sequence
  // of each MemTable it has heard of, edits ahead of their turn.
  std::map<uint64_t, std::vector<WriteBatch>> held_writes_;
  std::map<uint64_t, uint64_t> memtable_first_;
  bool wal_unsynced_ = false;  // the current WAL holds writes made without a sync
  std::unique_ptr<WritableFile> replica_log_;  // the active MemTable's
  uint64_t replica_log_mem_ = 0;
  bool replica_log_dirty_ = false;
  std::set<uint64_t> replica_logs_;  // MemTables with a replica log
  std::map<uint64_t, VersionEdit> held_edits_;
  std::set<uint64_t> held_sequences_;  // the first sequences of held_writes_' batches
  // Follower: every sequence up to applied_through_ is applied, and the
  // batches (first sequence -> ops) applied beyond it: a resent write is
  // recognised.
  uint64_t applied_through_ = 0;
  std::map<uint64_t, uint64_t> applied_ahead_;
  bool seeded_ = false;
  std::vector<std::string> spare_contents_;  // a head's table buffers, reused once shipped
  // The role: a follower until promoted (then a head with these hooks).
  bool follower_;
  ShipTables ship_tables_;
  EditLogged edit_logged_;
};

}  // namespace slip::lsm
