// A real ZooKeeper server for tests: a standalone ZooKeeperServerMain from
// Debian's jars, on a free loopback port with its own temporary data
// directory, killed and removed on destruction (and killed with the test
// process if that dies first).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace slip::cluster::testing {

class ZkTestServer {
 public:
  // Why a server cannot be started here ("" if it can): java or the jars
  // of the `zookeeper` package are missing.
  static std::string MissingPrerequisite();
  // Starts a server and waits until it accepts connections.
  static Result<std::unique_ptr<ZkTestServer>> Start();
  ~ZkTestServer();
  ZkTestServer(const ZkTestServer&) = delete;
  ZkTestServer& operator=(const ZkTestServer&) = delete;

  std::string connect() const { return "127.0.0.1:" + std::to_string(port_); }
  // Kills the server now (SIGKILL: no goodbye to clients).
  void Kill();

 private:
  ZkTestServer() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_;
};

}  // namespace slip::cluster::testing
