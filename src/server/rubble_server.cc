#include "server/rubble_server.h"

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <optional>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/cpu_time.h"
#include "common/hash.h"
#include "common/log.h"
#include "proto/kv.h"
#include "rubble/ledger.h"
#include "rubble/wire.h"

namespace slip::server {

namespace fs = std::filesystem;
using cluster::ClusterConfig;
using cluster::ShardId;
using rubble::ChainHeader;
using rubble::ChainItem;

namespace {

// How long a failed call to a successor, a head's link or a seed waits
// before it is tried again (the configuration may have moved on by then).
constexpr runtime::Nanos kRetry = 10 * runtime::kMillisecond;
constexpr runtime::Nanos kSeedRetry = 200 * runtime::kMillisecond;
// A seed travels in parts that fit a frame with room for the header.
constexpr size_t kSeedChunk = proto::kMaxMessage - 1024;
// A follower reports its slots this long after they changed (one report
// for a burst of edits and releases).
constexpr runtime::Nanos kReportDelay = 5 * runtime::kMillisecond;

uint16_t M(proto::Method m) { return static_cast<uint16_t>(m); }

// A new follower's copy of its head, and how far it reaches.
struct Seeded {
  std::string bytes;
  uint64_t last_sequence = 0, last_edit = 0;
};

// No node (node ids start at 0).
constexpr uint32_t kNone = UINT32_MAX;

// Whether `node` is a backup of `s` still being seeded.
// Callers answered with an item's outcome once the rest of the chain has it.
std::vector<std::function<void(Status)>> Answering(std::vector<PoolNode::Reply> replies) {
  std::vector<std::function<void(Status)>> out;
  for (auto& reply : replies) out.push_back([reply](Status s) { reply(s.code(), {}); });
  return out;
}

bool Syncing(const cluster::ShardReplicas& s, uint32_t node) {
  return std::find(s.syncing.begin(), s.syncing.end(), node) != s.syncing.end();
}

// An item by what it is: a write by its first sequence, an edit by its id.
using ItemKey = std::pair<ChainItem::Kind, uint64_t>;
ItemKey KeyOf(const ChainItem& item) {
  return {item.kind, item.kind == ChainItem::Kind::kWrite ? item.ticket.sequence : item.edit.id};
}

std::string_view AsView(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

}  // namespace

RubbleShape DefaultRubbleShape() {
  RubbleShape s;
  s.db.memtable_bytes = 2 << 20;
  s.db.target_file_bytes = 2 << 20;
  s.db.level1_bytes = 8 << 20;
  s.db.block_cache_bytes = 32 << 20;
  // A table may come out a little over target (a key's versions are never
  // split): the paper's 1/16 of padding.
  s.slots.count = 64;
  s.slots.slot_bytes = (17ull << 20) / 8;
  return s;
}

RubbleShape TinyRubbleShape(uint32_t slot_count) {
  RubbleShape s;
  s.db.memtable_bytes = 8 << 10;
  s.db.target_file_bytes = 8 << 10;
  s.db.level1_bytes = 32 << 10;
  s.db.l0_compaction_trigger = 2;
  s.db.block_cache_bytes = 1 << 20;
  s.db.table.block_bytes = 1024;
  s.db.direct_io = false;
  s.slots.count = slot_count;
  s.slots.slot_bytes = 16 << 10;
  return s;
}

// Where blocking tasks run, in order of posting when there is one thread
// of them; with their CPU time. Stop: no task runs afterwards.
class RubbleServer::Jobs {
 public:
  virtual ~Jobs() = default;
  virtual void Post(std::function<void()> fn) = 0;
  virtual void Stop() = 0;
  virtual uint64_t cpu_ns() const = 0;
};

// A few threads of the server's own.
class RubbleServer::Threads final : public Jobs {
 public:
  Threads(int n, const std::string& name) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, name] {
        pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
        Run();
      });
    }
  }
  ~Threads() override { Stop(); }
  void Stop() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  void Post(std::function<void()> fn) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stop_) return;
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }
  uint64_t cpu_ns() const override { return cpu_.load(); }

 private:
  void Run() {
    while (true) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      const uint64_t t0 = ThreadCpuNanos();
      fn();
      cpu_ += ThreadCpuNanos() - t0;
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> cpu_{0};
};

// An executor's turns (the simulator's): tasks never block there.
class RubbleServer::ExecutorJobs final : public Jobs {
 public:
  explicit ExecutorJobs(runtime::Executor* exec) : exec_(exec) {}
  void Post(std::function<void()> fn) override {
    exec_->Post([stopped = stopped_, cpu = cpu_, fn = std::move(fn)] {
      if (*stopped) return;
      const uint64_t t0 = ThreadCpuNanos();
      fn();
      *cpu += ThreadCpuNanos() - t0;
    });
  }
  void Stop() override { *stopped_ = true; }
  uint64_t cpu_ns() const override { return *cpu_; }

 private:
  runtime::Executor* const exec_;
  const std::shared_ptr<bool> stopped_ = std::make_shared<bool>(false);
  const std::shared_ptr<uint64_t> cpu_ = std::make_shared<uint64_t>(0);
};

// A head's shipping, shared with its engine's job threads: which followers
// get every table, their images, the slot ledger, and the pause a seed
// needs (no table shipped, none shipped but unlogged, while a new
// follower's copy of the version is taken).
struct RubbleServer::Ship {
  // `never_wait`: Busy where a job would wait (RubbleServerEnv::jobs).
  Ship(uint32_t slots, std::function<runtime::Nanos()> lease_left, bool never_wait)
      : ledger(slots), lease_left_(std::move(lease_left)), never_wait_(never_wait) {}

  Status Tables(lsm::VersionEdit* edit, const std::vector<std::string_view>& contents) {
    std::vector<std::shared_ptr<rubble::SlotWriter>> to;
    {
      std::unique_lock<std::mutex> l(mu);
      // A follower's image must be linked before any table is shipped: it
      // would miss this one.
      auto may_ship = [&] {
        if (closed) return true;
        if (seeding) return false;
        for (uint32_t m : members) {
          if (!writers.contains(m)) return false;
        }
        return true;
      };
      if (never_wait_ && !may_ship()) return Status::Busy("a follower is not linked yet, or one is being seeded");
      cv.wait(l, may_ship);
      if (closed) return Status::Aborted("this head stopped");
      // Fencing: a head whose lease ran out may have been replaced, and
      // its successor may hand the slots out again — it writes none. (The
      // manager declares it failed only after its lease expired.)
      if (lease_left_() <= 0) return Status::Aborted("this head's lease ran out: it ships nothing more");
      for (uint32_t m : members) to.push_back(writers.at(m));
      ++shipping;
    }
    Status s = [&]() -> Status {
      size_t tables = 0;
      for (const auto& c : contents) tables += !c.empty();
      auto acquired = ledger.Acquire(tables, never_wait_ ? 0 : 60000);
      if (never_wait_ && acquired.status().Is(Code::kNoSpace) && tables <= ledger.count()) {
        return Status::Busy("no free slot yet: followers still read them");
      }
      SLIP_ASSIGN_OR_RETURN(std::vector<uint32_t> slots, std::move(acquired));
      size_t next = 0;
      for (size_t i = 0; i < edit->added.size(); ++i) {
        if (contents[i].empty()) continue;  // moved down a level: it keeps its slot
        const uint32_t slot = slots[next++];
        for (const auto& w : to) {
          SLIP_RETURN_IF_ERROR(w->Write(slot, contents[i]));
          shipped_bytes += contents[i].size();
        }
        edit->added[i].second.slot = slot;
      }
      return Status::Ok();
    }();
    std::lock_guard<std::mutex> l(mu);
    --shipping;
    if (s.ok()) {
      for (size_t i = 0; i < edit->added.size(); ++i) {
        if (!contents[i].empty()) unlogged.insert(edit->added[i].second.number);
      }
    }
    cv.notify_all();
    return s;
  }

  void Logged(const lsm::VersionEdit& edit) {
    ledger.Logged(edit);
    std::lock_guard<std::mutex> l(mu);
    for (const auto& [level, number] : edit.deleted) own.erase(number);
    for (const auto& [level, f] : edit.added) {
      unlogged.erase(f.number);
      if (f.slot != 0) own[f.number] = f.slot;
    }
    OwnChanged();
    cv.notify_all();
  }

  // A table of the head's version (recovered, or had as a follower).
  void Own(const lsm::FileMeta& f) {
    std::lock_guard<std::mutex> l(mu);
    if (f.slot != 0) own[f.number] = f.slot;
    OwnChanged();
  }

  // Stops shipping until Resume: waits for tables being shipped, and
  // shipped ones, to be in the version. Aborted once closed (or after a
  // minute: an edit that never got logged has stopped the engine); Busy
  // instead of waiting when it never waits. Resume after any outcome.
  Status Pause() {
    std::unique_lock<std::mutex> l(mu);
    seeding = true;
    auto idle = [&] { return closed || (shipping == 0 && unlogged.empty()); };
    if (never_wait_ && !idle()) return Status::Busy("tables are being shipped");
    if (!cv.wait_for(l, std::chrono::minutes(1), idle) || closed) return Status::Aborted("the head is stopping");
    return Status::Ok();
  }
  void Resume() {
    std::lock_guard<std::mutex> l(mu);
    seeding = false;
    cv.notify_all();
  }
  void Close() {
    {
      std::lock_guard<std::mutex> l(mu);
      closed = true;
    }
    cv.notify_all();
    ledger.Close();
  }
  void AddWriter(uint32_t node, std::shared_ptr<rubble::SlotWriter> w) {
    std::lock_guard<std::mutex> l(mu);
    writers[node] = std::move(w);
    cv.notify_all();
  }
  void SetMembers(std::set<uint32_t> m) {
    std::lock_guard<std::mutex> l(mu);
    for (auto it = writers.begin(); it != writers.end();) {
      it = m.contains(it->first) ? std::next(it) : writers.erase(it);
    }
    for (uint32_t gone : members) {
      if (!m.contains(gone)) ledger.RemoveFollower(gone);
    }
    members = std::move(m);
    cv.notify_all();
  }
  void AddMember(uint32_t node) {
    std::lock_guard<std::mutex> l(mu);
    members.insert(node);
    cv.notify_all();
  }
  void RemoveMember(uint32_t node) {
    std::lock_guard<std::mutex> l(mu);
    members.erase(node);
    writers.erase(node);
    ledger.RemoveFollower(node);
    cv.notify_all();
  }
  std::set<uint32_t> Members() {
    std::lock_guard<std::mutex> l(mu);
    return members;
  }

  rubble::SlotLedger ledger;
  std::atomic<uint64_t> shipped_bytes{0};

 private:
  const std::function<runtime::Nanos()> lease_left_;
  const bool never_wait_;
  std::mutex mu;
  std::condition_variable cv;
  std::map<uint32_t, std::shared_ptr<rubble::SlotWriter>> writers;
  std::set<uint32_t> members;
  std::set<uint64_t> unlogged;  // tables shipped whose edit is not logged yet
  std::map<uint64_t, uint32_t> own;  // the head's version: table -> slot
  void OwnChanged() {
    std::set<uint32_t> slots;
    for (const auto& [number, slot] : own) slots.insert(slot);
    ledger.SetOwn(std::move(slots));
  }
  int shipping = 0;
  bool seeding = false, closed = false;
};

// An item passed to the successor and not yet acknowledged by it.
struct RubbleServer::Out {
  ChainItem item;
  std::vector<std::string> keys;  // a write's keys (reads at a member that is not the last wait for them)
  std::vector<std::function<void(Status)>> done;
  bool in_flight = false, acked = false;
  uint64_t generation = 0;  // of the call in flight: answers to older ones are stale
};

// Callers of an item a follower applied, answered once the rest of the
// chain has it (`downstream`) and this replica's log holding it is synced.
struct RubbleServer::SyncGate {
  uint64_t job = 0;  // the apply that took it
  bool synced = false, answered = false;
  std::optional<Status> downstream;
  std::vector<PoolNode::Reply> replies;
  void Answer(const Status& s) {
    if (answered) return;
    answered = true;
    for (auto& reply : replies) reply(s.code(), {});
  }
};

struct RubbleServer::Replica {
  ShardId shard = 0;
  std::string dir, image;
  bool head = false;
  bool ready = false;   // the engine is open (a head recovered, a follower linked) and not changing role
  bool seeded = false;  // a follower has its seed (a head always)
  std::unique_ptr<lsm::FileSystem> fs;
  rubble::SlotFileSystem* slots = nullptr;  // fs, when this replica has a slot image
  std::unique_ptr<lsm::Db> db;
  lsm::IoCounters io;

  // Where it is in the chain (this term).
  uint32_t predecessor = kNone, successor = kNone;
  bool read_tail = false;

  // The stream passed on: items by (kind, id), oldest first.
  std::deque<std::shared_ptr<Out>> out;
  std::map<std::pair<ChainItem::Kind, uint64_t>, std::shared_ptr<Out>> out_index;
  std::unordered_map<std::string, int> unacked_keys;
  bool resend_armed = false;

  // Follower: items the engine holds for later, with their callers.
  struct Held {
    ChainItem item;
    std::vector<Reply> replies;
  };
  std::map<std::pair<ChainItem::Kind, uint64_t>, Held> held;
  uint64_t seed_id = 0;
  std::string seed_bytes;
  uint64_t report_number = 0;
  bool report_armed = false;
  // All-compact follower: the next head sequence to write, writes waiting
  // for it, and writes being written (with the callers of resends).
  uint64_t next_to_write = 0;
  std::map<uint64_t, Held> waiting;
  std::map<uint64_t, std::vector<Reply>> writing_now;
  bool linking = false;  // a fresh link is being set up
  // Follower: applies and the syncs that cover them (SyncLater).
  uint64_t apply_jobs = 0;   // applier thread
  bool sync_queued = false;  // applier thread
  uint64_t synced_jobs = 0, jobs_seen = 0;          // node executor
  std::deque<std::shared_ptr<SyncGate>> unsynced;  // node executor, by job
  uint64_t incarnation = 0;  // of its follower engine: each fresh link starts a new one

  // Head.
  std::shared_ptr<Ship> ship;
  struct Sequenced {
    lsm::WriteBatch batch;
    lsm::WriteTicket ticket;
    Reply reply;
    bool found = true;
  };
  std::map<uint64_t, Sequenced> reorder;  // written, waiting for earlier sequences to be passed on
  uint64_t next_sequence = 1;
  std::unordered_map<std::string, int> writing;  // keys with a PUT between request and sequence
  std::set<std::string> deleting;                // keys with a DEL between its look-up and its sequence
  uint32_t seeding = kNone;                      // the follower being seeded
  bool catching = false;                         // without threads: put-off work is being retried
  std::vector<std::function<void()>> after_catch;  // ... and what waits for it
  std::set<uint32_t> seeded_followers;           // by this head, in its life
  std::set<uint32_t> checking;                   // ... listed syncing still, asked whether they hold the seed
  // Followers listed as syncing when this head's life began (it opened, or
  // was promoted), not yet linked fresh by it: nothing goes down the chain
  // until none is left (ResetStale).
  std::set<uint32_t> unreset;
  std::set<uint32_t> resetting;  // ... whose fresh link is on its way
  std::set<uint32_t> linked;                     // followers whose images it has
};

namespace {

RubbleServerEnv Shaped(RubbleServerEnv env) {
  if (env.jobs != nullptr) env.shape.db.background = false;  // engines without threads of their own
  return env;
}

}  // namespace

RubbleServer::RubbleServer(RubbleServerEnv env)
    : env_(Shaped(std::move(env))),
      writers_(env_.jobs != nullptr ? std::unique_ptr<Jobs>(std::make_unique<ExecutorJobs>(env_.jobs))
                                    : std::make_unique<Threads>(env_.writer_threads, "rubble:write")),
      applier_(env_.jobs != nullptr ? std::unique_ptr<Jobs>(std::make_unique<ExecutorJobs>(env_.jobs))
                                    : std::make_unique<Threads>(1, "rubble:apply")) {}

RubbleServer::~RubbleServer() {
  stopping_ = true;
  for (auto& [s, r] : replicas_) {
    if (r->ship) r->ship->Close();
  }
  writers_->Stop();
  applier_->Stop();
  for (auto& [s, r] : replicas_) r->db.reset();
}

std::vector<uint32_t> RubbleServer::ChainOf(const ClusterConfig& c, ShardId shard) {
  const auto& s = c.shards.at(shard);
  std::vector<uint32_t> chain = {s.primary};
  for (uint32_t b : s.backups) {
    if (!Syncing(s, b)) chain.push_back(b);
  }
  for (uint32_t b : s.backups) {
    if (Syncing(s, b)) chain.push_back(b);
  }
  return chain;
}

RubbleServer::ReplicaPtr RubbleServer::Find(ShardId shard) const {
  auto it = replicas_.find(shard);
  return it == replicas_.end() ? nullptr : it->second;
}

void RubbleServer::Refuse(const Reply& reply, const Status& s) const {
  reply(s.code(), proto::Encode(proto::KvResponse{term_, 0, s.message()}));
}

// --- configurations ---------------------------------------------------------

void RubbleServer::Adopt(const ClusterConfig& c) {
  if (c.term <= term_ || stopping_) return;
  config_ = c;
  term_ = c.term;
  env_.set_peers(c);
  std::set<ShardId> mine;
  for (ShardId s = 0; s < c.num_shards(); ++s) {
    const auto chain = ChainOf(c, s);
    if (std::find(chain.begin(), chain.end(), env_.self) == chain.end()) continue;
    mine.insert(s);
    const bool head = chain.front() == env_.self;
    ReplicaPtr r = Find(s);
    if (!r) {
      r = std::make_shared<Replica>();
      r->shard = s;
      r->dir = env_.dir + "/shard-" + std::to_string(s);
      r->image = r->dir + ".slots";
      replicas_[s] = r;
      if (head) {
        // A head opens what it has (a cold start recovers from its WAL);
        // a follower waits for its head to link and seed it.
        r->head = true;
        r->seeded = true;
        r->ship = std::make_shared<Ship>(env_.shape.slots.count, env_.lease_left, env_.jobs != nullptr);
        // Before it opens: its recovery's edits go down the chain.
        for (uint32_t b : c.shards[s].backups) {
          if (Syncing(c.shards[s], b)) r->unreset.insert(b);
        }
        applier_->Post([this, r] {
          Status opened = Open(*r, true);
          env_.exec->Post([this, r, opened] {
            if (!opened.ok()) {
              return env_.fatal(Status(opened.code(), "opening shard " + std::to_string(r->shard) + ": " + opened.message()));
            }
            r->next_sequence = r->db->stats().last_sequence + 1;
            r->ready = true;
            logging::Info("shard {}: head, {} writes recovered", r->shard, r->next_sequence - 1);
            Place(r, config_);
          });
        });
      }
    } else if (head && !r->head) {
      Promote(r);
    } else if (!head && r->head) {
      // A head is never demoted while it lives: the manager replaces a
      // failed one, and this process stops when it learns it was.
      return env_.fatal(Status::Aborted("shard " + std::to_string(s) + ": this head was made a follower"));
    }
    Place(r, c);
  }
  for (auto it = replicas_.begin(); it != replicas_.end();) {
    if (mine.contains(it->first)) {
      ++it;
      continue;
    }
    Drop(it->second);
    it = replicas_.erase(it);
  }
}

// A head's edits, once logged (in id order, on the engine's job threads):
// their slots belong to them now, and they go down the chain.
lsm::DbOptions::EditLogged RubbleServer::EditHook(std::shared_ptr<Ship> ship, ShardId shard) {
  return [this, ship, shard](const lsm::VersionEdit& e) {
    ship->Logged(e);
    env_.exec->Post([this, ship, shard, e] {
      ReplicaPtr r = Find(shard);
      if (!r || r->ship != ship) return;
      ChainItem item;
      item.kind = ChainItem::Kind::kEdit;
      item.edit = e;
      Emit(r, std::move(item), {});
    });
  };
}

Status RubbleServer::Open(Replica& r, bool head) {
  std::error_code ec;
  fs::create_directories(r.dir, ec);
  if (ec) return Status::IoError("creating " + r.dir + ": " + ec.message());
  lsm::DbOptions o = env_.shape.db;
  if (fs::exists(r.image)) {
    // A head that was a follower: its first tables are in its slots.
    SLIP_ASSIGN_OR_RETURN(auto sfs, rubble::SlotFileSystem::Open(r.dir, r.image, env_.shape.slots, nullptr, &r.io));
    if (head) sfs->TakeTables();
    r.slots = sfs.get();
    r.fs = std::move(sfs);
  } else {
    r.fs = lsm::NewPosixFileSystem(r.dir, {.direct_io = o.direct_io, .counters = &r.io});
  }
  o.fs = r.fs.get();
  o.follower = false;
  std::shared_ptr<Ship> ship = r.ship;
  if (env_.all_compact) {
    // Its own tables stay its own; its followers compact for themselves.
    o.adopt_table = [slots = r.slots](const lsm::FileMeta& m) {
      return slots != nullptr ? slots->Adopt(m) : Status::Ok();
    };
    SLIP_ASSIGN_OR_RETURN(r.db, lsm::Db::Open(r.dir, o));
    return Status::Ok();
  }
  // Recovery names each table it opens here, before any new one is shipped.
  o.adopt_table = [ship, slots = r.slots](const lsm::FileMeta& m) {
    ship->Own(m);
    return slots != nullptr ? slots->Adopt(m) : Status::Ok();
  };
  o.ship_tables = [ship](lsm::VersionEdit* e, const std::vector<std::string_view>& c) { return ship->Tables(e, c); };
  o.edit_logged = EditHook(ship, r.shard);
  SLIP_ASSIGN_OR_RETURN(r.db, lsm::Db::Open(r.dir, o));
  return Status::Ok();
}

// Where `r` is in its chain now; items go again to a new successor.
void RubbleServer::Place(const ReplicaPtr& r, const ClusterConfig& c) {
  const auto chain = ChainOf(c, r->shard);
  const auto& s = c.shards.at(r->shard);
  const size_t pos = std::find(chain.begin(), chain.end(), env_.self) - chain.begin();
  r->predecessor = pos == 0 ? kNone : chain[pos - 1];
  const uint32_t successor = pos + 1 < chain.size() ? chain[pos + 1] : kNone;
  r->read_tail = cluster::ChainTail(s) == env_.self;
  if (successor != r->successor) {
    r->successor = successor;
    ResendAll(r);
  }
  if (r->head && !r->unreset.empty()) {
    auto gone = [&](uint32_t n) { return std::find(chain.begin(), chain.end(), n) == chain.end(); };
    std::erase_if(r->unreset, gone);
    std::erase_if(r->resetting, gone);
    if (r->unreset.empty()) ResendAll(r);
  }
  if (!r->head || !r->ready) return;
  // The head: followers gone are forgotten.
  std::erase_if(r->seeded_followers,
                [&](uint32_t n) { return std::find(chain.begin(), chain.end(), n) == chain.end(); });
  for (uint32_t n : std::set<uint32_t>(r->seeded_followers)) {
    if (Syncing(s, n)) CheckSeeded(r, n);
  }
  ResetStale(r);
  if (env_.all_compact) return SeedNext(r);  // nothing is shipped
  // Complete followers get every table, and so does one being seeded (its
  // image holds its seed's tables; it gets those of every edit after).
  std::set<uint32_t> members;
  for (size_t i = 1; i < chain.size(); ++i) {
    if (!Syncing(s, chain[i]) || r->seeded_followers.contains(chain[i]) || chain[i] == r->seeding) {
      members.insert(chain[i]);
    }
  }
  std::erase_if(r->linked, [&](uint32_t n) { return !members.contains(n); });
  r->ship->SetMembers(members);
  LinkFollowers(r);
  SeedNext(r);
}

void RubbleServer::Promote(const ReplicaPtr& r) {
  if (!r->ready || !r->seeded) {
    return env_.fatal(Status::Aborted("shard " + std::to_string(r->shard) +
                                      ": made head while not a complete follower (the configuration is wrong)"));
  }
  logging::Info("shard {}: promoted to head in term {}", r->shard, term_);
  for (uint32_t b : config_.shards[r->shard].backups) {
    if (Syncing(config_.shards[r->shard], b)) r->unreset.insert(b);
  }
  if (env_.all_compact) {
    // An engine of its own already, at its head's sequences: what it
    // waits for was never readable here, so never acknowledged.
    r->head = true;
    r->waiting.clear();
    r->ship = std::make_shared<Ship>(env_.shape.slots.count, env_.lease_left, env_.jobs != nullptr);
    r->next_sequence = r->db->stats().last_sequence + 1;
    return;
  }
  r->ready = false;
  r->head = true;
  r->ship = std::make_shared<Ship>(env_.shape.slots.count, env_.lease_left, env_.jobs != nullptr);
  // Its followers' reports count from the edit it took over at: before
  // it, they may still apply its predecessor's edits.
  const uint64_t took_over_at = r->db->version().last_edit();
  const auto chain = ChainOf(config_, r->shard);
  std::set<uint32_t> members;
  for (size_t i = 1; i < chain.size(); ++i) {
    if (!Syncing(config_.shards[r->shard], chain[i])) members.insert(chain[i]);
  }
  for (uint32_t m : members) r->ship->ledger.AddFollower(m, took_over_at);
  r->ship->SetMembers(members);
  // What it held was never readable here, so never acknowledged.
  r->held.clear();
  r->seed_bytes.clear();
  for (uint32_t m : members) Link(r, m, false);
  std::shared_ptr<Ship> ship = r->ship;
  // On a writer thread: its flush waits for the links above.
  writers_->Post([this, r, ship] {
    r->slots->TakeTables();
    const lsm::Version v = r->db->version();
    for (int level = 0; level < lsm::kLevels; ++level) {
      for (const auto& f : v.files(level)) ship->Own(f);
    }
    Status s = r->db->Promote(
        [ship](lsm::VersionEdit* e, const std::vector<std::string_view>& c) { return ship->Tables(e, c); },
        EditHook(ship, r->shard));
    env_.exec->Post([this, r, s] {
      auto promoted = [this, r] {
        r->next_sequence = r->db->stats().last_sequence + 1;
        r->ready = true;
        Place(r, config_);
      };
      // Without threads the flush of what it had may be put off: it takes
      // writes only once those are in tables (its WAL holds none of them).
      if (s.Is(Code::kBusy) && env_.jobs != nullptr) return Catch(r, promoted);
      if (!s.ok()) return env_.fatal(Status(s.code(), "promoting shard " + std::to_string(r->shard) + ": " + s.message()));
      promoted();
    });
  });
}

void RubbleServer::Catch(const ReplicaPtr& r, std::function<void()> then) {
  if (then) r->after_catch.push_back(std::move(then));
  if (r->catching) return;
  r->catching = true;
  env_.exec->After(kRetry, [this, r] {
    if (Find(r->shard) != r || !r->db) return;
    writers_->Post([this, r] {
      Status s = r->db->WaitForIdle();
      env_.exec->Post([this, r, s] {
        r->catching = false;
        if (Find(r->shard) != r) return;
        if (s.Is(Code::kBusy)) return Catch(r);
        if (!s.ok()) return env_.fatal(Status(s.code(), "shard " + std::to_string(r->shard) + ": " + s.message()));
        auto waiting = std::move(r->after_catch);
        r->after_catch.clear();
        for (auto& then_run : waiting) then_run();
      });
    });
  });
}

void RubbleServer::Drop(const ReplicaPtr& r) {
  logging::Info("shard {}: no longer replicated here", r->shard);
  if (r->ship) r->ship->Close();
  for (auto& o : r->out) {
    for (auto& d : o->done) d(Status::Unavailable("this node no longer replicates the shard"));
  }
  r->out.clear();
  r->out_index.clear();
  applier_->Post([r] {
    r->db.reset();
    r->fs.reset();
    std::error_code ec;
    fs::remove_all(r->dir, ec);
    fs::remove(r->image, ec);
  });
}

// --- requests -----------------------------------------------------------------

void RubbleServer::Handle(uint16_t method, std::span<const std::byte> payload, Reply reply) {
  const auto m = static_cast<proto::Method>(method);
  if (m == proto::Method::kPutIf) {
    return Refuse(reply, Status::NotSupported("conditional writes (SET NX/XX) are not supported by a RubbleDB node"));
  }
  switch (m) {
    case proto::Method::kRubbleApply:
      return OnApply(payload, std::move(reply));
    case proto::Method::kRubbleLink:
      return OnLink(payload, std::move(reply));
    case proto::Method::kRubbleSeed:
      return OnSeed(payload, std::move(reply));
    case proto::Method::kRubbleSlots:
      return OnSlots(payload, std::move(reply));
    case proto::Method::kPut:
    case proto::Method::kGet:
    case proto::Method::kDel:
      break;
    default:
      return Refuse(reply, Status::InvalidArgument("a rubble node does not serve method " + std::to_string(method)));
  }
  auto req = proto::DecodeKvRequest(payload, log::Limits{});
  if (!req.ok()) return Refuse(reply, req.status());
  if (req->term != term_) {
    return Refuse(reply, Status::StaleTerm("request term " + std::to_string(req->term) + ", node term " +
                                           std::to_string(term_)));
  }
  const ShardId shard = config_.ShardOf(HashKey(req->key));
  ReplicaPtr r = shard == req->shard ? Find(shard) : nullptr;
  const bool get = m == proto::Method::kGet;
  if (!r || (get ? !r->read_tail : !r->head)) {
    return Refuse(reply, Status::StaleTerm("node " + std::to_string(env_.self) + " is not shard " +
                                           std::to_string(req->shard) + "'s " + (get ? "tail" : "head") +
                                           " in term " + std::to_string(term_)));
  }
  if (env_.lease_left() <= 0) {
    return Refuse(reply, Status::Unavailable("node " + std::to_string(env_.self) + " has no valid lease"));
  }
  if (!r->ready || !r->seeded) return Refuse(reply, Status::Busy("shard " + std::to_string(shard) + " is opening"));
  window_.Record(env_.exec->Now(), req->key);
  std::string key(req->key);
  if (get) {
    // Members behind this one are being seeded: a write it passed on but
    // not yet had acknowledged may be missing there, and a read here must
    // not return what the next read (there) could miss.
    if (r->successor != kNone && r->unacked_keys.contains(key)) {
      return Refuse(reply, Status::Busy("a write of this key is on its way down the chain"));
    }
    ++gets_;
    auto v = r->db->Get(key);
    if (!v.ok()) return Refuse(reply, v.status());
    return reply(Code::kOk, proto::Encode(proto::KvResponse{term_, 0, *v}));
  }
  if (req->key.size() + req->value.size() > kMaxEntryBytes) {
    return Refuse(reply, Status::TooLarge("a rubble entry holds at most " + std::to_string(kMaxEntryBytes) +
                                          " bytes of key and value (a table must fit one slot)"));
  }
  Write(r, m, std::move(key), std::string(req->value), std::move(reply));
}

void RubbleServer::Write(const ReplicaPtr& r, proto::Method m, std::string key, std::string value, Reply reply) {
  const bool del = m == proto::Method::kDel;
  // A DEL says whether it found a value: no write of its key may come
  // between its look-up and its own sequence.
  if (r->deleting.contains(key) || (del && r->writing.contains(key))) {
    return Refuse(reply, Status::Busy("another write of this key is being sequenced"));
  }
  if (del) {
    r->deleting.insert(key);
  } else {
    ++r->writing[key];
  }
  ++writes_;
  writers_->Post([this, r, del, key = std::move(key), value = std::move(value), reply = std::move(reply)]() mutable {
    bool found = true;
    Status s;
    if (del) {
      auto v = r->db->Get(key);
      found = v.ok();
      if (!v.ok() && !v.status().Is(Code::kNotFound)) s = v.status();
    }
    lsm::WriteBatch batch;
    batch.ops.push_back({del ? lsm::ValueType::kDeletion : lsm::ValueType::kValue, key, std::move(value)});
    lsm::WriteTicket ticket;
    // A DEL that found nothing still writes its tombstone: its answer is
    // about the state at its sequence, acknowledged with everything before.
    if (s.ok()) s = r->db->Write(batch, {}, &ticket);
    batch.sequence = ticket.sequence;
    env_.exec->Post([this, r, del, key, s, batch = std::move(batch), ticket, reply = std::move(reply), found]() mutable {
      if (del) {
        r->deleting.erase(key);
      } else if (--r->writing[key] == 0) {
        r->writing.erase(key);
      }
      if (!s.ok()) {
        // The engine stops all writes after a failed WAL write: this head
        // can take none, and its successor should.
        Refuse(reply, Status::Unavailable("the head's engine failed: " + s.message()));
        if (s.Is(Code::kIoError) || s.Is(Code::kCorruption)) env_.fatal(s);
        return;
      }
      Sequenced(r, std::move(batch), ticket, std::move(reply), found);
      // Without threads this write may have put a flush off.
      if (env_.jobs != nullptr && !env_.all_compact) Catch(r);
    });
  });
}

// Writes go down the chain in sequence order, whatever order the writer
// threads finished in (a follower could take them in any order; in order
// they never wait for each other there).
void RubbleServer::Sequenced(const ReplicaPtr& r, lsm::WriteBatch batch, lsm::WriteTicket ticket, Reply reply,
                             bool found) {
  r->reorder.emplace(ticket.sequence, Replica::Sequenced{std::move(batch), ticket, std::move(reply), found});
  while (!r->reorder.empty() && r->reorder.begin()->first <= r->next_sequence) {
    Replica::Sequenced w = std::move(r->reorder.begin()->second);
    r->reorder.erase(r->reorder.begin());
    r->next_sequence = w.ticket.sequence + w.batch.ops.size();
    const uint64_t seq = w.ticket.sequence;
    auto done = [this, reply = std::move(w.reply), seq, found = w.found](Status s) {
      if (!s.ok()) return Refuse(reply, s);
      reply(found ? Code::kOk : Code::kNotFound, proto::Encode(proto::KvResponse{term_, seq, {}}));
    };
    ChainItem item;
    item.kind = ChainItem::Kind::kWrite;
    item.batch = std::move(w.batch);
    item.ticket = w.ticket;
    std::vector<std::function<void(Status)>> callers;
    callers.push_back(std::move(done));
    Emit(r, std::move(item), std::move(callers));
  }
}

// --- the stream down the chain ---------------------------------------------------

void RubbleServer::Emit(const ReplicaPtr& r, ChainItem item, std::vector<std::function<void(Status)>> done) {
  const auto key = KeyOf(item);
  if (auto it = r->out_index.find(key); it != r->out_index.end()) {
    // Resent to us while we still wait for our successor: one more caller.
    for (auto& d : done) it->second->done.push_back(std::move(d));
    return;
  }
  auto o = std::make_shared<Out>();
  if (item.kind == ChainItem::Kind::kWrite) {
    for (const auto& op : item.batch.ops) o->keys.push_back(op.key);
  }
  for (const auto& k : o->keys) ++r->unacked_keys[k];
  o->item = std::move(item);
  o->done = std::move(done);
  r->out.push_back(o);
  r->out_index[key] = o;
  Send(r, o);  // the last member acknowledges at once
}

void RubbleServer::Send(const ReplicaPtr& r, const std::shared_ptr<Out>& o) {
  if (o->acked) return;
  if (!r->unreset.empty()) return;  // a head whose stale followers are not all linked fresh yet
  if (r->successor == kNone) return Acked(r, o);
  o->in_flight = true;
  const uint64_t generation = ++o->generation;
  o->item.header = ChainHeader{r->shard, term_, env_.self};
  env_.calls->Call(r->successor, M(proto::Method::kRubbleApply), rubble::EncodeItem(o->item),
                   [this, r, o, generation](Result<rpc::PeerResponse> res) {
                     if (o->acked || o->generation != generation) return;
                     o->in_flight = false;
                     if (res.ok() && res->status == Code::kOk) return Acked(r, o);
                     // Dead, busy, not seeded, or ahead of us in terms:
                     // again soon, to whoever follows then.
                     ResendLater(r);
                   });
}

void RubbleServer::Acked(const ReplicaPtr& r, const std::shared_ptr<Out>& o) {
  if (o->acked) return;
  o->acked = true;
  for (const auto& k : o->keys) {
    auto it = r->unacked_keys.find(k);
    if (it != r->unacked_keys.end() && --it->second == 0) r->unacked_keys.erase(it);
  }
  r->out_index.erase(KeyOf(o->item));
  auto done = std::move(o->done);
  while (!r->out.empty() && r->out.front()->acked) r->out.pop_front();
  for (auto& d : done) d(Status::Ok());
}

void RubbleServer::ResendLater(const ReplicaPtr& r) {
  if (r->resend_armed) return;
  r->resend_armed = true;
  env_.exec->After(kRetry, [this, r] {
    r->resend_armed = false;
    if (replicas_.count(r->shard) == 0 || replicas_.at(r->shard) != r) return;
    for (auto o : std::deque<std::shared_ptr<Out>>(r->out)) {
      if (!o->acked && !o->in_flight) Send(r, o);
    }
  });
}

void RubbleServer::ResendAll(const ReplicaPtr& r) {
  for (auto o : std::deque<std::shared_ptr<Out>>(r->out)) {
    if (o->acked) continue;
    o->in_flight = false;
    ++o->generation;  // an answer from the old successor no longer counts
    Send(r, o);
  }
}

// --- a follower's side -------------------------------------------------------------

Status RubbleServer::Accepts(ShardId shard, uint64_t term, uint32_t sender, const char* what) const {
  if (term > term_) return Status::Busy(std::string(what) + " of term " + std::to_string(term) + ": this node is at " + std::to_string(term_));
  ReplicaPtr r = Find(shard);
  if (!r || r->head || r->predecessor != sender) {
    return Status::StaleTerm(std::string(what) + " from node " + std::to_string(sender) +
                             ", not this replica's predecessor in term " + std::to_string(term_));
  }
  return Status::Ok();
}

void RubbleServer::OnApply(std::span<const std::byte> payload, Reply reply) {
  auto item = rubble::DecodeItem(AsView(payload));
  if (!item.ok()) return reply(item.status().code(), {});
  if (Status s = Accepts(item->header.shard, item->header.term, item->header.sender, "RUBBLE_APPLY"); !s.ok()) {
    return reply(s.code(), {});
  }
  ReplicaPtr r = Find(item->header.shard);
  if (!r->ready || !r->seeded) return reply(Code::kUnavailable, {});  // its predecessor keeps it and tries again
  if (env_.all_compact) return ApplyInOrder(r, std::move(*item), std::move(reply));
  applier_->Post([this, r, item = std::move(*item), reply = std::move(reply)]() mutable {
    lsm::Applied applied;
    // Its replica log is synced by a job of its own (SyncLater), one sync
    // for every item applied before it runs.
    Status s = item.kind == ChainItem::Kind::kWrite
                   ? r->db->ApplyReplicated(item.batch, item.ticket, &applied, /*sync=*/false)
                   : r->db->InstallEdit(item.edit, &applied, /*sync=*/false);
    const uint64_t job = ++r->apply_jobs;
    SyncLater(r);
    env_.exec->Post([this, r, s, job, applied = std::move(applied), item = std::move(item),
                     reply = std::move(reply)]() mutable {
      if (!s.ok()) {
        // A replica that cannot apply what its head sent has diverged or
        // lost its disk: it must not stay in the chain.
        reply(Code::kUnavailable, {});
        return env_.fatal(Status(s.code(), "shard " + std::to_string(r->shard) + ": " + s.message()));
      }
      if (!r->ready || r->head) return reply(Code::kUnavailable, {});
      auto& h = r->held[KeyOf(item)];
      if (h.replies.empty()) h.item = std::move(item);
      h.replies.push_back(std::move(reply));
      // Passed on once it took effect here (a successor never has what
      // this replica would drop), answered once its log is synced too.
      auto release = [&](ItemKey key) {
        auto it = r->held.find(key);
        if (it == r->held.end()) return;
        Replica::Held taken = std::move(it->second);
        r->held.erase(it);
        Emit(r, std::move(taken.item), AnsweringWhenSynced(r, job, std::move(taken.replies)));
      };
      for (uint64_t seq : applied.writes) release(ItemKey{ChainItem::Kind::kWrite, seq});
      for (uint64_t e : applied.edits) release(ItemKey{ChainItem::Kind::kEdit, e});
      if (!applied.edits.empty()) ReportLater(r);
    });
  });
}

void RubbleServer::ApplyInOrder(const ReplicaPtr& r, ChainItem item, Reply reply) {
  if (item.kind != ChainItem::Kind::kWrite) return reply(Code::kInvalidArgument, {});
  const uint64_t seq = item.ticket.sequence;
  if (auto it = r->writing_now.find(seq); it != r->writing_now.end()) {
    it->second.push_back(std::move(reply));  // resent while being written
    return;
  }
  if (seq < r->next_to_write) {
    // Written already: passed on again (its successor recognises it too).
    return Emit(r, std::move(item), AnsweringWhenSynced(r, r->jobs_seen, {std::move(reply)}));
  }
  auto& h = r->waiting[seq];
  if (h.replies.empty()) h.item = std::move(item);
  h.replies.push_back(std::move(reply));
  // The next ones in the head's order go to the engine, one by one on the
  // applier thread (its order is theirs).
  while (!r->waiting.empty() && r->waiting.begin()->first == r->next_to_write) {
    Replica::Held next = std::move(r->waiting.begin()->second);
    r->waiting.erase(r->waiting.begin());
    const uint64_t at = next.item.ticket.sequence;
    r->next_to_write = at + next.item.batch.ops.size();
    r->writing_now[at] = std::move(next.replies);
    applier_->Post([this, r, item = std::move(next.item)]() mutable {
      // Synced with the others written before the sync job runs (SyncLater).
      Status s = r->db->Write(item.batch, {.sync = false, .given_sequence = true});
      const uint64_t job = ++r->apply_jobs;
      SyncLater(r);
      env_.exec->Post([this, r, s, job, item = std::move(item)]() mutable {
        auto it = r->writing_now.find(item.ticket.sequence);
        if (it == r->writing_now.end()) return;
        std::vector<Reply> replies = std::move(it->second);
        r->writing_now.erase(it);
        if (!s.ok()) {
          for (auto& caller : replies) caller(Code::kUnavailable, {});
          return env_.fatal(Status(s.code(), "shard " + std::to_string(r->shard) + ": " + s.message()));
        }
        Emit(r, std::move(item), AnsweringWhenSynced(r, job, std::move(replies)));
      });
    });
  }
}

// A follower's log: one sync for everything applied before it runs, after
// which the items it covers may be answered for (their successors may have
// them already: the syncs down the chain overlap).
void RubbleServer::SyncLater(const ReplicaPtr& r) {
  if (r->sync_queued) return;
  r->sync_queued = true;
  applier_->Post([this, r] {
    r->sync_queued = false;
    const uint64_t through = r->apply_jobs;
    Status s = r->db ? r->db->SyncLogs() : Status::Ok();
    env_.exec->Post([this, r, through, s] {
      if (!s.ok()) return env_.fatal(Status(s.code(), "shard " + std::to_string(r->shard) + ": " + s.message()));
      r->synced_jobs = std::max(r->synced_jobs, through);
      while (!r->unsynced.empty() && r->unsynced.front()->job <= r->synced_jobs) {
        std::shared_ptr<SyncGate> g = std::move(r->unsynced.front());
        r->unsynced.pop_front();
        g->synced = true;
        if (g->downstream) g->Answer(*g->downstream);
      }
    });
  });
}

std::vector<std::function<void(Status)>> RubbleServer::AnsweringWhenSynced(const ReplicaPtr& r, uint64_t job,
                                                                            std::vector<Reply> replies) {
  r->jobs_seen = std::max(r->jobs_seen, job);
  if (job <= r->synced_jobs) return Answering(std::move(replies));
  auto gate = std::make_shared<SyncGate>();
  gate->job = job;
  gate->replies = std::move(replies);
  r->unsynced.push_back(gate);
  return {[gate](Status s) {
    gate->downstream = s;
    // A failure downstream is told at once: the predecessor sends again.
    if (gate->synced || !s.ok()) gate->Answer(s);
  }};
}

void RubbleServer::OnLink(std::span<const std::byte> payload, Reply reply) {
  auto req = rubble::DecodeLink(AsView(payload));
  if (!req.ok()) return reply(req.status().code(), {});
  const ShardId shard = req->header.shard;
  if (req->header.term > term_) return reply(Code::kBusy, {});
  ReplicaPtr r = Find(shard);
  if (!r || r->head || shard >= config_.num_shards() || config_.shards[shard].primary != req->header.sender) {
    return reply(Code::kStaleTerm, {});
  }
  if (!req->fresh) {
    // A new head asks where our slots are; it learns which we hold next.
    if (!r->ready || !r->seeded) return reply(Code::kUnavailable, {});
    reply(Code::kOk, rubble::EncodeLinkResponse({r->image, r->db->stats().last_sequence, r->db->version().last_edit()}));
    r->report_number = std::max(r->report_number, uint64_t{1});
    return ReportLater(r);
  }
  if (req->slot_count != env_.shape.slots.count || req->slot_bytes != env_.shape.slots.slot_bytes) {
    return reply(Code::kInvalidArgument, {});
  }
  // Start over: an engine waiting for its seed, over its image (made once:
  // what a slot held before is never read — the head writes a slot before
  // any edit names it).
  if (r->linking) return reply(Code::kBusy, {});
  r->linking = true;
  const uint64_t incarnation = ++r->incarnation;
  r->ready = false;
  r->seeded = false;
  r->held.clear();
  r->unsynced.clear();  // their callers send again, to the new engine
  r->seed_bytes.clear();
  r->seed_id = 0;
  applier_->Post([this, r, incarnation, reply = std::move(reply)] {
    r->db.reset();
    r->fs.reset();
    r->slots = nullptr;
    std::error_code ec;
    fs::remove_all(r->dir, ec);
    fs::create_directories(env_.dir, ec);
    Status s;
    if (!fs::exists(r->image, ec) || fs::file_size(r->image, ec) != env_.shape.slots.image_bytes()) {
      s = rubble::CreateSlotImage(r->image, env_.shape.slots);
    }
    std::unique_ptr<rubble::SlotFileSystem> sfs;
    if (s.ok()) {
      auto opened = rubble::SlotFileSystem::Open(
          r->dir, r->image, env_.shape.slots,
          [this, shard = r->shard](uint32_t) {
            env_.exec->Post([this, shard] {
              if (ReplicaPtr replica = Find(shard)) ReportLater(replica);
            });
          },
          &r->io);
      s = opened.status();
      if (s.ok()) sfs = std::move(*opened);
    }
    if (s.ok()) {
      lsm::DbOptions o = env_.shape.db;
      o.fs = sfs.get();
      o.follower = true;
      // What it applies is on its disk before it answers for it: after a
      // restart of every node, whichever replica the manager left as head
      // has every acknowledged write (rubble_cluster_sim_test's cold starts).
      o.wal = true;
      o.adopt_table = [f = sfs.get()](const lsm::FileMeta& m) { return f->Adopt(m); };
      auto db = lsm::Db::Open(r->dir, o);
      s = db.status();
      if (s.ok()) {
        r->slots = sfs.get();
        r->fs = std::move(sfs);
        r->db = std::move(*db);
      }
    }
    env_.exec->Post([this, r, s, reply, incarnation] {
      if (incarnation != r->incarnation) return reply(Code::kUnavailable, {});
      r->linking = false;
      if (!s.ok()) {
        reply(Code::kUnavailable, {});
        return env_.fatal(Status(s.code(), "shard " + std::to_string(r->shard) + ": " + s.message()));
      }
      r->ready = true;
      reply(Code::kOk, rubble::EncodeLinkResponse({r->image, 0, 0}));
    });
  });
}

void RubbleServer::OnSeed(std::span<const std::byte> payload, Reply reply) {
  auto c = rubble::DecodeSeedChunk(AsView(payload));
  if (!c.ok()) return reply(c.status().code(), {});
  const ShardId shard = c->header.shard;
  if (c->header.term > term_) return reply(Code::kBusy, {});
  ReplicaPtr r = Find(shard);
  if (!r || r->head || config_.shards[shard].primary != c->header.sender) return reply(Code::kStaleTerm, {});
  if (!r->ready || r->seeded || r->linking) return reply(Code::kUnavailable, {});  // not linked fresh for it
  if (c->seed_id != r->seed_id || c->offset == 0) {
    r->seed_id = c->seed_id;
    r->seed_bytes.clear();
  }
  if (c->offset != r->seed_bytes.size()) return reply(Code::kUnavailable, {});
  r->seed_bytes.append(c->bytes);
  if (r->seed_bytes.size() < c->total) return reply(Code::kOk, {});
  r->ready = false;
  applier_->Post([this, r, incarnation = r->incarnation, bytes = std::move(r->seed_bytes), reply = std::move(reply)] {
    auto seed = rubble::DecodeSeed(bytes);
    Status s = seed.ok() ? r->db->Seed(*seed) : seed.status();
    if (s.ok() && env_.all_compact) {
      // From here on an engine of its own: it flushes and compacts.
      r->slots->TakeTables();
      s = r->db->Promote(nullptr, nullptr);
    }
    const uint64_t next = seed.ok() ? seed->last_sequence + 1 : 0;
    env_.exec->Post([this, r, s, reply, next, incarnation] {
      // Linked afresh meanwhile: this seed went into an engine since replaced.
      if (incarnation != r->incarnation) return reply(Code::kUnavailable, {});
      r->next_to_write = next;
      r->ready = true;
      if (!s.ok()) {
        logging::Warn("shard {}: seed refused: {}", r->shard, s.ToString());
        return reply(Code::kUnavailable, {});
      }
      r->seeded = true;
      logging::Info("shard {}: seeded by node {}", r->shard, config_.shards[r->shard].primary);
      reply(Code::kOk, {});
      ReportLater(r);
    });
  });
  r->seed_bytes.clear();
}

void RubbleServer::ReportLater(const ReplicaPtr& r) {
  if (r->report_armed || r->head) return;
  r->report_armed = true;
  env_.exec->After(kReportDelay, [this, r] {
    r->report_armed = false;
    if (Find(r->shard) != r || r->head || !r->ready || !r->seeded || r->slots == nullptr) return;
    rubble::SlotReport rep;
    rep.header = ChainHeader{r->shard, term_, env_.self};
    // The watermark first: a table added after it is protected by it.
    rep.watermark = r->db->version().last_edit();
    rep.slots = r->slots->held_slots();
    rep.number = ++r->report_number;
    env_.calls->Call(config_.shards[r->shard].primary, M(proto::Method::kRubbleSlots), rubble::EncodeSlotReport(rep),
                     [this, r](Result<rpc::PeerResponse> res) {
                       if (!res.ok() || res->status != Code::kOk) {
                         env_.exec->After(kSeedRetry, [this, r] { ReportLater(r); });
                       }
                     });
  });
}

// --- a head's side: links, seeds, reports ------------------------------------------

void RubbleServer::OnSlots(std::span<const std::byte> payload, Reply reply) {
  auto rep = rubble::DecodeSlotReport(AsView(payload));
  if (!rep.ok()) return reply(rep.status().code(), {});
  ReplicaPtr r = Find(rep->header.shard);
  if (!r || !r->head || !r->ship) return reply(Code::kStaleTerm, {});
  r->ship->ledger.Report(rep->header.sender, rep->number, rep->slots, rep->watermark);
  reply(Code::kOk, {});
}

void RubbleServer::LinkFollowers(const ReplicaPtr& r) {
  for (uint32_t m : r->ship->Members()) {
    if (!r->linked.contains(m) && m != r->seeding) Link(r, m, false);  // one being seeded is linked fresh
  }
}

void RubbleServer::Link(const ReplicaPtr& r, uint32_t node, bool fresh) {
  r->linked.insert(node);
  rubble::LinkRequest req{ChainHeader{r->shard, term_, env_.self}, fresh, env_.shape.slots.count,
                          env_.shape.slots.slot_bytes};
  env_.calls->Call(node, M(proto::Method::kRubbleLink), rubble::EncodeLink(req),
                   [this, r, node](Result<rpc::PeerResponse> res) {
                     if (Find(r->shard) != r || !r->head) return;
                     if (!res.ok() || res->status != Code::kOk) {
                       r->linked.erase(node);
                       // Tried again while it is a member; a dead one leaves the configuration.
                       env_.exec->After(kSeedRetry, [this, r] {
                         if (Find(r->shard) == r && r->ship) LinkFollowers(r);
                       });
                       return;
                     }
                     // Here, not on a thread of ours: the engine may be
                     // waiting for this link in one of them.
                     auto answer = rubble::DecodeLinkResponse(res->payload);
                     auto w = answer.ok() ? rubble::SlotWriter::Open(answer->image, env_.shape.slots)
                                          : Result<std::unique_ptr<rubble::SlotWriter>>(answer.status());
                     if (!w.ok()) {
                       return env_.fatal(Status(w.status().code(), "shard " + std::to_string(r->shard) + ": node " +
                                                                       std::to_string(node) + "'s slot image: " +
                                                                       w.status().message()));
                     }
                     r->ship->AddWriter(node, std::shared_ptr<rubble::SlotWriter>(std::move(*w)));
                   });
}

// A head's life began (it opened, or was promoted) with followers listed as
// syncing. Each may still run an engine seeded by the head's last life or
// by the head before it, and take this life's items into it — which name
// slots this head never wrote into that image: a restarted head's recovery
// edits go down the chain before it links anyone (found by `slip soak`: "no
// table footer" at a follower right after its head came back), and a
// promoted head's flush edit too. Only a fresh link ends such an engine, so
// this head passes nothing on — not to a complete successor either, which
// would pass it on to them — until each has had one or left the chain.
void RubbleServer::ResetStale(const ReplicaPtr& r) {
  for (uint32_t n : std::set<uint32_t>(r->unreset)) {
    if (!r->resetting.insert(n).second) continue;
    rubble::LinkRequest req{ChainHeader{r->shard, term_, env_.self}, true, env_.shape.slots.count,
                            env_.shape.slots.slot_bytes};
    env_.calls->Call(n, M(proto::Method::kRubbleLink), rubble::EncodeLink(req),
                     [this, r, n](Result<rpc::PeerResponse> res) {
                       r->resetting.erase(n);
                       if (Find(r->shard) != r || !r->head || !r->unreset.contains(n)) return;
                       if (!res.ok() || res->status != Code::kOk) {
                         // Dead (the manager takes it out of the chain), busy,
                         // or not at this term yet.
                         env_.exec->After(kSeedRetry, [this, r] {
                           if (Find(r->shard) == r && r->head) ResetStale(r);
                         });
                         return;
                       }
                       r->unreset.erase(n);
                       if (!r->unreset.empty()) return;
                       ResendAll(r);
                       SeedNext(r);
                     });
  }
}

// A follower this head seeded is listed as syncing while its seed is not
// published yet — or again, once its process started afresh with its data
// (cluster::Resync lists it syncing once more, and if it was listed so
// already the configuration shows nothing else): it then holds no seed, and
// it would refuse every item until seeded again. A plain link tells them
// apart: a follower not seeded refuses it.
void RubbleServer::CheckSeeded(const ReplicaPtr& r, uint32_t node) {
  if (!r->checking.insert(node).second) return;
  rubble::LinkRequest req{ChainHeader{r->shard, term_, env_.self}, false, env_.shape.slots.count,
                          env_.shape.slots.slot_bytes};
  env_.calls->Call(node, M(proto::Method::kRubbleLink), rubble::EncodeLink(req),
                   [this, r, node](Result<rpc::PeerResponse> res) {
                     r->checking.erase(node);
                     if (Find(r->shard) != r || !r->head || !r->seeded_followers.contains(node) ||
                         !Syncing(config_.shards[r->shard], node)) {
                       return;
                     }
                     if (res.ok() && res->status == Code::kOk) return;  // seeded: its publication is on the way
                     if (res.ok() && res->status == Code::kUnavailable) {
                       logging::Info("shard {}: node {} started again and holds no seed", r->shard, node);
                       r->seeded_followers.erase(node);
                       r->linked.erase(node);
                       return Place(r, config_);
                     }
                     // Not reached, or not at this term yet: asked again.
                     env_.exec->After(kSeedRetry, [this, r, node] {
                       if (Find(r->shard) == r && r->head) CheckSeeded(r, node);
                     });
                   });
}

void RubbleServer::SeedNext(const ReplicaPtr& r) {
  // After the resets: a fresh link of each would find the other's under way.
  if (r->seeding != kNone || !r->ready || !r->head || !r->unreset.empty()) return;
  const auto& s = config_.shards[r->shard];
  uint32_t next = kNone;
  for (uint32_t n : ChainOf(config_, r->shard)) {
    if (Syncing(s, n) && !r->seeded_followers.contains(n)) {
      next = n;
      break;
    }
  }
  if (next == kNone) return;
  r->seeding = next;
  logging::Info("shard {}: seeding node {}", r->shard, next);
  rubble::LinkRequest req{ChainHeader{r->shard, term_, env_.self}, true, env_.shape.slots.count,
                          env_.shape.slots.slot_bytes};
  env_.calls->Call(next, M(proto::Method::kRubbleLink), rubble::EncodeLink(req),
                   [this, r, next](Result<rpc::PeerResponse> res) {
                     if (!res.ok() || res->status != Code::kOk) {
                       return SeedFailed(r, next, res.ok() ? Status(res->status, "linking") : res.status());
                     }
                     std::shared_ptr<Ship> ship = r->ship;
                     auto answer = rubble::DecodeLinkResponse(res->payload);
                     if (!answer.ok()) return SeedFailed(r, next, answer.status());
                     writers_->Post([this, r, ship, next, image = answer->image] {
                       // The follower's copy: every table of the version in
                       // its slot, then the MemTables; no edit in between.
                       auto seeded = [&]() -> Result<Seeded> {
                         SLIP_ASSIGN_OR_RETURN(auto w, rubble::SlotWriter::Open(image, env_.shape.slots));
                         std::shared_ptr<rubble::SlotWriter> writer(std::move(w));
                         struct Resume {
                           Ship* s;
                           ~Resume() { s->Resume(); }
                         } resume{ship.get()};
                         SLIP_RETURN_IF_ERROR(ship->Pause());
                         SLIP_ASSIGN_OR_RETURN(lsm::FollowerSeed seed, r->db->SeedFollower());
                         std::vector<uint32_t> slots;
                         std::string scratch;
                         uint32_t next_slot = 0;
                         for (auto& [level, meta] : seed.version.added) {
                           // All-compact: the new replica's image is its own, filled in order.
                           if (env_.all_compact) meta.slot = ++next_slot;
                           if (meta.slot == 0 || meta.slot > env_.shape.slots.count) {
                             return Status::InvalidArgument("table " + std::to_string(meta.number) +
                                                            " has no slot in the new replica's image");
                           }
                           char name[32];
                           std::snprintf(name, sizeof name, "/%06llu.sst", static_cast<unsigned long long>(meta.number));
                           SLIP_ASSIGN_OR_RETURN(auto file, r->fs->Open(r->dir + name, lsm::FileSystem::Kind::kTable));
                           SLIP_ASSIGN_OR_RETURN(std::string_view bytes, file->Read(0, meta.size, &scratch));
                           SLIP_RETURN_IF_ERROR(writer->Write(meta.slot, bytes));
                           slots.push_back(meta.slot);
                         }
                         if (!env_.all_compact) {
                           ship->ledger.AddFollower(next, seed.version.id);
                           ship->ledger.Report(next, 0, slots, seed.version.id);
                           ship->AddWriter(next, writer);
                           ship->AddMember(next);
                         }
                         return Seeded{rubble::EncodeSeed(seed), seed.last_sequence, seed.version.id};
                       }();
                       env_.exec->Post([this, r, next, seeded = std::move(seeded)]() mutable {
                         if (!seeded.ok()) return SeedFailed(r, next, seeded.status());
                         auto bytes = std::make_shared<std::string>(std::move(seeded->bytes));
                         AfterPredecessorHas(r, next, seeded->last_sequence, seeded->last_edit, [this, r, next, bytes] {
                           SendSeed(r, next, env_.exec->Rng().Next() | 1, bytes, 0);
                         });
                       });
                     });
                   });
}

// A seed may be no newer than what the new follower's predecessor has: a
// follower ahead of a member before it would hold writes that member lacks
// — never acknowledged, readable at it once it is the tail, and gone if
// that member were promoted (found by rubble_server_test's seeded kills).
void RubbleServer::AfterPredecessorHas(const ReplicaPtr& r, uint32_t node, uint64_t sequence, uint64_t edit,
                                       std::function<void()> then, int tries) {
  if (Find(r->shard) != r || !r->head || r->seeding != node) return;
  const auto chain = ChainOf(config_, r->shard);
  const auto at = std::find(chain.begin(), chain.end(), node);
  if (at == chain.end() || at == chain.begin()) {
    return SeedFailed(r, node, Status::Aborted("no longer a follower of the shard"));
  }
  const uint32_t predecessor = *(at - 1);
  if (predecessor == env_.self) return then();
  rubble::LinkRequest req{ChainHeader{r->shard, term_, env_.self}, false, env_.shape.slots.count,
                          env_.shape.slots.slot_bytes};
  env_.calls->Call(predecessor, M(proto::Method::kRubbleLink), rubble::EncodeLink(req),
                   [this, r, node, sequence, edit, predecessor, tries,
                    then = std::move(then)](Result<rpc::PeerResponse> res) mutable {
                     auto a = res.ok() && res->status == Code::kOk
                                  ? rubble::DecodeLinkResponse(res->payload)
                                  : Result<rubble::LinkResponse>(Status::Unavailable("no answer"));
                     // All-compact: every replica numbers edits of its own
                     // (found by rubble_cluster_sim_test: a seed waited for
                     // a predecessor that had compacted less than its head).
                     if (a.ok() && a->last_sequence >= sequence && (env_.all_compact || a->last_edit >= edit)) {
                       return then();
                     }
                     // Every 2 s: a seed that waits long says for what.
                     if (tries % 400 == 399) {
                       logging::Warn("shard {}: seeding node {} waits for node {} to have write {} and edit {} (it "
                                     "has {} and {})",
                                     r->shard, node, predecessor, sequence, edit, a.ok() ? a->last_sequence : 0,
                                     a.ok() ? a->last_edit : 0);
                     }
                     env_.exec->After(kReportDelay, [this, r, node, sequence, edit, tries, then = std::move(then)]() mutable {
                       AfterPredecessorHas(r, node, sequence, edit, std::move(then), tries + 1);
                     });
                   });
}

void RubbleServer::SendSeed(const ReplicaPtr& r, uint32_t node, uint64_t seed_id, std::shared_ptr<std::string> bytes,
                            uint64_t offset) {
  if (Find(r->shard) != r || !r->head) return;
  rubble::SeedChunk c;
  c.header = ChainHeader{r->shard, term_, env_.self};
  c.seed_id = seed_id;
  c.offset = offset;
  c.total = bytes->size();
  c.bytes = std::string_view(*bytes).substr(offset, kSeedChunk);
  const uint64_t end = offset + c.bytes.size();
  env_.calls->Call(node, M(proto::Method::kRubbleSeed), rubble::EncodeSeedChunk(c),
                   [this, r, node, seed_id, bytes, end](Result<rpc::PeerResponse> res) {
                     if (!res.ok() || res->status != Code::kOk) {
                       return SeedFailed(r, node, res.ok() ? Status(res->status, "seeding") : res.status());
                     }
                     if (end < bytes->size()) return SendSeed(r, node, seed_id, bytes, end);
                     logging::Info("shard {}: node {} seeded ({} bytes of MemTables and version)", r->shard, node,
                                   bytes->size());
                     r->seeding = kNone;
                     r->seeded_followers.insert(node);
                     r->linked.insert(node);
                     env_.mark_synced(r->shard, node);
                     SeedNext(r);
                   });
}

void RubbleServer::SeedFailed(const ReplicaPtr& r, uint32_t node, const Status& s) {
  if (Find(r->shard) != r || !r->head) return;
  logging::Warn("shard {}: seeding node {} failed ({}); trying again", r->shard, node, s.ToString());
  if (r->ship) r->ship->RemoveMember(node);
  r->linked.erase(node);
  r->seeding = kNone;
  env_.exec->After(kSeedRetry, [this, r] {
    if (Find(r->shard) == r) SeedNext(r);
  });
}

// --- what STATS reports ------------------------------------------------------------

PoolNode::Counters RubbleServer::counters() const {
  Counters c;
  c.gets = gets_.load();
  c.writes = writes_.load();
  return c;
}

RubbleServer::Cpu RubbleServer::cpu() const {
  Cpu c;
  c.writers_ns = writers_->cpu_ns();
  c.apply_ns = applier_->cpu_ns();
  for (const auto& [s, r] : replicas_) {
    if (!r->db) continue;
    const auto st = r->db->stats();
    c.flush_ns += st.flush_cpu_ns;
    c.compaction_ns += st.compaction_cpu_ns;
  }
  return c;
}

}  // namespace slip::server
