// What operators look at, on a real cluster (`slip cluster up` with
// --metrics-port and --http-port: three nodes, RF 3, rowan-kv, tcp on
// loopback): a node's Prometheus endpoint, whose counters must move with
// load; `slip stats` in a real terminal (tmux), whose table must show every
// node; and the web view in a real headless browser (Debian's chromium),
// which must show the nodes and then show the change after one is killed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "cluster/config_access.h"
#include "integration/cluster_harness.h"
#include "slip/client.h"

namespace slip {
namespace {

namespace fs = std::filesystem;
using integration::FreePortRange;
using integration::Shell;
using integration::Slip;

bool Have(const std::string& tool) { return Shell("command -v " + tool + " >/dev/null 2>&1 && echo yes") == "yes\n"; }

// The sum of a Prometheus family's samples whose line matches `filter`.
double Sum(const std::string& text, const std::string& family, const std::string& filter = "") {
  double total = 0;
  size_t at = 0;
  while ((at = text.find("\n" + family, at)) != std::string::npos) {
    ++at;
    const size_t nl = text.find('\n', at);
    const std::string line = text.substr(at, nl - at);
    const char next = line.size() > family.size() ? line[family.size()] : ' ';
    if ((next == ' ' || next == '{') && line.find(filter) != std::string::npos) {
      total += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return total;
}

class OperatorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string((fs::temp_directory_path() / ("slip_ops_" + std::to_string(::getpid()))).string());
    fs::remove_all(*dir_);
    metrics_ = FreePortRange(6);  // node i: metrics_ + i, http_ + i
    ASSERT_NE(metrics_, 0);
    http_ = static_cast<uint16_t>(metrics_ + 3);
    ASSERT_EQ(Slip("cluster up --lease-ms 1000 --nodes 3 --rf 3 --shards 12 --design rowan-kv --dir " + *dir_ +
                   " --metrics-port " + std::to_string(metrics_) + " --http-port " + std::to_string(http_)),
              0)
        << "see " << *dir_ << "/logs";
  }
  static void TearDownTestSuite() {
    if (dir_ == nullptr) return;
    (void)Slip("cluster down --dir " + *dir_);
    if (!HasFailure()) fs::remove_all(*dir_);
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Curl(uint16_t port, const std::string& path) {
    return Shell("curl -s --max-time 10 http://127.0.0.1:" + std::to_string(port) + path);
  }
  // Puts `n` keys through the C++ client (they spread over every primary).
  static void Load(int n) {
    auto client = Client::Open(ClientOptions{.dir = *dir_, .zookeeper = "", .provider = "",
                                             .deadline = std::chrono::seconds(20), .bind_address = "", .secret_file = ""});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE((*client)->Put("load" + std::to_string(i), "v").ok());
      ASSERT_TRUE((*client)->Get("load" + std::to_string(i)).ok());
    }
  }

  static std::string* dir_;
  static uint16_t metrics_, http_;
};
std::string* OperatorsTest::dir_ = nullptr;
uint16_t OperatorsTest::metrics_ = 0;
uint16_t OperatorsTest::http_ = 0;

TEST_F(OperatorsTest, MetricsEndpointCountersMoveWithLoad) {
  const integration::TailLogsOnFailure logs(*dir_);
  ASSERT_TRUE(Have("curl")) << "curl is needed (scripts/install-deps)";
  const std::string before = Curl(metrics_, "/metrics");
  ASSERT_NE(before.find("# TYPE slip_operations_total counter"), std::string::npos) << before.substr(0, 500);
  EXPECT_NE(before.find("slip_node_info{node=\"0\",design=\"rowan-kv\"} 1"), std::string::npos);
  EXPECT_NE(before.find("# TYPE slip_request_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(before.find("slip_lease_seconds_left"), std::string::npos);
  EXPECT_NE(before.find("slip_cpu_seconds_total{role=\"worker\"}"), std::string::npos);
  Load(300);
  const std::string after = Curl(metrics_, "/metrics");
  // About a third of 300 keys have node 0 as primary.
  EXPECT_GE(Sum(after, "slip_operations_total", "op=\"put\"") - Sum(before, "slip_operations_total", "op=\"put\""), 40);
  EXPECT_GE(Sum(after, "slip_operations_total", "op=\"get\"") - Sum(before, "slip_operations_total", "op=\"get\""), 40);
  EXPECT_GE(Sum(after, "slip_request_duration_seconds_count", "op=\"put\"") -
                Sum(before, "slip_request_duration_seconds_count", "op=\"put\""),
            40);
  EXPECT_GT(Sum(after, "slip_cpu_seconds_total"), Sum(before, "slip_cpu_seconds_total"));
  EXPECT_GT(Sum(after, "slip_store_appended_bytes_total"), Sum(before, "slip_store_appended_bytes_total"));
  // Every sample is a slip_* series; the web view's port serves the same.
  for (size_t at = 0; at < after.size();) {
    const size_t nl = after.find('\n', at);
    const std::string line = after.substr(at, nl - at);
    at = nl + 1;
    if (!line.empty() && line[0] != '#') {
      ASSERT_TRUE(line.starts_with("slip_")) << line;
    }
  }
  EXPECT_NE(Curl(http_ + 1, "/metrics").find("slip_node_info{node=\"1\""), std::string::npos);
  EXPECT_EQ(Shell("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" + std::to_string(metrics_) + "/nope"), "404");
}

TEST_F(OperatorsTest, SlipStatsInATerminalShowsTheCluster) {
  const integration::TailLogsOnFailure logs(*dir_);
  if (!Have("tmux")) GTEST_SKIP() << "tmux is not installed (scripts/install-deps installs it)";
  const std::string session = "slipstats" + std::to_string(::getpid());
  ASSERT_EQ(Shell("tmux new-session -d -s " + session + " -x 160 -y 20 '" + std::string(SLIP_BINARY) +
                  " stats --dir " + *dir_ + " --interval 0.5'; echo $?"),
            "0\n");
  std::thread load([] { Load(400); });
  std::string pane;
  bool seen = false;
  for (int i = 0; i < 60 && !seen; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    pane = Shell("tmux capture-pane -p -t " + session);
    seen = pane.find("node 0") != std::string::npos && pane.find("node 1") != std::string::npos &&
           pane.find("node 2") != std::string::npos && pane.find("total") != std::string::npos;
  }
  load.join();
  (void)Shell("tmux kill-session -t " + session);
  EXPECT_TRUE(seen) << pane;
  EXPECT_NE(pane.find("slip stats"), std::string::npos) << pane;
  EXPECT_NE(pane.find("rowan-kv"), std::string::npos) << pane;
  EXPECT_TRUE(std::regex_search(pane, std::regex("node 0 +up"))) << pane;
}

TEST_F(OperatorsTest, WebViewInAHeadlessBrowserShowsNodesAndAKill) {
  const integration::TailLogsOnFailure logs(*dir_);
  if (!Have("chromium")) GTEST_SKIP() << "chromium is not installed (scripts/install-deps installs it)";
  const std::string profile = *dir_ + "/chromium";
  auto dom = [&] {
    // Virtual time runs the page's 1 s polls quickly (it waits for their fetches).
    return Shell("timeout 90 chromium --headless --disable-gpu --no-sandbox --user-data-dir=" + profile +
                 " --virtual-time-budget=4000 --dump-dom http://127.0.0.1:" + std::to_string(http_) + "/ 2>/dev/null");
  };
  const std::string first = dom();
  for (int n = 0; n < 3; ++n) {
    EXPECT_NE(first.find("<tr id=\"node-" + std::to_string(n) + "\" data-state=\"up\" data-answers=\"yes\">"),
              std::string::npos)
        << first.substr(0, 2000);
  }
  std::smatch m;
  ASSERT_TRUE(std::regex_search(first, m, std::regex("data-updates=\"([0-9]+)\""))) << first.substr(0, 2000);
  EXPECT_GE(std::stoi(m[1]), 2);  // it polled again and re-rendered
  ASSERT_TRUE(std::regex_search(first, m, std::regex("data-term=\"([0-9]+)\"")));
  const int term_before = std::stoi(m[1]);
  EXPECT_NE(first.find("id=\"shard-11\""), std::string::npos);

  ASSERT_EQ(Slip("cluster kill --dir " + *dir_ + " --node 2"), 0);
  auto store = cluster::OpenConfigStore(*dir_, "");
  ASSERT_TRUE(store.ok());
  bool down = false;
  for (int i = 0; i < 150 && !down; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto c = (*store)->Load();
    down = c.ok() && c->config.nodes.at(2).state != cluster::NodeState::kUp;
  }
  ASSERT_TRUE(down) << "the manager did not declare node 2 failed";
  const std::string second = dom();
  EXPECT_NE(second.find("<tr id=\"node-2\" data-state=\"down\" data-answers=\"no\">"), std::string::npos)
      << second.substr(0, 3000);
  EXPECT_NE(second.find("<tr id=\"node-0\" data-state=\"up\" data-answers=\"yes\">"), std::string::npos);
  ASSERT_TRUE(std::regex_search(second, m, std::regex("data-term=\"([0-9]+)\"")));
  EXPECT_GT(std::stoi(m[1]), term_before);
  // Node 2's shards were promoted elsewhere: no shard row names it primary any more.
  EXPECT_FALSE(std::regex_search(second, std::regex("<tr id=\"shard-[0-9]+\"><td>[0-9]+</td><td>2</td>"))) << second;
}

}  // namespace
}  // namespace slip
