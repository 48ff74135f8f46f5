// ErdaPath: the erda design's client side (docs/papers/erda.md §6).
//
// GET, with no server CPU: one READ of the key's probe window in the
// primary's bucket table, one READ of the entry its index word names; the
// client checks the block's CRC, header and key itself, and tries the old
// offset when the new one does not check out. It answers only under a
// grant (ERDA_GRANT: valid until this long after the client sent it, a
// bound the node's lease guarantees) and only if its READs finished within
// the grant and within max_read (a slower read may have raced the cleaner's
// segment reuse). Anything inconclusive becomes a two-sided GET.
//
// PUT: ERDA_RESERVE (a version and a place), the client's own WRITE of the
// entry block there, a READ on the same connection (its completion means
// the WRITE was placed and is persistent), then ERDA_COMMIT, which the node
// answers once the entry is replicated and published. A reservation that
// comes back later than write_within is not written to (the node may
// reclaim the place); the attempt then reports Unavailable and ClientCore
// retries.
//
// Runs on one executor, which polls the endpoint (Poll()).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "client/direct_path.h"
#include "fabric/fabric.h"
#include "fabric/op_tracker.h"
#include "log/entry.h"
#include "proto/kv.h"
#include "runtime/runtime.h"

namespace slip::client {

struct ErdaPathOptions {
  // The first READ of an entry; a larger block costs a second READ.
  size_t first_read = 512;
  log::Limits limits;  // what a block's lengths may claim
};

class ErdaPath final : public DirectPath {
 public:
  // `peers` carries the two-sided calls; `ep` is this client's endpoint for
  // one-sided operations, polled only through Poll().
  ErdaPath(rpc::PeerCaller* peers, fabric::Endpoint* ep, runtime::Executor* exec, ErdaPathOptions options = {});
  ~ErdaPath() override;

  bool TakesPut(size_t key_len, size_t value_len) const override;
  void Get(rpc::NodeId node, uint64_t term, uint32_t shard, const std::string& key, Done done) override;
  void Put(rpc::NodeId node, uint64_t term, uint32_t shard, const std::string& key, const std::string& value,
           Done done) override;

  // Drives the endpoint; returns whether a completion arrived.
  bool Poll();

  struct Stats {
    uint64_t gets = 0, one_sided_gets = 0, fallback_gets = 0, old_versions = 0;
    uint64_t puts = 0, one_sided_puts = 0, fallback_puts = 0;
    uint64_t grants = 0, reads = 0, writes = 0;
    uint64_t written_bytes = 0;  // entries written one-sidedly into nodes' PM
    // Sequential network round trips: each call (grant, RESERVE, COMMIT, a
    // fallback), each READ of a GET, and a WRITE with its flush READ (posted
    // together) as one.
    uint64_t round_trips = 0;

    // Sums another client's (or run's) counters into these.
    Stats& operator+=(const Stats& o) {
      gets += o.gets, one_sided_gets += o.one_sided_gets, fallback_gets += o.fallback_gets;
      old_versions += o.old_versions;
      puts += o.puts, one_sided_puts += o.one_sided_puts, fallback_puts += o.fallback_puts;
      grants += o.grants, reads += o.reads, writes += o.writes;
      written_bytes += o.written_bytes, round_trips += o.round_trips;
      return *this;
    }
  };
  const Stats& stats() const { return stats_; }

 private:
  struct Node;
  struct GetOp;
  struct PutOp;
  struct Pending;

  Node& NodeOf(rpc::NodeId node);
  // Calls then(true) with a valid grant for (node, shard, term), or answers
  // `done` with the node's refusal and calls nothing.
  void WithGrant(rpc::NodeId node, uint64_t term, uint32_t shard, const Done& done, std::function<void()> then);
  void ReadWindow(std::shared_ptr<GetOp> op);
  void NextVersion(std::shared_ptr<GetOp> op);
  void ReadEntry(std::shared_ptr<GetOp> op, uint64_t region_offset, size_t len);
  void OnEntry(std::shared_ptr<GetOp> op, uint64_t region_offset, size_t requested);
  void AnswerGet(std::shared_ptr<GetOp> op, Code status, uint64_t version, std::string value);
  void FallbackGet(std::shared_ptr<GetOp> op);
  void Reserve(std::shared_ptr<PutOp> op);
  void WriteEntry(std::shared_ptr<PutOp> op, const proto::ErdaReserveResponse& r);
  void Commit(std::shared_ptr<PutOp> op);
  void FallbackPut(std::shared_ptr<PutOp> op);

  // One-sided operations: `fn` runs with the completion's status.
  Status PostRead(Node& n, void* dst, size_t len, const fabric::RemoteMemory& mem, uint64_t offset,
                  std::function<void(Code)> fn);
  Status PostWrite(Node& n, const void* src, size_t len, const fabric::RemoteMemory& mem, uint64_t offset,
                   std::function<void(Code)> fn);

  rpc::PeerCaller* const peers_;
  fabric::Endpoint* const ep_;
  runtime::Executor* const exec_;
  const ErdaPathOptions options_;
  std::map<rpc::NodeId, std::unique_ptr<Node>> nodes_;
  fabric::OpTracker ops_;
  Stats stats_;
};

}  // namespace slip::client
