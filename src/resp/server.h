// The Redis-protocol front door: a TCP server that speaks RESP2 and runs
// each command through a slip::Client, so redis-cli, redis-benchmark and
// any language's Redis client read and write a Slipstream cluster. Every
// node can run one (`slip server --resp-port`); any of them serves every
// key, since the client routes each key to its shard's primary.
//
// Commands (docs/resp.md): GET, SET (NX/XX; no expiry), DEL,
// EXISTS, MGET, MSET, PING, ECHO, INFO, AUTH, HELLO 2, QUIT, SELECT 0,
// COMMAND (COUNT, INFO, DOCS), CONFIG GET. A SET answered +OK is
// persistent on every replica, as a Put the C++ client saw succeed. A
// failover the client could not ride out within its deadline answers
// -TRYAGAIN: the write may or may not have happened, as after a C++
// client's Unavailable or Timeout.
//
// Pipelining: every command parsed from what a connection sent is issued at
// once (up to `max_in_flight` per connection), so a pipeline's requests
// reach the data path together and travel in shared frames; replies go
// back in request order. A connection that sends faster than its replies
// drain stops being read until they do.
//
// Threads: one I/O thread (epoll) owns every connection; the client's
// callbacks hand results back to it through a queue and an eventfd.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "resp/resp.h"
#include "slip/client.h"

namespace slip::resp {

struct ServerOptions {
  std::string bind = "127.0.0.1";
  uint16_t port = 0;  // 0: a free port (see Server::port)
  // The users and passwords AUTH accepts ("default" is the user of
  // `AUTH password`), asked when a connection opens and at each AUTH (so a
  // rotated cluster secret is seen without a restart). None: no AUTH needed.
  struct Credential {
    std::string user = "default";
    std::string password;
  };
  std::function<std::vector<Credential>()> credentials;
  // More INFO, under "# Slipstream": "field:value" lines (CRLF-separated).
  std::function<std::string()> info;
  // Connections at once (at most half the process's file descriptors).
  size_t max_clients = 10000;
  size_t max_in_flight = 1024;  // commands of one connection awaiting their reply
  size_t max_output = 64u << 20;  // reply bytes queued on one connection before it stops being read
  // What one connection's parser may hold (a command being assembled and
  // those not yet issued): beyond it the connection gets an error and is
  // closed, as Redis's client-query-buffer-limit does.
  size_t max_query = 96u << 20;
  size_t max_keys = 10000;         // keys of one command (MGET, MSET, DEL, EXISTS)
  size_t max_reply = 256u << 20;   // values gathered for one command's reply (MGET)
  Limits limits;                   // an authenticated connection's
  // A connection that has not authenticated yet (when AUTH is required):
  // enough for AUTH and HELLO, as Redis limits unauthenticated clients.
  Limits unauthenticated_limits{.max_bulk = 16u << 10, .max_args = 10, .max_line = 16u << 10};
};

class Server {
 public:
  // Listens and serves until destroyed. `client` must outlive the server.
  static Result<std::unique_ptr<Server>> Start(Client* client, ServerOptions options);
  virtual ~Server() = default;
  virtual uint16_t port() const = 0;

  struct Counters {
    uint64_t connections = 0;  // accepted, in all
    uint64_t connected = 0;    // open now
    uint64_t commands = 0;     // run, in all
    uint64_t errors = 0;       // error replies
    uint64_t rejected = 0;     // connections refused (max_clients)
  };
  virtual Counters counters() const = 0;
};

}  // namespace slip::resp
