// The one-sided GET over the simulated fabric: the server's CPU never runs
// for a read (E8), answers are whole versions (E1), damaged versions fall
// back to older ones or to the server.
#include "erda/reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <optional>

#include "common/hash.h"
#include "common/random.h"
#include "fabric/sim/sim_fabric.h"
#include "runtime/sim_runtime.h"

namespace slip::erda {
namespace {

using runtime::kMicrosecond;

class ErdaReaderTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(fabric::SimFabricOptions{}); }

  void Start(fabric::SimFabricOptions fo, ReaderOptions ro = {}) {
    reader_.reset();
    client_ep_.reset();
    server_ep_.reset();
    fabric_ = std::make_unique<fabric::SimFabric>(rt_, fo);
    region_ = std::move(pm::PmRegion::Anonymous(1 << 20, {})).value();
    EngineOptions eo;
    eo.num_buckets = 64;
    eo.num_heads = 2;
    eo.num_shards = 4;
    eo.segment_bytes = 64 << 10;
    eo.limits.max_key = 256;
    eo.limits.max_value = 32 << 10;
    engine_ = std::move(Engine::Open(region_.get(), eo)).value();
    server_nic_ = rt_.CreateExecutor("server/nic");
    client_nic_ = rt_.CreateExecutor("client/nic");
    server_ep_ = std::move(fabric_->CreateEndpoint(0, server_nic_, {})).value();
    client_ep_ = std::move(fabric_->CreateEndpoint(1, client_nic_, {})).value();
    auto mr = server_ep_->Register(region_->base(), region_->size(), fabric::Endpoint::kRemoteRead);
    ASSERT_TRUE(mr.ok()) << mr.status().ToString();
    const fabric::PeerId server = std::move(client_ep_->AddPeer(server_ep_->address())).value();
    reader_ = std::make_unique<OneSidedReader>(client_ep_.get(), server, mr->remote, engine_->layout(),
                                               engine_->limits(), ro);
    // The server's NIC is polled (software providers need that for one-sided
    // targets); anything it completes would be work for the server's CPU.
    server_nic_->AddPoller([this] {
      fabric::Completion c[16];
      const size_t n = server_ep_->Poll(c);
      server_completions_ += n;
      return n > 0;
    });
    client_nic_->AddPoller([this] {
      fabric::Completion c[16];
      const size_t n = client_ep_->Poll(c);
      for (size_t i = 0; i < n; ++i) EXPECT_TRUE(reader_->OnCompletion(c[i]));
      return n > 0;
    });
  }

  Result<std::string> Get(const std::string& key) {
    std::optional<Result<std::string>> got;
    reader_->Get(key, [&](Result<std::string> r) { got = std::move(r); });
    EXPECT_TRUE(rt_.RunUntil([&] { return got.has_value(); }, rt_.Now() + 100 * runtime::kMillisecond));
    return got.value_or(Status::Timeout("no answer"));
  }

  runtime::SimRuntime rt_{runtime::SimRuntimeOptions{.seed = 7}};
  std::unique_ptr<fabric::SimFabric> fabric_;
  std::unique_ptr<pm::PmRegion> region_;
  std::unique_ptr<Engine> engine_;
  runtime::Executor* server_nic_ = nullptr;
  runtime::Executor* client_nic_ = nullptr;
  std::unique_ptr<fabric::Endpoint> server_ep_, client_ep_;
  std::unique_ptr<OneSidedReader> reader_;
  uint64_t server_completions_ = 0;
};

TEST_F(ErdaReaderTest, ReadsEveryValueWithoutTheServer) {
  Random rng(1);
  std::map<std::string, std::string> want;
  for (int i = 0; i < 60; ++i) {
    const std::string key = "key" + std::to_string(i);
    std::string v(i % 3 == 0 ? rng.Uniform(20000) : rng.Uniform(400), '\0');
    for (auto& c : v) c = static_cast<char>(rng.Next());
    ASSERT_TRUE(engine_->Put(key, v).ok());
    want[key] = v;
  }
  ASSERT_TRUE(engine_->Delete("key7").ok());
  want.erase("key7");
  const EngineStats before = engine_->stats();
  for (const auto& [k, v] : want) {
    auto got = Get(k);
    ASSERT_TRUE(got.ok()) << k << ": " << got.status().ToString();
    EXPECT_EQ(*got, v) << k;
  }
  EXPECT_TRUE(Get("key7").status().Is(Code::kNotFound));
  EXPECT_TRUE(Get("never-written").status().Is(Code::kNotFound));
  // E8: no completion on the server's endpoint, no engine call.
  EXPECT_EQ(server_completions_, 0u);
  EXPECT_EQ(engine_->stats().reserves, before.reserves);
  // Two READs for an object within the first read, three beyond it, one for an absent key.
  EXPECT_LE(reader_->stats().reads, 2 * want.size() + want.size() / 3 + 4);
  EXPECT_EQ(reader_->in_flight(), 0u);
}

TEST_F(ErdaReaderTest, ADamagedNewestVersionFallsBackToTheOldOneThenToTheServer) {
  ASSERT_TRUE(engine_->Put("k", "old").ok());
  auto r = engine_->Reserve("k", ObjectType::kPut, 3);
  ASSERT_TRUE(r.ok());
  std::byte* at = region_->at(engine_->layout().ObjectOffset(r->head, r->units));
  const std::string obj = EncodeObject(ObjectType::kPut, "k", "new");
  std::memcpy(at, obj.data(), obj.size());
  ASSERT_TRUE(engine_->Check(*r).ok());
  ASSERT_TRUE(engine_->Publish(*r).ok());
  EXPECT_EQ(*Get("k"), "new");
  at[kObjectHeader + 1] ^= std::byte{4};  // a bit flips in the newest value
  EXPECT_EQ(*Get("k"), "old");
  EXPECT_EQ(reader_->stats().old_version, 1u);
  ASSERT_TRUE(engine_->Put("k", "newest").ok());  // the damaged one is now the old version
  EXPECT_EQ(*Get("k"), "newest");
  // Every version damaged: never the bytes, the server is asked instead.
  ASSERT_TRUE(engine_->Put("j", "only").ok());
  const std::vector<Slot> slots = BucketTable(region_.get(), engine_->layout().table_offset,
                                              engine_->layout().num_buckets)
                                      .Find(HashKey("j"));
  ASSERT_EQ(slots.size(), 1u);
  const IndexWord w = BucketTable(region_.get(), engine_->layout().table_offset, engine_->layout().num_buckets)
                          .Load(slots[0]);
  region_->at(engine_->layout().ObjectOffset(engine_->layout().HeadOf(HashKey("j")), w.new_offset()))[2] ^=
      std::byte{1};
  EXPECT_TRUE(Get("j").status().Is(Code::kUnavailable));
  EXPECT_EQ(reader_->stats().inconclusive, 1u);
}

// Reads race publications (virtual time interleaves the window READ, the
// object READ and the server's stores): every answer is a whole version,
// and a reader never goes back in time.
TEST_F(ErdaReaderTest, ReadsRacingWritesSeeWholeVersionsInOrder) {
  fabric::SimFabricOptions fo;
  fo.mtu = 256;  // objects arrive in several packets
  Start(fo, ReaderOptions{.first_read = 128});
  ASSERT_TRUE(engine_->Put("k", std::string(300, 'a') + "#0").ok());
  int written = 0;
  // The server publishes a new version every 3 us (its own executor).
  std::function<void()> write = [&] {
    if (written >= 300) return;
    ++written;
    ASSERT_TRUE(engine_->Put("k", std::string(300, static_cast<char>('a' + written % 26)) + "#" +
                                      std::to_string(written))
                    .ok());
    server_nic_->After(3 * kMicrosecond, write);
  };
  server_nic_->After(1 * kMicrosecond, write);
  int last = 0, answers = 0;
  std::function<void()> read = [&] {
    reader_->Get("k", [&](Result<std::string> r) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      const int i = std::stoi(r->substr(301));
      EXPECT_EQ(r->substr(0, 300), std::string(300, static_cast<char>('a' + i % 26))) << "a mixture";
      EXPECT_GE(i, last) << "went back in time";
      last = i;
      ++answers;
      if (written < 300) read();
    });
  };
  read();
  ASSERT_TRUE(rt_.RunUntil([&] { return written >= 300 && reader_->in_flight() == 0; },
                           rt_.Now() + runtime::kSecond));
  EXPECT_GT(answers, 50);
  EXPECT_GT(last, 250);
}

}  // namespace
}  // namespace slip::erda
