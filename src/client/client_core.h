// ClientCore: the client's request path — route a key to its shard's
// primary, send, and recover from what a replicated store answers:
//
//   StaleTerm    the node's configuration differs: refresh the routing
//                table (at least the node's term) and resend.
//   Busy         the shard is being reconfigured or the node is out of
//                space: back off, resend.
//   Unavailable, Timeout
//                the node may be dead: refresh routing, back off, resend. A
//                write's outcome is then unknown until a later attempt
//                answers; retrying a PUT is harmless (last writer wins), and
//                a retried DEL that finds nothing reports NotFound although an
//                earlier attempt may have deleted the key (flagged to the
//                history as an unknown outcome).
//   anything else  returned to the caller at once.
//
// Each operation has a deadline; when it passes, the last error is returned.
// Transport-agnostic (PeerCaller) and clock-free (Executor), so the same code
// serves the library, `slip` and the simulator.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/direct_path.h"
#include "cluster/routing.h"
#include "common/status.h"
#include "log/entry.h"
#include "proto/kv.h"
#include "rpc/peer_caller.h"
#include "runtime/runtime.h"

namespace slip::client {

using rpc::NodeId;

// The client routes with the cluster's routing table.
using cluster::RoutingTable;

class RoutingSource {
 public:
  virtual ~RoutingSource() = default;
  // A routing table with term >= min_term if one exists, else the newest
  // known. `done` runs on the caller's executor (not inside Fetch).
  virtual void Fetch(uint64_t min_term, std::function<void(Result<RoutingTable>)> done) = 0;
};

struct CoreOptions {
  runtime::Nanos op_deadline = 10 * runtime::kSecond;
  runtime::Nanos backoff_min = 200 * runtime::kMicrosecond;
  runtime::Nanos backoff_max = 50 * runtime::kMillisecond;
  log::Limits limits;  // refuse oversized input before sending
};

// For history checkers: what one operation, or one attempt whose outcome
// became unknown, did as far as the client can tell.
struct OpRecord {
  // kPutIfAbsent / kPutIfPresent: PutIf; result kOk = written, kNotFound =
  // the condition did not hold.
  enum class Kind : uint8_t { kPut, kGet, kDel, kPutIfAbsent, kPutIfPresent } kind;
  std::string key;
  std::optional<std::string> value;  // PUT: written; GET: read
  Code result = Code::kOk;
  bool unknown = false;  // an attempt that may apply at any time after `invoke`, or never
  runtime::Nanos invoke = 0, ret = 0;
  uint32_t attempts = 0;
  uint64_t version = 0;  // acknowledged PUT/DEL: the version the primary assigned
};

class ClientCore {
 public:
  ClientCore(rpc::PeerCaller* peers, RoutingSource* routing, runtime::Executor* exec,
             CoreOptions options = {});

  // Callbacks run on the executor. Put yields the version written.
  void Put(std::string key, std::string value, std::function<void(Result<uint64_t>)> done);
  // A PUT only if the key has no value (kIfAbsent) or has one (kIfPresent),
  // decided at the primary against its committed state; yields the version
  // written, or 0 when the condition did not hold (nothing written). Not
  // for designs whose clients write one-sidedly (NotSupported).
  void PutIf(std::string key, std::string value, proto::PutCondition condition,
             std::function<void(Result<uint64_t>)> done);
  void Get(std::string key, std::function<void(Result<std::string>)> done);
  void Delete(std::string key, std::function<void(Status)> done);

  void set_recorder(std::function<void(const OpRecord&)> r) { recorder_ = std::move(r); }
  // One-sided access for designs whose clients have it (routing table's
  // direct); null: every operation is a two-sided call.
  void set_direct_path(DirectPath* d) { direct_ = d; }

  struct Counters {
    uint64_t ops = 0, attempts = 0, stale = 0, busy = 0, unreachable = 0, refreshes = 0;
    uint64_t direct_attempts = 0;  // attempts handed to the DirectPath
  };
  const Counters& counters() const { return counters_; }
  const RoutingTable& routing() const { return routing_; }

 private:
  struct Op;
  void Start(std::shared_ptr<Op> op);
  void Attempt(std::shared_ptr<Op> op);
  void OnResponse(std::shared_ptr<Op> op, Result<rpc::PeerResponse> r);
  void Retry(std::shared_ptr<Op> op, Status why, bool refresh, uint64_t min_term);
  void Finish(std::shared_ptr<Op> op, Status s, std::string value, uint64_t version,
              std::optional<Code> attempt = std::nullopt);
  void RecordUnknownAttempt(Op& op);
  static OpRecord::Kind RecordKind(const Op& op);
  void Refresh(uint64_t min_term, std::function<void()> then);

  rpc::PeerCaller* peers_;
  RoutingSource* source_;
  runtime::Executor* exec_;
  CoreOptions options_;
  RoutingTable routing_;
  bool have_routing_ = false;
  std::function<void(const OpRecord&)> recorder_;
  DirectPath* direct_ = nullptr;
  Counters counters_;
};

}  // namespace slip::client
