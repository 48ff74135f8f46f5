// Slipstream's C++ client.
//
//   auto client = slip::Client::Open({.dir = "/var/lib/slip"});
//   if (!client.ok()) ...
//   (*client)->Put("user42", "value");
//   auto v = (*client)->Get("user42");      // NotFound if absent
//   (*client)->Delete("user42");
//
// The client routes each key to its shard's primary from the cluster
// configuration (read from the configuration store: the cluster directory or
// ZooKeeper), refreshes its routing when a node answers StaleTerm, and
// retries through failovers until the call's deadline. A write that returns
// OK is persistent on every replica. A write that returns Unavailable or
// Timeout may or may not have happened.
//
// Thread-safe: calls may come from any thread; the async forms call back on
// the client's own thread (do not block there).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "slip/status.h"

namespace slip {

struct ClientOptions {
  std::string dir;        // the cluster directory (embedded configuration store)
  std::string zookeeper;  // or "host:port" of its ZooKeeper
  // libfabric provider: tcp | shm | verbs. Empty: the cluster's, from its
  // configuration (tcp if none is stored yet).
  std::string provider;
  std::chrono::milliseconds deadline{10000};  // per call, retries included
  // tcp/verbs: the local IP to talk from; the nodes must be able to reach it
  // (a client on another host names its own address). Empty: 127.0.0.1.
  std::string bind_address;
  // The cluster secret, when the cluster has one (`slip cluster up` makes
  // DIR/secret): this file, else DIR/secret if readable. A client without
  // it is refused by an authenticated cluster with Unauthenticated.
  std::string secret_file;
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Open(const ClientOptions& options);
  virtual ~Client() = default;

  virtual Status Put(std::string_view key, std::string_view value) = 0;
  virtual Result<std::string> Get(std::string_view key) = 0;
  // OK when the key has no value any more; NotFound when it certainly had
  // none. After a failover a retried delete may find nothing because its
  // own earlier attempt removed the value: that is OK, not NotFound.
  virtual Status Delete(std::string_view key) = 0;

  // A write only if the key has no value (kIfAbsent: Redis's SET NX) or
  // has one (kIfPresent: SET XX), decided by its primary. True: written
  // (persistent on every replica); false: the condition did not hold and
  // nothing was written. NotSupported where clients write one-sidedly
  // (erda, erda-raw, erda-redo) and on dinomo, clover and rubble nodes.
  // After a failover, a retry that finds the condition false reports
  // Unavailable: the lost first attempt may have written the value.
  enum class Condition : uint8_t { kIfAbsent, kIfPresent };
  virtual Result<bool> PutIf(std::string_view key, std::string_view value, Condition condition) = 0;
  virtual void PutAsync(std::string key, std::string value, std::function<void(Status)> done) = 0;
  virtual void PutIfAsync(std::string key, std::string value, Condition condition,
                          std::function<void(Result<bool>)> done) = 0;
  virtual void GetAsync(std::string key, std::function<void(Result<std::string>)> done) = 0;
  virtual void DeleteAsync(std::string key, std::function<void(Status)> done) = 0;

  // Every live node's counters as one JSON object each: its design, CPU time
  // per role in nanoseconds since it started (worker, backup_worker, nic,
  // control, digest; a dinomo cluster's pool answers too, with "pool") and
  // operation counts. For monitoring and benchmarks.
  virtual Result<std::vector<std::string>> NodeStats() = 0;
  // The same, node by node, for monitoring a cluster with a node down: each
  // configured node's id (the pool's: kPoolStatsId) with its JSON, or why it
  // did not answer (within a second). An error only when the configuration
  // cannot be read.
  static constexpr uint32_t kPoolStatsId = 0xFFFFFFF0u;
  struct NodeAnswer {
    uint32_t node = 0;
    Result<std::string> stats = Status::Unavailable("not asked");
  };
  virtual Result<std::vector<NodeAnswer>> NodeStatsEach() = 0;

  // Network round trips this client has waited on so far: one per
  // two-sided call (retries included), and where clients reach primaries
  // one-sidedly (erda, erda-raw) one per dependent step — each READ, a WRITE
  // with its flush READ, each call. Routing-table refreshes are not counted.
  virtual uint64_t RoundTrips() = 0;

  // RPC frames this client has sent so far (a request each, a retry
  // again), and the fabric messages that carried them: a message carries
  // every frame for one node from one turn of the client's thread. The
  // one-sided steps of erda's clients are not messages. For benchmarks.
  struct Sent {
    uint64_t frames = 0, messages = 0;
  };
  virtual Sent RpcSent() = 0;
};

}  // namespace slip
