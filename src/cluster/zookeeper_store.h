// The ZooKeeper ConfigStore backend (libzookeeper-mt): the replicated store
// of docs/papers/rowan.md §3.6. Layout under `root` (created as needed):
//   ROOT/config         the configuration as JSON (cluster_config.md); the
//                       store version is the znode's version + 1, and CAS is
//                       a version-conditional set (create for kNoVersion)
//   ROOT/leases/NAME    an ephemeral znode holding the holder's name
// Leases live as long as this store's ZooKeeper session: a crashed holder's
// lease goes when ZooKeeper expires its session (session_timeout after the
// last heartbeat), not after the `ttl` passed to AcquireLease. The epoch is
// the lease znode's creation zxid, which only rises. A holder's expiry is
// now + min(ttl, negotiated session timeout): a successful call proves the
// session was alive at the server no earlier than `now`.
//
// If the session expires (a long partition), the store opens a new session
// on the next call; leases of the old one are gone (Renew says Aborted).
#pragma once

#include <memory>
#include <string>

#include "cluster/config_store.h"

namespace slip::cluster {

struct ZooKeeperStoreOptions {
  std::string connect;  // "host:port[,host:port...]", as for zookeeper_init
  std::string root = "/slipstream";  // absolute znode path, no trailing '/'
  // Session timeout asked of the servers (they clamp it to 2..20 tick times).
  // Longer: survives longer pauses; a dead CM's lease lasts that long.
  Nanos session_timeout = 4 * runtime::kSecond;
  // Open (and every call made while disconnected) gives up after this long
  // with Unavailable instead of blocking until ZooKeeper answers.
  Nanos connect_timeout = 3 * runtime::kSecond;
  bool client_log = false;  // let libzookeeper print its own log to stderr
};

// Unavailable if no server answers within connect_timeout.
Result<std::unique_ptr<ConfigStore>> OpenZooKeeperStore(const ZooKeeperStoreOptions& options);

}  // namespace slip::cluster
