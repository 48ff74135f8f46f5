// RocksDB as a durable single-node reference: every write goes to the WAL
// and is fsync'ed before it returns (WriteOptions::sync), which is what
// "acknowledged means durable" costs on an ordinary disk. Concurrent writers
// share fsyncs through RocksDB's group commit.
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>

#include <filesystem>

#include "bench/peers/peers.h"
#include "bench/peers/server_process.h"
#include "lsm/db.h"
#include "lsm/posix_file.h"

namespace slip::bench {
namespace {

class RocksDbSession final : public KvSession {
 public:
  explicit RocksDbSession(rocksdb::DB* db) : db_(db) { write_.sync = true; }

  Status Put(std::string_view key, std::string_view value) override {
    return Convert(db_->Put(write_, Slice(key), Slice(value)));
  }
  Result<std::string> Get(std::string_view key) override {
    std::string v;
    rocksdb::Status s = db_->Get(read_, Slice(key), &v);
    if (!s.ok()) return Convert(s);
    return v;
  }
  Status Del(std::string_view key) override { return Convert(db_->Delete(write_, Slice(key))); }
  Status Scan(std::string_view start, uint32_t count,
              std::vector<std::pair<std::string, std::string>>* out) override {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read_));
    for (it->Seek(Slice(start)); it->Valid() && out->size() < count; it->Next())
      out->emplace_back(it->key().ToString(), it->value().ToString());
    return Convert(it->status());
  }

 private:
  static rocksdb::Slice Slice(std::string_view s) { return {s.data(), s.size()}; }
  static Status Convert(const rocksdb::Status& s) {
    if (s.ok()) return Status::Ok();
    if (s.IsNotFound()) return Status::NotFound();
    return Status::IoError("rocksdb: " + s.ToString());
  }
  rocksdb::DB* db_;
  rocksdb::WriteOptions write_;
  rocksdb::ReadOptions read_;
};

class RocksDbTarget final : public KvTarget {
 public:
  RocksDbTarget(std::unique_ptr<TempDir> tmp, std::string dir, std::unique_ptr<rocksdb::DB> db)
      : tmp_(std::move(tmp)), dir_(std::move(dir)), db_(std::move(db)) {}
  ~RocksDbTarget() override {
    db_.reset();  // close before the directory goes
  }

  std::string name() const override { return "rocksdb"; }
  std::string Durability() const override { return DurabilityOfPath(dir_); }
  std::string Describe() const override {
    return "embedded RocksDB " + std::to_string(ROCKSDB_MAJOR) + "." + std::to_string(ROCKSDB_MINOR) +
           " in " + dir_ + ", WAL fsync per write (sync=true, group commit), shaped as the lsm engine; unreplicated";
  }
  Result<std::unique_ptr<KvSession>> Connect(uint32_t) override {
    return std::unique_ptr<KvSession>(new RocksDbSession(db_.get()));
  }
  TargetSample Sample() override {
    TargetSample s;
    // Requests run on the driver threads (client CPU); flushes and
    // compactions run on RocksDB's own "rocksdb:*" threads: the analogue of
    // a log-structured store's cleaning.
    s.cpu_us.clean = OwnThreadsCpuUs("rocksdb:");
    s.counts_round_trips = true;  // in-process: 0 per op
    s.fabric_bytes = 0;
    // pm_bytes: RocksDB writes a disk, not PM — not comparable, left null.
    return s;
  }

 private:
  std::unique_ptr<TempDir> tmp_;
  std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace

Result<std::unique_ptr<KvTarget>> MakeRocksDbTarget(const RocksDbTargetOptions& o) {
  std::unique_ptr<TempDir> tmp;
  SLIP_ASSIGN_OR_RETURN(std::string dir, FreshDatabaseDir(o.dir, "rocksdb", &tmp));
  rocksdb::Options options;
  options.create_if_missing = true;
  // The shape of Slipstream's LSM engine (the lsm target), so the two
  // compare as engines: the same MemTable and file sizes, level limits,
  // block size, Bloom bits, block cache and direct I/O; no compression.
  const lsm::DbOptions shape;
  options.write_buffer_size = shape.memtable_bytes;
  options.max_write_buffer_number = shape.max_immutables + 1;
  options.target_file_size_base = shape.target_file_bytes;
  options.level0_file_num_compaction_trigger = shape.l0_compaction_trigger;
  options.level0_slowdown_writes_trigger = shape.l0_slowdown;
  options.level0_stop_writes_trigger = shape.l0_stop;
  options.max_bytes_for_level_base = shape.level1_bytes;
  options.max_bytes_for_level_multiplier = shape.level_multiplier;
  options.num_levels = shape.levels;
  options.compression = rocksdb::kNoCompression;
  options.max_background_jobs = 2;  // one flush, one compaction, as the engine runs
  std::filesystem::create_directories(dir);
  const bool direct = shape.direct_io && lsm::DirectIoSupported(dir);
  options.use_direct_reads = direct;
  options.use_direct_io_for_flush_and_compaction = direct;
  rocksdb::BlockBasedTableOptions table;
  table.block_size = shape.table.block_bytes;
  table.block_restart_interval = shape.table.restart_interval;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(shape.table.bloom_bits_per_key));
  table.block_cache = rocksdb::NewLRUCache(shape.block_cache_bytes);
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok()) return Status::IoError("rocksdb open " + dir + ": " + s.ToString());
  return std::unique_ptr<KvTarget>(
      new RocksDbTarget(std::move(tmp), dir, std::unique_ptr<rocksdb::DB>(db)));
}

}  // namespace slip::bench
