#include "rubble/chain.h"

#include "common/cpu_time.h"

#include <cstdio>
#include <filesystem>
#include <shared_mutex>

namespace slip::rubble {


struct Chain::Ack {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  void Done(Status s) {
    std::lock_guard<std::mutex> l(mu);
    if (done) return;
    done = true;
    status = std::move(s);
    cv.notify_all();
  }
  Status Wait() {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return done; });
    return status;
  }
};

Result<std::unique_ptr<Chain>> Chain::Open(const ChainOptions& o) {
  if (o.replicas < 1 || o.replicas > 16) return Status::InvalidArgument("a chain of 1 to 16 replicas");
  std::unique_ptr<Chain> c(new Chain(o));
  SLIP_RETURN_IF_ERROR(c->Start());
  return c;
}

Status Chain::Start() {
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  if (ec) return Status::IoError("creating " + options_.dir + ": " + ec.message());
  const bool rubble = options_.mode == Mode::kRubble;
  const int n = options_.replicas - 1;
  if (rubble) slot_map_ = std::make_unique<SlotMap>(options_.slots.count, n);

  const std::string head_dir = options_.dir + "/head";
  head_fs_ = lsm::NewPosixFileSystem(head_dir, {.direct_io = options_.db.direct_io, .counters = &head_io_});
  lsm::DbOptions ho = options_.db;
  ho.fs = head_fs_.get();
  ho.follower = false;
  if (rubble) {
    ho.ship_tables = ShipHook(0);
    ho.edit_logged = LoggedHook(0, -1);
  }
  SLIP_ASSIGN_OR_RETURN(head_, lsm::Db::Open(head_dir, ho));
  head_db_ = head_.get();

  std::optional<lsm::FollowerSeed> seed;
  if (rubble) {
    SLIP_ASSIGN_OR_RETURN(seed, head_->SeedFollower());
    next_sequence_ = seed->last_sequence + 1;
  } else {
    next_sequence_ = head_->stats().last_sequence + 1;
  }
  for (int i = 0; i < n; ++i) {
    auto f = std::make_unique<Follower>();
    f->index = i;
    const std::string dir = options_.dir + "/follower-" + std::to_string(i + 1);
    lsm::DbOptions fo = options_.db;
    if (rubble) {
      const std::string image = options_.dir + "/follower-" + std::to_string(i + 1) + ".slots";
      SLIP_RETURN_IF_ERROR(CreateSlotImage(image, options_.slots));
      // The head's bytes count against the follower's device: they land there.
      SLIP_ASSIGN_OR_RETURN(f->writer, SlotWriter::Open(image, options_.slots, &f->io));
      SLIP_ASSIGN_OR_RETURN(
          f->fs, SlotFileSystem::Open(dir, image, options_.slots,
                                      [this, i](uint32_t slot) { slot_map_->Release(i, slot); }, &f->io));
      fo.fs = f->fs.get();
      fo.follower = true;
      fo.wal = false;
      fo.adopt_table = [fs = f->fs.get()](const lsm::FileMeta& m) { return fs->Adopt(m); };
      fo.ship_tables = nullptr;
      fo.edit_logged = nullptr;
    } else {
      f->own_fs = lsm::NewPosixFileSystem(dir, {.direct_io = options_.db.direct_io, .counters = &f->io});
      fo.fs = f->own_fs.get();
      fo.follower = false;
    }
    SLIP_ASSIGN_OR_RETURN(f->db, lsm::Db::Open(dir, fo));
    if (rubble) SLIP_RETURN_IF_ERROR(f->db->Seed(*seed));
    followers_.push_back(std::move(f));
  }
  for (auto& f : followers_) f->thread = std::thread([this, p = f.get()] { Run(p); });
  return Status::Ok();
}

Chain::~Chain() {
  for (auto& f : followers_) {
    {
      std::lock_guard<std::mutex> l(f->mu);
      f->stop = true;
    }
    f->cv.notify_all();
    if (f->thread.joinable()) f->thread.join();
  }
  head_.reset();  // its hooks call into the followers
  for (auto& f : followers_) f->db.reset();
  followers_.clear();
}

Chain::Follower* Chain::Next(int from) {
  for (size_t i = static_cast<size_t>(from + 1); i < followers_.size(); ++i) {
    if (followers_[i]->alive) return followers_[i].get();
  }
  return nullptr;
}

int Chain::live_replicas() const {
  int n = 1;
  for (const auto& f : followers_) n += f->alive;
  return n;
}

void Chain::Forward(int from, Item item, std::optional<uint64_t> generation) {
  std::lock_guard<std::mutex> chain(chain_mu_);
  // Checked under the lock KillHead changes heads under: a failed head's
  // last edit does not slip past its successor.
  if (generation && *generation != head_generation_.load()) return;
  Follower* next = Next(from);
  if (next == nullptr) {
    if (item.ack) item.ack->Done(Status::Ok());  // the tail applied it
    return;
  }
  auto& unacked = from < 0 ? head_unacked_ : followers_[static_cast<size_t>(from)]->unacked;
  if (item.ack) {
    while (!unacked.empty() && unacked.front()->done) unacked.pop_front();
    unacked.push_back(item.ack);
  }
  {
    std::lock_guard<std::mutex> l(next->mu);
    next->queue.push_back(std::move(item));
  }
  next->cv.notify_one();
}

void Chain::Run(Follower* f) {
  while (true) {
    Item item;
    {
      std::unique_lock<std::mutex> l(f->mu);
      f->busy = false;
      f->cv.notify_all();  // Drain waits for an idle follower
      f->cv.wait(l, [&] { return f->stop || !f->queue.empty(); });
      if (f->stop) return;
      item = std::move(f->queue.front());
      f->queue.pop_front();
      f->busy = true;
    }
    const uint64_t t0 = ThreadCpuNanos();
    Status s;
    lsm::Applied applied;
    auto* w = std::get_if<std::pair<lsm::WriteBatch, lsm::WriteTicket>>(&item.what);
    if (w != nullptr && options_.mode == Mode::kAllCompact) {
      s = f->db->Write(w->first);
      if (s.ok()) applied.writes.push_back(w->first.sequence);
    } else if (w != nullptr) {
      s = f->db->ApplyReplicated(w->first, w->second, &applied);
    } else {
      s = f->db->InstallEdit(std::get<lsm::VersionEdit>(item.what), &applied);
    }
    f->cpu_ns += ThreadCpuNanos() - t0;
    if (!s.ok()) {
      // A replica that cannot apply what its head sent has diverged: the
      // write fails rather than be acknowledged by a chain that lacks it.
      if (item.ack) item.ack->Done(s);
      continue;
    }
    // Held until it takes effect here: a write until readable, an edit until
    // applied — a successor never has what this replica might drop.
    if (w != nullptr) {
      f->held.emplace(w->first.sequence, std::move(item));
    } else {
      f->held_edits.emplace(std::get<lsm::VersionEdit>(item.what).id, std::move(item));
    }
    for (uint64_t seq : applied.writes) {
      auto it = f->held.find(seq);
      if (it == f->held.end()) continue;
      Item released = std::move(it->second);
      f->held.erase(it);
      Forward(f->index, std::move(released));
    }
    for (uint64_t id : applied.edits) {
      auto it = f->held_edits.find(id);
      if (it == f->held_edits.end()) continue;
      Item released = std::move(it->second);
      f->held_edits.erase(it);
      Forward(f->index, std::move(released));
    }
  }
}

Status Chain::Ship(lsm::VersionEdit* edit, const std::vector<std::string_view>& contents) {
  const uint64_t t0 = ThreadCpuNanos();
  struct Count {
    std::atomic<uint64_t>* total;
    uint64_t t0;
    ~Count() { *total += ThreadCpuNanos() - t0; }
  } count{&ship_cpu_ns_, t0};
  size_t tables = 0;
  for (const auto& c : contents) tables += !c.empty();
  SLIP_ASSIGN_OR_RETURN(std::vector<uint32_t> slots, slot_map_->Acquire(tables));
  std::vector<Follower*> live;
  {
    std::lock_guard<std::mutex> chain(chain_mu_);
    for (auto& f : followers_) {
      if (f->alive) live.push_back(f.get());
    }
  }
  size_t next = 0;
  for (size_t i = 0; i < edit->added.size(); ++i) {
    if (contents[i].empty()) continue;  // moved down a level: it keeps its slot
    const uint32_t slot = slots[next++];
    // The head fans out: every follower's copy, not one passed along.
    for (Follower* f : live) {
      SLIP_RETURN_IF_ERROR(f->writer->Write(slot, contents[i]));
      shipped_bytes_ += options_.slots.slot_bytes;
    }
    edit->added[i].second.slot = slot;
  }
  return Status::Ok();
}

lsm::DbOptions::ShipTables Chain::ShipHook(uint64_t generation) {
  return [this, generation](lsm::VersionEdit* e, const std::vector<std::string_view>& c) -> Status {
    // A head that failed ships nothing more: its slots are no longer its own.
    if (generation != head_generation_.load()) return Status::Aborted("this head failed");
    return Ship(e, c);
  };
}

lsm::DbOptions::EditLogged Chain::LoggedHook(uint64_t generation, int from) {
  return [this, generation, from](const lsm::VersionEdit& e) { Forward(from, Item{e, nullptr}, generation); };
}

Status Chain::Write(lsm::WriteBatch batch) {
  std::shared_lock<std::shared_mutex> alive(head_mu_);
  lsm::WriteTicket ticket;
  SLIP_RETURN_IF_ERROR(head_db_->Write(batch, {}, &ticket));
  batch.sequence = ticket.sequence;
  const uint64_t ops = batch.ops.size();
  auto ack = std::make_shared<Ack>();
  {
    std::lock_guard<std::mutex> l(order_mu_);
    out_of_order_.emplace(ticket.sequence, Item{std::make_pair(std::move(batch), ticket), ack});
    (void)ops;
    while (!out_of_order_.empty() && out_of_order_.begin()->first == next_sequence_) {
      Item item = std::move(out_of_order_.begin()->second);
      out_of_order_.erase(out_of_order_.begin());
      next_sequence_ += std::get<0>(item.what).first.ops.size();
      Forward(head_pos_, std::move(item));
    }
  }
  alive.unlock();
  return ack->Wait();
}

Status Chain::Put(std::string_view key, std::string_view value) {
  lsm::WriteBatch b;
  b.ops.push_back({lsm::ValueType::kValue, std::string(key), std::string(value)});
  return Write(std::move(b));
}

Status Chain::Delete(std::string_view key) {
  lsm::WriteBatch b;
  b.ops.push_back({lsm::ValueType::kDeletion, std::string(key), {}});
  return Write(std::move(b));
}

lsm::Db* Chain::Tail() {
  std::lock_guard<std::mutex> chain(chain_mu_);
  for (auto it = followers_.rbegin(); it != followers_.rend(); ++it) {
    if ((*it)->alive) return (*it)->db.get();
  }
  return head_db_;
}

Result<std::string> Chain::Get(std::string_view key) { return Tail()->Get(key); }

Status Chain::Scan(std::string_view start, size_t count, std::vector<std::pair<std::string, std::string>>* out) {
  return Tail()->Scan(start, count, out);
}

Status Chain::Drain() {
  // Until nothing moves: the head's jobs make edits, which followers apply,
  // and (all-compact) followers' own jobs.
  for (int round = 0; round < 1000; ++round) {
    SLIP_RETURN_IF_ERROR(head_db_->WaitForIdle());
    bool moved = false;
    for (auto& f : followers_) {
      std::unique_lock<std::mutex> l(f->mu);
      if (!f->alive) continue;
      moved |= !f->queue.empty() || f->busy;
      f->cv.wait(l, [&] { return f->queue.empty() && !f->busy; });
    }
    for (auto& f : followers_) {
      if (f->alive && options_.mode == Mode::kAllCompact) SLIP_RETURN_IF_ERROR(f->db->WaitForIdle());
    }
    if (!moved) return Status::Ok();
  }
  return Status::Busy("the chain did not settle");
}

Status Chain::KillTail() {
  Follower* tail = nullptr;
  {
    std::lock_guard<std::mutex> chain(chain_mu_);
    for (auto it = followers_.rbegin(); it != followers_.rend(); ++it) {
      if ((*it)->alive) {
        tail = it->get();
        break;
      }
    }
    if (tail == nullptr) return Status::InvalidArgument("the chain is down to its head");
  }
  {
    std::lock_guard<std::mutex> l(tail->mu);
    tail->stop = true;
    tail->queue.clear();  // lost with it
  }
  tail->cv.notify_all();
  tail->thread.join();
  std::lock_guard<std::mutex> chain(chain_mu_);
  tail->alive = false;
  if (slot_map_) slot_map_->RemoveFollower(tail->index);
  // The new tail acknowledges what it applied and passed to the dead one:
  // the last live follower before it, or the head (a promoted follower is
  // not `alive` as a follower, but it passes on from its own place).
  int prev = tail->index - 1;
  while (prev > head_pos_ && !followers_[static_cast<size_t>(prev)]->alive) --prev;
  auto& unacked = prev < 0 ? head_unacked_ : followers_[static_cast<size_t>(prev)]->unacked;
  for (auto& a : unacked) a->Done(Status::Ok());
  unacked.clear();
  return Status::Ok();
}

Status Chain::KillHead() {
  if (options_.mode != Mode::kRubble) {
    return Status::NotSupported("a head fails over in rubble mode (all-compact followers are not followers)");
  }
  // No write is between the head and its successor while the head changes.
  std::unique_lock<std::shared_mutex> writes(head_mu_);
  Follower* next = nullptr;
  {
    std::lock_guard<std::mutex> chain(chain_mu_);
    next = Next(head_pos_);
    if (next == nullptr) return Status::InvalidArgument("the head has no successor to take over");
    head_generation_++;  // the failed head's jobs ship and send nothing more
  }
  // The crash: the head's engine stops mid-job.
  if (head_pos_ < 0) {
    head_.reset();
  } else {
    followers_[static_cast<size_t>(head_pos_)]->db.reset();
  }
  // Its successor stops following; what was on its way to it is lost with
  // the head (and was never acknowledged: only the tail acknowledges).
  {
    std::lock_guard<std::mutex> l(next->mu);
    next->stop = true;
  }
  next->cv.notify_all();
  next->thread.join();
  std::vector<std::shared_ptr<Ack>> lost;
  for (auto& item : next->queue) {
    if (item.ack) lost.push_back(item.ack);
  }
  for (auto& [seq, item] : next->held) {
    if (item.ack) lost.push_back(item.ack);
  }
  next->queue.clear();
  next->held.clear();
  next->held_edits.clear();
  for (auto& a : lost) a->Done(Status::Unavailable("the chain's head failed before the write reached its successor"));
  {
    std::lock_guard<std::mutex> chain(chain_mu_);
    next->alive = false;
    head_pos_ = next->index;
    head_unacked_.clear();
  }
  // Its slot map is rebuilt from its own version: a slot a live table
  // holds stays held by every follower; one the failed head shipped into
  // for an edit nobody applied is free again (the paper leaves this open).
  if (slot_map_) {
    slot_map_->RemoveFollower(next->index);
    std::vector<uint32_t> held;
    const lsm::Version v = next->db->version();
    for (int level = 0; level < lsm::kLevels; ++level) {
      for (const auto& f : v.files(level)) {
        if (f.slot != 0) held.push_back(f.slot);
      }
    }
    slot_map_->Reconcile(held);
  }
  next->fs->TakeTables();
  SLIP_RETURN_IF_ERROR(next->db->Promote(ShipHook(head_generation_.load()),
                                         LoggedHook(head_generation_.load(), next->index)));
  head_db_ = next->db.get();
  std::lock_guard<std::mutex> order(order_mu_);
  for (auto& [seq, item] : out_of_order_) {
    if (item.ack) item.ack->Done(Status::Unavailable("the chain's head failed"));
  }
  out_of_order_.clear();
  next_sequence_ = head_db_->stats().last_sequence + 1;
  return Status::Ok();
}

std::vector<Chain::Replica> Chain::replicas() {
  std::vector<Replica> out;
  Replica h;
  h.head = head_pos_ < 0;
  h.alive = head_ != nullptr;
  if (head_) h.db = head_->stats();
  h.read_bytes = head_io_.bytes_read.load();
  h.write_bytes = head_io_.bytes_written.load();
  out.push_back(h);
  for (auto& f : followers_) {
    Replica r;
    r.head = f->index == head_pos_;
    r.alive = f->alive || r.head;
    if (!f->db) continue;
    r.request_cpu_ns = f->cpu_ns.load();
    r.db = f->db->stats();
    r.read_bytes = f->io.bytes_read.load();
    r.write_bytes = f->io.bytes_written.load();
    out.push_back(r);
  }
  return out;
}

}  // namespace slip::rubble
