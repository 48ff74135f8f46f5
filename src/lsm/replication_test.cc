// The engine's replication hooks (lsm/db.h: tickets, followers, shipped
// tables, edits installed in order) in one process, with the chain's
// transport replaced by queues the test delivers from in any order it
// likes: the invariants of RubbleDB's chain that are the engine's own —
// followers hold exactly the head's writes in the head's MemTables (I4, I5),
// reach the head's version edit by edit (I1), never flush or compact (I11),
// and never show a write through a table before they applied it themselves
// (I3, the "A1" case).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "common/random.h"
#include "lsm/db.h"
#include "lsm/testing/tiny_shape.h"

namespace slip::lsm {
namespace {

DbOptions Shape(MemFileSystem* fs) {
  DbOptions o = testing::TinyShape(fs);
  o.wal = false;  // as in the paper's runs: the chain is the durability
  return o;
}

std::string TableName(uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06llu.sst", static_cast<unsigned long long>(n));
  return buf;
}

// A head and followers sharing a MemFileSystem; what the head sends waits
// in queues until the test delivers it.
struct Chain {
  MemFileSystem fs;
  std::unique_ptr<Db> head;
  std::vector<std::unique_ptr<Db>> followers;
  struct Write {
    WriteBatch batch;
    WriteTicket ticket;
  };
  std::vector<std::vector<Write>> writes;       // per follower, in send order
  std::vector<std::vector<VersionEdit>> edits;  // per follower
  uint64_t shipped_tables = 0;
  uint32_t next_slot = 1;
  const bool follower_wal_;

  // `follower_wal`: followers log what they apply (as a cluster's do).
  explicit Chain(int n_followers, bool follower_wal = false) : follower_wal_(follower_wal) {
    DbOptions o = Shape(&fs);
    o.ship_tables = [this, n_followers](VersionEdit* edit, const std::vector<std::string_view>& contents) -> Status {
      // The one-sided write: the table's bytes land in each follower's
      // directory (a slot) before the edit that names them is sent.
      for (size_t t = 0; t < edit->added.size(); ++t) {
        FileMeta& f = edit->added[t].second;
        if (contents[t].empty()) continue;  // moved: it keeps its slot
        f.slot = next_slot++;
        SLIP_ASSIGN_OR_RETURN(auto src, fs.Open("/head/" + TableName(f.number), FileSystem::Kind::kTable));
        std::string scratch;
        SLIP_ASSIGN_OR_RETURN(std::string_view bytes, src->Read(0, src->size(), &scratch));
        if (bytes != contents[t]) return Status::Corruption("the head's copy differs from its file");
        for (int i = 0; i < n_followers; ++i) {
          SLIP_ASSIGN_OR_RETURN(auto dst, fs.Create("/f" + std::to_string(i) + "/slot" + std::to_string(f.slot),
                                                    FileSystem::Kind::kTable));
          SLIP_RETURN_IF_ERROR(dst->Append(bytes));
          SLIP_RETURN_IF_ERROR(dst->Sync());
        }
        ++shipped_tables;
      }
      return Status::Ok();
    };
    o.edit_logged = [this](const VersionEdit& e) {
      for (auto& q : edits) q.push_back(e);
    };
    auto opened = Db::Open("/head", o);
    head = std::move(opened).value();
    writes.resize(n_followers);
    edits.resize(n_followers);
    for (int i = 0; i < n_followers; ++i) AddFollower(i);
  }

  // Follower i's options: its tables are its slots.
  DbOptions FollowerOptions(int i) {
    DbOptions f = Shape(&fs);
    f.follower = true;
    f.wal = follower_wal_;
    const std::string dir = "/f" + std::to_string(i);
    f.adopt_table = [this, dir](const FileMeta& meta) -> Status {
      // What a slot file system does: the name the engine opens is the slot.
      SLIP_ASSIGN_OR_RETURN(auto src, fs.Open(dir + "/slot" + std::to_string(meta.slot), FileSystem::Kind::kTable));
      std::string scratch;
      SLIP_ASSIGN_OR_RETURN(std::string_view bytes, src->Read(0, src->size(), &scratch));
      SLIP_ASSIGN_OR_RETURN(auto dst, fs.Create(dir + "/" + TableName(meta.number), FileSystem::Kind::kTable));
      SLIP_RETURN_IF_ERROR(dst->Append(bytes));
      return dst->Sync();
    };
    return f;
  }

  void AddFollower(int i) {
    const std::string dir = "/f" + std::to_string(i);
    auto db = Db::Open(dir, FollowerOptions(i));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    auto seed = head->SeedFollower();
    ASSERT_TRUE(seed.ok());
    ASSERT_TRUE((*db)->Seed(*seed).ok());
    if (static_cast<size_t>(i) < followers.size()) {
      followers[i] = std::move(*db);
      writes[i].clear();
      edits[i].clear();
    } else {
      followers.push_back(std::move(*db));
    }
  }

  Status Put(const std::string& k, const std::string& v, bool del = false) {
    WriteBatch b;
    b.ops.push_back({del ? ValueType::kDeletion : ValueType::kValue, k, v});
    WriteTicket t;
    SLIP_RETURN_IF_ERROR(head->Write(b, {}, &t));
    b.sequence = t.sequence;
    for (auto& q : writes) q.push_back({b, t});
    return Status::Ok();
  }

  // Delivers follower i's queued writes and edits, in an order `rng`
  // shuffles within windows of `window` (1: in order), edits interleaved.
  void Deliver(int i, Random* rng, size_t window) {
    auto shuffle = [&](auto& v) {
      for (size_t start = 0; start < v.size(); start += window) {
        const size_t end = std::min(v.size(), start + window);
        for (size_t j = end - 1; j > start; --j) std::swap(v[j], v[start + rng->Uniform(j - start + 1)]);
      }
    };
    auto& w = writes[i];
    auto& e = edits[i];
    shuffle(w);
    shuffle(e);
    size_t wi = 0, ei = 0;
    Applied applied;
    std::vector<uint64_t> sent, sent_edits;
    while (wi < w.size() || ei < e.size()) {
      if (ei < e.size() && (wi == w.size() || rng->Uniform(8) == 0)) {
        sent_edits.push_back(e[ei].id);
        ASSERT_TRUE(followers[i]->InstallEdit(e[ei++], &applied).ok());
      } else {
        sent.push_back(w[wi].ticket.sequence);
        ASSERT_TRUE(followers[i]->ApplyReplicated(w[wi].batch, w[wi].ticket, &applied).ok());
        ++wi;
      }
    }
    // Each write is reported readable once, when it is, and each edit
    // applied once, in id order: what a chain node passes on by.
    std::sort(applied.writes.begin(), applied.writes.end());
    std::sort(sent.begin(), sent.end());
    EXPECT_EQ(applied.writes, sent);
    EXPECT_TRUE(std::is_sorted(applied.edits.begin(), applied.edits.end())) << "edits apply in id order";
    for (uint64_t id : sent_edits) {
      EXPECT_NE(std::find(applied.edits.begin(), applied.edits.end(), id), applied.edits.end()) << "edit " << id;
    }
    w.clear();
    e.clear();
  }
};

void ExpectSame(Db& a, Db& b, const std::vector<std::string>& keys) {
  for (const auto& k : keys) {
    auto x = a.Get(k), y = b.Get(k);
    ASSERT_EQ(x.ok(), y.ok()) << k;
    if (x.ok()) {
      ASSERT_EQ(*x, *y) << k;
    }
  }
  std::vector<std::pair<std::string, std::string>> sa, sb;
  ASSERT_TRUE(a.Scan("", keys.size() + 1, &sa).ok());
  ASSERT_TRUE(b.Scan("", keys.size() + 1, &sb).ok());
  ASSERT_EQ(sa, sb);
}

std::vector<std::string> Keys(int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back("k" + std::to_string(1000 + i));
  return keys;
}

// I1, I4, I5, I11, T1, T2, T9: writes and edits delivered out of order
// (across MemTable boundaries) leave every follower with the head's data
// and the head's version, without one flush or compaction of its own.
TEST(ReplicationTest, FollowersReachTheHeadsStateFromAnyDeliveryOrder) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    Chain chain(2);
    Random rng(seed);
    const auto keys = Keys(300);
    for (int round = 0; round < 6; ++round) {
      for (int i = 0; i < 400; ++i) {
        // Zipf-ish: a few keys take most updates (T9).
        const size_t k = rng.Uniform(4) == 0 ? rng.Uniform(5) : rng.Uniform(keys.size());
        ASSERT_TRUE(chain.Put(keys[k], "v" + std::to_string(round * 1000 + i) + std::string(rng.Uniform(60), 'p'),
                              rng.Uniform(6) == 0)
                        .ok());
      }
      for (int f = 0; f < 2; ++f) chain.Deliver(f, &rng, f == 0 ? 1 : 64);
    }
    ASSERT_GT(chain.shipped_tables, 0u);
    ASSERT_GT(chain.head->stats().compactions, 0u);
    for (auto& f : chain.followers) {
      ExpectSame(*chain.head, *f, keys);
      EXPECT_EQ(f->version(), chain.head->version()) << "seed " << seed;
      const Db::Stats s = f->stats();
      EXPECT_EQ(s.flushes + s.compactions + s.trivial_moves, 0u);
      EXPECT_EQ(s.held_writes + s.held_edits, 0u);
    }
  }
}

// T3, I3: a flush edit that reaches a follower before the writes of its
// MemTable waits for them; until they arrive, the follower serves what it
// applied, never a value it only has through the table.
TEST(ReplicationTest, AFlushEditWaitsForTheWritesOfItsMemTable) {
  Chain chain(1);
  ASSERT_TRUE(chain.Put("a", "old").ok());
  Random order(1);
  chain.Deliver(0, &order, 1);
  ASSERT_TRUE(chain.Put("a", "new").ok());
  const uint64_t mem = chain.writes[0].back().ticket.memtable;
  auto flushed = [&] {
    for (const auto& e : chain.edits[0]) {
      if (e.flushed_memtable && *e.flushed_memtable >= mem) return true;
    }
    return false;
  };
  for (int i = 0; i < 200 && !flushed(); ++i) {
    ASSERT_TRUE(chain.Put("filler" + std::to_string(i), std::string(100, 'f')).ok());
  }
  ASSERT_TRUE(flushed()) << "the head should have flushed";
  // The edits first, the writes held back.
  for (const auto& e : chain.edits[0]) ASSERT_TRUE(chain.followers[0]->InstallEdit(e).ok());
  chain.edits[0].clear();
  EXPECT_GT(chain.followers[0]->stats().held_edits, 0u);
  EXPECT_EQ(*chain.followers[0]->Get("a"), "old") << "a write the follower has not applied is visible";
  chain.Deliver(0, &order, 1);
  EXPECT_EQ(chain.followers[0]->stats().held_edits, 0u);
  EXPECT_EQ(*chain.followers[0]->Get("a"), "new");
  EXPECT_EQ(chain.followers[0]->version(), chain.head->version());
}

// A quiet chain: the flush edit itself tells a follower where the flushed
// MemTable ends, so the edit applies with no later write to tell it.
TEST(ReplicationTest, AFlushAppliesOnAQuietChain) {
  Chain chain(1);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(chain.Put("k" + std::to_string(i), "v").ok());
  ASSERT_TRUE(chain.head->Flush().ok());
  Random rng(3);
  chain.Deliver(0, &rng, 1);
  EXPECT_EQ(chain.followers[0]->stats().held_edits, 0u);
  EXPECT_EQ(chain.followers[0]->version(), chain.head->version());
  EXPECT_GE(chain.followers[0]->version().files(0).size() + chain.followers[0]->version().files(1).size(), 1u);
}

// A replacement replica seeded from the head mid-run (its tables, its
// MemTables) catches up with what follows.
TEST(ReplicationTest, AReplacementFollowerSeededMidRunCatchesUp) {
  Chain chain(1);
  Random rng(4);
  const auto keys = Keys(200);
  for (int i = 0; i < 1500; ++i) ASSERT_TRUE(chain.Put(keys[rng.Uniform(keys.size())], "a" + std::to_string(i)).ok());
  // The follower is lost with what was queued for it; a new one is seeded.
  chain.AddFollower(0);
  for (int i = 0; i < 1500; ++i) ASSERT_TRUE(chain.Put(keys[rng.Uniform(keys.size())], "b" + std::to_string(i)).ok());
  chain.Deliver(0, &rng, 16);
  ExpectSame(*chain.head, *chain.followers[0], keys);
  EXPECT_EQ(chain.followers[0]->version(), chain.head->version());
}

// Every replica of a chain can be its head after a restart of them all
// (the manager may have left any of them head): a follower logs what it
// applies per MemTable, synced before it passes anything on, and drops a
// MemTable's log with the MemTable. Reopened as a head after a crash that
// loses every unsynced byte, it has every write it applied — those in its
// tables and those only in its MemTables — and no log of a flushed one.
TEST(ReplicationTest, AFollowersDiskHoldsEveryWriteItAppliedWhenItOpensAsAHead) {
  Chain chain(1, /*follower_wal=*/true);
  Random rng(7);
  const auto keys = Keys(150);
  for (int i = 0; i < 900; ++i) {
    ASSERT_TRUE(chain.Put(keys[rng.Uniform(keys.size())], "v" + std::to_string(i), rng.Uniform(7) == 0).ok());
    if (i % 100 == 99) chain.Deliver(0, &rng, 8);
  }
  chain.Deliver(0, &rng, 8);
  ASSERT_GT(chain.followers[0]->version().files(0).size() + chain.followers[0]->version().files(1).size(), 0u)
      << "the follower should hold tables";
  // Writes only in its MemTables too.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(chain.Put("tail" + std::to_string(i), "t").ok());
  chain.Deliver(0, &rng, 1);
  auto keys_and_tail = keys;
  for (int i = 0; i < 5; ++i) keys_and_tail.push_back("tail" + std::to_string(i));
  ExpectSame(*chain.head, *chain.followers[0], keys_and_tail);
  // At most the logs of the MemTables it still has.
  size_t logs = 0;
  const auto before = chain.fs.List("/f0");
  ASSERT_TRUE(before.ok());
  for (const auto& name : *before) logs += name.ends_with(".rlog");
  EXPECT_GE(logs, 1u);
  EXPECT_LE(logs, 3u) << "the logs of flushed MemTables should be gone";

  chain.followers[0].reset();
  chain.fs.Crash();
  DbOptions as_head = chain.FollowerOptions(0);
  as_head.follower = false;
  auto reopened = Db::Open("/f0", as_head);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  ExpectSame(*chain.head, **reopened, keys_and_tail);
  const auto after = chain.fs.List("/f0");
  ASSERT_TRUE(after.ok());
  for (const auto& name : *after) EXPECT_FALSE(name.ends_with(".rlog")) << name << " left behind";
  // And it takes writes as a head, which a reopen keeps too.
  ASSERT_TRUE((*reopened)->Put("after", "promotion").ok());
  reopened->reset();
  auto again = Db::Open("/f0", as_head);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*(*again)->Get("after"), "promotion");
  EXPECT_EQ(*(*again)->Get("tail4"), "t");
}

// A seed logs its MemTables' writes in key order, not sequence order: a
// follower reopened as a head from that log takes its newest write as its
// last sequence, not the last one logged (rubble_cluster_sim_test found a
// follower seeded again after a quick restart, then head after a cold
// start, hiding the writes above the last one logged and handing their
// sequences out again).
TEST(ReplicationTest, ASeededFollowerOpenedAsAHeadHasItsSeedsNewestWrites) {
  MemFileSystem fs;
  DbOptions o = Shape(&fs);
  o.memtable_bytes = 1 << 20;  // every write stays in the MemTable the seed carries
  auto head = Db::Open("/head", o);
  ASSERT_TRUE(head.ok());
  // Sequences 1..4; the last key in order ("c") holds the oldest write.
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"c", "c1"}, {"b", "b2"}, {"a", "a3"}, {"b", "b4"}}) {
    ASSERT_TRUE((*head)->Put(k, v).ok());
  }
  DbOptions f = o;
  f.follower = true;
  f.wal = true;
  auto follower = Db::Open("/f", f);
  ASSERT_TRUE(follower.ok());
  auto seed = (*head)->SeedFollower();
  ASSERT_TRUE(seed.ok());
  ASSERT_TRUE((*follower)->Seed(*seed).ok());
  follower->reset();
  fs.Crash();

  f.follower = false;
  auto reopened = Db::Open("/f", f);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->stats().last_sequence, 4u);
  ExpectSame(**head, **reopened, {"a", "b", "c"});
  // Its next write comes after all of them, and is the newest of its key.
  WriteBatch b;
  b.ops.push_back({ValueType::kValue, "a", "a5"});
  WriteTicket t;
  ASSERT_TRUE((*reopened)->Write(b, {}, &t).ok());
  EXPECT_EQ(t.sequence, 5u);
  EXPECT_EQ(*(*reopened)->Get("a"), "a5");
}

// Group commit on both sides: writes taken without a sync (a follower's
// applies, an all-compact follower's writes) are durable once SyncLogs
// returns — also those in a WAL it left behind when a MemTable was sealed.
TEST(ReplicationTest, SyncLogsMakesWritesTakenWithoutASyncDurable) {
  Chain chain(1, /*follower_wal=*/true);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(chain.Put("k" + std::to_string(i), std::string(100, 'a' + i % 26)).ok());
  Applied applied;
  for (const auto& w : chain.writes[0]) {
    ASSERT_TRUE(chain.followers[0]->ApplyReplicated(w.batch, w.ticket, &applied, /*sync=*/false).ok());
  }
  chain.writes[0].clear();
  // The head's flush edits tell where each MemTable ends.
  for (const auto& e : chain.edits[0]) ASSERT_TRUE(chain.followers[0]->InstallEdit(e, &applied, /*sync=*/false).ok());
  chain.edits[0].clear();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(chain.followers[0]->Get("k" + std::to_string(i)).ok()) << i;
  ASSERT_TRUE(chain.followers[0]->SyncLogs().ok());
  chain.followers[0].reset();

  // A head's writes without a sync, across several MemTables.
  DbOptions o = Shape(&chain.fs);
  o.wal = true;
  auto head = Db::Open("/h2", o);
  ASSERT_TRUE(head.ok());
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE((*head)->Put("h" + std::to_string(i), std::string(100, 'b'), {.sync = false}).ok());
  }
  ASSERT_TRUE((*head)->SyncLogs().ok());
  head->reset();

  chain.fs.Crash();
  DbOptions as_head = chain.FollowerOptions(0);
  as_head.follower = false;
  auto f = Db::Open("/f0", as_head);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  for (int i = 0; i < 40; ++i) {
    auto got = (*f)->Get("k" + std::to_string(i));
    ASSERT_TRUE(got.ok()) << "k" << i << ": " << got.status().ToString();
    EXPECT_EQ(*got, std::string(100, 'a' + i % 26)) << i;
  }
  auto h = Db::Open("/h2", o);
  ASSERT_TRUE(h.ok());
  for (int i = 0; i < 200; ++i) EXPECT_TRUE((*h)->Get("h" + std::to_string(i)).ok()) << i;
}

// An engine without threads never waits for its ship hook: while the hook
// says Busy (a follower not linked yet, no free slot) flushes are put off
// — writes go on, reads see them, nothing is logged half-way — and the
// next WaitForIdle once the hook says yes does them, with no table of the
// refused attempts left behind.
TEST(ReplicationTest, AnEngineWithoutThreadsPutsItsFlushesOffWhileTheShipIsBusy) {
  MemFileSystem fs;
  DbOptions o = Shape(&fs);
  ASSERT_FALSE(o.background);
  bool busy = true;
  int refused = 0, shipped = 0;
  o.ship_tables = [&](VersionEdit* edit, const std::vector<std::string_view>&) -> Status {
    if (busy) {
      ++refused;
      return Status::Busy("not linked yet");
    }
    for (auto& [level, f] : edit->added) f.slot = static_cast<uint32_t>(++shipped);
    return Status::Ok();
  };
  auto db = Db::Open("/h", o);
  ASSERT_TRUE(db.ok());
  for (int i = 0; i < 300; ++i) ASSERT_TRUE((*db)->Put("k" + std::to_string(i % 97), std::string(60, 'a' + i % 26)).ok());
  EXPECT_GT(refused, 0);
  EXPECT_EQ((*db)->stats().flushes, 0u);
  EXPECT_TRUE((*db)->WaitForIdle().Is(Code::kBusy));
  EXPECT_EQ(*(*db)->Get("k5"), std::string(60, 'a' + 296 % 26));
  busy = false;
  ASSERT_TRUE((*db)->WaitForIdle().ok());
  EXPECT_GT((*db)->stats().flushes, 0u);
  EXPECT_GT(shipped, 0);
  EXPECT_EQ(*(*db)->Get("k5"), std::string(60, 'a' + 296 % 26));
  size_t tables = 0;
  for (int level = 0; level < kLevels; ++level) tables += (*db)->version().files(level).size();
  size_t files = 0;
  const auto names = fs.List("/h");
  ASSERT_TRUE(names.ok());
  for (const auto& name : *names) files += name.ends_with(".sst");
  EXPECT_EQ(files, tables) << "a refused attempt's tables stayed";
}

TEST(ReplicationTest, RolesRefuseTheOthersCalls) {
  Chain chain(1);
  WriteBatch b;
  b.ops.push_back({ValueType::kValue, "x", "y"});
  EXPECT_TRUE(chain.followers[0]->Write(b).Is(Code::kInvalidArgument));
  EXPECT_TRUE(chain.head->ApplyReplicated(b, {1, 1, 1}).Is(Code::kInvalidArgument));
  EXPECT_TRUE(chain.head->InstallEdit(VersionEdit{}).Is(Code::kInvalidArgument));
  EXPECT_TRUE(chain.followers[0]->ApplyReplicated(b, {0, 1, 1}).Is(Code::kInvalidArgument));
  auto seed = chain.head->SeedFollower();
  EXPECT_TRUE(chain.followers[0]->Seed(*seed).Is(Code::kInvalidArgument)) << "seeded twice";
}

}  // namespace
}  // namespace slip::lsm
