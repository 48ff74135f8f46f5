// The registry of replication designs: name -> what a design is made of.
//
// A design is a folder under replication/ (rpc/, rowan/, rwrite/, batch/,
// share/, tailwind/) that defines one `Design` — its primary side (a
// Replicator factory; the one-sided designs supply a Placement to the shared
// OneSidedReplicator) and its backup side (how peers' writes land: a backup
// worker, one shared multi-receive log, or private buffers opened by
// REPL_OPEN; and which prefix of a buffer can be trusted) — and one line in
// registry.cc. Servers, the simulator and the tools build replication only
// through here; nothing else branches on the design
// (docs/architecture.md, "How to add a design").
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "fabric/fabric.h"
#include "log/entry.h"
#include "replication/design.h"
#include "replication/onesided/replicator.h"
#include "replication/replicator.h"
#include "rpc/peer_caller.h"
#include "runtime/runtime.h"

namespace slip::replication {

// How peers' replication writes reach a backup's PM.
enum class BackupReceive : uint8_t {
  kWorker,          // a backup worker applies each REPLICATE request (two-sided)
  kSharedLog,       // Sends into one multi-receive log the NIC fills in order
  kPrivateBuffers,  // Writes into segments opened per sender (REPL_OPEN/CLOSE)
};

// What a Replicator is built from. `ep` (the sender's own endpoint, polled
// on `exec`) and `onesided` matter to one-sided designs only.
struct ReplicatorContext {
  runtime::Executor* exec = nullptr;
  fabric::Endpoint* ep = nullptr;
  rpc::PeerCaller* peers = nullptr;
  OneSidedOptions onesided;
};

struct Design {
  Protocol protocol;
  std::string_view name;  // what --design takes
  BackupReceive receive = BackupReceive::kWorker;
  // Several senders write into one backup log (rowan's b-log, share-kv's
  // shared buffer): tests run such designs with more than one sender.
  bool senders_share_a_log = false;
  // The prefix of a private buffer holding `buffer` that a backup may trust
  // (tailwind: what the running checksum vouches for); null: all of it.
  uint64_t (*valid_prefix)(std::span<const std::byte> buffer, const log::Limits& limits) = nullptr;
  std::unique_ptr<Replicator> (*make_replicator)(const ReplicatorContext& context) = nullptr;
  // The erda family (docs/papers/erda.md; server/node_core_erda.cc,
  // client/erda_path.h): how clients reach a primary besides two-sided
  // calls, and how the primary takes a PUT's entry in.
  struct ClientAccess {
    bool reads_one_sided = false;   // GET: READ a bucket word, then the entry
    bool writes_one_sided = false;  // PUT: RESERVE, WRITE the entry (+ flush READ), COMMIT
    bool copies_puts = false;       // a PUT's entry is staged, checked, then copied into the log
    bool any() const { return reads_one_sided || writes_one_sided || copies_puts; }
  };
  ClientAccess clients = {};

  bool one_sided() const { return receive != BackupReceive::kWorker; }
};

// The factory of a one-sided design whose placement `P` needs no arguments.
template <typename P>
std::unique_ptr<Replicator> OneSidedWith(const ReplicatorContext& c) {
  return std::make_unique<OneSidedReplicator>(c.exec, c.ep, c.peers, c.onesided, std::make_unique<P>());
}

// Every design, in a fixed order (rpc-kv first).
const std::vector<const Design*>& AllDesigns();
const Design& DesignOf(Protocol protocol);
// InvalidArgument naming the known designs for anything else.
Result<const Design*> FindDesign(std::string_view name);

// The primary side of `context.onesided.protocol`'s design (rpc-kv: `ep` and
// the one-sided options are unused).
std::unique_ptr<Replicator> MakeReplicator(Protocol protocol, const ReplicatorContext& context);

}  // namespace slip::replication
