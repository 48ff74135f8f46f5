// The RubbleDB chain protocol under seeded faults (docs/papers/rubbledb.md
// §5): R = 2..4 engines on one MemFileSystem, each follower's tables read
// straight from slot files the head writes (so a slot reused too early
// shows as damage or a wrong value), links as FIFO queues a seeded
// scheduler delivers from — with writes now and then overtaking each other
// by one — and heads, middles and tails killed at random points. After
// every read and at the end it checks: a read at the tail returns the
// newest acknowledged write of its key or a newer one, never one that is
// later lost; at quiescence every replica holds the newest surviving write
// of every key and the head's version (I1), followers that were never
// promoted flushed and compacted nothing (I11), and the slots in use are the
// live tables' (I8). 200 seeds; SLIP_RUBBLE_SEED=N runs one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <map>
#include <set>

#include "common/random.h"
#include "lsm/db.h"
#include "lsm/testing/tiny_shape.h"
#include "rubble/slots.h"

namespace slip::rubble {
namespace {

using lsm::Db;
using lsm::FileMeta;
using lsm::FileSystem;
using lsm::MemFileSystem;
using lsm::VersionEdit;
using lsm::WriteBatch;
using lsm::WriteTicket;

// A slot as a file of its table's size, read from the slot's file now (not
// a copy): what the follower sees if the head rewrote the slot.
class SlotView final : public lsm::RandomAccessFile {
 public:
  SlotView(std::unique_ptr<lsm::RandomAccessFile> f, uint64_t size) : f_(std::move(f)), size_(size) {}
  Result<std::string_view> Read(uint64_t offset, size_t n, std::string* scratch) const override {
    if (offset > size_ || n > size_ - offset) return Status::Corruption("a read past a slot's table");
    return f_->Read(offset, n, scratch);
  }
  uint64_t size() const override { return size_; }

 private:
  std::unique_ptr<lsm::RandomAccessFile> f_;
  uint64_t size_;
};

// A follower's file system: its own files in `dir` of the shared
// MemFileSystem, its tables in `dir`/slotN (what SlotFileSystem does over a
// slot image).
class SimSlotFs final : public FileSystem {
 public:
  SimSlotFs(MemFileSystem* mem, std::string dir, std::function<void(uint32_t)> release)
      : mem_(mem), dir_(std::move(dir)), release_(std::move(release)) {}
  Status Adopt(const FileMeta& m) {
    tables_[m.number] = {m.slot, m.size};
    return Status::Ok();
  }
  void TakeTables() { own_ = true; }
  Result<std::unique_ptr<lsm::WritableFile>> Create(const std::string& path, Kind kind) override {
    if (kind == Kind::kTable && !own_) return Status::NotSupported("a follower writes no table");
    return mem_->Create(path, kind);
  }
  Result<std::unique_ptr<lsm::RandomAccessFile>> Open(const std::string& path, Kind kind) override {
    if (auto it = tables_.find(Number(path)); it != tables_.end()) {
      SLIP_ASSIGN_OR_RETURN(auto f, mem_->Open(dir_ + "/slot" + std::to_string(it->second.first), kind));
      return std::unique_ptr<lsm::RandomAccessFile>(new SlotView(std::move(f), it->second.second));
    }
    return mem_->Open(path, kind);
  }
  Status Remove(const std::string& path) override {
    if (auto it = tables_.find(Number(path)); it != tables_.end()) {
      const uint32_t slot = it->second.first;
      tables_.erase(it);
      release_(slot);
      return Status::Ok();
    }
    return mem_->Remove(path);
  }
  Status Rename(const std::string& from, const std::string& to) override { return mem_->Rename(from, to); }
  Result<std::vector<std::string>> List(const std::string& dir) override { return mem_->List(dir); }
  Status CreateDir(const std::string& dir) override { return mem_->CreateDir(dir); }

 private:
  uint64_t Number(const std::string& path) const {
    if (!path.ends_with(".sst") || path.size() < dir_.size() + 5) return 0;
    return std::strtoull(path.c_str() + dir_.size() + 1, nullptr, 10);
  }
  MemFileSystem* mem_;
  std::string dir_;
  std::function<void(uint32_t)> release_;
  std::map<uint64_t, std::pair<uint32_t, uint64_t>> tables_;
  bool own_ = false;
};

struct Msg {
  bool is_edit = false;
  WriteBatch batch;
  WriteTicket ticket;
  VersionEdit edit;
};

Msg EditMsg(const VersionEdit& e) {
  Msg m;
  m.is_edit = true;
  m.edit = e;
  return m;
}

Msg WriteMsg(WriteBatch b, const WriteTicket& t) {
  Msg m;
  m.batch = std::move(b);
  m.ticket = t;
  return m;
}

struct Node {
  int id = 0;
  std::unique_ptr<SimSlotFs> fs;
  std::unique_ptr<Db> db;
  std::deque<Msg> inbox;             // from its predecessor, in order
  std::vector<Msg> sent;             // what it passed on (resent when its successor dies)
  std::map<uint64_t, Msg> held;      // writes its engine holds for a later MemTable
  std::map<uint64_t, Msg> held_edits;  // edits it holds for their turn
  std::set<uint64_t> visible;        // sequences readable here
  bool promoted = false;
};

struct Write {
  std::string key;
  std::optional<std::string> value;  // nullopt: a delete
  bool acked = false, lost = false, read = false;
};

class Sim {
 public:
  explicit Sim(uint64_t seed) : rng_(seed), slots_(4096, 8) {}

  void Run() {
    const int replicas = 2 + static_cast<int>(rng_.Uniform(3));
    for (int i = 0; i < replicas; ++i) nodes_.push_back(std::make_unique<Node>());
    for (int i = 0; i < replicas; ++i) nodes_[i]->id = i;
    // The head.
    lsm::DbOptions o = Shape();
    o.fs = &mem_;
    o.ship_tables = [this](VersionEdit* e, const std::vector<std::string_view>& c) { return Ship(chain_[0], e, c); };
    o.edit_logged = [this](const VersionEdit& e) { Pass(chain_[0], EditMsg(e)); };
    chain_.push_back(0);  // its edits at open go nowhere: no follower yet (they start from its seed)
    nodes_[0]->db = std::move(Db::Open("/n0", o).value());
    auto seed = nodes_[0]->db->SeedFollower();
    ASSERT_TRUE(seed.ok());
    for (int i = 1; i < replicas; ++i) {
      Node* n = nodes_[i].get();
      const std::string dir = "/n" + std::to_string(i);
      n->fs = std::make_unique<SimSlotFs>(&mem_, dir, [this, i](uint32_t slot) { slots_.Release(i, slot); });
      lsm::DbOptions f = Shape();
      f.fs = n->fs.get();
      f.follower = true;
      f.adopt_table = [fs = n->fs.get()](const FileMeta& m) { return fs->Adopt(m); };
      n->db = std::move(Db::Open(dir, f).value());
      ASSERT_TRUE(n->db->Seed(*seed).ok());
      chain_.push_back(i);
    }
    for (int i = replicas; i < 8; ++i) slots_.RemoveFollower(i);
    slots_.RemoveFollower(0);  // the head holds no slots of its own

    const int steps = 1500;
    for (int step = 0; step < steps && !::testing::Test::HasFatalFailure() && !failed_; ++step) {
      const uint64_t what = rng_.Uniform(100);
      if (what < 40) {
        ClientWrite();
      } else if (what < 50) {
        ClientRead();
      } else if (what < 51 && chain_.size() >= 2) {
        Kill();
      } else {
        Deliver();
      }
    }
    // Quiescence: everything in flight arrives.
    for (int guard = 0; guard < 1000000 && Deliver(); ++guard) {
    }
    if (failed_ || ::testing::Test::HasFatalFailure()) return;
    Check();
  }

 private:
  static lsm::DbOptions Shape() {
    lsm::DbOptions o = lsm::testing::TinyShape(nullptr);
    o.wal = false;
    return o;
  }

  Status Ship(int from, VersionEdit* e, const std::vector<std::string_view>& contents) {
    if (from != chain_[0]) return Status::Aborted("not the head");
    for (size_t i = 0; i < e->added.size(); ++i) {
      if (contents[i].empty()) continue;
      SLIP_ASSIGN_OR_RETURN(auto got, slots_.Acquire(1, 0));
      for (size_t c = 1; c < chain_.size(); ++c) {
        SLIP_ASSIGN_OR_RETURN(
            auto f, mem_.Create("/n" + std::to_string(chain_[c]) + "/slot" + std::to_string(got[0]), FileSystem::Kind::kTable));
        SLIP_RETURN_IF_ERROR(f->Append(contents[i]));
        SLIP_RETURN_IF_ERROR(f->Sync());
      }
      e->added[i].second.slot = got[0];
    }
    return Status::Ok();
  }

  int Successor(int node) const {
    for (size_t i = 0; i + 1 < chain_.size(); ++i) {
      if (chain_[i] == node) return chain_[i + 1];
    }
    return -1;
  }

  // Node `from` passes `m` on, or (the tail) acknowledges it.
  void Pass(int from, Msg m) {
    const int next = Successor(from);
    if (next < 0) {
      if (!m.is_edit) Ack(m.ticket.sequence);
      return;
    }
    nodes_[from]->sent.push_back(m);
    nodes_[next]->inbox.push_back(std::move(m));
  }

  void Ack(uint64_t sequence) {
    auto it = writes_.find(sequence);
    if (it == writes_.end() || it->second.acked) return;
    ASSERT_FALSE(it->second.lost) << "a lost write acknowledged, sequence " << sequence;
    it->second.acked = true;
    uint64_t& last = last_acked_[it->second.key];
    last = std::max(last, sequence);
  }

  void ClientWrite() {
    Node& head = *nodes_[chain_[0]];
    const std::string key = "k" + std::to_string(rng_.Uniform(120));
    WriteBatch b;
    Write w;
    w.key = key;
    if (rng_.Uniform(6) == 0) {
      b.ops.push_back({lsm::ValueType::kDeletion, key, {}});
    } else {
      w.value = "v" + std::to_string(++counter_) + std::string(rng_.Uniform(80), 'x');
      b.ops.push_back({lsm::ValueType::kValue, key, *w.value});
    }
    WriteTicket t;
    ASSERT_TRUE(head.db->Write(b, {}, &t).ok());
    b.sequence = t.sequence;
    writes_[t.sequence] = w;
    head.visible.insert(t.sequence);
    Pass(chain_[0], WriteMsg(std::move(b), t));
  }

  // A read at the tail: the newest acknowledged write of the key or newer.
  void ClientRead() {
    counts.reads++;
    Node& tail = *nodes_[chain_.back()];
    const std::string key = "k" + std::to_string(rng_.Uniform(120));
    auto got = tail.db->Get(key);
    ASSERT_TRUE(got.ok() || got.status().Is(Code::kNotFound)) << got.status().ToString();
    if (got.ok()) {
      ASSERT_FALSE(lost_values_.contains(*got)) << "the tail shows a lost write of " << key;
    }
    const uint64_t floor = last_acked_.contains(key) ? last_acked_[key] : 0;
    // Which write it shows: the one with this value, or (not found) a delete.
    bool fine = false;
    for (auto& [seq, w] : writes_) {
      if (w.key != key || seq < floor) continue;
      if (got.ok() ? (w.value && *w.value == *got) : !w.value) {
        fine = true;
        // A value names its write (values are unique); "not found" does not.
        if (got.ok()) {
          w.read = true;
          ASSERT_FALSE(w.lost) << "read a lost write";
        }
        break;
      }
    }
    if (!got.ok() && floor == 0) fine = true;  // never written (or nothing acknowledged yet)
    ASSERT_TRUE(fine) << "tail read of " << key << " returned " << (got.ok() ? *got : "not found")
                      << ", older than acknowledged write " << floor;
  }

  bool Deliver() {
    std::vector<int> ready;
    for (size_t i = 1; i < chain_.size(); ++i) {
      if (!nodes_[chain_[i]]->inbox.empty()) ready.push_back(chain_[i]);
    }
    if (ready.empty()) return false;
    Node& n = *nodes_[ready[rng_.Uniform(ready.size())]];
    // Now and then a message overtakes up to three before it (writes of one
    // MemTable or of the next, an edit and the writes it holds): the engine
    // orders them.
    size_t pick = 0;
    if (n.inbox.size() > 1 && rng_.Uniform(5) == 0) {
      pick = 1 + rng_.Uniform(std::min<size_t>(n.inbox.size() - 1, 3));
      counts.overtakes++;
    }
    Msg m = std::move(n.inbox[pick]);
    n.inbox.erase(n.inbox.begin() + static_cast<long>(pick));
    lsm::Applied applied;
    Status s;
    if (m.is_edit) {
      n.held_edits.emplace(m.edit.id, m);
      s = n.db->InstallEdit(m.edit, &applied);
    } else {
      n.held.emplace(m.ticket.sequence, m);
      s = n.db->ApplyReplicated(m.batch, m.ticket, &applied);
    }
    if (!s.ok()) {
      ADD_FAILURE() << "node " << n.id << " refused what its predecessor passed: " << s.ToString();
      failed_ = true;
      return false;
    }
    // Passed on once it takes effect here, not before.
    for (uint64_t seq : applied.writes) {
      n.visible.insert(seq);
      auto it = n.held.find(seq);
      if (it == n.held.end()) continue;
      Msg w = std::move(it->second);
      n.held.erase(it);
      Pass(n.id, std::move(w));
    }
    for (uint64_t id : applied.edits) {
      auto it = n.held_edits.find(id);
      if (it == n.held_edits.end()) continue;
      Msg e = std::move(it->second);
      n.held_edits.erase(it);
      Pass(n.id, std::move(e));
    }
    return true;
  }

  void Kill() {
    const size_t at = rng_.Uniform(chain_.size());
    const int dead = chain_[at];
    (at == 0 ? counts.head_kills : at + 1 == chain_.size() ? counts.tail_kills : counts.middle_kills)++;
    if (at == 0) {
      // The head: its successor takes over; what the successor cannot read
      // was never acknowledged, and is lost.
      const int s = chain_[1];
      Node& next = *nodes_[s];
      next.inbox.clear();
      next.held.clear();
      next.held_edits.clear();
      // The new head's sequences go on from what it has: a lost write's
      // sequence is taken again, so the lost leave the record.
      for (auto it = writes_.begin(); it != writes_.end();) {
        if (!it->second.acked && !next.visible.contains(it->first)) {
          ASSERT_FALSE(it->second.read) << "a write read at the tail is lost, sequence " << it->first;
          if (it->second.value) lost_values_.insert(*it->second.value);
          counts.lost++;
          it = writes_.erase(it);
        } else {
          ++it;
        }
      }
      chain_.erase(chain_.begin());
      nodes_[dead]->db.reset();
      slots_.RemoveFollower(s);
      std::vector<uint32_t> held;
      const lsm::Version v = next.db->version();
      for (int level = 0; level < lsm::kLevels; ++level) {
        for (const auto& f : v.files(level)) {
          if (f.slot != 0) held.push_back(f.slot);
        }
      }
      slots_.Reconcile(held);
      next.fs->TakeTables();
      next.promoted = true;
      ASSERT_TRUE(next.db
                      ->Promote([this, s](VersionEdit* e, const std::vector<std::string_view>& c) { return Ship(s, e, c); },
                                [this, s](const VersionEdit& e) { Pass(s, EditMsg(e)); })
                      .ok());
      // The new head's writes continue from what it has; if it is alone,
      // what it applied is acknowledged.
      if (chain_.size() == 1) {
        for (uint64_t seq : next.visible) Ack(seq);
      }
      return;
    }
    // A follower: its predecessor passes what it passed on again, to the
    // dead one's successor (which keeps what it has: resends are
    // recognised); a dead tail's predecessor acknowledges what it applied.
    const int prev = chain_[at - 1];
    chain_.erase(chain_.begin() + static_cast<long>(at));
    slots_.RemoveFollower(dead);
    nodes_[dead]->inbox.clear();
    const int next = Successor(prev);
    if (next < 0) {
      for (uint64_t seq : nodes_[prev]->visible) Ack(seq);
      nodes_[prev]->sent.clear();
    } else {
      for (const Msg& m : nodes_[prev]->sent) nodes_[next]->inbox.push_back(m);
    }
  }

  void Check() {
    Node& head = *nodes_[chain_[0]];
    // Everything acknowledged or lost by now: the newest surviving write of
    // each key is what every replica holds.
    std::map<std::string, std::pair<uint64_t, std::optional<std::string>>> newest;
    counts.head_compactions += head.db->stats().compactions;
    if (head.promoted) counts.promoted_flushes += head.db->stats().flushes;
    for (auto& [seq, w] : writes_) {
      ASSERT_TRUE(w.acked) << "write " << seq << " neither acknowledged nor lost at quiescence";
      counts.acked++;
      if (w.lost) continue;
      newest[w.key] = {seq, w.value};
    }
    for (int id : chain_) {
      Node& n = *nodes_[id];
      std::vector<std::pair<std::string, std::string>> all;
      ASSERT_TRUE(n.db->Scan("", 1000, &all).ok());
      for (const auto& [k, v] : all) ASSERT_FALSE(lost_values_.contains(v)) << "node " << id << " holds a lost write";
      for (const auto& [key, v] : newest) {
        auto got = n.db->Get(key);
        if (v.second) {
          ASSERT_TRUE(got.ok()) << "node " << id << " lost " << key << ": " << got.status().ToString();
          ASSERT_EQ(*got, *v.second) << "node " << id << ", " << key;
        } else {
          ASSERT_TRUE(got.status().Is(Code::kNotFound)) << "node " << id << ", " << key;
        }
      }
      ASSERT_EQ(n.db->version(), head.db->version()) << "I1, node " << id;
      if (id != chain_[0] && !n.promoted) {
        const auto s = n.db->stats();
        ASSERT_EQ(s.flushes + s.compactions, 0u) << "I11, node " << id;
      }
    }
    size_t in_slots = 0;
    const lsm::Version v = head.db->version();
    for (int level = 0; level < lsm::kLevels; ++level) {
      for (const auto& f : v.files(level)) in_slots += f.slot != 0;
    }
    if (chain_.size() > 1) {
      ASSERT_EQ(4096 - slots_.free_slots(), in_slots) << "I8";
    }
  }

  Random rng_;
  MemFileSystem mem_;
  SlotMap slots_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<int> chain_;  // live nodes, head first
  std::map<uint64_t, Write> writes_;
  std::map<std::string, uint64_t> last_acked_;
  std::set<std::string> lost_values_;  // of writes lost with a head: never to be read
  uint64_t counter_ = 0;
  bool failed_ = false;

 public:
  struct Counts {
    uint64_t head_kills = 0, middle_kills = 0, tail_kills = 0, acked = 0, lost = 0, reads = 0, overtakes = 0,
             head_compactions = 0, promoted_flushes = 0;
  };
  Counts counts;
};

TEST(ChainSimTest, SeededFaultsLoseNoAcknowledgedWrite) {
  std::vector<uint64_t> seeds;
  if (const char* one = std::getenv("SLIP_RUBBLE_SEED")) {
    seeds.push_back(std::strtoull(one, nullptr, 10));
  } else {
    for (uint64_t s = 1; s <= 200; ++s) seeds.push_back(s);
  }
  Sim::Counts total;
  for (uint64_t seed : seeds) {
    SCOPED_TRACE("SLIP_RUBBLE_SEED=" + std::to_string(seed));
    Sim sim(seed);
    sim.Run();
    if (::testing::Test::HasFailure()) return;
    total.head_kills += sim.counts.head_kills;
    total.middle_kills += sim.counts.middle_kills;
    total.tail_kills += sim.counts.tail_kills;
    total.acked += sim.counts.acked;
    total.lost += sim.counts.lost;
    total.reads += sim.counts.reads;
    total.overtakes += sim.counts.overtakes;
    total.head_compactions += sim.counts.head_compactions;
    total.promoted_flushes += sim.counts.promoted_flushes;
  }
  // What the campaign exercised (a campaign that kills nothing proves little).
  std::printf("%zu seeds: %llu heads, %llu middles, %llu tails killed; %llu writes acknowledged, %llu lost (never "
              "acknowledged); %llu tail reads checked; %llu overtakes; %llu head compactions; %llu flushes by promoted heads\n",
              seeds.size(), (unsigned long long)total.head_kills, (unsigned long long)total.middle_kills,
              (unsigned long long)total.tail_kills, (unsigned long long)total.acked, (unsigned long long)total.lost,
              (unsigned long long)total.reads, (unsigned long long)total.overtakes,
              (unsigned long long)total.head_compactions, (unsigned long long)total.promoted_flushes);
  if (seeds.size() > 1) {
    EXPECT_GT(total.head_kills, 0u);
    EXPECT_GT(total.middle_kills, 0u);
    EXPECT_GT(total.tail_kills, 0u);
    EXPECT_GT(total.head_compactions, 0u);
  }
}

}  // namespace
}  // namespace slip::rubble
