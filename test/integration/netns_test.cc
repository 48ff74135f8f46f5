// Three hosts on one machine: each node runs in its own network namespace
// with its own address, joined to the others by veth pairs on a bridge in a
// fourth ("hub") namespace, where the test's client lives. The nodes can
// only reach each other through the bridge, so everything — client RPCs,
// replication, one-sided writes — crosses a real (virtual) Ethernet link
// over the tcp provider, as it would between hosts. The configuration store
// is the embedded one: namespaces share the filesystem, as hosts would share
// a ZooKeeper.
//
// The same checks as cluster_test: SIGKILL a node under a write load, then
// rejoin, then a whole-cluster stop and cold start; every acknowledged write
// must be readable with its latest value after each.
//
// Creating namespaces needs root (CAP_NET_ADMIN) and iproute2; without them
// the test is skipped and says why.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/processes.h"
#include "integration/cluster_harness.h"
#include "slip/client.h"

namespace slip {
namespace {

namespace fs = std::filesystem;

constexpr int kNodes = 3;
const char* const kSubnet = "10.231.0.";  // private to the test's namespaces
const char* const kHubAddress = "10.231.0.254";

std::string NodeAddress(int i) { return kSubnet + std::to_string(i + 1); }

std::string FindIp() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// The namespaces and links, removed again on destruction (deleting a
// namespace removes its end of each veth pair, and so the pair).
class Hosts {
 public:
  explicit Hosts(std::string log) : log_(std::move(log)), ip_(FindIp()) {
    const std::string tag = "slip" + std::to_string(getpid());
    hub_ = tag + "h";
    for (int i = 0; i < kNodes; ++i) nodes_.push_back(tag + "n" + std::to_string(i));
  }
  ~Hosts() {
    LeaveHub();
    for (const std::string& ns : created_) Ip("netns del " + ns);
  }

  // Empty on success, else why the machine cannot do this.
  std::string Create() {
    if (geteuid() != 0) return "needs root (CAP_NET_ADMIN) to create network namespaces";
    if (ip_.empty()) return "iproute2's ip command not found";
    std::vector<std::string> all = nodes_;
    all.push_back(hub_);
    for (const std::string& ns : all) {
      if (Ip("netns add " + ns) != 0) return "ip netns add " + ns + " failed (see " + log_ + ")";
      created_.push_back(ns);
      if (Ip("-n " + ns + " link set lo up") != 0) return "cannot bring up lo in " + ns;
    }
    const std::string in_hub = "-n " + hub_ + " ";
    if (Ip(in_hub + "link add br0 type bridge") != 0) return "no bridge support (see " + log_ + ")";
    if (Ip(in_hub + "addr add " + kHubAddress + "/24 dev br0") != 0 || Ip(in_hub + "link set br0 up") != 0) {
      return "cannot configure the hub bridge";
    }
    for (int i = 0; i < kNodes; ++i) {
      const std::string v = "v" + std::to_string(i);
      const std::string in_node = "-n " + nodes_[i] + " ";
      if (Ip(in_hub + "link add " + v + " type veth peer name eth0 netns " + nodes_[i]) != 0) {
        return "no veth support (see " + log_ + ")";
      }
      if (Ip(in_hub + "link set " + v + " master br0") != 0 || Ip(in_hub + "link set " + v + " up") != 0 ||
          Ip(in_node + "addr add " + NodeAddress(i) + "/24 dev eth0") != 0 ||
          Ip(in_node + "link set eth0 up") != 0) {
        return "cannot wire node " + std::to_string(i);
      }
    }
    return "";
  }

  // This thread (and the threads it starts) joins the hub's network; the
  // client created afterwards talks from there.
  bool EnterHub() {
    home_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    const int hub = open(("/var/run/netns/" + hub_).c_str(), O_RDONLY | O_CLOEXEC);
    const bool ok = home_ >= 0 && hub >= 0 && setns(hub, CLONE_NEWNET) == 0;
    if (hub >= 0) close(hub);
    return ok;
  }
  void LeaveHub() {
    if (home_ < 0) return;
    (void)setns(home_, CLONE_NEWNET);
    close(home_);
    home_ = -1;
  }

  // argv that runs `argv` inside node i's namespace (`ip netns exec`
  // execs in place, so the pid is the program's).
  std::vector<std::string> InNode(int i, std::vector<std::string> argv) const {
    std::vector<std::string> full = {ip_, "netns", "exec", nodes_[i]};
    full.insert(full.end(), argv.begin(), argv.end());
    return full;
  }

  // Bytes node i sent on its link.
  uint64_t TxBytes(int i) const {
    const std::string cmd = ip_ + " netns exec " + nodes_[i] + " cat /sys/class/net/eth0/statistics/tx_bytes";
    FILE* f = popen(cmd.c_str(), "r");
    if (f == nullptr) return 0;
    unsigned long long v = 0;
    if (std::fscanf(f, "%llu", &v) != 1) v = 0;
    pclose(f);
    return v;
  }

 private:
  int Ip(const std::string& args) {
    const std::string cmd = ip_ + " " + args + " >>" + log_ + " 2>&1";
    return std::system(cmd.c_str());
  }

  std::string log_, ip_, hub_;
  std::vector<std::string> nodes_, created_;
  int home_ = -1;
};

using integration::Slip;

class NetnsClusterTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() / ("slip_netns_" + std::to_string(getpid()) + "_" + GetParam())).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/logs");
    hosts_ = std::make_unique<Hosts>(dir_ + "/logs/netns.log");
    const std::string why = hosts_->Create();
    if (!why.empty()) GTEST_SKIP() << "three network namespaces unavailable: " << why;
  }
  void TearDown() override {
    client_.reset();
    if (!dir_.empty()) (void)Slip("cluster down --dir " + dir_);
    hosts_.reset();
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);  // else keep the logs
  }

  void StartNode(int i) {
    auto p = cli::SpawnDetached(dir_, "node-" + std::to_string(i),
                                hosts_->InNode(i, {SLIP_BINARY, "server", "--dir", dir_, "--node", std::to_string(i),
                                                   "--bind", NodeAddress(i), "--lease-ms", "1000"}));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
  }
  void StartAll() {
    auto m = cli::SpawnDetached(dir_, "manager", {SLIP_BINARY, "manager", "--dir", dir_, "--lease-ms", "1000"});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    for (int i = 0; i < kNodes; ++i) ASSERT_NO_FATAL_FAILURE(StartNode(i));
  }
  // A client in the hub, once a write goes through (every node published
  // its address and every shard has a primary).
  void Connect() {
    auto c = Client::Open(ClientOptions{.dir = dir_, .zookeeper = "", .provider = "tcp",
                                        .deadline = std::chrono::seconds(20), .bind_address = kHubAddress, .secret_file = ""});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(*c);
    Status s;
    for (int attempt = 0; attempt < 6; ++attempt) {
      s = client_->Put("__netns_ready", "1");
      if (s.ok()) return;
    }
    FAIL() << "cluster not ready: " << s.ToString() << " (logs in " << dir_ << "/logs)";
  }

  std::string dir_;
  std::unique_ptr<Hosts> hosts_;
  std::unique_ptr<Client> client_;
};

TEST_P(NetnsClusterTest, ThreeHostsSurviveKillRejoinAndColdStart) {
  ASSERT_EQ(Slip("cluster init --nodes 3 --rf 3 --shards 12 --design " + GetParam() + " --dir " + dir_), 0);
  ASSERT_TRUE(hosts_->EnterHub());
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_NO_FATAL_FAILURE(Connect());

  integration::AckedWrites m;
  ASSERT_EQ(integration::WaitFullyReplicated(dir_), "") << "logs in " << dir_ << "/logs";
  integration::RunLoadWithFault(*client_, m, 300, 500,
                                [&] { ASSERT_EQ(Slip("cluster kill --node 1 --dir " + dir_), 0); });
  m.Check(*client_, "after failover");

  ASSERT_NO_FATAL_FAILURE(StartNode(1));  // back, empty, re-replicated
  m.Check(*client_, "after rejoin");

  client_.reset();
  ASSERT_EQ(Slip("cluster down --dir " + dir_), 0);
  ASSERT_NO_FATAL_FAILURE(StartAll());
  ASSERT_NO_FATAL_FAILURE(Connect());
  m.Check(*client_, "after cold start");

  // The traffic went over the links, not some loopback: every node sent
  // (replication, answers) well beyond link-layer chatter.
  for (int i = 0; i < kNodes; ++i) EXPECT_GT(hosts_->TxBytes(i), 100u << 10) << "node " << i;
  std::printf("  %d operations, %d with unknown outcome, %zu keys checked; tx bytes %llu / %llu / %llu\n",
              m.ops.load(), m.unknown.load(), m.acked.size(), static_cast<unsigned long long>(hosts_->TxBytes(0)),
              static_cast<unsigned long long>(hosts_->TxBytes(1)),
              static_cast<unsigned long long>(hosts_->TxBytes(2)));
}

INSTANTIATE_TEST_SUITE_P(Designs, NetnsClusterTest, ::testing::Values("rpc-kv", "rowan-kv"),
                         integration::DesignParamName);

}  // namespace
}  // namespace slip
