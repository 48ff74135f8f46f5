#include "replication/registry.h"

#include "cluster/routing.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace slip::replication {
namespace {

TEST(Registry, EveryProtocolHasExactlyOneDesignFoundByItsName) {
  std::set<std::string_view> names;
  for (Protocol p : AllProtocols()) {
    const Design& d = DesignOf(p);
    EXPECT_EQ(d.protocol, p);
    EXPECT_TRUE(names.insert(d.name).second) << d.name << " registered twice";
    auto found = FindDesign(d.name);
    ASSERT_TRUE(found.ok());
    EXPECT_EQ(*found, &d);
    EXPECT_EQ(DesignName(p), d.name);
    EXPECT_NE(d.make_replicator, nullptr) << d.name;
  }
  EXPECT_EQ(names.size(), AllDesigns().size());
  for (const char* n : {"rpc-kv", "rowan-kv", "rwrite-kv", "batch-kv", "share-kv", "tailwind", "erda"}) {
    EXPECT_TRUE(FindDesign(n).ok()) << n;
  }
}

TEST(Registry, AnUnknownNameIsRefusedNamingTheKnownOnes) {
  auto r = ParseDesign("raft-kv");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().Is(Code::kInvalidArgument));
  EXPECT_NE(r.status().message().find("raft-kv"), std::string::npos);
  EXPECT_NE(r.status().message().find("rowan-kv"), std::string::npos);
  EXPECT_NE(r.status().message().find("tailwind"), std::string::npos);
}

TEST(Registry, BackupSidesMatchTheDesigns) {
  EXPECT_FALSE(IsOneSided(Protocol::kRpc));
  EXPECT_EQ(DesignOf(Protocol::kRowan).receive, BackupReceive::kSharedLog);
  for (Protocol p : {Protocol::kRWrite, Protocol::kBatch, Protocol::kShare, Protocol::kTailwind}) {
    EXPECT_TRUE(IsOneSided(p));
    EXPECT_EQ(DesignOf(p).receive, BackupReceive::kPrivateBuffers) << DesignName(p);
  }
  // Only tailwind trusts less than what its senders reported.
  for (const Design* d : AllDesigns()) {
    EXPECT_EQ(d->valid_prefix != nullptr, d->protocol == Protocol::kTailwind) << d->name;
  }
  EXPECT_TRUE(DesignOf(Protocol::kRowan).senders_share_a_log);
  EXPECT_TRUE(DesignOf(Protocol::kShare).senders_share_a_log);
  EXPECT_FALSE(DesignOf(Protocol::kRWrite).senders_share_a_log);
}

// Clients learn from the configuration's design name whether they access
// primaries one-sidedly; the cluster module's list must be the registry's.
TEST(Registry, DirectClientDesignsAgreeWithWhatClientsAreTold) {
  for (const Design* d : AllDesigns()) {
    const cluster::RoutingTable::Direct direct = cluster::DirectAccessOf(d->name);
    EXPECT_EQ(d->clients.reads_one_sided, direct.gets) << d->name;
    EXPECT_EQ(d->clients.writes_one_sided, direct.puts) << d->name;
  }
  // erda replicates as rowan-kv does.
  EXPECT_EQ(DesignOf(Protocol::kErda).receive, BackupReceive::kSharedLog);
  EXPECT_EQ(DesignOf(Protocol::kErda).make_replicator, DesignOf(Protocol::kRowan).make_replicator);
}

}  // namespace
}  // namespace slip::replication
