// KvTarget: what the benchmark driver drives — Slipstream's own designs and
// the peers (RocksDB, Redis, memcached) behind one small interface, so every
// run is the same workload, the same driver loop and the same report.
//
// A target owns whatever it needs to run (an in-process store, a temp
// directory, server processes it started) and releases it in its destructor.
// `Connect()` is called once per driver thread; a session is then used by
// that thread only, so sessions need no locking (one connection, one writer
// id, ...). The target itself must allow concurrent Connect() and Sample().
//
// Figures the driver cannot see from outside (server CPU, bytes on the wire,
// PM bytes) come from `Sample()`: cumulative counters the driver reads at the
// start and end of the measured window and divides by the ops completed in
// between. A counter the target cannot measure stays nullopt and is reported
// as null — never estimated.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace slip::bench {

// Per-thread connection to a target. Not thread-safe: one per driver thread.
class KvSession {
 public:
  virtual ~KvSession() = default;

  // OK once the write is as durable as the target promises (Describe()).
  virtual Status Put(std::string_view key, std::string_view value) = 0;
  // The value, or NotFound.
  virtual Result<std::string> Get(std::string_view key) = 0;
  // OK or NotFound (both mean "absent afterwards").
  virtual Status Del(std::string_view key) = 0;
  // Up to `count` pairs with key >= start_key in key order. Targets without
  // ordered keys (hash stores) keep the default.
  virtual Status Scan(std::string_view start_key, uint32_t count,
                      std::vector<std::pair<std::string, std::string>>* out) {
    (void)start_key, (void)count, (void)out;
    return Status::NotSupported("this target has no ordered scan");
  }
  // Asynchronous calls, for pipelined runs (DriverOptions::depth > 1): `done`
  // runs once, on a thread of the target, with what the synchronous call
  // would return. Targets without them keep SupportsAsync() false.
  virtual bool SupportsAsync() const { return false; }
  virtual void PutAsync(std::string key, std::string value, std::function<void(Status)> done) {
    (void)key, (void)value;
    done(Status::NotSupported("this target has no asynchronous calls"));
  }
  virtual void GetAsync(std::string key, std::function<void(Status)> done) {
    (void)key;
    done(Status::NotSupported("this target has no asynchronous calls"));
  }
  virtual void DelAsync(std::string key, std::function<void(Status)> done) {
    (void)key;
    done(Status::NotSupported("this target has no asynchronous calls"));
  }

  // Request/response exchanges this session has made on the network so far
  // (a target without a network leaves it at 0; see TargetSample::rtts).
  virtual uint64_t round_trips() const { return 0; }
};

// The roles whose CPU time a run reports (DESIGN.md "What every run
// reports"). `client` is the driver threads' own CPU and is always measured
// by the driver; the rest come from the target.
struct RoleCpu {
  // microseconds; `pool`: a disaggregated pool's own processor (dinomo)
  std::optional<double> worker, backup_worker, nic, control, digest, clean, pool;
};

// RPC traffic of a target built on rpc::RpcChannel: frames (a request or an
// answer each) sent by the client library and by the servers, and the
// fabric messages that carried them (one turn's frames for one peer).
struct RpcSends {
  double client_frames = 0, client_messages = 0, server_frames = 0, server_messages = 0;
};

// Cumulative counters of a target at one instant. The driver reports
// (end - start) / ops for each one that is set in both samples.
struct TargetSample {
  RoleCpu cpu_us;
  // Whether round trips are counted by the sessions (KvSession::round_trips).
  // False: rtts_per_op is null.
  bool counts_round_trips = false;
  // The target's own count of round trips so far, across sessions (clients
  // that know theirs: Client::RoundTrips); when set in both samples it is
  // used instead of the sessions' counts.
  std::optional<double> round_trips;
  std::optional<double> fabric_bytes;     // bytes moved between processes/nodes
  std::optional<double> pm_bytes;         // bytes written to PM (incl. cleaning)
  std::optional<double> media_bytes;      // device-level bytes (DLWA numerator)
  std::optional<double> media_requested;  // bytes requested of the device (DLWA denominator)
  std::optional<RpcSends> rpc_sends;
};

// "memory" when `path` lies on a filesystem held in memory (tmpfs, ramfs:
// gone at power loss), else "file".
std::string DurabilityOfPath(const std::string& path);

class KvTarget {
 public:
  virtual ~KvTarget() = default;

  // Short name for the report's "design" field: "local", "redis-wait", ...
  virtual std::string name() const = 0;
  // One line: what runs where and what an acknowledged write survives.
  virtual std::string Describe() const = 0;
  // The durability class of an acknowledged write, so that designs are
  // compared only within one: "memory" (held in memory — tmpfs PM files,
  // DRAM — survives process crashes, not power loss), "file" (msync/fsync'd
  // to a filesystem: survives power loss), "dax" (real PM, cache-line flush).
  virtual std::string Durability() const = 0;
  // A session for one driver thread. `thread` is 0..threads-1 (e.g. the
  // store writer id of an in-process target).
  virtual Result<std::unique_ptr<KvSession>> Connect(uint32_t thread) = 0;
  // Current cumulative counters (see TargetSample). Default: nothing measured.
  virtual TargetSample Sample() { return {}; }
};

}  // namespace slip::bench
