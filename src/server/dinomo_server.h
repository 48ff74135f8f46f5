// DinomoServer: what a DINOMO KVS node does in a cluster (docs/papers/
// dinomo.md §5a) — which keys it serves and when, and the KV requests on
// top of a dinomo::KvsNode. Runtime-agnostic: the process (node/
// kvs_node_process.h) and the tests build it the same way.
//
// It owns the keys of the shards the configuration makes it primary of.
// When that set or the pool's address changes it reconfigures, as the
// paper's affected nodes do:
//   1. stop serving and let its data path drain;
//   2. POOL_MERGE_ALL its own log at the new term T (fencing what it ran
//      before) — it is now *settled* at T: it serves nothing of a term
//      below T and everything it wrote is merged;
//   3. wait until every other live member is settled at T too (KN_RELEASE:
//      a node whose shards move to us may still serve them until then);
//   4. POOL_MERGE_ALL every down node's log at T (fencing them: nothing they
//      write later is merged — merge before serve, D4);
//   5. serve with a new KvsNode whose epoch is T, so its versions beat every
//      earlier owner's. Its cache starts empty. Before it serves, it makes
//      the pool's cells match T's shared keys among those of its shards
//      (POOL_SHARE, POOL_UNSHARE): every member settled at T, so no one
//      writes them the old way any more (docs/papers/dinomo.md §4d).
// A shared key is served by its shard's owner and its secondaries (the
// configuration's `shared`); a change to them reconfigures every node.
// The very next term, when it leaves its ownership and the pool alone, is
// adopted in place (and settles it at once); after a skipped term the node
// reconfigures fully, since its shards may have been another's in between. Steps 2 and 3 make two nodes never serve a key
// at once: each serves a term only after every other settled at it, and
// settling means leaving every earlier term. Settling needs nothing of
// other nodes, so nodes reconfiguring together cannot wait on each other.
// docs/papers/dinomo.md §5b.
//
// Requests: StaleTerm for another term, a shard it does not own, or while
// reconfiguring (the client refreshes its map and retries); Unavailable
// once the lease has run out, so a node cut off never answers from a cache
// someone else's writes have made stale.
//
// Single-threaded: every call on `exec`.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cluster/cluster_config.h"
#include "common/status.h"
#include "dinomo/kvs_node.h"
#include "fabric/fabric.h"
#include "proto/kv.h"
#include "rpc/peer_caller.h"
#include "runtime/runtime.h"
#include "server/pool_node.h"

namespace slip::server {

struct DinomoServerEnv {
  uint32_t self = 0;
  runtime::Executor* exec = nullptr;
  fabric::Endpoint* data = nullptr;  // the KvsNode's one-sided operations (Poll drives it)
  rpc::PeerCaller* calls = nullptr;  // reaches the pool as `pool_peer`, other nodes by id
  rpc::NodeId pool_peer = 0;
  // Points `calls` at a configuration's pool (as `pool_peer`) and members.
  std::function<void(const cluster::ClusterConfig&)> set_peers;
  // Runs when the node has settled at a configuration's term (step 2, or a
  // change adopted in place); may be empty.
  std::function<void(const cluster::ClusterConfig&)> settled;
  // Time left on this node's lease (<= 0: none).
  std::function<runtime::Nanos()> lease_left;
  // The node cannot go on (a term past what versions can hold, a data path
  // that never drains): the process must stop.
  std::function<void(Status)> fatal;
  // Cache and batching for every KvsNode it runs (node and epoch are its own).
  dinomo::KvsNodeOptions node;
  // DINOMO-N (dinomo/shared_nothing.h): the node works on a partition of
  // its own, so before it serves shards it gained their data is copied into
  // it (POOL_ADOPT) — the reorganization DINOMO's shared pool saves.
  bool copy_on_handover = false;
  // The node joined as a new member: nothing of its id is unmerged in the
  // pool (a removed node merged its log before it left), so until it has
  // served a shard it is settled at every term it hears of — the nodes
  // giving it shards need not wait for it to start.
  bool joined = false;
};

class DinomoServer final : public PoolNode {
 public:
  // Versions are (epoch << 32) | n in 48 bits: terms above this cannot be epochs.
  static constexpr uint64_t kMaxEpoch = (uint64_t{1} << 16) - 1;

  explicit DinomoServer(DinomoServerEnv env);
  ~DinomoServer() override;

  void Adopt(const cluster::ClusterConfig& config) override;
  // PUT, GET, DEL and KN_RELEASE (proto/kv.h). Anything else: InvalidArgument.
  void Handle(uint16_t method, std::span<const std::byte> payload, Reply reply) override;
  bool Poll() override { return node_ != nullptr && node_->Poll(); }

  bool serving() const { return serving_; }
  // The term it serves in (its KvsNode's epoch is the term it last reconfigured in).
  uint64_t serving_term() const override { return serving_ ? serving_config_.term : 0; }
  Counters counters() const override;
  HotWindow hot_keys() override { return window_.Last(env_.exec->Now()); }
  // Counters of the KvsNode serving now (zeros when none).
  dinomo::KvsNodeStats stats() const { return node_ ? node_->stats() : dinomo::KvsNodeStats{}; }
  uint64_t reconfigurations() const { return reconfigurations_; }
  // The highest term it has settled at (step 2).
  uint64_t settled_term() const { return settled_term_; }


 private:
  void Consider();  // serve config_ as it is, or reconfigure for it
  void Reconfigure();
  void WaitIdle(int waited_ms);
  void MergeSelf();
  void Settle(const cluster::ClusterConfig& c);
  void SettleEarly();
  void AwaitOthers();
  void Release(std::span<const std::byte> payload, Reply reply);
  void MergeNext(std::vector<uint32_t> left);
  void AdoptShards();  // DINOMO-N: copies what it gains, then StartNode
  void StartNode();
  // Shares and unshares in the pool the keys of its shards as `c` says
  // (then serves).
  void SyncShared(const cluster::ClusterConfig& c);
  void ChangeShared(const cluster::ClusterConfig& c, std::vector<std::pair<proto::Method, std::string>> changes);
  void Serve(const cluster::ClusterConfig& c);
  void Retry();
  void Refuse(const Reply& reply, const Status& s) const;

  DinomoServerEnv env_;
  cluster::ClusterConfig config_;          // the newest adopted
  cluster::ClusterConfig target_;          // what the reconfiguration under way is for
  cluster::ClusterConfig serving_config_;  // what node_ serves
  std::set<uint32_t> owned_;               // shards node_ serves
  std::unique_ptr<dinomo::KvsNode> node_;
  bool serving_ = false;
  bool reconfiguring_ = false;
  int64_t retry_ms_ = 50;  // Retry's pause, doubling up to 2 s while the pool does not answer
  uint64_t reconfigurations_ = 0;
  uint64_t settled_term_ = 0;
  bool fresh_ = false;  // joined and has not served a shard yet (env.joined)
  runtime::Nanos stopped_at_ = 0;  // when the reconfiguration under way stopped serving
  std::vector<std::pair<uint64_t, Reply>> releases_;  // KN_RELEASE calls waiting for a settle
  RequestWindow window_;
  // Timers may outlive the server.
  std::shared_ptr<int> life_ = std::make_shared<int>(0);
};

// The shards `node` owns (is primary of) in `config`.
std::set<uint32_t> OwnedBy(const cluster::ClusterConfig& config, uint32_t node);

}  // namespace slip::server
