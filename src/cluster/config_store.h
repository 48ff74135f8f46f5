// ConfigStore: where the cluster configuration lives durably, and the lease
// that makes one configuration manager (CM) at a time (docs/papers/rowan.md §3.6,
// §3.8). Two backends:
//   embedded   a directory on one machine (embedded_store.cc): the default
//              for a single-host cluster; processes sharing the directory
//              coordinate through flock.
//   zookeeper  a ZooKeeper ensemble (zookeeper_store.h): the replicated one.
// Semantics shared by both (docs/formats/cluster_config.md):
//   - Load returns the stored configuration and its *store version*, an
//     opaque number that changes with every successful write (it is not the
//     term). kNoVersion means "nothing stored yet".
//   - CompareAndSwap writes only if the stored version is still `expected`,
//     else Aborted; concurrent writers: exactly one wins. It also refuses a
//     configuration that is invalid or whose term is not above the stored
//     one, so terms only rise no matter who writes.
//   - Leases are named; one holder at a time. Times are the caller's: `now`
//     is read from a clock by the caller (runtime::Executor::Now() or a
//     process-wide clock), never inside the store, so protocol code stays
//     deterministic. A holder may act as lease holder only until the
//     `expiry` it was given (computed from the `now` it passed *before* the
//     call), and must renew before then.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cluster/cluster_config.h"
#include "common/status.h"
#include "runtime/runtime.h"

namespace slip::cluster {

using runtime::Nanos;

inline constexpr uint64_t kNoVersion = 0;

struct VersionedConfig {
  ClusterConfig config;
  uint64_t version = kNoVersion;  // > kNoVersion for a stored configuration
};

struct Lease {
  std::string name;
  std::string holder;
  // Fencing token: rises every time the lease changes hands (never when it
  // is renewed), so a configuration or message stamped with it tells a stale
  // manager from the current one.
  uint64_t epoch = 0;
  // The holder may act until this time on the caller's clock.
  Nanos expiry = 0;
};

class ConfigStore {
 public:
  virtual ~ConfigStore() = default;

  // NotFound if no configuration was ever stored; Corruption if the stored
  // bytes do not decode; Unavailable/IoError if the store cannot be read.
  virtual Result<VersionedConfig> Load() = 0;

  // Stores `config` iff the stored version is `expected` (kNoVersion: iff
  // none is stored) and returns the new version. Aborted on a version
  // mismatch (Load again and recompute); InvalidArgument if `config` fails
  // Validate() or its term is not above the stored term. On Unavailable the
  // write may or may not have happened: Load to find out.
  virtual Result<uint64_t> CompareAndSwap(uint64_t expected, const ClusterConfig& config) = 0;

  // One-shot notification: `changed` runs once, on a thread of the store,
  // after the stored version is seen to differ from `known` (at once if it
  // already does). It may also run spuriously (e.g. on a lost ZooKeeper
  // session), so always Load and compare. Destroying the store drops pending
  // watches without running them. Do not call into the store from
  // `changed` for long; it runs on the store's notification thread.
  virtual Status Watch(uint64_t known, std::function<void()> changed) = 0;

  // Grants lease `name` to `holder` for `ttl` from `now` if it is free,
  // expired, or already held by `holder` (then like RenewLease: same epoch).
  // Busy if someone else holds it (the message names the holder).
  virtual Result<Lease> AcquireLease(const std::string& name, const std::string& holder,
                                     Nanos ttl, Nanos now) = 0;
  // Extends a lease still held: returns it with a new expiry and the same
  // epoch. Aborted if it expired or changed hands meanwhile — the holder has
  // lost it and must stop acting on it at once.
  virtual Result<Lease> RenewLease(const Lease& lease, Nanos ttl, Nanos now) = 0;
  // Gives a held lease up early so a successor need not wait for expiry.
  // OK also if it was lost already.
  virtual Status ReleaseLease(const Lease& lease) = 0;
};

// The lease a node holds while it is alive (and the manager probes).
inline std::string NodeLeaseName(NodeId node) { return "node-" + std::to_string(node); }

struct EmbeddedStoreOptions {
  std::string dir;  // holds cluster.json, its lock and lease files; created if missing
  // A pending Watch waits for inotify to report the file replaced, and
  // looks every `recheck_interval` anyway. Where the directory cannot be
  // watched (or it went: moved, removed), or with `inotify` false, it looks
  // every `watch_interval` instead: a stat, and a read when it changed (or
  // every tenth time). Lower: faster notice of a new configuration (a
  // reconfiguration waits for it), more stats.
  bool inotify = true;
  Nanos watch_interval = 2 * runtime::kMillisecond;
  Nanos recheck_interval = runtime::kSecond;
};

// The embedded backend: DIR/cluster.json replaced atomically (write a temp
// file, fsync, rename, fsync DIR), CAS on the version stored in the file,
// every read-modify-write under a flock (DIR/cluster.lock, or the lease's
// own) so processes sharing DIR are serialised. Leases are
// DIR/lease-<name>.json with holder, epoch and expiry, durable like the
// configuration, and their renewals DIR/lease-<name>.renewal, which are not
// fsync'd (docs/formats/cluster_config.md says why); all users of DIR must
// pass `now` from one clock (same machine, e.g. CLOCK_MONOTONIC or
// CLOCK_REALTIME in nanoseconds). A lease whose expiry lies more than two
// ttls beyond `now` cannot have come from that clock (it restarted — e.g.
// CLOCK_MONOTONIC after a reboot) and counts as expired.
Result<std::unique_ptr<ConfigStore>> OpenEmbeddedStore(const EmbeddedStoreOptions& options);

// The in-memory backend: one process's configuration store, for the
// simulator (virtual time: leases compare the caller's `now` only) and for
// tests. Every store opened over the same `MemoryStoreState` sees the same
// configuration and leases, like processes sharing a directory. Watch
// callbacks run on the thread that made the change (or, when the version
// already differs, on the caller's, before Watch returns), outside the
// store's lock.
class MemoryStoreState;
std::shared_ptr<MemoryStoreState> NewMemoryStoreState();
std::unique_ptr<ConfigStore> OpenMemoryStore(std::shared_ptr<MemoryStoreState> state);

}  // namespace slip::cluster
