// SimFabric: the deterministic simulated provider of fabric/fabric.h, on a
// SimRuntime's virtual time. One SimFabric is the network of a whole
// simulated cluster; nodes are small integers.
//
// Model (a software RNIC per node, docs/papers/rowan.md §6.3):
//   * Registered memory is real memory: Write copies bytes into the target's
//     buffer, Read copies out of it, CompareSwap/FetchAdd operate on the
//     target's 8-byte word. Keys are unique per registration fabric-wide. A
//     bad key, an out-of-range or misaligned access, or missing access
//     rights completes with InvalidArgument; nothing crashes.
//   * A connection is (initiator endpoint, target endpoint). Operations are
//     split into MTU-sized packets. The sender's NIC serialises its packets
//     at `bandwidth`; each packet flies for `latency` (+ link delay +
//     jitter); the target NIC processes packets one at a time, `nic_service`
//     each, in arrival order across connections but strictly in posting
//     order within a connection (a reorder buffer restores FIFO after
//     jitter or retransmission). Packets of different connections interleave.
//   * Reliable-connection semantics: a lost packet (random drop, partition,
//     crashed target) is retransmitted after `retransmit_delay`, doubling up
//     to `max_retransmit_interval`. A drop is thus extra delay; an
//     unreachable peer makes the operation fail with Timeout once
//     op_timeout (EndpointOptions) has passed since it was posted, and the
//     connection resets: every other outstanding operation on it fails with
//     Unavailable and the next one starts afresh.
//   * Two-sided Send lands in the target endpoint's FIFO of posted receive
//     buffers exactly as fabric.h says (multi-receive: 64 B stride, overflow
//     to the next buffer, tail untouched, buffer_released). With no buffer
//     that can take it, the target NIC answers receiver-not-ready and the
//     sender retries after `rnr_retry_delay` until a buffer is posted or
//     op_timeout. A message larger than a whole buffer fails (TooLarge).
//   * Persistence: data placed by Send/Write/atomics becomes persistent
//     `dma_persist_delay` after placement (0: at once). The node's persist
//     hook is then called with the range (e.g. PmRegion::Persist). A Read's
//     response leaves the target only once every earlier placement on its
//     connection is persistent: "Write then Read" = remote persist.
//   * Completions of an endpoint are delivered as events on the executor that
//     drives it (its pollers then run), so handlers see them at the right
//     virtual time.
//   * CPU (the simulator's cost model, runtime/cost.h): posting an operation
//     charges the poster Cost::kFabricPost (+ per byte), each completion
//     polled Cost::kFabricCompletion. On an RDMA NIC a post chained behind
//     a kMore one rides its doorbell (its bytes only), and a silent
//     operation that succeeds is never polled. With `software_target` the target's
//     driver pays Cost::kFabricTarget (+ per byte) for placing packets, and
//     costs follow a software provider's system calls (libfabric tcp, as
//     strace shows it): every post is a send of its own and pays kFabricPost
//     in full; the target pays kFabricTarget for every packet it places (an
//     initiator's packets are placed one at a time; the provider answers each
//     operation with a send of its own, an ack or a Read's data); the
//     initiator takes a turn's answers in with one receive (the first
//     completion pays kFabricCompletion).
//
// Faults (all decisions drawn from the runtime's seeded Rng):
//   drop / delay / jitter per directed link or by default, partition (set of
//   cut node pairs), tear the next Write placed at a node after k bytes (or
//   with a probability), crash a node (its endpoints die; a crash hook lets
//   the caller crash its PmRegion too).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "fabric/fabric.h"
#include "runtime/sim_runtime.h"

namespace slip::fabric {

using NodeId = uint32_t;
using runtime::Nanos;

struct SimFabricOptions {
  // One-way propagation delay of every packet and response.
  Nanos latency = 1000;
  // Link bandwidth in bytes per nanosecond (12.5 = 100 Gb/s). Charged per
  // packet at the sender's NIC (serialised per node) and on read responses.
  double bandwidth = 12.5;
  // Time the target NIC spends on each packet; it serialises the target NIC
  // (75 M msg/s ~ 13 ns). Ops up to one MTU are one packet.
  Nanos nic_service = 13;
  // Payload bytes per packet; larger Send/Write/Read are split.
  size_t mtu = 4096;
  // Placement-to-persistence delay (DDIO off: DMA completion). 0 = at once.
  Nanos dma_persist_delay = 0;
  // No NIC offload (a software provider: tcp, shm): the target side of
  // every packet is work for the target endpoint's driver executor, which
  // places it when free and is charged runtime::Cost::kFabricTarget. False
  // (an RDMA NIC): placement costs the target's CPU nothing.
  bool software_target = false;
  // Receiver-not-ready back-off before a Send is retried.
  Nanos rnr_retry_delay = 20 * runtime::kMicrosecond;
  // First retransmission after a lost packet; doubles up to the maximum.
  Nanos retransmit_delay = 50 * runtime::kMicrosecond;
  Nanos max_retransmit_interval = 5 * runtime::kMillisecond;
};

// Faults on one directed link (from -> to), or the default for all links.
struct LinkFaults {
  double drop_probability = 0;  // per transmission attempt (packet or response)
  Nanos extra_delay = 0;        // added to every packet's flight
  Nanos jitter = 0;             // uniform extra delay in [0, jitter]: reorders
                                // across connections (never within one)
  double tear_probability = 0;  // per Write/Send placed over this link: torn at a
                                // uniformly random byte in [0, len]
};

class SimFabric {
 public:
  // The runtime must outlive the fabric and its endpoints. Events the fabric
  // left in the runtime become no-ops once the fabric and all its endpoints
  // are gone.
  explicit SimFabric(runtime::SimRuntime& rt, SimFabricOptions options = {});
  ~SimFabric();
  SimFabric(const SimFabric&) = delete;
  SimFabric& operator=(const SimFabric&) = delete;

  // An endpoint of `node`, driven by `driver` (an executor of the same
  // runtime, usually the node's NIC executor; null: completions are queued
  // without waking anyone). Unavailable if the node is crashed.
  Result<std::unique_ptr<Endpoint>> CreateEndpoint(NodeId node, runtime::Executor* driver,
                                                   const EndpointOptions& options);
  // The Fabric interface for code running on `node`: CreateEndpoint(options)
  // makes endpoints of that node driven by `driver`. It refers to this
  // SimFabric, which must outlive it.
  std::unique_ptr<Fabric> ForNode(NodeId node, runtime::Executor* driver);

  // --- faults ---
  void SetDefaultFaults(const LinkFaults& faults);
  void SetLinkFaults(NodeId from, NodeId to, const LinkFaults& faults);
  // Faults on every link to or from `node`. Precedence: the directed link's
  // own faults, then the destination node's, then the source node's, then
  // the default.
  void SetNodeFaults(NodeId node, const LinkFaults& faults);
  // Cuts / restores both directions between a and b.
  void Partition(NodeId a, NodeId b);
  void Heal(NodeId a, NodeId b);
  void HealAll();
  // The next Write or Send placed at `node` lands only its first
  // `after_bytes` bytes (0..len); the rest never arrives and the writer's
  // completion is Aborted (a torn Send completes no receive). Queued:
  // several calls tear several successive transfers.
  void TearNextWrite(NodeId node, size_t after_bytes);
  // Power loss: the node's endpoints stop at once (their pending work and
  // unpersisted placements are lost, peers' operations to them fail), then
  // the crash hook runs. The node stays down until RestartNode().
  void CrashNode(NodeId node);
  // The node may create endpoints again (old ones stay dead).
  void RestartNode(NodeId node);
  bool crashed(NodeId node) const;

  // Called with each placed range once it is persistent (see the model).
  void SetPersistHook(NodeId node, std::function<void(const std::byte*, size_t)> hook);
  // Called by CrashNode(node), e.g. [&] { region->SimulateCrash(seed); }.
  void SetCrashHook(NodeId node, std::function<void()> hook);

  // --- observation ---
  struct Stats {
    uint64_t ops = 0;          // operations posted
    uint64_t packets = 0;      // packets placed at targets
    uint64_t retransmits = 0;  // lost attempts retried (drops, cuts, dead peers)
    uint64_t rnr_retries = 0;  // Sends bounced for want of a receive buffer
    uint64_t bytes = 0;        // payload bytes placed or read
    uint64_t torn_writes = 0;
    uint64_t timeouts = 0;     // operations failed by op_timeout
  };
  const Stats& stats() const;
  const SimFabricOptions& options() const;

  class Impl;  // shared with endpoint handles, which may outlive the fabric

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace slip::fabric
