// The erda design on one node over the simulated fabric: a client's
// ErdaPath against a NodeCore with its heads, mirror and table
// (server/node_core_erda.cc, erda_heads.h, erda_mirror.h, erda_node.h).
// Replication is out of the picture (no backups); the cluster simulation
// covers it, with faults (sim/cluster_sim_test.cc).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>

#include "client/erda_path.h"
#include "common/hash.h"
#include "fabric/sim/sim_fabric.h"
#include "replication/backup_log.h"
#include "rpc/local_caller.h"
#include "runtime/sim_runtime.h"
#include "server/erda_node.h"
#include "server/node_core.h"

namespace slip::server {
namespace {

using runtime::kMicrosecond;
using runtime::kMillisecond;

constexpr uint32_t kShards = 4;
constexpr uint64_t kTerm = 3;

class ErdaNodeTest : public ::testing::Test {
 protected:
  void Start(ErdaNodeOptions eo = {}, ErdaHeadsOptions ho = {}) {
    region_ = std::move(pm::PmRegion::Anonymous(8 << 20, {})).value();
    store::StoreOptions so;
    so.geometry.segment_size = 256 << 10;
    so.geometry.num_shards = kShards;
    so.max_block_bytes = 8192;
    so.limits.max_key = 256;
    so.limits.max_value = 4096;
    so.num_writers = 2;
    so.hold_freed_segments = true;
    store_ = std::move(store::Store::Open(region_.get(), so)).value();
    fabric_ = std::make_unique<fabric::SimFabric>(rt_, fabric::SimFabricOptions{});
    worker_ = rt_.CreateExecutor("node/worker");
    nic_ = rt_.CreateExecutor("node/nic");
    client_ = rt_.CreateExecutor("client");
    server_ep_ = std::move(fabric_->CreateEndpoint(0, nic_, {})).value();
    client_ep_ = std::move(fabric_->CreateEndpoint(1000, client_, {})).value();
    replication::BackupLogOptions bo;
    bo.protocol = replication::Protocol::kErda;
    backup_ = std::move(replication::BackupLog::Create(store_.get(), server_ep_.get(), bo)).value();
    auto erda = ErdaNode::Create(store_.get(), server_ep_.get(), *backup_, eo);
    ASSERT_TRUE(erda.ok()) << erda.status().ToString();
    erda_ = std::move(*erda);
    heads_ = std::make_unique<ErdaHeads>(store_.get(), ho);
    nic_->AddPoller([this] { return backup_->Poll(rt_.Now()); });

    auto view = std::make_shared<NodeView>();
    view->term = kTerm;
    view->shards.assign(kShards, ShardReplicas{.primary = 0, .backups = {}, .syncing = {}});
    view->blocked.assign(kShards, false);
    views_.Set(view);
    NodeCoreOptions co;
    co.erda_heads = heads_.get();
    co.erda_exec = worker_;
    co.erda_layout = erda_->layout();
    core_ = std::make_unique<NodeCore>(0, store_.get(), 0, nullptr, &views_, nullptr, co);
    // Two-sided calls from the client's executor to the node's worker and back.
    peers_ = std::make_unique<rpc::LocalCaller>(
        client_, worker_, [core = core_.get()](uint16_t method, std::span<const std::byte> payload,
                                               rpc::LocalCaller::Reply reply) {
          core->Handle(method, payload, std::move(reply));
        });
    client::ErdaPathOptions po;
    po.limits = so.limits;
    path_ = std::make_unique<client::ErdaPath>(peers_.get(), client_ep_.get(), client_, po);
    client_->AddPoller([this] { return path_->Poll(); });
  }

  uint32_t ShardOf(const std::string& key) const { return store_->ShardOf(HashKey(key)); }

  rpc::PeerResponse Run(std::function<void(client::DirectPath::Done)> op) {
    std::optional<Result<rpc::PeerResponse>> got;
    client_->Post([&] { op([&](Result<rpc::PeerResponse> r) { got = std::move(r); }); });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * kMillisecond));
    if (!got || !got->ok()) {
      ADD_FAILURE() << (got ? got->status().ToString() : "no answer");
      return rpc::PeerResponse{Code::kAborted, {}};
    }
    return **got;
  }
  Code Put(const std::string& key, const std::string& value) {
    return Run([&](auto done) { path_->Put(0, kTerm, ShardOf(key), key, value, std::move(done)); }).status;
  }
  // The value, or the status when not OK.
  std::string Get(const std::string& key, Code* status = nullptr) {
    rpc::PeerResponse r = Run([&](auto done) { path_->Get(0, kTerm, ShardOf(key), key, std::move(done)); });
    if (status) *status = r.status;
    auto kv = proto::DecodeKvResponse(proto::AsBytes(r.payload), log::Limits{});
    EXPECT_TRUE(kv.ok());
    return r.status == Code::kOk && kv.ok() ? std::string(kv->value) : std::string();
  }
  // A two-sided request straight to the core.
  rpc::PeerResponse Call(proto::Method m, std::string payload) {
    return Run([&](auto done) { peers_->Call(0, static_cast<uint16_t>(m), std::move(payload), std::move(done)); });
  }

  runtime::SimRuntime rt_{runtime::SimRuntimeOptions{.seed = 11}};
  std::unique_ptr<pm::PmRegion> region_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<fabric::SimFabric> fabric_;
  runtime::Executor *worker_ = nullptr, *nic_ = nullptr, *client_ = nullptr;
  std::unique_ptr<fabric::Endpoint> server_ep_, client_ep_;
  std::unique_ptr<replication::BackupLog> backup_;
  std::unique_ptr<ErdaNode> erda_;
  std::unique_ptr<ErdaHeads> heads_;
  ViewHolder views_;
  std::unique_ptr<rpc::LocalCaller> peers_;
  std::unique_ptr<NodeCore> core_;
  std::unique_ptr<client::ErdaPath> path_;
};

TEST_F(ErdaNodeTest, PutWritesTheEntryItselfAndGetNeverCallsTheServer) {
  Start();
  ASSERT_EQ(Put("apple", "red"), Code::kOk);
  EXPECT_EQ(peers_->calls(proto::Method::kErdaReserve), 1);
  EXPECT_EQ(peers_->calls(proto::Method::kErdaCommit), 1);
  EXPECT_EQ(peers_->calls(proto::Method::kPut), 0);
  EXPECT_EQ(core_->counters().erda_commits, 1u);
  EXPECT_EQ(*store_->Get("apple"), "red");

  const int before = peers_->calls(proto::Method::kGet);
  EXPECT_EQ(Get("apple"), "red");
  Code c;
  Get("pear", &c);
  EXPECT_EQ(c, Code::kNotFound);
  EXPECT_EQ(peers_->calls(proto::Method::kGet), before) << "both GETs one-sided";
  EXPECT_EQ(path_->stats().one_sided_gets, 2u);
  EXPECT_EQ(path_->stats().fallback_gets, 0u);
}

TEST_F(ErdaNodeTest, ReadersSeeEveryCommittedChange) {
  Start();
  ASSERT_EQ(Put("k", "one"), Code::kOk);
  ASSERT_EQ(Put("k", "two"), Code::kOk);
  EXPECT_EQ(Get("k"), "two");
  // A two-sided PUT (e.g. an entry too large to write one-sidedly) and a DEL
  // change the words too: the mirror follows the store's index.
  ASSERT_EQ(Call(proto::Method::kPut, proto::Encode(proto::KvRequest{kTerm, ShardOf("k"), "k", "three"})).status,
            Code::kOk);
  EXPECT_EQ(Get("k"), "three");
  ASSERT_EQ(Call(proto::Method::kDel, proto::Encode(proto::KvRequest{kTerm, ShardOf("k"), "k", {}})).status,
            Code::kOk);
  Code c;
  Get("k", &c);
  EXPECT_EQ(c, Code::kNotFound);
  EXPECT_EQ(path_->stats().fallback_gets, 0u);
}

TEST_F(ErdaNodeTest, ACommitWithNothingLandedIsRefusedAndThePlaceKilledAtSeal) {
  ErdaHeadsOptions ho;
  ho.write_within = 1 * kMillisecond;
  ho.landing_grace = 2 * kMillisecond;
  Start({}, ho);
  const std::string key = "ghost";
  auto r = Call(proto::Method::kErdaReserve, proto::Encode(proto::ErdaReserveRequest{kTerm, ShardOf(key), 5, key}));
  ASSERT_EQ(r.status, Code::kOk);
  auto res = proto::DecodeErdaReserveResponse(proto::AsBytes(r.payload));
  ASSERT_TRUE(res.ok());
  // The client never wrote: COMMIT finds no entry there.
  auto c = Call(proto::Method::kErdaCommit,
                proto::Encode(proto::ErdaCommitRequest{kTerm, ShardOf(key), res->reservation, key}));
  EXPECT_EQ(c.status, Code::kUnavailable);
  EXPECT_EQ(heads_->stats().failed, 1u);
  // A second COMMIT of it: the reservation is gone.
  c = Call(proto::Method::kErdaCommit,
           proto::Encode(proto::ErdaCommitRequest{kTerm, ShardOf(key), res->reservation, key}));
  EXPECT_EQ(c.status, Code::kUnavailable);
  // A late write now lands; once the idle head is sealed, it is zeroed.
  const uint64_t at = erda_->layout()->grant.area_offset + res->area_offset;
  auto plan = log::PlanEntry(key.size(), 5, 8192);
  auto bytes = log::EncodeEntry({log::EntryType::kPut, static_cast<uint16_t>(ShardOf(key)), res->version}, key,
                                "boo!!", *plan);
  std::memcpy(region_->at(at), bytes.data(), bytes.size());
  rt_.RunUntil(rt_.Now() + 50 * kMillisecond);
  EXPECT_EQ(heads_->stats().heads_sealed, 1u);
  EXPECT_EQ(heads_->stats().places_killed, 1u);
  EXPECT_EQ(region_->at(at)[0], std::byte{0});
  EXPECT_TRUE(store_->Get(key).status().Is(Code::kNotFound));
}

TEST_F(ErdaNodeTest, AnExpiredReservationCannotBeCommitted) {
  ErdaHeadsOptions ho;
  ho.reservation_ttl = 5 * kMillisecond;
  Start({}, ho);
  const std::string key = "slow";
  auto r = Call(proto::Method::kErdaReserve, proto::Encode(proto::ErdaReserveRequest{kTerm, ShardOf(key), 1, key}));
  ASSERT_EQ(r.status, Code::kOk);
  auto res = proto::DecodeErdaReserveResponse(proto::AsBytes(r.payload));
  rt_.RunUntil(rt_.Now() + 30 * kMillisecond);
  EXPECT_EQ(heads_->stats().expired, 1u);
  auto c = Call(proto::Method::kErdaCommit,
                proto::Encode(proto::ErdaCommitRequest{kTerm, ShardOf(key), res->reservation, key}));
  EXPECT_EQ(c.status, Code::kUnavailable);
  EXPECT_TRUE(store_->Get(key).status().Is(Code::kNotFound));
}

TEST_F(ErdaNodeTest, RefusalsAreClearAndChangeNothing) {
  Start();
  // Another term, a shard this node does not serve, an entry too large to
  // write one-sidedly, garbage.
  auto r = Call(proto::Method::kErdaGrant, proto::Encode(proto::ErdaGrantRequest{kTerm + 1, 0}));
  EXPECT_EQ(r.status, Code::kStaleTerm);
  r = Call(proto::Method::kErdaGrant, proto::Encode(proto::ErdaGrantRequest{kTerm, kShards}));
  EXPECT_EQ(r.status, Code::kStaleTerm);
  r = Call(proto::Method::kErdaReserve, proto::Encode(proto::ErdaReserveRequest{kTerm, ShardOf("big"), 4096, "big"}));
  EXPECT_EQ(r.status, Code::kOk) << "fits the node's one-block limit";
  r = Call(proto::Method::kErdaReserve,
           proto::Encode(proto::ErdaReserveRequest{kTerm, ShardOf("k"), 1, "k"}) + "x");
  EXPECT_EQ(r.status, Code::kCorruption);
  r = Call(proto::Method::kErdaCommit, "short");
  EXPECT_EQ(r.status, Code::kCorruption);
  EXPECT_EQ(store_->stats().keys, 0u);
}

TEST_F(ErdaNodeTest, AKeyLeftOutOfAFullWindowIsReadThroughTheServer) {
  ErdaNodeOptions eo;
  eo.buckets = 2;  // one window of 8 entries for every key
  Start(eo);
  for (int i = 0; i < 12; ++i) ASSERT_EQ(Put("key" + std::to_string(i), "v" + std::to_string(i)), Code::kOk);
  EXPECT_GT(erda_->mirror()->stats().overflowed, 0u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(Get("key" + std::to_string(i)), "v" + std::to_string(i));
  EXPECT_GT(path_->stats().fallback_gets, 0u) << "the keys without an entry";
  EXPECT_GT(path_->stats().one_sided_gets, 0u);
  Code c;
  Get("absent", &c);
  EXPECT_EQ(c, Code::kNotFound);
}

TEST_F(ErdaNodeTest, GrantsRunOutAndAreAskedForAgain) {
  ErdaNodeOptions eo;
  eo.max_grant = 2 * kMillisecond;
  Start(eo);
  ASSERT_EQ(Put("k", "v"), Code::kOk);
  const int grants = peers_->calls(proto::Method::kErdaGrant);
  EXPECT_EQ(Get("k"), "v");
  EXPECT_EQ(peers_->calls(proto::Method::kErdaGrant), grants) << "still granted";
  rt_.RunUntil(rt_.Now() + 5 * kMillisecond);
  EXPECT_EQ(Get("k"), "v");
  EXPECT_EQ(peers_->calls(proto::Method::kErdaGrant), grants + 1);
}

// erda-raw, the paper's "read after write": the client writes its entry
// one-sidedly as erda's does, but the node copies it into its log, and GETs
// ask the node.
TEST_F(ErdaNodeTest, ReadAfterWriteCopiesTheClientsEntryAndReadsTwoSided) {
  ErdaNodeOptions eo;
  eo.readable_table = false;
  eo.copy_puts = true;
  Start(eo);
  EXPECT_EQ(erda_->mirror(), nullptr);
  EXPECT_EQ(erda_->layout()->grant.num_buckets, 0u);
  ASSERT_EQ(Put("apple", "red"), Code::kOk);
  EXPECT_EQ(peers_->calls(proto::Method::kErdaReserve), 1);
  EXPECT_EQ(peers_->calls(proto::Method::kErdaCommit), 1);
  EXPECT_EQ(path_->stats().one_sided_puts, 1u);
  EXPECT_EQ(core_->counters().erda_copies, 1u);
  EXPECT_EQ(core_->counters().erda_commits, 0u);
  EXPECT_EQ(heads_->stats().copied, 1u);
  // The copy, in a t-log, is what the index holds.
  auto at = store_->Locate("apple");
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(store_->segments().meta(store_->segments().SegmentOf(*at)).owner, log::SegmentOwner::kWorker);
  EXPECT_EQ(Get("apple"), "red");
  EXPECT_EQ(peers_->calls(proto::Method::kGet), 1) << "no table: the GET asked the node";
  EXPECT_EQ(path_->stats().one_sided_gets, 0u);
}

// erda-redo, the paper's "redo logging": a two-sided PUT whose entry the
// node stages (the redo record), checks and copies into its log.
TEST_F(ErdaNodeTest, RedoLoggingStagesATwoSidedPutThenCopiesIt) {
  ErdaNodeOptions eo;
  eo.readable_table = false;
  eo.copy_puts = true;
  ErdaHeadsOptions ho;
  ho.write_within = 1 * kMillisecond;
  ho.landing_grace = 2 * kMillisecond;
  Start(eo, ho);
  ASSERT_EQ(Call(proto::Method::kPut, proto::Encode(proto::KvRequest{kTerm, ShardOf("k"), "k", "v1"})).status,
            Code::kOk);
  ASSERT_EQ(Call(proto::Method::kPut, proto::Encode(proto::KvRequest{kTerm, ShardOf("k"), "k", "v2"})).status,
            Code::kOk);
  EXPECT_EQ(heads_->stats().copied, 2u);
  EXPECT_EQ(core_->counters().erda_copies, 2u);
  EXPECT_EQ(store_->stats().staged_bytes, 2u * 64);
  log::EntryMeta meta;
  EXPECT_EQ(*store_->Get("k", &meta), "v2");
  // A DEL is written directly (nothing to stage: the paper's redo deletes
  // zero an index entry).
  ASSERT_EQ(Call(proto::Method::kDel, proto::Encode(proto::KvRequest{kTerm, ShardOf("k"), "k", {}})).status,
            Code::kOk);
  EXPECT_EQ(heads_->stats().copied, 2u);
  // The staged records are zeroed once their head is sealed; what the index
  // holds stays.
  rt_.RunUntil(rt_.Now() + 50 * kMillisecond);
  EXPECT_EQ(heads_->stats().places_killed, 2u);
  EXPECT_TRUE(store_->Get("k").status().Is(Code::kNotFound));
  // An entry larger than a redo record may be is written directly.
  const std::string big(4000, 'b');
  ASSERT_EQ(Call(proto::Method::kPut, proto::Encode(proto::KvRequest{kTerm, ShardOf("big"), "big", big})).status,
            Code::kOk);
  EXPECT_EQ(*store_->Get("big"), big);
}

// E7 (docs/papers/erda.md): an update in erda writes its entry once — the
// client's one-sided WRITE, adopted where it landed — where both baselines
// write it twice (staged, then copied): half the NVM bytes. Our entry is one
// log block (32 B header, key, value, padded to 64 B) in every design, so the
// ratio is exactly 1/2, not the paper's (9+N)/(4+2N) (Table 1), whose redo
// record and in-place apply carry no header.
struct NvmCase {
  const char* design;
  bool copy;       // the node copies the entry (both baselines)
  bool two_sided;  // the PUT is a two-sided call (erda-redo)
};
class ErdaNvmBytesTest : public ErdaNodeTest, public ::testing::WithParamInterface<std::tuple<NvmCase, int>> {};

TEST_P(ErdaNvmBytesTest, AnUpdateWritesItsEntryOnceInErdaAndTwiceInTheBaselines) {
  const auto& [c, value_size] = GetParam();
  const std::string key = "user000000000000042";  // 19 B, as the paper's Table 1 example
  const std::string value(value_size, 'v');
  const uint64_t block = (log::kHeaderSize + key.size() + value.size() + log::kAlign - 1) / log::kAlign * log::kAlign;
  ErdaNodeOptions eo;
  eo.readable_table = !c.copy;
  eo.copy_puts = c.copy;
  Start(eo);
  auto put = [&] {
    if (!c.two_sided) return Put(key, value);
    return Call(proto::Method::kPut, proto::Encode(proto::KvRequest{kTerm, ShardOf(key), key, value})).status;
  };
  ASSERT_EQ(put(), Code::kOk) << "create";
  // What the client's NIC and the node's CPU write into the node's PM.
  const auto nvm = [&] {
    const store::StoreStats st = store_->stats();
    return path_->stats().written_bytes + st.appended_bytes + st.staged_bytes;
  };
  const uint64_t before = nvm();
  const uint64_t records = core_->counters().commit_records;
  constexpr int kUpdates = 8;
  for (int i = 0; i < kUpdates; ++i) ASSERT_EQ(put(), Code::kOk);
  ASSERT_EQ(core_->counters().commit_records, records) << "a commit record would be counted";
  const uint64_t per_update = (nvm() - before) / kUpdates;
  EXPECT_EQ(per_update, c.copy ? 2 * block : block);
  std::printf("E7 %-9s value %4d B: %llu NVM bytes per update (Table 1: %d)\n", c.design, value_size,
              static_cast<unsigned long long>(per_update),
              c.copy ? 4 + 2 * (static_cast<int>(key.size()) + value_size)
                     : 9 + static_cast<int>(key.size()) + value_size);
}

INSTANTIATE_TEST_SUITE_P(DesignsAndValueSizes, ErdaNvmBytesTest,
                         ::testing::Combine(::testing::Values(NvmCase{"erda", false, false},
                                                              NvmCase{"erda-raw", true, false},
                                                              NvmCase{"erda-redo", true, true}),
                                            ::testing::Values(16, 64, 256, 1024, 4000)),
                         [](const auto& p) {
                           std::string d = std::get<0>(p.param).design;
                           for (char& ch : d) ch = ch == '-' ? '_' : ch;
                           return d + "_" + std::to_string(std::get<1>(p.param));
                         });

}  // namespace
}  // namespace slip::server
