// RocksDB as a durable single-node reference: every write goes to the WAL
// and is fsync'ed before it returns (WriteOptions::sync), which is what
// "acknowledged means durable" costs on an ordinary disk. Concurrent writers
// share fsyncs through RocksDB's group commit.
#include <rocksdb/db.h>
#include <rocksdb/options.h>

#include <filesystem>

#include "bench/peers/peers.h"
#include "bench/peers/server_process.h"

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
           " in " + dir_ + ", WAL fsync per write (sync=true, group commit); unreplicated";
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
  std::string dir = o.dir;
  if (dir.empty()) {
    SLIP_ASSIGN_OR_RETURN(tmp, TempDir::Create("slip-bench-rocksdb-"));
    dir = tmp->path();
  } else {
    // A fresh database per run, so results do not depend on earlier runs.
    dir += "/rocksdb";
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok()) return Status::IoError("rocksdb open " + dir + ": " + s.ToString());
  return std::unique_ptr<KvTarget>(
      new RocksDbTarget(std::move(tmp), dir, std::unique_ptr<rocksdb::DB>(db)));
}

}  // namespace slip::bench
