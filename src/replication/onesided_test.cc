// The one-sided replication designs end to end on the simulated fabric:
// every acknowledged write is on every backup (digested where it landed),
// across backup and primary power loss and torn transfers, with the backup's
// CPU involved only in the control path.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "common/random.h"
#include "replication/testing/world.h"

namespace slip::replication {
namespace {

using testing::ReplicationWorld;
using testing::WorldOptions;

// The newest acknowledged state of each key, by version.
struct Model {
  struct State {
    uint64_t version = 0;
    std::optional<std::string> value;  // nullopt: deleted
  };
  std::map<std::string, State> acked;

  void Ack(const std::string& key, uint64_t version, std::optional<std::string> value) {
    State& s = acked[key];
    if (version > s.version) s = State{version, std::move(value)};
  }

  // Every acknowledged write is on `store`: its version there is at least
  // the newest acknowledged one, with that value when equal.
  static std::string Check(const store::Store& store, const std::map<std::string, State>& acked) {
    for (const auto& [key, want] : acked) {
      log::EntryMeta meta;
      meta.version = 0;
      auto got = store.Get(key, &meta);
      if (!got.ok() && !got.status().Is(Code::kNotFound)) return key + ": " + got.status().ToString();
      if (got.status().Is(Code::kNotFound) && meta.version == 0 && want.value) return key + ": missing";
      if (meta.version < want.version) {
        return key + ": version " + std::to_string(meta.version) + " < acknowledged " + std::to_string(want.version);
      }
      if (meta.version == want.version && (got.ok() ? std::optional<std::string>(*got) : std::nullopt) != want.value) {
        return key + ": wrong value at version " + std::to_string(meta.version) + " (got " +
               (got.ok() ? std::to_string(got->size()) + " bytes" : got.status().ToString()) + ", want " +
               (want.value ? std::to_string(want.value->size()) + " bytes" : "deleted") + ")";
      }
    }
    return "";
  }
};

class Workload {
 public:
  Workload(ReplicationWorld& w, int primary, std::vector<NodeId> backups, uint64_t seed)
      : w_(w), primary_(primary), backups_(std::move(backups)), rng_(seed) {}

  // Issues `n` writes with up to `window` in flight; records acknowledgements.
  void Start(int n, int window) {
    left_ = n;
    for (int i = 0; i < window; ++i) Next();
  }
  bool done() const { return left_ == 0 && in_flight_ == 0; }
  Model model;
  int acked = 0, failed = 0;
  bool stopped = false;  // the primary crashed: nothing more is issued

 private:
  void Next() {
    if (left_ == 0 || stopped) return;
    --left_;
    const std::string key = "key" + std::to_string(rng_.Uniform(64));
    const bool del = rng_.Bernoulli(0.15) && w_.node(primary_).store->Get(key).ok();
    const size_t len = rng_.Bernoulli(0.05) ? 5000 + rng_.Uniform(4000) : 1 + rng_.Uniform(300);
    std::string value(len, '\0');
    for (auto& c : value) c = static_cast<char>('a' + rng_.Uniform(26));
    ++in_flight_;
    w_.Write(primary_, 0, del ? log::EntryType::kDel : log::EntryType::kPut, key, value, backups_,
             [this, key, value, del, node = &w_.node(primary_)](Status s, uint64_t version) {
               --in_flight_;
               if (s.ok()) {
                 ++acked;
                 model.Ack(key, version, del ? std::nullopt : std::optional<std::string>(value));
               } else {
                 ++failed;
               }
               (void)node;
               Next();
             });
  }

  ReplicationWorld& w_;
  int primary_;
  std::vector<NodeId> backups_;
  Random rng_;
  int left_ = 0, in_flight_ = 0;
};

std::string Name(const ::testing::TestParamInfo<Protocol>& info) {
  std::string s = DesignName(info.param);
  for (auto& c : s) {
    if (c == '-') c = '_';
  }
  return s;
}

class OneSided : public ::testing::TestWithParam<Protocol> {
 protected:
  WorldOptions Options(uint64_t seed = 1) {
    WorldOptions o;
    o.protocol = GetParam();
    o.seed = seed;
    o.segment_size = 64 << 10;  // small: buffers roll and segments get used
    o.pm_bytes = 12 << 20;
    return o;
  }
};

TEST_P(OneSided, EveryAcknowledgedWriteIsOnEveryBackup) {
  ReplicationWorld w(Options());
  Workload load(w, 0, {1, 2}, 7);
  load.Start(1500, 8);
  ASSERT_TRUE(w.RunUntil([&] { return load.done(); }, 10 * runtime::kSecond))
      << "acked " << load.acked << " failed " << load.failed << " posted "
      << w.node(1).backup->stats().segments_posted << " used " << w.node(1).backup->stats().segments_used
      << " rnr " << w.fabric().stats().rnr_retries << " timeouts " << w.fabric().stats().timeouts;
  EXPECT_EQ(load.acked, 1500);
  EXPECT_EQ(load.failed, 0);
  for (int b : {1, 2}) {
    ASSERT_TRUE(w.node(b).backup->CatchUp().ok());
    EXPECT_EQ(Model::Check(*w.node(b).store, load.model.acked), "") << "backup " << b;
  }
  EXPECT_EQ(Model::Check(*w.node(0).store, load.model.acked), "") << "primary";
  // Backups served only the control path: a few opens and closes per
  // segment, never one call per write (rpc-kv makes 1500 each).
  for (int b : {1, 2}) EXPECT_LT(w.node(b).control_calls, 100u) << "backup " << b;
}

TEST_P(OneSided, DigestIndexesUsedSegmentsWithoutCatchUp) {
  ReplicationWorld w(Options());
  Workload load(w, 0, {1, 2}, 8);
  load.Start(2500, 8);
  ASSERT_TRUE(w.RunUntil([&] { return load.done(); }, 10 * runtime::kSecond));
  // Let the grace period pass and the digest role run.
  w.RunUntil([] { return false; }, 20 * runtime::kMillisecond);
  const auto st = w.node(1).backup->stats();
  EXPECT_GT(st.segments_digested, 0u);
  EXPECT_GT(w.node(1).store->stats().keys, 0u);
}

TEST_P(OneSided, BackupPowerLossLosesNoAcknowledgedWrite) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    ReplicationWorld w(Options(seed));
    Workload load(w, 0, {1, 2}, seed);
    load.Start(1200, 8);
    Random rng(seed * 77);
    w.RunUntil([] { return false; }, static_cast<runtime::Nanos>(rng.Uniform(3000)) * runtime::kMicrosecond);
    w.CrashAndRestart(2, seed);
    ASSERT_TRUE(w.RunUntil([&] { return load.done(); }, 60 * runtime::kSecond)) << "seed " << seed;
    EXPECT_GT(load.acked, 0);
    for (int b : {1, 2}) {
      ASSERT_TRUE(w.node(b).backup->CatchUp().ok());
      EXPECT_EQ(Model::Check(*w.node(b).store, load.model.acked), "") << "seed " << seed << " backup " << b;
    }
  }
}

TEST_P(OneSided, PrimaryPowerLossLeavesAcknowledgedWritesOnBackups) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    ReplicationWorld w(Options(seed));
    Workload load(w, 0, {1, 2}, seed);
    load.Start(100000, 8);
    Random rng(seed * 31);
    w.RunUntil([] { return false; }, static_cast<runtime::Nanos>(200 + rng.Uniform(3000)) * runtime::kMicrosecond);
    load.stopped = true;
    const auto acked = load.model.acked;  // acknowledged before the crash
    w.CrashAndRestart(0, seed);
    w.RunUntil([] { return false; }, 5 * runtime::kMillisecond);
    EXPECT_GT(load.acked, 0) << "seed " << seed;
    for (int b : {1, 2}) {
      ASSERT_TRUE(w.node(b).backup->CatchUp().ok());
      EXPECT_EQ(Model::Check(*w.node(b).store, acked), "") << "seed " << seed << " backup " << b;
    }
    // The primary's own log kept everything it acknowledged, too.
    EXPECT_EQ(Model::Check(*w.node(0).store, acked), "") << "seed " << seed;
  }
}

TEST_P(OneSided, TornTransferFailsOnlyItsWrite) {
  if (GetParam() == Protocol::kRowan) GTEST_SKIP() << "rowan sends; the simulator tears writes only";
  ReplicationWorld w(Options());
  Workload load(w, 0, {1, 2}, 9);
  load.Start(300, 1);
  ASSERT_TRUE(w.RunUntil([&] { return load.acked >= 50; }, 10 * runtime::kSecond));
  w.fabric().TearNextWrite(1, 40);  // mid-header of the next transfer
  ASSERT_TRUE(w.RunUntil([&] { return load.done(); }, 60 * runtime::kSecond));
  EXPECT_GE(load.failed, 1);
  EXPECT_GT(load.acked, 250);
  for (int b : {1, 2}) {
    ASSERT_TRUE(w.node(b).backup->CatchUp().ok());
    EXPECT_EQ(Model::Check(*w.node(b).store, load.model.acked), "") << "backup " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Designs, OneSided,
                         ::testing::Values(Protocol::kRowan, Protocol::kRWrite, Protocol::kBatch,
                                           Protocol::kTailwind),
                         Name);

TEST(OneSidedBatch, GathersEntriesAndFlushesOnTimeout) {
  WorldOptions o;
  o.protocol = Protocol::kBatch;
  ReplicationWorld w(o);
  Workload load(w, 0, {1, 2}, 3);
  load.Start(400, 16);
  ASSERT_TRUE(w.RunUntil([&] { return load.done(); }, 10 * runtime::kSecond));
  const auto& st = w.node(0).senders[0].replicator->stats();
  EXPECT_EQ(load.acked, 400);
  EXPECT_LT(st.writes, 2u * 400u);  // several entries per Write (2 backups)
  // One write at a time: nothing else arrives, each batch waits out its timeout.
  Workload lone(w, 0, {1, 2}, 4);
  lone.Start(20, 1);
  ASSERT_TRUE(w.RunUntil([&] { return lone.done(); }, 10 * runtime::kSecond));
  EXPECT_EQ(lone.acked, 20);
  EXPECT_GT(st.batch_timeouts, 10u);
}

TEST(OneSidedDesign, NamesRoundTripAndUnknownIsRefused) {
  for (Protocol p : AllProtocols()) {
    if (p == Protocol::kShare) continue;
    auto parsed = ParseDesign(DesignName(p));
    ASSERT_TRUE(parsed.ok()) << DesignName(p);
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_TRUE(ParseDesign("farm").status().Is(Code::kInvalidArgument));
  EXPECT_TRUE(ParseDesign("share-kv").status().Is(Code::kNotSupported));
}

}  // namespace
}  // namespace slip::replication
