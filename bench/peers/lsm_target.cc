// Slipstream's own LSM engine (src/lsm, the engine under RubbleDB) as a
// single-node target beside RocksDB: the same driver, the WAL synced on
// every write in both (group commit in both), and the same shape — 4 KB
// blocks, 10 Bloom bits per key, no compression, 4 MB MemTables and files,
// level 0 compacting at 4 files, 16 MB at level 1, a 64 MB block cache
// (lsm::DbOptions' defaults; the rocksdb target is set to the same).
#include "bench/peers/peers.h"
#include "bench/peers/server_process.h"
#include "lsm/db.h"

namespace slip::bench {
namespace {

class LsmSession final : public KvSession {
 public:
  explicit LsmSession(lsm::Db* db) : db_(db) {}
  Status Put(std::string_view key, std::string_view value) override { return db_->Put(key, value); }
  Result<std::string> Get(std::string_view key) override { return db_->Get(key); }
  Status Del(std::string_view key) override { return db_->Delete(key); }
  Status Scan(std::string_view start, uint32_t count, std::vector<std::pair<std::string, std::string>>* out) override {
    return db_->Scan(start, count, out);
  }

 private:
  lsm::Db* const db_;
};

class LsmTarget final : public KvTarget {
 public:
  LsmTarget(std::unique_ptr<TempDir> tmp, std::string dir, std::unique_ptr<lsm::Db> db)
      : tmp_(std::move(tmp)), dir_(std::move(dir)), db_(std::move(db)) {}
  ~LsmTarget() override { db_.reset(); }

  std::string name() const override { return "lsm"; }
  std::string Durability() const override { return DurabilityOfPath(dir_); }
  std::string Describe() const override {
    const auto s = db_->stats();
    return "Slipstream's LSM engine in " + dir_ + ", WAL fdatasync per write (group commit), tables " +
           (s.direct_io ? "with O_DIRECT" : "buffered") + "; unreplicated";
  }
  Result<std::unique_ptr<KvSession>> Connect(uint32_t) override {
    return std::unique_ptr<KvSession>(new LsmSession(db_.get()));
  }
  TargetSample Sample() override {
    TargetSample s;
    // Requests run on the driver threads; flushes and compactions on the
    // engine's "lsm:*" threads, reported as the cleaning role (as RocksDB's).
    s.cpu_us.clean = OwnThreadsCpuUs("lsm:");
    s.counts_round_trips = true;  // in-process: 0 per op
    s.fabric_bytes = 0;
    return s;
  }

 private:
  std::unique_ptr<TempDir> tmp_;
  std::string dir_;
  std::unique_ptr<lsm::Db> db_;
};

}  // namespace

Result<std::unique_ptr<KvTarget>> MakeLsmTarget(const LsmTargetOptions& o) {
  std::unique_ptr<TempDir> tmp;
  SLIP_ASSIGN_OR_RETURN(std::string dir, FreshDatabaseDir(o.dir, "lsm", &tmp));
  SLIP_ASSIGN_OR_RETURN(auto db, lsm::Db::Open(dir, lsm::DbOptions{}));
  return std::unique_ptr<KvTarget>(new LsmTarget(std::move(tmp), dir, std::move(db)));
}

}  // namespace slip::bench
