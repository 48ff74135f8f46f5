// A real local cluster: `slip cluster up` starts a manager and three
// `slip server` processes (tcp provider on loopback, RF 3); the test drives
// it through slip::Client, kills a node with SIGKILL in the middle of a
// write load, and checks that every acknowledged write is readable with its
// latest value and no deleted key came back — after the failover, after the
// killed node rejoined, and after a whole-cluster stop and cold start. Once
// per replication design: the one-sided designs must survive the same; and
// with three request workers per server ("design/3", server/worker_pool.h),
// where requests hop between threads and share-kv's workers share one
// remote log per backup; and over the shm provider ("design@shm"), which
// every process takes from the cluster's configuration.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "cli/processes.h"
#include "cluster/cluster_config.h"
#include "integration/cluster_harness.h"
#include "auth/keyring.h"
#include "node/node_process.h"
#include "cluster/config_access.h"
#include "cluster/rebalance.h"
#include "proto/kv.h"
#include "common/hash.h"
#include "fabric/ofi/ofi_fabric.h"
#include "log/entry.h"
#include "replication/seal.h"
#include "rpc/rpc_peers.h"
#include "slip/client.h"

#include <nlohmann/json.hpp>

namespace slip {
namespace {

namespace fs = std::filesystem;

using integration::Slip;

using integration::AckedWrites;

class ClusterIntegrationTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ClusterIntegrationTest, KillFailoverRejoinAndColdStartLoseNothingAcknowledged) {
  std::string param = GetParam();
  std::string provider = "tcp";
  if (const size_t at = param.find('@'); at != std::string::npos) {
    provider = param.substr(at + 1);
    param.resize(at);
  }
  const size_t slash = param.find('/');
  const std::string design = param.substr(0, slash);
  const std::string workers = slash == std::string::npos ? "1" : param.substr(slash + 1);
  const fs::path dir = fs::temp_directory_path() /
                       ("slip_cluster_" + std::to_string(getpid()) + "_" + design + "_w" + workers + "_" + provider);
  fs::remove_all(dir);
  const std::string d = dir.string();
  const integration::TailLogsOnFailure logs(d);
  const std::string up = "cluster up --lease-ms 1000 --workers " + workers + " --dir " + d;
  ASSERT_EQ(Slip(up + " --nodes 3 --rf 3 --shards 12 --design " + design + " --provider " + provider), 0)
      << "see " << d << "/logs";

  auto client = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                           .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  // A client that reads its routing now and stays idle through the failover:
  // its first request afterwards carries a stale term and must be redirected.
  auto stale = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                          .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  ASSERT_TRUE(stale.ok());
  ASSERT_TRUE((*stale)->Put("stale-probe", "before").ok());
  // Values at the frame and store limits, which travel in fragments (RPC)
  // or in pieces (one-sided designs): they must survive everything below
  // too — failover, re-replication to the rejoined node, cold start.
  integration::SizedValues sized;
  if (cluster::UsesChain(design)) {
    // A rubble table must fit one slot: entries up to 1 MB.
    ASSERT_NO_FATAL_FAILURE(sized.Write(**client, {0, 65535, 65536, 65537, (size_t{1} << 20) - 16}));
    EXPECT_TRUE((*client)->Put("sized-over", std::string((1 << 20) + 1, 'x')).Is(Code::kTooLarge));
  } else {
    ASSERT_NO_FATAL_FAILURE(sized.Write(**client, {0, 65535, 65536, 65537, size_t{1} << 20, size_t{16} << 20}));
  }
  EXPECT_TRUE((*client)->Put("sized-over", std::string((16 << 20) + 1, 'x')).Is(Code::kTooLarge));
  AckedWrites m;
  const std::string unhealthy = integration::WaitFullyReplicated(d);
  ASSERT_EQ(unhealthy, "") << "the cluster never became fully replicated; see " << d << "/logs";
  // A load of puts and deletes from two threads; node 1 is killed midway,
  // and the clients keep writing through the failover.
  integration::RunLoadWithFault(**client, m, 400, 600,
                                [&] { ASSERT_EQ(Slip("cluster kill --node 1 --dir " + d), 0); });
  m.Check(**client, "after failover");
  sized.Check(**client, "after failover");
  auto probe = (*stale)->Get("stale-probe");
  ASSERT_TRUE(probe.ok()) << "stale-term client not redirected: " << probe.status().ToString();
  EXPECT_EQ(*probe, "before");
  stale->reset();

  // The configuration moves on: node 1 is marked down. Not necessarily yet:
  // when node 1 was primary of nothing (a slow start on a loaded machine
  // can cost it its shards), no request above waited for the failover, so
  // give the manager a few leases to notice.
  {
    auto store = cluster::OpenConfigStore(d, "");
    ASSERT_TRUE(store.ok());
    cluster::NodeState state = cluster::NodeState::kUp;
    for (int i = 0; i < 100 && state != cluster::NodeState::kDown; ++i) {
      auto c = (*store)->Load();
      ASSERT_TRUE(c.ok());
      state = c->config.nodes.at(1).state;
      if (state != cluster::NodeState::kDown) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(state, cluster::NodeState::kDown);
  }

  // The killed node comes back (empty) and is re-replicated.
  ASSERT_EQ(Slip(up), 0);
  m.Check(**client, "after rejoin");
  sized.Check(**client, "after rejoin");

  // Whole-cluster stop and cold start.
  client->reset();
  ASSERT_EQ(Slip("cluster down --dir " + d), 0);
  ASSERT_EQ(Slip(up), 0) << "see " << d << "/logs";
  auto again = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                          .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  ASSERT_TRUE(again.ok());
  m.Check(**again, "after cold start");
  sized.Check(**again, "after cold start");
  if (workers != "1") {
    // Every node lists an entry per worker, and requests come in at their
    // shard's worker's (entering at worker 0, two in three would hop).
    auto store = cluster::OpenConfigStore(d, "");
    ASSERT_TRUE(store.ok());
    auto c = (*store)->Load();
    ASSERT_TRUE(c.ok());
    for (const auto& [id, info] : c->config.nodes) EXPECT_EQ(info.workers.size(), std::stoul(workers)) << "node " << id;
    for (int i = 0; i < 60; ++i) {
      const std::string k = "entry-" + std::to_string(i);
      m.Record(k, "v", (*again)->Put(k, "v"), false);
    }
    uint64_t requests = 0, hopped = 0, received = 0, frames = 0, messages = 0;
    auto stats = (*again)->NodeStats();
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    for (const std::string& text : *stats) {
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (j.is_discarded() || !j.contains("requests_hopped")) continue;
      for (const char* f : {"puts", "gets", "dels", "backup_requests"}) requests += j[f].get<uint64_t>();
      hopped += j["requests_hopped"].get<uint64_t>();
      received += j["rpc"]["requests"].get<uint64_t>();
      frames += j["rpc"]["frames_sent"].get<uint64_t>();
      messages += j["rpc"]["messages_sent"].get<uint64_t>();
    }
    EXPECT_GE(requests, 60u);
    EXPECT_LT(hopped * 4, requests) << hopped << " of " << requests << " requests hopped between workers";
    // The RPC traffic is summed over every worker's channel: each request
    // a worker served came in on one, and was answered by a frame.
    EXPECT_GE(received, requests);
    // Each node counted the STATS request it was answering, not yet its answer.
    EXPECT_GE(frames + stats->size(), received);
    EXPECT_GT(messages, 0u);
    EXPECT_LE(messages, frames);
    const Client::Sent sent = (*again)->RpcSent();
    EXPECT_GE(sent.frames, 60u);
    EXPECT_GT(sent.messages, 0u);
    EXPECT_LE(sent.messages, sent.frames);
    m.Check(**again, "after the entries' writes");
  }
  std::printf("  %d operations, %d with unknown outcome, %zu keys checked\n", m.ops.load(), m.unknown.load(),
              m.acked.size());
  again->reset();
  EXPECT_EQ(Slip("cluster down --dir " + d), 0);
  if (!HasFailure()) fs::remove_all(dir);  // else keep the logs
}

// A node whose start outlasts the manager's grace (its first lease comes
// after 3 lease periods) is declared failed while it is still starting, and
// its shards go to the others. It must come back as a replica of shards —
// not as an "up" member holding nothing, which left every shard one replica
// short for good — and, when it holds data that may be stale by now, start
// over empty first.
TEST(ClusterStartTest, ANodeDeclaredFailedWhileStartingRejoinsItsShards) {
  const fs::path dir = fs::temp_directory_path() / ("slip_cluster_" + std::to_string(getpid()) + "_slowstart");
  fs::remove_all(dir);
  const std::string d = dir.string();
  ASSERT_EQ(Slip("cluster init --nodes 3 --rf 3 --shards 6 --design rpc-kv --dir " + d), 0);
  // Whether DIR/logs/<name>.log has a line containing `what` (waits up to 20 s).
  auto logged = [&](const std::string& name, const std::string& what, size_t after_bytes) {
    for (int i = 0; i < 2000; ++i) {
      std::ifstream f(d + "/logs/" + name + ".log");
      std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (text.size() > after_bytes && text.find(what, after_bytes) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  auto log_size = [&](const std::string& name) {
    std::error_code ec;
    const auto n = fs::file_size(d + "/logs/" + name + ".log", ec);
    return ec ? size_t{0} : static_cast<size_t>(n);
  };
  auto start_all = [&](bool stall_node1) {
    const size_t node1_log = log_size("node-1");
    auto m = cli::SpawnDetached(d, "manager", {SLIP_BINARY, "manager", "--dir", d, "--lease-ms", "1000"});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    pid_t slow = -1;
    for (int i = 0; i < 3; ++i) {
      auto p = cli::SpawnDetached(d, "node-" + std::to_string(i),
                                  {SLIP_BINARY, "server", "--dir", d, "--node", std::to_string(i), "--lease-ms",
                                   "1000", "--pm-mb", "64"});
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      if (i == 1) slow = *p;
    }
    if (!stall_node1) return;
    // Past its configuration read (its store is open), before its first
    // lease: stalled for longer than the manager's grace.
    ASSERT_TRUE(logged("node-1", "store recovered", node1_log));
    ASSERT_EQ(kill(slow, SIGSTOP), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(4500));
    ASSERT_EQ(kill(slow, SIGCONT), 0);
  };
  auto stop_all = [&] {
    for (const char* n : {"node-0", "node-1", "node-2", "manager"}) EXPECT_TRUE(cli::StopProcess(d, n).ok()) << n;
  };

  // A fresh cluster: node 1 is empty when it learns it was replaced.
  ASSERT_NO_FATAL_FAILURE(start_all(true));
  ASSERT_EQ(integration::WaitFullyReplicated(d), "") << "see " << d << "/logs";
  {
    auto c = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                        .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    for (int i = 0; i < 50; ++i) ASSERT_TRUE((*c)->Put("k" + std::to_string(i), "v" + std::to_string(i)).ok()) << i;
  }
  stop_all();

  // Again with data: node 1 must drop what it holds and rejoin empty.
  ASSERT_NO_FATAL_FAILURE(start_all(true));
  ASSERT_EQ(integration::WaitFullyReplicated(d), "") << "see " << d << "/logs";
  {
    auto c = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                        .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
    ASSERT_TRUE(c.ok());
    for (int i = 0; i < 50; ++i) {
      auto v = (*c)->Get("k" + std::to_string(i));
      ASSERT_TRUE(v.ok()) << i << ": " << v.status().ToString();
      EXPECT_EQ(*v, "v" + std::to_string(i));
    }
  }
  stop_all();
  if (!HasFailure()) fs::remove_all(dir);
}

// A node that stalls for longer than its lease (SIGSTOP here; a loaded
// machine, a long page-in in production) is fenced: its lease runs out and
// the manager replaces it. The process itself boots again once it is
// listed down and rejoins as a replica — no operator, no supervisor — and
// loses nothing the cluster acknowledged meanwhile.
TEST(ClusterStallTest, ANodeStalledPastItsLeaseRejoinsByItself) {
  const fs::path dir = fs::temp_directory_path() / ("slip_cluster_" + std::to_string(getpid()) + "_stall");
  fs::remove_all(dir);
  const std::string d = dir.string();
  const integration::TailLogsOnFailure logs(d);
  ASSERT_EQ(Slip("cluster up --lease-ms 1000 --nodes 3 --rf 3 --shards 12 --design rowan-kv --dir " + d), 0);
  ASSERT_EQ(integration::WaitFullyReplicated(d), "") << "see " << d << "/logs";
  auto client = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                           .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  pid_t node1 = 0;
  for (const auto& p : cli::ListProcesses(d)) {
    if (p.name == "node-1") node1 = p.pid;
  }
  ASSERT_GT(node1, 0);
  AckedWrites m;
  // Stalled for four leases while two threads write: the manager declares
  // it failed and the others take its shards.
  integration::RunLoadWithFault(**client, m, 200, 400, [&] {
    ASSERT_EQ(kill(node1, SIGSTOP), 0);
    std::this_thread::sleep_for(std::chrono::seconds(4));
    ASSERT_EQ(kill(node1, SIGCONT), 0);
  });
  // The same process comes back as a full replica of its shards again.
  ASSERT_EQ(integration::WaitFullyReplicated(d), "") << "node 1 never rejoined; see " << d << "/logs";
  bool alive = false;
  for (const auto& p : cli::ListProcesses(d)) alive |= p.name == "node-1" && p.pid == node1 && p.alive;
  EXPECT_TRUE(alive) << "node 1's process is gone";
  {
    std::ifstream f(d + "/logs/node-1.log");
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("fenced ("), std::string::npos);
    EXPECT_NE(text.find("booting again to rejoin (incarnation"), std::string::npos);
  }
  m.Check(**client, "after the stalled node rejoined");
  // Its replicas are complete: with the other two killed one after the
  // other, node 1 alone serves every acknowledged write.
  ASSERT_EQ(Slip("cluster kill --node 0 --dir " + d), 0);
  m.Check(**client, "after node 0 was killed");
  ASSERT_EQ(Slip("cluster kill --node 2 --dir " + d), 0);
  m.Check(**client, "after nodes 0 and 2 were killed");
  client->reset();
  ASSERT_EQ(Slip("cluster down --dir " + d), 0);
  if (!HasFailure()) fs::remove_all(dir);
}

// DINOMO (docs/papers/dinomo.md, "In the cluster"): KVS nodes over a
// `slip pool` process. A KVS node is killed under a write load — its shards
// go to the others, which merge its log before they serve them — and comes
// back (the manager hands it its share again); the pool itself is killed and restarted (its index
// and every node's open segments are in its region), the nodes finding it
// at its new address; then a whole-cluster cold start. No acknowledged
// write is lost, and a client with a stale map is redirected.
// Once per design with its data in the pool: dinomo; dinomo-n (a partition
// per node: a failed node's shards are copied into their new owners'
// partitions); and clover (any node serves any key; a restarted pool makes
// every node start over against it).
class PoolClusterTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PoolClusterTest, KillAKvsNodeThePoolAndEverythingLoseNothingAcknowledged) {
  std::string design = GetParam();
  std::replace(design.begin(), design.end(), '_', '-');  // test names have no dashes
  const fs::path dir = fs::temp_directory_path() / ("slip_cluster_" + std::to_string(getpid()) + "_" + design);
  fs::remove_all(dir);
  const std::string d = dir.string();
  const std::string up = "cluster up --lease-ms 1000 --pm-mb 64 --dir " + d;
  ASSERT_EQ(Slip(up + " --nodes 3 --shards 12 --design " + design), 0) << "see " << d << "/logs";
  auto open = [&] {
    return Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                      .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  };
  auto client = open();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto stale = open();
  ASSERT_TRUE(stale.ok());
  ASSERT_TRUE((*stale)->Put("stale-probe", "before").ok());
  // Values up to half a segment (8 MB segments) travel in one batch; more
  // is refused with the reason.
  integration::SizedValues sized;
  ASSERT_NO_FATAL_FAILURE(sized.Write(**client, {0, 65537, size_t{1} << 20, size_t{3} << 20}));
  EXPECT_TRUE((*client)->Put("sized-over", std::string(5 << 20, 'x')).Is(Code::kTooLarge));

  AckedWrites m;
  integration::RunLoadWithFault(**client, m, 400, 600,
                                [&] { ASSERT_EQ(Slip("cluster kill --node 1 --dir " + d), 0); });
  m.Check(**client, "after a KVS node's failure");
  sized.Check(**client, "after a KVS node's failure");
  auto probe = (*stale)->Get("stale-probe");
  ASSERT_TRUE(probe.ok()) << "stale-map client not redirected: " << probe.status().ToString();
  EXPECT_EQ(*probe, "before");
  stale->reset();

  // The killed node rejoins; then the pool dies under a write load and
  // `cluster up` restarts it.
  ASSERT_EQ(Slip(up), 0) << "see " << d << "/logs";
  m.Check(**client, "after the node rejoined");
  integration::RunLoadWithFault(**client, m, m.ops + 200, 300, [&] {
    ASSERT_TRUE(cli::KillProcess(d, "pool").ok());
    ASSERT_EQ(Slip(up), 0) << "see " << d << "/logs";
  });
  m.Check(**client, "after the pool restarted");
  sized.Check(**client, "after the pool restarted");

  client->reset();
  ASSERT_EQ(Slip("cluster down --dir " + d), 0);
  ASSERT_EQ(Slip(up), 0) << "see " << d << "/logs";
  auto again = open();
  ASSERT_TRUE(again.ok());
  m.Check(**again, "after cold start");
  sized.Check(**again, "after cold start");
  std::printf("  %d operations, %d with unknown outcome, %zu keys checked\n", m.ops.load(), m.unknown.load(),
              m.acked.size());
  again->reset();
  EXPECT_EQ(Slip("cluster down --dir " + d), 0);
  if (!HasFailure()) fs::remove_all(dir);  // else keep the logs
}

INSTANTIATE_TEST_SUITE_P(Designs, PoolClusterTest,
                         ::testing::Values(std::string("dinomo"), std::string("dinomo_n"), std::string("clover")),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// DINOMO's elasticity (docs/papers/dinomo.md §5b): `slip cluster add-node`
// starts a node that joins and gets its share of the shards from the live
// nodes, `slip cluster remove-node` makes one hand all of its shards over
// and leave, both under a write load; nothing moves but ownership, no
// acknowledged write is lost, and a cold start brings back exactly the
// members left. A design that would have to copy data refuses at once. The
// autoscaler adds and then removes a node by its thresholds.
TEST(DinomoClusterTest, NodesJoinAndLeaveUnderLoadLosingNothing) {
  const fs::path dir = fs::temp_directory_path() / ("slip_cluster_" + std::to_string(getpid()) + "_elastic");
  fs::remove_all(dir);
  const std::string d = dir.string();
  const std::string up = "cluster up --lease-ms 1000 --pm-mb 64 --dir " + d;
  ASSERT_EQ(Slip(up + " --nodes 3 --shards 12 --design dinomo"), 0) << "see " << d << "/logs";
  auto client = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                           .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto store = cluster::OpenConfigStore(d, "");
  ASSERT_TRUE(store.ok());
  auto owned = [&] {
    std::map<uint32_t, uint32_t> o;
    const cluster::ClusterConfig c = (*store)->Load()->config;
    for (const auto& sh : c.shards) ++o[sh.primary];
    return o;
  };

  AckedWrites m;
  integration::RunLoadWithFault(**client, m, 300, 400,
                                [&] { ASSERT_EQ(Slip("cluster add-node --lease-ms 1000 --dir " + d), 0); });
  m.Check(**client, "after node 3 joined");
  EXPECT_EQ(owned(), (std::map<uint32_t, uint32_t>{{0, 3}, {1, 3}, {2, 3}, {3, 3}}));

  integration::RunLoadWithFault(**client, m, m.ops + 200, 400,
                                [&] { ASSERT_EQ(Slip("cluster remove-node --node 0 --dir " + d), 0); });
  m.Check(**client, "after node 0 left");
  EXPECT_FALSE((*store)->Load()->config.nodes.contains(0));
  EXPECT_EQ(owned(), (std::map<uint32_t, uint32_t>{{1, 4}, {2, 4}, {3, 4}}));
  for (const auto& p : cli::ListProcesses(d)) EXPECT_NE(p.name, "node-0") << "its process is gone";

  // Bad requests change nothing.
  const uint64_t term = (*store)->Load()->config.term;
  EXPECT_NE(Slip("cluster remove-node --node 0 --dir " + d), 0) << "not a member any more";
  EXPECT_NE(Slip("cluster add-node --node 1 --dir " + d), 0) << "a member already";
  EXPECT_EQ((*store)->Load()->config.term, term);
  const std::string other = d + "-rubble";
  ASSERT_EQ(Slip("cluster init --nodes 3 --rf 2 --shards 6 --design rubble --dir " + other), 0);
  EXPECT_NE(Slip("cluster add-node --dir " + other), 0) << "rubble chains do not move shards";
  EXPECT_TRUE(cli::ListProcesses(other).empty());
  const std::string idle = d + "-rpc";
  ASSERT_EQ(Slip("cluster init --nodes 3 --rf 2 --shards 6 --dir " + idle), 0);
  EXPECT_NE(Slip("cluster add-node --dir " + idle), 0) << "nothing runs there to move shards";
  EXPECT_TRUE(cli::ListProcesses(idle).empty());
  fs::remove_all(other);
  fs::remove_all(idle);

  // The policy engine as a supervisor (cluster/autoscale.h): thresholds that
  // make every epoch "overloaded" add a node; ones that make it "idle"
  // remove the idlest — one action, then the grace period.
  ASSERT_EQ(Slip("cluster autoscale --epochs 3 --epoch-ms 300 --over -1 --slo-us 0 --grace-ms 60000 --dir " + d), 0);
  EXPECT_EQ(owned().size(), 4u) << "a fourth node joined";
  ASSERT_EQ(Slip("cluster autoscale --epochs 3 --epoch-ms 300 --under 2 --slo-us 1e9 --grace-ms 60000 --dir " + d), 0);
  EXPECT_EQ(owned().size(), 3u) << "one node left";
  m.Check(**client, "after the autoscaler added and removed a node");

  client->reset();
  ASSERT_EQ(Slip("cluster down --dir " + d), 0);
  ASSERT_EQ(Slip(up), 0) << "see " << d << "/logs";
  auto again = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                          .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  ASSERT_TRUE(again.ok());
  m.Check(**again, "after cold start");
  std::printf("  %d operations, %d with unknown outcome, %zu keys checked\n", m.ops.load(), m.unknown.load(),
              m.acked.size());
  again->reset();
  EXPECT_EQ(Slip("cluster down --dir " + d), 0);
  if (!HasFailure()) fs::remove_all(dir);
}

// DINOMO's selective replication (docs/papers/dinomo.md §4d): hot keys
// shared by all three nodes through the pool's cells while a write load
// runs, clients spreading each shared key's requests over its owners; a
// secondary owner killed and back; then the keys de-replicated under load.
// No acknowledged write is lost throughout, and a cold start finds the
// cells or their absence as the configuration says.
TEST(DinomoClusterTest, HotKeysSharedKilledAndUnsharedUnderLoadLoseNothing) {
  const fs::path dir = fs::temp_directory_path() / ("slip_cluster_" + std::to_string(getpid()) + "_shared");
  fs::remove_all(dir);
  const std::string d = dir.string();
  const std::string up = "cluster up --lease-ms 1000 --pm-mb 64 --dir " + d;
  ASSERT_EQ(Slip(up + " --nodes 3 --shards 12 --design dinomo"), 0) << "see " << d << "/logs";
  auto open = [&] {
    return Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                      .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  };
  auto client = open();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto store = cluster::OpenConfigStore(d, "");
  ASSERT_TRUE(store.ok());
  // The load's busiest keys (each thread writes its own: key0, key1, ...).
  const std::vector<std::string> hot = {"key0", "key1", "key2", "key3"};
  AckedWrites m;
  integration::RunLoadWithFault(**client, m, 200, 400, [&] {
    for (const std::string& k : hot) ASSERT_EQ(Slip("cluster share --key " + k + " --owners 0,1,2 --dir " + d), 0);
  });
  m.Check(**client, "after the hot keys were shared");
  EXPECT_EQ((*store)->Load()->config.shared.size(), hot.size());
  // Hot: a hundred more writes of them.
  for (int i = 0; i < 100; ++i) {
    const std::string& k = hot[i % hot.size()];
    const std::string v = "hot-" + std::to_string(i);
    m.Record(k, v, (*client)->Put(k, v), false);
  }
  // Writes of shared keys went through the cells, from more than one node.
  uint64_t swaps = 0, swapping_nodes = 0;
  auto stats = (*client)->NodeStats();
  ASSERT_TRUE(stats.ok());
  for (const std::string& text : *stats) {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.contains("swaps")) continue;
    swaps += j["swaps"].get<uint64_t>();
    swapping_nodes += j["swaps"].get<uint64_t>() > 0;
  }
  EXPECT_GE(swaps, 100u);
  EXPECT_GE(swapping_nodes, 2u) << "clients spread a shared key's writes over its owners";

  integration::RunLoadWithFault(**client, m, m.ops + 200, 400,
                                [&] { ASSERT_EQ(Slip("cluster kill --node 2 --dir " + d), 0); });
  m.Check(**client, "after a secondary owner's failure");
  ASSERT_EQ(Slip(up), 0) << "see " << d << "/logs";
  m.Check(**client, "after it came back");

  integration::RunLoadWithFault(**client, m, m.ops + 200, 400, [&] {
    for (const std::string& k : hot) ASSERT_EQ(Slip("cluster unshare --key " + k + " --dir " + d), 0);
  });
  m.Check(**client, "after the hot keys were de-replicated");
  EXPECT_TRUE((*store)->Load()->config.shared.empty());
  EXPECT_NE(Slip("cluster unshare --key key0 --dir " + d), 0) << "not shared any more";
  EXPECT_NE(Slip("cluster share --key key0 --owners 7 --dir " + d), 0) << "no node 7";

  // The policy engine's hot-key rows: with the SLO violated (an objective
  // of 0 us) and the nodes not all busy, a key taking most requests is
  // shared; with the SLO met and the key no longer requested, it goes back.
  {
    std::atomic<bool> stop{false};
    std::thread hot_load([&] {
      for (int i = 0; !stop; ++i) {
        const std::string k = i % 2 == 0 ? "key7" : "key" + std::to_string(100 + i % 40);
        const std::string v = "auto-" + std::to_string(i);
        m.Record(k, v, (*client)->Put(k, v), false);
      }
    });
    EXPECT_EQ(Slip("cluster autoscale --epochs 4 --epoch-ms 1100 --slo-us 0 --over 2 --under -1 --grace-ms 0 --dir " + d),
              0);
    stop = true;
    hot_load.join();
    const auto shared = (*store)->Load()->config.shared;
    EXPECT_TRUE(shared.contains("key7")) << "the hot key was not shared";
    EXPECT_EQ(Slip("cluster autoscale --epochs 3 --epoch-ms 1100 --slo-us 1e9 --under -1 --grace-ms 0 --dir " + d), 0);
    EXPECT_TRUE((*store)->Load()->config.shared.empty()) << "the cold key was not de-replicated";
  }
  m.Check(**client, "after the autoscaler shared and de-replicated a key");

  client->reset();
  ASSERT_EQ(Slip("cluster down --dir " + d), 0);
  ASSERT_EQ(Slip(up), 0) << "see " << d << "/logs";
  auto again = open();
  ASSERT_TRUE(again.ok());
  m.Check(**again, "after cold start");
  std::printf("  %d operations, %d with unknown outcome, %zu keys checked, %llu swaps\n", m.ops.load(),
              m.unknown.load(), m.acked.size(), static_cast<unsigned long long>(swaps));
  again->reset();
  EXPECT_EQ(Slip("cluster down --dir " + d), 0);
  if (!HasFailure()) fs::remove_all(dir);
}

// A server that cannot start says why and exits non-zero (its loop of
// incarnations must not turn a failure into a clean exit).
TEST(CommandLine, AServerThatCannotStartExitsWithTheReason) {
  const fs::path dir = fs::temp_directory_path() / ("slip_nostart_" + std::to_string(getpid()));
  fs::remove_all(dir);
  ASSERT_EQ(Slip("cluster init --nodes 1 --rf 1 --dir " + dir.string()), 0);
  int status = 0;
  const std::string out = integration::Shell(std::string(SLIP_BINARY) + " server --dir " + dir.string() +
                                                 " --node 0 --provider bogus --lease-ms 1000 2>&1",
                                             &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("runs over provider tcp, not bogus"), std::string::npos) << out;
  fs::remove_all(dir);
}

// `slip put` takes a value from stdin or a file, `slip get` gives its bytes
// back unchanged, and a value over the store's limit is refused at once
// with the reason (not after a deadline of retries).
TEST(CommandLine, ValuesTravelUnchangedAndOversizeFailsFast) {
  const fs::path dir = fs::temp_directory_path() / ("slip_cli_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string d = (dir / "cluster").string();
  ASSERT_EQ(Slip("cluster up --nodes 3 --rf 3 --shards 6 --dir " + d), 0) << "see " << d << "/logs";
  const std::string slip = SLIP_BINARY;
  auto sh = [](const std::string& cmd) { return std::system(cmd.c_str()); };
  const std::string in = (dir / "in").string(), out = (dir / "out").string();
  // 2 MB of every byte value, NULs and newlines included.
  {
    std::string bytes;
    for (int i = 0; i < 2000000; ++i) bytes.push_back(static_cast<char>(i * 131 % 256));
    std::FILE* f = std::fopen(in.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  EXPECT_EQ(sh(slip + " put --dir " + d + " from-file --value-file " + in), 0);
  EXPECT_EQ(sh(slip + " get --dir " + d + " from-file > " + out), 0);
  EXPECT_EQ(sh("cmp " + in + " " + out), 0);
  EXPECT_EQ(sh(slip + " put --dir " + d + " from-stdin - < " + in), 0);
  EXPECT_EQ(sh(slip + " get --dir " + d + " from-stdin > " + out), 0);
  EXPECT_EQ(sh("cmp " + in + " " + out), 0);
  // Over the value limit: refused at once, naming the limit.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(sh("head -c 16777217 /dev/zero | " + slip + " put --dir " + d + " big - 2> " + out), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  std::FILE* f = std::fopen(out.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char msg[512] = {};
  (void)std::fread(msg, 1, sizeof(msg) - 1, f);
  std::fclose(f);
  EXPECT_NE(std::string(msg).find("TooLarge"), std::string::npos) << msg;
  EXPECT_NE(sh(slip + " get --dir " + d + " big > /dev/null 2>&1"), 0) << "nothing stored";
  EXPECT_EQ(Slip("cluster down --dir " + d), 0);
  if (!HasFailure()) fs::remove_all(dir);
}

// `slip cluster up --pm`: the durability class is checked before anything
// starts (dax needs a DAX mount, file a disk), recorded, shown by `cluster
// status`, and dram keeps PM files in memory across a cold start even when
// the cluster directory is on a disk.
TEST(CommandLine, PmClassesAreCheckedRecordedAndShown) {
  const fs::path dir = fs::temp_directory_path() / ("slip_pm_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string d = dir.string();
  const std::string slip = SLIP_BINARY;
  auto sh = [](const std::string& cmd) { return std::system(cmd.c_str()); };
  if (fs::exists("/dev/shm")) {
    const std::string shm = "/dev/shm/slip_pm_" + std::to_string(getpid());
    EXPECT_NE(Slip("cluster up --nodes 1 --rf 1 --shards 2 --pm file --dir " + shm), 0) << "file class on tmpfs";
    fs::remove_all(shm);
  }
  EXPECT_NE(Slip("cluster up --nodes 1 --rf 1 --shards 2 --pm dax --dir " + d + "/dax"), 0)
      << "no DAX mount on this machine (a real one would pass)";
  EXPECT_NE(Slip("cluster up --nodes 1 --rf 1 --shards 2 --pm nvme --dir " + d + "/bad"), 0);
  EXPECT_FALSE(fs::exists(d + "/dax/run")) << "nothing started for a refused class";

  const std::string c = d + "/dram";
  ASSERT_EQ(Slip("cluster up --nodes 3 --rf 3 --shards 6 --pm dram --dir " + c), 0) << "see " << c << "/logs";
  const std::string status = (dir / "status").string();
  ASSERT_EQ(sh(slip + " cluster status --dir " + c + " > " + status), 0);
  std::string text;
  {
    std::FILE* f = std::fopen(status.c_str(), "r");
    ASSERT_NE(f, nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  EXPECT_NE(text.find("durability dram"), std::string::npos) << text;
  auto place = node::PlacePm("dram", c, 0);
  ASSERT_TRUE(place.ok());
  EXPECT_EQ(place->path.rfind("/dev/shm/", 0), 0u) << place->path;
  EXPECT_TRUE(fs::exists(place->path)) << place->path;
  EXPECT_NE(text.find(place->path), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(c + "/node-0/pm")) << "the PM file is not on the disk";
  EXPECT_EQ(sh(slip + " put --dir " + c + " k v1"), 0);
  ASSERT_EQ(Slip("cluster down --dir " + c), 0);
  ASSERT_EQ(Slip("cluster up --dir " + c), 0) << "cold start";
  EXPECT_EQ(sh(slip + " get --dir " + c + " k > " + status), 0);
  EXPECT_EQ(Slip("cluster down --dir " + c), 0);
  fs::remove_all(fs::path(place->path).parent_path().parent_path());  // the cluster's /dev/shm directory
  if (!HasFailure()) fs::remove_all(dir);
}

// `slip cluster status` lists the shard moves under way with their state
// (read from the configuration alone: no process needs to run).
TEST(CommandLine, StatusShowsMigrationsUnderWay) {
  const fs::path dir = fs::temp_directory_path() / ("slip_moves_" + std::to_string(getpid()));
  fs::remove_all(dir);
  auto store = cluster::OpenConfigStore(dir.string(), "");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto placed = cluster::Place({{0, "a"}, {1, "b"}, {2, "c"}}, 3, 1);
  ASSERT_TRUE(placed.ok());
  placed->pm = "file";
  const cluster::NodeId from = placed->shards[1].primary;
  const cluster::NodeId to = (from + 1) % 3;
  auto moving = cluster::StartMigration(*placed, 1, from, to);
  ASSERT_TRUE(moving.ok()) << moving.status().ToString();
  ASSERT_TRUE((*store)->CompareAndSwap(cluster::kNoVersion, *moving).ok());
  const std::string out = (dir / "status").string();
  ASSERT_EQ(std::system((std::string(SLIP_BINARY) + " cluster status --dir " + dir.string() + " > " + out).c_str()), 0);
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("shard 1 moving from node " + std::to_string(from) + " to node " + std::to_string(to) +
                      ": pending"),
            std::string::npos)
      << text;
  if (!HasFailure()) fs::remove_all(dir);
}

// Elastic sharded clusters (docs/papers/rowan.md §3.7): under a write load
// with deletes (a DEL of a key not copied yet is fetched from the source),
// two nodes join (each takes its share by shard moves), a move's target is
// killed right after the move starts (finished or rolled back, nothing
// acknowledged is lost), two nodes leave, and the cluster cold-starts.
class ReshardClusterTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReshardClusterTest, NodesJoinAndLeaveAndMovesSurviveAKillUnderLoadLosingNothing) {
  // "design/N": N request workers per server (a move's requests then cross
  // threads: MIGRATE_* on worker 0, the shard's writes on its own worker).
  const std::string param = GetParam();
  const size_t slash = param.find('/');
  const std::string design = param.substr(0, slash);
  const std::string workers = slash == std::string::npos ? "1" : param.substr(slash + 1);
  const fs::path dir =
      fs::temp_directory_path() / ("slip_cluster_" + std::to_string(getpid()) + "_reshard_" + design + "_w" + workers);
  fs::remove_all(dir);
  const std::string d = dir.string();
  const integration::TailLogsOnFailure logs(d);
  const std::string up = "cluster up --lease-ms 1000 --pm-mb 64 --workers " + workers + " --dir " + d;
  const std::string add = "cluster add-node --lease-ms 1000 --pm-mb 64 --workers " + workers + " --dir " + d;
  ASSERT_EQ(Slip(up + " --nodes 3 --rf 2 --shards 12 --design " + design), 0) << "see " << d << "/logs";
  auto client = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                           .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto store = cluster::OpenConfigStore(d, "");
  ASSERT_TRUE(store.ok());
  auto config = [&] { return (*store)->Load()->config; };

  AckedWrites m;
  integration::RunLoadWithFault(**client, m, 300, 300, [&] { ASSERT_EQ(Slip(add), 0); });
  integration::RunLoadWithFault(**client, m, m.ops + 200, 300, [&] { ASSERT_EQ(Slip(add), 0); });
  m.Check(**client, "after two nodes joined");
  {
    const cluster::ClusterConfig c = config();
    ASSERT_EQ(c.nodes.size(), 5u);
    EXPECT_TRUE(c.migrations.empty());
    for (const auto& [n, k] : c.PrimaryCounts()) EXPECT_GE(k, 2u) << "node " << n << " took its share";
  }

  // A move whose target dies at once: done or rolled back, nothing lost.
  {
    const cluster::ClusterConfig c = config();
    const uint32_t shard = 0;
    const auto r = c.Replicas(shard);
    cluster::NodeId to = 0;
    while (std::find(r.begin(), r.end(), to) != r.end()) ++to;
    integration::RunLoadWithFault(**client, m, m.ops + 200, 300, [&] {
      std::thread mover([&] { (void)Slip("cluster move --shard 0 --to " + std::to_string(to) + " --dir " + d); });
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ASSERT_EQ(Slip("cluster kill --node " + std::to_string(to) + " --dir " + d), 0);
      mover.join();
    });
    m.Check(**client, "after a move's target was killed");
    ASSERT_EQ(Slip(up), 0) << "the killed node comes back";
    m.Check(**client, "after the killed node rejoined");
    // `cluster up` is ready once every shard serves; the node it restarted,
    // replaced meanwhile, may still be rejoining (waiting out its killed
    // incarnation's lease). It must be a member again before it can leave.
    ASSERT_EQ(integration::WaitFullyReplicated(d), "");
  }

  integration::RunLoadWithFault(**client, m, m.ops + 200, 300, [&] { ASSERT_EQ(Slip("cluster remove-node --node 0 --dir " + d), 0); });
  integration::RunLoadWithFault(**client, m, m.ops + 200, 300, [&] { ASSERT_EQ(Slip("cluster remove-node --node 4 --dir " + d), 0); });
  m.Check(**client, "after two nodes left");
  {
    const cluster::ClusterConfig c = config();
    EXPECT_EQ(c.nodes.size(), 3u);
    EXPECT_FALSE(c.nodes.contains(0));
    EXPECT_FALSE(c.nodes.contains(4));
    for (const auto& p : cli::ListProcesses(d)) EXPECT_TRUE(p.name != "node-0" && p.name != "node-4") << p.name;
  }
  // Bad requests change nothing.
  const uint64_t term = config().term;
  EXPECT_NE(Slip("cluster move --shard 99 --to 1 --dir " + d), 0) << "no such shard";
  EXPECT_NE(Slip("cluster move --shard 1 --to 0 --dir " + d), 0) << "not a member";
  EXPECT_NE(Slip("cluster remove-node --node 0 --dir " + d), 0) << "not a member any more";
  EXPECT_EQ(config().term, term);

  client->reset();
  ASSERT_EQ(Slip("cluster down --dir " + d), 0);
  ASSERT_EQ(Slip(up), 0) << "see " << d << "/logs";
  auto again = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                          .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  ASSERT_TRUE(again.ok());
  m.Check(**again, "after cold start");
  std::printf("  %d operations, %d with unknown outcome, %zu keys checked\n", m.ops.load(), m.unknown.load(),
              m.acked.size());
  again->reset();
  EXPECT_EQ(Slip("cluster down --dir " + d), 0);
  if (!HasFailure()) fs::remove_all(dir);
}

// A joining node holds its lease before it is listed. The manager, past its
// boot grace, probes the lease of every listed node and declares one whose
// lease is free failed; a node listed first could lose that race while it
// started, and `cluster add-node` then planned no moves to it. Here the test
// is that manager, probing the moment the new node first appears.
TEST(ReshardJoinTest, ANewNodeHoldsItsLeaseBeforeItIsListed) {
  const fs::path dir = fs::temp_directory_path() / ("slip_join_lease_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string d = dir.string();
  const integration::TailLogsOnFailure logs(d);
  ASSERT_EQ(Slip("cluster up --nodes 2 --rf 2 --shards 4 --design rpc-kv --dir " + d), 0) << "see " << d << "/logs";
  auto store = cluster::OpenConfigStore(d, "");
  ASSERT_TRUE(store.ok());
  std::atomic<int> added{-1};
  std::thread add([&] { added = Slip("cluster add-node --dir " + d); });
  bool probed = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!probed && added == -1 && std::chrono::steady_clock::now() < deadline) {
    auto vc = (*store)->Load();
    if (!vc.ok() || !vc->config.nodes.contains(2)) {
      // The gap the old order left was a millisecond or so: look as often
      // as the nodes, which share the cores, leave room to.
      std::this_thread::yield();
      continue;
    }
    probed = true;
    auto probe = (*store)->AcquireLease(cluster::NodeLeaseName(2), "test-probe", runtime::kSecond, node::MachineNow());
    if (probe.ok()) {
      ADD_FAILURE() << "node 2 was listed before it held its lease";
      (void)(*store)->ReleaseLease(*probe);
    } else {
      EXPECT_TRUE(probe.status().Is(Code::kBusy)) << probe.status().ToString();
    }
  }
  add.join();
  EXPECT_TRUE(probed) << "node 2 was never seen listed";
  EXPECT_EQ(added, 0);
  const auto after = (*store)->Load();
  EXPECT_TRUE(after.ok());
  if (after.ok()) {
    const cluster::ClusterConfig& c = after->config;
    EXPECT_TRUE(c.nodes.contains(2) && c.nodes.at(2).state == cluster::NodeState::kUp) << "node 2 is an up member";
    EXPECT_GE(c.PrimaryCounts()[2], 1u) << "node 2 took its share";
  }
  EXPECT_EQ(Slip("cluster down --dir " + d), 0);
  if (!HasFailure()) fs::remove_all(dir);
}

// The cluster secret (docs/security.md): `cluster up` makes one, owner-only;
// a client without it, or with another cluster's, is refused and changes
// nothing; `cluster rotate-secret` under a write load fails no operation,
// and afterwards the old secret is refused.
TEST(AuthTest, StrangersAreRefusedAndRotationFailsNoOperation) {
  const fs::path dir = fs::temp_directory_path() / ("slip_auth_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string d = (dir / "cluster").string();
  integration::TailLogsOnFailure tail(d);
  ASSERT_EQ(Slip("cluster up --nodes 3 --rf 3 --shards 6 --design rowan-kv --dir " + d), 0) << "see " << d << "/logs";
  const std::string secret = d + "/secret";
  ASSERT_EQ(fs::status(secret).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  auto open = [&](const std::string& config_dir, const std::string& secret_file) {
    return Client::Open(ClientOptions{.dir = config_dir, .zookeeper = "", .provider = "",
                                      .deadline = std::chrono::seconds(5), .bind_address = "",
                                      .secret_file = secret_file});
  };
  auto member = open(d, "");
  ASSERT_TRUE(member.ok()) << member.status().ToString();
  ASSERT_TRUE((*member)->Put("k", "v1").ok());
  // A stranger: the cluster's configuration (addresses) but no secret...
  const std::string bare = (dir / "bare").string();
  fs::create_directories(bare);
  fs::copy_file(d + "/cluster.json", bare + "/cluster.json");
  // ...and one with another cluster's secret.
  const std::string other = (dir / "other-secret").string();
  ASSERT_TRUE(auth::WriteKeyringFile(other, auth::Keyring::Generate()).ok());
  const std::string old_copy = (dir / "old-secret").string();
  fs::copy_file(secret, old_copy);
  for (const auto& [config_dir, secret_file] : {std::pair{bare, std::string()}, std::pair{d, other}}) {
    auto stranger = open(config_dir, secret_file);
    ASSERT_TRUE(stranger.ok()) << stranger.status().ToString();
    Status put = (*stranger)->Put("k", "evil");
    EXPECT_TRUE(put.Is(Code::kUnauthenticated)) << put.ToString();
    EXPECT_TRUE((*stranger)->Delete("k").Is(Code::kUnauthenticated));
    EXPECT_TRUE((*stranger)->Get("k").status().Is(Code::kUnauthenticated));
  }
  auto v = (*member)->Get("k");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "v1") << "a stranger changed nothing";

  integration::AckedWrites m;
  int rotated = -1;
  integration::RunLoadWithFault(**member, m, 200, 400, [&] { rotated = Slip("cluster rotate-secret --dir " + d); });
  EXPECT_EQ(rotated, 0);
  EXPECT_EQ(m.unknown, 0) << "an operation failed during the rotation";
  m.Check(**member, "after the rotation");
  auto ring = auth::ReadKeyringFile(secret);
  ASSERT_TRUE(ring.ok());
  EXPECT_EQ(ring->keys().size(), 1u);
  EXPECT_EQ(ring->current().id, 2u);
  auto stale = open(d, old_copy);
  ASSERT_TRUE(stale.ok());
  EXPECT_TRUE((*stale)->Get("k").status().Is(Code::kUnauthenticated)) << "the old secret is retired";
  stale->reset();
  member->reset();
  // A cold start uses the new secret.
  ASSERT_EQ(Slip("cluster down --dir " + d), 0);
  ASSERT_EQ(Slip("cluster up --dir " + d), 0) << "see " << d << "/logs";
  auto again = open(d, "");
  ASSERT_TRUE(again.ok());
  m.Check(**again, "after a cold start");
  again->reset();
  EXPECT_EQ(Slip("cluster down --dir " + d), 0);
  if (!HasFailure()) fs::remove_all(dir);
}

// Fencing (docs/security.md): anyone who can reach a rowan-kv backup's
// replication endpoint can Send into its shared log. A CRC-valid entry of
// the highest version, unsealed or sealed with a guessed token, is erased
// where it landed: after the backup is promoted, the key still has its
// acknowledged value.
TEST(FencingTest, AForgedReplicationSendIsNeverServed) {
  const fs::path dir = fs::temp_directory_path() / ("slip_fencing_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const std::string d = (dir / "cluster").string();
  integration::TailLogsOnFailure tail(d);
  ASSERT_EQ(Slip("cluster up --nodes 3 --rf 2 --shards 3 --lease-ms 1000 --design rowan-kv --provider tcp --dir " + d),
            0)
      << "see " << d << "/logs";
  auto client = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                           .deadline = std::chrono::seconds(20), .bind_address = "",
                                           .secret_file = ""});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE((*client)->Put("k", "acknowledged").ok());
  ASSERT_EQ(integration::WaitFullyReplicated(d), "");

  auto store = cluster::OpenConfigStore(d, "");
  ASSERT_TRUE(store.ok());
  auto vc = cluster::LoadWhenPresent(store->get(), 10 * runtime::kSecond);
  ASSERT_TRUE(vc.ok());
  const uint32_t shard = vc->config.ShardOf(HashKey("k"));
  const std::vector<cluster::NodeId> replicas = vc->config.Replicas(shard);
  ASSERT_EQ(replicas.size(), 2u);
  const cluster::NodeId primary = replicas[0], backup = replicas[1];
  auto stats_of = [&](cluster::NodeId node) -> nlohmann::json {
    auto all = (*client)->NodeStats();
    if (!all.ok()) return {};
    for (const std::string& text : *all) {
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (!j.is_discarded() && j.value("node", -1) == static_cast<int>(node)) return j;
    }
    return {};
  };
  const nlohmann::json before = stats_of(backup);
  ASSERT_TRUE(before.contains("replication")) << before.dump();
  auto address = rpc::RpcPeers::HexDecode(before["replication"]["address"].get<std::string>());
  ASSERT_TRUE(address.ok());

  // The stranger: its own tcp endpoint, no grant.
  auto fabric = fabric::OpenOfiFabric(fabric::FabricOptions{.provider = "tcp", .node_address = ""},
                                      fabric::OfiOptions{.max_multi_recv_message = proto::kMaxMessage});
  ASSERT_TRUE(fabric.ok()) << fabric.status().ToString();
  auto ep = (*fabric)->CreateEndpoint(fabric::EndpointOptions{.name = "stranger"});
  ASSERT_TRUE(ep.ok());
  auto peer = (*ep)->AddPeer(*address);
  ASSERT_TRUE(peer.ok());
  const log::EntryMeta meta{log::EntryType::kPut, static_cast<uint16_t>(shard), log::kMaxVersion - 1};
  auto layout = log::PlanEntry(1, 6, 4096);
  ASSERT_TRUE(layout.ok());
  const std::vector<std::byte> block = log::EncodeEntry(meta, "k", "forged", *layout);
  std::vector<std::byte> sealed(replication::kSealBytes + block.size());
  replication::EncodeSeal(0x5eed5eed5eed5eedull, static_cast<uint32_t>(block.size()), sealed.data());
  std::memcpy(sealed.data() + replication::kSealBytes, block.data(), block.size());
  ASSERT_TRUE((*ep)->Send(*peer, block.data(), block.size(), nullptr, 1).ok());
  ASSERT_TRUE((*ep)->Send(*peer, sealed.data(), sealed.size(), nullptr, 2).ok());
  int sent = 0;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       sent < 2 && std::chrono::steady_clock::now() < until;) {
    fabric::Completion c[4];
    for (size_t i = 0, n = (*ep)->Poll(c); i < n; ++i) {
      EXPECT_EQ(c[i].status, Code::kOk) << "send " << c[i].context;
      ++sent;
    }
  }
  ASSERT_EQ(sent, 2) << "the stranger's Sends never completed";
  uint64_t rejected = 0;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       rejected < 2 && std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    const nlohmann::json j = stats_of(backup);
    if (j.contains("replication")) rejected = j["replication"]["messages_rejected"].get<uint64_t>();
  }
  EXPECT_EQ(rejected, 2u) << "the backup did not erase both forged messages";

  // Promote the backup: the forged version would win there if it had been
  // digested.
  ASSERT_EQ(Slip("cluster kill --node " + std::to_string(primary) + " --dir " + d), 0);
  Result<std::string> v = Status::Unavailable("not read");
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
    v = (*client)->Get("k");
    if (v.ok() || v.status().Is(Code::kNotFound)) break;
  }
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "acknowledged");
  EXPECT_TRUE((*client)->Put("after", "works").ok());
  ep->reset();
  client->reset();
  EXPECT_EQ(Slip("cluster down --dir " + d), 0);
  if (!HasFailure()) fs::remove_all(dir);
}

// Media damage on a stopped node (docs/design-notes.md "Damage on the
// media"): one bit flipped in one live entry and one 8-byte word of
// another's header torn to zero, in one node's PM file. `slip fsck` finds
// both; the node, started again, discards its data (kept aside) and is
// seeded from its peers, and every key reads back its latest value.
class DamageClusterTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DamageClusterTest, AFlippedBitAndATornWordAreDetectedAndRepairedFromPeers) {
  const std::string design = GetParam();
  const fs::path dir = fs::temp_directory_path() / ("slip_damage_" + std::to_string(getpid()) + "_" +
                                                    integration::DesignParamName({design, 0}));
  fs::remove_all(dir);
  const std::string d = (dir / "cluster").string();
  integration::TailLogsOnFailure tail(d);
  // The file class on a real filesystem (the test's temporary directory):
  // what a disk's media errors would hit.
  ASSERT_EQ(Slip("cluster up --nodes 3 --rf 3 --shards 3 --pm-mb 64 --lease-ms 1000 --pm file --provider tcp "
                 "--design " + design + " --dir " + d),
            0);
  std::map<std::string, std::string> want;
  {
    auto client = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                             .deadline = std::chrono::seconds(20), .bind_address = "",
                                             .secret_file = ""});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    for (int gen = 0; gen < 2; ++gen) {
      for (int k = 0; k < 40; ++k) {
        if (gen == 1 && k % 2 == 1) continue;  // half the keys written twice
        const std::string key = "key" + std::to_string(k);
        const std::string value = "value-of-" + key + "-gen" + std::to_string(gen) + "-" + std::string(40, 'v');
        ASSERT_TRUE((*client)->Put(key, value).ok()) << key;
        want[key] = value;
      }
    }
    ASSERT_EQ(integration::WaitFullyReplicated(d), "");
  }
  ASSERT_EQ(Slip("cluster down --dir " + d), 0);

  const std::string pm = d + "/node-1/pm";
  {
    std::fstream f(pm, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << pm;
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // An entry's key and value lie back to back after its 32-byte header.
    auto place = [&](const std::string& key) {
      const size_t at = bytes.find(key + want[key]);
      EXPECT_NE(at, std::string::npos) << key << " is not in " << pm;
      return at;
    };
    const size_t flip = place("key2"), tear = place("key4");
    ASSERT_NE(flip, std::string::npos);
    ASSERT_NE(tear, std::string::npos);
    ASSERT_EQ((tear - 32) % 64, 0u) << "not a block's start";
    f.seekp(static_cast<std::streamoff>(flip + 12));
    f.put(static_cast<char>(bytes[flip + 12] ^ 0x04));
    f.seekp(static_cast<std::streamoff>(tear - 32));
    f.write(std::string(8, '\0').data(), 8);
    ASSERT_TRUE(f.good());
  }
  EXPECT_EQ(WEXITSTATUS(Slip("fsck --node 1 --dir " + d)), 1) << "slip fsck did not see the damage";
  EXPECT_EQ(WEXITSTATUS(Slip("fsck --node 0 --dir " + d)), 0);

  ASSERT_EQ(Slip("cluster up --dir " + d), 0);
  ASSERT_EQ(integration::WaitFullyReplicated(d), "");
  {
    auto client = Client::Open(ClientOptions{.dir = d, .zookeeper = "", .provider = "",
                                             .deadline = std::chrono::seconds(20), .bind_address = "",
                                             .secret_file = ""});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    for (const auto& [key, value] : want) {
      auto got = (*client)->Get(key);
      ASSERT_TRUE(got.ok()) << key << ": " << got.status().ToString();
      EXPECT_EQ(*got, value) << key;
    }
    std::string damage;
    auto all = (*client)->NodeStats();
    ASSERT_TRUE(all.ok());
    for (const std::string& text : *all) {
      auto j = nlohmann::json::parse(text, nullptr, false);
      if (!j.is_discarded() && j.value("node", -1) == 1) damage = j.value("damage", "");
    }
    EXPECT_NE(damage.find("2 damaged places"), std::string::npos) << "node 1 reports: " << damage;
  }
  bool aside = false;
  for (const auto& e : fs::directory_iterator(d + "/node-1")) {
    aside |= e.path().filename().string().starts_with("pm.damaged-");
  }
  EXPECT_TRUE(aside) << "the damaged file was not kept aside";
  ASSERT_EQ(Slip("cluster down --dir " + d), 0);
  // Seeded from its peers and stopped in order: nothing damaged any more.
  EXPECT_EQ(WEXITSTATUS(Slip("fsck --node 1 --dir " + d)), 0);
  if (!HasFailure()) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Designs, DamageClusterTest, ::testing::Values("rpc-kv", "rowan-kv", "tailwind"),
                         integration::DesignParamName);

INSTANTIATE_TEST_SUITE_P(Designs, ReshardClusterTest, ::testing::Values("rpc-kv", "rowan-kv", "tailwind", "share-kv/3", "erda"),
                         integration::DesignParamName);

INSTANTIATE_TEST_SUITE_P(Designs, ClusterIntegrationTest,
                         ::testing::Values("rpc-kv", "rowan-kv", "rwrite-kv", "batch-kv", "share-kv", "tailwind",
                                           "erda", "erda-raw", "erda-redo", "rpc-kv/3", "share-kv/3", "erda/3",
                                           "rpc-kv@shm", "rowan-kv@shm", "erda@shm", "rubble", "rubble-all-compact"),
                         integration::DesignParamName);

}  // namespace
}  // namespace slip
