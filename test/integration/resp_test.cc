// The Redis-protocol front door of a real cluster, driven by the real Redis
// tools: `slip cluster up --resp-port P` (three nodes, RF 3, rowan-kv, tcp on
// loopback) gives node i the port P+i. redis-cli runs the commands (and a
// `--pipe` bulk load), redis-benchmark the load with and without
// pipelining, and hiredis (this program) a writer whose every acknowledged
// SET must survive a node killed mid-run while redis-benchmark hammers
// another node's port.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "integration/cluster_harness.h"
#include "resp/resp.h"
#include "slip/client.h"

namespace slip {
namespace {

namespace fs = std::filesystem;
using integration::FreePortRange;
using integration::Shell;
using integration::Slip;

redisContext* Connect(uint16_t port, const std::string& password) {
  redisContext* c = redisConnect("127.0.0.1", port);
  if (c == nullptr || c->err) return c;
  auto* r = static_cast<redisReply*>(redisCommand(c, "AUTH %s", password.c_str()));
  if (r != nullptr) freeReplyObject(r);
  return c;
}

class RespFrontDoorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string((fs::temp_directory_path() / ("slip_resp_" + std::to_string(::getpid()))).string());
    fs::remove_all(*dir_);
    base_ = FreePortRange(3);
    ASSERT_NE(base_, 0);
    ASSERT_EQ(Slip("cluster up --lease-ms 1000 --nodes 3 --rf 3 --shards 12 --design rowan-kv --dir " + *dir_ +
                   " --resp-port " + std::to_string(base_)),
              0)
        << "see " << *dir_ << "/logs";
    password_ = new std::string(Shell(std::string(SLIP_BINARY) + " cluster password --dir " + *dir_));
    while (!password_->empty() && password_->back() == '\n') password_->pop_back();
    ASSERT_EQ(password_->size(), 64u);
  }
  static void TearDownTestSuite() {
    if (dir_ == nullptr) return;
    (void)Slip("cluster down --dir " + *dir_);
    if (!HasFailure()) fs::remove_all(*dir_);
    delete dir_;
    delete password_;
    dir_ = password_ = nullptr;
  }

  // redis-cli against node i's port, authenticated. A refused connection is
  // tried again for up to a minute: on a loaded machine a node can stall
  // past its lease, and its port is closed until it has rejoined.
  static std::string Cli(int node, const std::string& args) {
    std::string out;
    for (int attempt = 0; attempt < 600; ++attempt) {
      out = Shell("redis-cli -p " + std::to_string(base_ + node) + " --no-auth-warning -a " + *password_ + " " + args +
                  " 2>&1");
      if (out.rfind("Could not connect to Redis", 0) != 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return out;
  }

  static std::string* dir_;
  static std::string* password_;
  static uint16_t base_;
};
std::string* RespFrontDoorTest::dir_ = nullptr;
std::string* RespFrontDoorTest::password_ = nullptr;
uint16_t RespFrontDoorTest::base_ = 0;

TEST_F(RespFrontDoorTest, RedisCliCommandsOnEveryNodesPort) {
  const integration::TailLogsOnFailure logs(*dir_);
  EXPECT_EQ(Cli(0, "PING"), "PONG\n");
  EXPECT_EQ(Cli(0, "SET cli:a alpha"), "OK\n");
  // Any node's port serves every key: each one forwards to the key's primary.
  EXPECT_EQ(Cli(1, "GET cli:a"), "alpha\n");
  EXPECT_EQ(Cli(2, "MSET cli:b beta cli:c gamma"), "OK\n");
  EXPECT_EQ(Cli(0, "MGET cli:a cli:b cli:c cli:none"), "alpha\nbeta\ngamma\n\n");
  EXPECT_EQ(Cli(1, "EXISTS cli:a cli:b cli:none"), "2\n");
  EXPECT_EQ(Cli(2, "DEL cli:a cli:none"), "1\n");
  EXPECT_EQ(Cli(0, "GET cli:a"), "\n");
  EXPECT_NE(Cli(0, "INFO").find("slip_node:0"), std::string::npos);
  EXPECT_NE(Cli(2, "INFO server").find("tcp_port:" + std::to_string(base_ + 2)), std::string::npos);
  EXPECT_EQ(Cli(0, "SET cli:x v EX 10"), "ERR SET EX: Slipstream keeps no expiry times\n\n");
  // Conditional writes, decided at the key's primary.
  EXPECT_EQ(Cli(1, "SET cli:nx first NX"), "OK\n");
  EXPECT_EQ(Cli(2, "SET cli:nx second NX"), "\n");  // nil: it has a value
  EXPECT_EQ(Cli(0, "SET cli:xx first XX"), "\n");   // nil: it has none
  EXPECT_EQ(Cli(0, "SET cli:nx third XX"), "OK\n");
  EXPECT_EQ(Cli(2, "MGET cli:nx cli:xx"), "third\n\n");
  // Without the password nothing is served.
  EXPECT_EQ(Shell("redis-cli -p " + std::to_string(base_) + " GET cli:b 2>&1"), "NOAUTH Authentication required.\n\n");
  // The C++ client sees what redis-cli wrote.
  auto client = Client::Open(ClientOptions{.dir = *dir_, .zookeeper = "", .provider = "",
                                           .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
  ASSERT_TRUE(client.ok());
  auto b = (*client)->Get("cli:b");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*b, "beta");
}

TEST_F(RespFrontDoorTest, RedisCliPipeLoadsEveryCommand) {
  const integration::TailLogsOnFailure logs(*dir_);
  const std::string file = *dir_ + "/pipe.resp";
  {
    std::ofstream f(file, std::ios::binary);
    std::string s;
    for (int i = 0; i < 5000; ++i) resp::AppendCommand(&s, {"SET", "pipe:" + std::to_string(i), "v" + std::to_string(i)});
    f << s;
  }
  const std::string out = Cli(1, "--pipe < " + file);
  EXPECT_NE(out.find("errors: 0, replies: 5000"), std::string::npos) << out;
  EXPECT_EQ(Cli(2, "GET pipe:0"), "v0\n");
  EXPECT_EQ(Cli(0, "GET pipe:4999"), "v4999\n");
  EXPECT_EQ(Cli(0, "EXISTS pipe:17 pipe:2500 pipe:4998"), "3\n");
}

TEST_F(RespFrontDoorTest, RedisBenchmarkWithAndWithoutPipelining) {
  const integration::TailLogsOnFailure logs(*dir_);
  for (const std::string pipeline : {"1", "16"}) {
    int status = 0;
    const std::string out = Shell("redis-benchmark -p " + std::to_string(base_) + " -a " + *password_ +
                                    " -t set,get -n 5000 -c 20 -r 1000 -q --csv -P " + pipeline + " 2>&1",
                                &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("\"SET\""), std::string::npos) << out;
    EXPECT_NE(out.find("\"GET\""), std::string::npos) << out;
    EXPECT_EQ(out.find("rror"), std::string::npos) << out;
  }
  // It wrote key:<12 digits>.
  EXPECT_EQ(Cli(0, "EXISTS key:000000000000 key:000000000001 key:000000000002"), "3\n");
}

TEST_F(RespFrontDoorTest, HiredisPipelinesBinaryValuesAndLimits) {
  const integration::TailLogsOnFailure logs(*dir_);
  redisContext* c = Connect(base_ + 2, *password_);
  ASSERT_TRUE(c != nullptr && !c->err);
  // 200 SETs and GETs in one pipeline, values with every byte.
  std::map<std::string, std::string> want;
  for (int i = 0; i < 200; ++i) {
    std::string v(1 + i * 37 % 3000, '\0');
    for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<char>((i + j * 7) & 0xff);
    const std::string k = "bin:" + std::to_string(i);
    redisAppendCommand(c, "SET %b %b", k.data(), k.size(), v.data(), v.size());
    want[k] = v;
  }
  for (const auto& [k, v] : want) redisAppendCommand(c, "GET %b", k.data(), k.size());
  for (int i = 0; i < 200; ++i) {
    void* r = nullptr;
    ASSERT_EQ(redisGetReply(c, &r), REDIS_OK);
    auto* reply = static_cast<redisReply*>(r);
    EXPECT_EQ(reply->type, REDIS_REPLY_STATUS);
    freeReplyObject(reply);
  }
  for (const auto& [k, v] : want) {
    void* r = nullptr;
    ASSERT_EQ(redisGetReply(c, &r), REDIS_OK);
    auto* reply = static_cast<redisReply*>(r);
    ASSERT_EQ(reply->type, REDIS_REPLY_STRING) << k;
    EXPECT_EQ(std::string(reply->str, reply->len), v) << k;
    freeReplyObject(reply);
  }
  // A value of the store's largest size goes through; one byte more is
  // refused with a reason, nothing written, and the connection goes on.
  const std::string big(16u << 20, 'b');
  auto* r = static_cast<redisReply*>(redisCommand(c, "SET big %b", big.data(), big.size()));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, REDIS_REPLY_STATUS) << (r->str ? r->str : "");
  freeReplyObject(r);
  const std::string over(big.size() + 1, 'o');
  r = static_cast<redisReply*>(redisCommand(c, "SET big %b", over.data(), over.size()));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->type, REDIS_REPLY_ERROR);
  freeReplyObject(r);
  r = static_cast<redisReply*>(redisCommand(c, "GET big"));
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->type, REDIS_REPLY_STRING);
  EXPECT_TRUE(std::string(r->str, r->len) == big);
  freeReplyObject(r);
  redisFree(c);
}

TEST_F(RespFrontDoorTest, KillingANodeDuringRedisBenchmarkLosesNoAcknowledgedSet) {
  const integration::TailLogsOnFailure logs(*dir_);
  ASSERT_EQ(integration::WaitFullyReplicated(*dir_), "");
  // redis-benchmark loads node 0's door while this writer sets unique values
  // through node 1's, and node 2 is killed in the middle.
  int bench_status = -1;
  std::string bench_out;
  std::atomic<bool> bench_done{false};
  std::thread bench([&] {
    bench_out = Shell("redis-benchmark -p " + std::to_string(base_) + " -a " + *password_ +
                        " -t set -n 150000 -c 20 -r 5000 -P 8 -q --csv 2>&1",
                    &bench_status);
    bench_done = true;
  });
  std::map<std::string, std::string> acked;
  std::map<std::string, std::set<std::string>> maybe;  // error replies: may or may not have happened
  std::atomic<bool> stop{false};
  std::atomic<int> acks{0};
  int errors = 0;
  std::thread writer([&] {
    redisContext* c = Connect(base_ + 1, *password_);
    for (int i = 0; !stop && c != nullptr && !c->err; ++i) {
      const std::string k = "acked:" + std::to_string(i % 500), v = "w" + std::to_string(i);
      auto* r = static_cast<redisReply*>(redisCommand(c, "SET %s %s", k.c_str(), v.c_str()));
      if (r == nullptr) break;
      if (r->type == REDIS_REPLY_STATUS) {
        acked[k] = v;
        maybe[k].clear();
        ++acks;
      } else {
        ++errors;
        maybe[k].insert(v);
      }
      freeReplyObject(r);
    }
    if (c != nullptr) redisFree(c);
  });
  for (int i = 0; i < 3000 && acks < 300; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool bench_running_at_kill = !bench_done;
  ASSERT_EQ(Slip("cluster kill --dir " + *dir_ + " --node 2"), 0);
  bench.join();
  // The writer goes on past the failover, then stops.
  const int acks_at_end = acks;
  for (int i = 0; i < 1000 && acks < acks_at_end + 300; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  stop = true;
  writer.join();
  EXPECT_TRUE(bench_running_at_kill) << "redis-benchmark ended before the kill: the test checked no failover";
  EXPECT_EQ(bench_status, 0) << bench_out;
  EXPECT_NE(bench_out.find("\"SET\""), std::string::npos) << bench_out;
  ASSERT_GT(acked.size(), 100u);
  // Every acknowledged SET reads back with its value (or a later unknown one).
  redisContext* c = Connect(base_, *password_);
  ASSERT_TRUE(c != nullptr && !c->err);
  for (const auto& [k, v] : acked) {
    auto* r = static_cast<redisReply*>(redisCommand(c, "GET %s", k.c_str()));
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->type, REDIS_REPLY_STRING) << k;
    const std::string got(r->str, r->len);
    freeReplyObject(r);
    EXPECT_TRUE(got == v || maybe[k].count(got)) << k << " is " << got << ", acknowledged " << v;
  }
  redisFree(c);
  std::printf("acknowledged SETs checked: %zu keys; error replies during the failover: %d\n", acked.size(), errors);
  // The killed node comes back and rejoins; its door serves again.
  ASSERT_EQ(Slip("cluster up --dir " + *dir_), 0);
  ASSERT_EQ(integration::WaitFullyReplicated(*dir_), "");
  // Its door opens once it serves again.
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       Cli(2, "PING") != "PONG\n" && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Cli(2, "GET acked:0"), Cli(0, "GET acked:0"));
  EXPECT_EQ(Cli(2, "PING"), "PONG\n");
}

}  // namespace
}  // namespace slip
