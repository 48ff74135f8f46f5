#include "cluster/zk_test_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "common/subprocess.h"

namespace slip::cluster::testing {
namespace {

namespace fs = std::filesystem;

constexpr const char* kJava = "/usr/bin/java";
constexpr const char* kJarDir = "/usr/share/java";
// ZooKeeperServerMain's runtime classpath in Debian's packaging; slf4j-nop
// keeps the server quiet.
const std::vector<std::string> kJars = {
    "zookeeper.jar",     "zookeeper-jute.jar",   "slf4j-api.jar",
    "slf4j-nop.jar",     "netty-handler.jar",    "netty-common.jar",
    "netty-buffer.jar",  "netty-transport.jar",  "netty-codec.jar",
    "netty-resolver.jar", "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar", "metrics-core.jar", "commons-cli.jar"};

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// The server listens before it has loaded its database; "srvr" answers
// with its statistics only once it serves requests.
bool Serving(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string reply;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      write(fd, "srvr", 4) == 4) {
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[512];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) reply.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return reply.find("Mode:") != std::string::npos;
}

}  // namespace

std::string ZkTestServer::MissingPrerequisite() {
  if (access(kJava, X_OK) != 0) return std::string(kJava) + " not found (install a JRE)";
  for (const auto& jar : kJars) {
    const std::string path = std::string(kJarDir) + "/" + jar;
    if (!fs::exists(path)) return path + " not found (install the zookeeper package)";
  }
  return "";
}

Result<std::unique_ptr<ZkTestServer>> ZkTestServer::Start() {
  if (std::string why = MissingPrerequisite(); !why.empty()) return Status::NotSupported(why);
  std::unique_ptr<ZkTestServer> s(new ZkTestServer());
  char tmpl[] = "/tmp/slip-zk-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return Status::IoError("mkdtemp");
  s->dir_ = tmpl;
  s->port_ = FreeLoopbackPort();
  if (s->port_ == 0) return Status::IoError("no free loopback port");
  {
    std::ofstream cfg(s->dir_ + "/zoo.cfg");
    // tickTime 500 ms: sessions may be as short as 1 s (2 ticks), so lease
    // expiry tests finish quickly.
    cfg << "tickTime=500\n"
        << "dataDir=" << s->dir_ << "/data\n"
        << "clientPort=" << s->port_ << "\n"
        << "clientPortAddress=127.0.0.1\n"
        << "admin.enableServer=false\n"
        << "maxClientCnxns=0\n"
        << "4lw.commands.whitelist=srvr\n";
  }
  std::string cp;
  for (const auto& jar : kJars) cp += (cp.empty() ? "" : ":") + std::string(kJarDir) + "/" + jar;
  const std::string cfg = s->dir_ + "/zoo.cfg", log = s->dir_ + "/server.log";
  std::vector<std::string> args = {kJava, "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                                   "-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg};
  // Never outlives the test (kChild: SIGKILL when the test process dies).
  SLIP_ASSIGN_OR_RETURN(pid_t pid, subprocess::Spawn({.argv = args, .output = log, .truncate_output = true}));
  s->pid_ = pid;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!Serving(s->port_)) {
    if (!subprocess::Alive(pid)) {
      s->pid_ = -1;
      std::ifstream in(log);
      std::stringstream ss;
      ss << in.rdbuf();
      return Status::IoError("zookeeper server exited at start: " + ss.str().substr(0, 2000));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::Timeout("zookeeper server did not listen on port " +
                             std::to_string(s->port_) + " within 30 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return s;
}

void ZkTestServer::Kill() {
  if (pid_ > 0) {
    (void)subprocess::Kill(pid_);
    pid_ = -1;
  }
}

ZkTestServer::~ZkTestServer() {
  Kill();
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

}  // namespace slip::cluster::testing
