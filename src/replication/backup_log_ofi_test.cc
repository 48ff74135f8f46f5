// Fencing on a real libfabric provider (docs/security.md, "Fencing"): what
// a backup granted at REPL_OPEN works, and once Fence revokes it the old
// key fails at the target's NIC — the provider refuses it, no backup code
// decides — and a reopen is refused. The simulated fabric's version of
// these tests is in onesided_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "common/hash.h"
#include "fabric/ofi/ofi_fabric.h"
#include "log/entry.h"
#include "pm/region.h"
#include "replication/backup_log.h"
#include "replication/seal.h"
#include "store/store.h"

namespace slip::replication {
namespace {

using Clock = std::chrono::steady_clock;

class BackupLogOfi : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto f = fabric::OpenOfiFabric(fabric::FabricOptions{.provider = GetParam(), .node_address = ""});
    if (!f.ok()) GTEST_SKIP() << GetParam() << ": " << f.status().ToString();
    fabric_ = std::move(*f);
    auto region = pm::PmRegion::Anonymous(8 << 20, {});
    ASSERT_TRUE(region.ok());
    region_ = std::move(*region);
    store::StoreOptions so;
    so.geometry.segment_size = 256 << 10;
    so.geometry.num_shards = 4;
    so.max_block_bytes = 16 << 10;
    so.limits.max_key = 1024;
    auto st = store::Store::Open(region_.get(), so);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    store_ = std::move(*st);
    auto in = fabric_->CreateEndpoint({.name = "backup"});
    auto out = fabric_->CreateEndpoint({.name = "sender"});
    ASSERT_TRUE(in.ok() && out.ok());
    in_ = std::move(*in);
    out_ = std::move(*out);
  }

  void StartBackup(Protocol p) {
    BackupLogOptions o;
    o.protocol = p;
    auto b = BackupLog::Create(store_.get(), in_.get(), o);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backup_ = std::move(*b);
    backup_->Fence(Senders{.term = 1, .shards = {{0, {0, 1, 2, 3}}}});
  }

  Result<proto::ReplOpenResponse> Open(uint32_t sender, proto::ReplBuffer kind) {
    auto r = backup_->Open(proto::ReplOpenRequest{.term = 1, .sender = sender, .buffer = kind});
    if (r.ok() && !peer_) {
      auto peer = out_->AddPeer(r->address);
      if (!peer.ok()) return peer.status();
      peer_ = *peer;
    }
    return r;
  }

  // Drives both endpoints until the sender's operation `context` completes.
  std::optional<fabric::Completion> Wait(uint64_t context) {
    for (auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
      if (auto it = done_.find(context); it != done_.end()) return it->second;
      backup_->Poll(0);
      fabric::Completion c[8];
      for (size_t i = 0, n = out_->Poll(c); i < n; ++i) done_[c[i].context] = c[i];
    }
    return std::nullopt;
  }

  std::unique_ptr<fabric::Fabric> fabric_;
  std::unique_ptr<pm::PmRegion> region_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<fabric::Endpoint> in_, out_;
  std::unique_ptr<BackupLog> backup_;
  std::optional<fabric::PeerId> peer_;
  std::map<uint64_t, fabric::Completion> done_;  // the sender's, by context
};

TEST_P(BackupLogOfi, ARevokedBufferKeyFailsAtTheNic) {
  ASSERT_NO_FATAL_FAILURE(StartBackup(Protocol::kRWrite));
  auto grant = Open(0, proto::ReplBuffer::kPrivate);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  const fabric::RemoteMemory mem{grant->mem_addr, grant->mem_key, grant->mem_len};
  char bytes[64];
  std::memset(bytes, 'x', sizeof(bytes));
  ASSERT_TRUE(out_->Write(*peer_, bytes, sizeof(bytes), nullptr, mem, 0, 1).ok());
  auto c = Wait(1);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, Code::kOk) << "the granted key";

  // Another node took shard 0..3 over: node 0 is fenced.
  backup_->Fence(Senders{.term = 2, .shards = {{5, {0, 1, 2, 3}}}});
  EXPECT_EQ(backup_->stats().senders_fenced, 1u);
  std::memset(bytes, 'y', sizeof(bytes));
  ASSERT_TRUE(out_->Write(*peer_, bytes, sizeof(bytes), nullptr, mem, 64, 2).ok());
  c = Wait(2);
  ASSERT_TRUE(c.has_value()) << "a write with a revoked key neither failed nor completed";
  EXPECT_NE(c->status, Code::kOk) << "the provider accepted a revoked key";
  EXPECT_NE(std::memcmp(store_->segments().SegmentBase(grant->buffer_id) + 64, bytes, sizeof(bytes)), 0)
      << "the revoked write landed";
  EXPECT_TRUE(Open(0, proto::ReplBuffer::kPrivate).status().Is(Code::kStaleTerm));
}

TEST_P(BackupLogOfi, SharedLogScreensSealsAndARevokedSenderCannotFlush) {
  ASSERT_NO_FATAL_FAILURE(StartBackup(Protocol::kRowan));
  auto grant = Open(0, proto::ReplBuffer::kNone);
  ASSERT_TRUE(grant.ok()) << grant.status().ToString();
  ASSERT_NE(grant->send_token, 0u);
  const fabric::RemoteMemory flush{grant->mem_addr, grant->mem_key, grant->mem_len};

  auto message = [&](const std::string& key, uint64_t token) {
    const uint16_t shard = static_cast<uint16_t>(store_->ShardOf(HashKey(key)));
    auto layout = log::PlanEntry(key.size(), 5, 4096);
    const auto block = log::EncodeEntry({log::EntryType::kPut, shard, 7}, key, "value", *layout);
    std::vector<std::byte> m(kSealBytes + block.size());
    EncodeSeal(token, static_cast<uint32_t>(block.size()), m.data());
    std::memcpy(m.data() + kSealBytes, block.data(), block.size());
    return token == 0 ? block : m;
  };
  const auto sealed = message("sealed", grant->send_token);
  const auto unsealed = message("unsealed", 0);
  const auto guessed = message("guessed", grant->send_token ^ 1);
  ASSERT_TRUE(out_->Send(*peer_, sealed.data(), sealed.size(), nullptr, 1).ok());
  ASSERT_TRUE(out_->Send(*peer_, unsealed.data(), unsealed.size(), nullptr, 2).ok());
  ASSERT_TRUE(out_->Send(*peer_, guessed.data(), guessed.size(), nullptr, 3).ok());
  uint8_t byte = 0;
  ASSERT_TRUE(out_->Read(*peer_, &byte, 1, nullptr, flush, 0, 4).ok());
  for (uint64_t ctx : {1, 2, 3, 4}) {
    auto c = Wait(ctx);
    ASSERT_TRUE(c.has_value()) << ctx;
    EXPECT_EQ(c->status, Code::kOk) << ctx;
  }
  ASSERT_TRUE(backup_->CatchUp().ok());
  EXPECT_EQ(backup_->stats().messages_rejected, 2u);
  EXPECT_TRUE(store_->Get("sealed").ok());
  EXPECT_TRUE(store_->Get("unsealed").status().Is(Code::kNotFound));
  EXPECT_TRUE(store_->Get("guessed").status().Is(Code::kNotFound));

  backup_->Fence(Senders{.term = 2, .shards = {{5, {0, 1, 2, 3}}}});
  const auto late = message("late", grant->send_token);
  ASSERT_TRUE(out_->Send(*peer_, late.data(), late.size(), nullptr, 5).ok());
  ASSERT_TRUE(out_->Read(*peer_, &byte, 1, nullptr, flush, 0, 6).ok());
  auto read = Wait(6);
  ASSERT_TRUE(read.has_value());
  EXPECT_NE(read->status, Code::kOk) << "a revoked sender's flush Read succeeded: it could acknowledge";
  ASSERT_TRUE(backup_->CatchUp().ok());
  EXPECT_TRUE(store_->Get("late").status().Is(Code::kNotFound)) << "a revoked token's message was indexed";
}

std::string ProviderName(const ::testing::TestParamInfo<std::string>& p) { return p.param; }

INSTANTIATE_TEST_SUITE_P(Providers, BackupLogOfi, ::testing::Values("shm", "tcp"), ProviderName);

}  // namespace
}  // namespace slip::replication
