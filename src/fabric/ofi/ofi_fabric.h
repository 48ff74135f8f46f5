// The libfabric providers of fabric/: "shm" (same host), "tcp" (tcp;ofi_rxm)
// and "verbs" (verbs;ofi_rxm). OpenOfiFabric(FabricOptions) itself is
// declared in fabric/fabric.h; this header adds the provider's tuning knobs.
//
// How the fabric.h contract maps onto libfabric (1.17), and where it bends:
//   * One libfabric domain per Endpoint, opened FI_THREAD_DOMAIN: the contract
//     gives every endpoint a single owner thread, so the provider can skip its
//     locks. Registrations are per endpoint, as the contract says.
//   * Multi-receive buffers are native FI_MULTI_RECV buffers. libfabric places
//     messages back to back with no alignment, so every Send is padded to the
//     64 B stride by the sender (a zero-filled second iov entry, no copy); the
//     unpadded length travels as remote CQ data so single-message receives
//     report the true length.
//     libfabric cannot place a message "in the current buffer iff it fits":
//     shm and rxm place a message at the current offset without looking at
//     its size, and retire a buffer only when its free tail drops below
//     FI_OPT_MIN_MULTI_RECV; a message longer than the free tail is truncated
//     (rxm, which then also resets the connection) or corrupts the buffer's
//     bookkeeping (shm 1.17: the free length underflows). So we set
//     FI_OPT_MIN_MULTI_RECV to OfiOptions::max_multi_recv_message (M) and
//     make sure no message can be longer than a free tail:
//       - a buffer retires as soon as its free tail is < M, possibly before a
//         message fails to fit (the unwritten tail is < M bytes). This is the
//         contract's "a buffer retires when the next message may not fit"
//         (src/fabric/contract/contract_test_suite.h);
//       - PostMultiRecv refuses buffers shorter than M (InvalidArgument);
//       - Send refuses messages whose padded length exceeds M (TooLarge), to
//         any kind of receive buffer, since the sender cannot know which kind
//         the receiver posted. Every endpoint of a deployment must use the
//         same M (a peer with a larger M can still overflow our buffers).
//     On tcp, rxm must send every such message eagerly: its segmentation
//     and rendezvous protocols lose or tear messages into a multi-receive
//     buffer when several are in flight (measured, 1.17), so OpenOfiFabric
//     raises FI_OFI_RXM_EAGER_LIMIT to at least M before libfabric starts,
//     and rxm's bounce buffers (FI_OFI_RXM_BUFFER_SIZE) to hold a largest
//     message: one that arrives while no receive is posted waits there, and
//     a shorter buffer truncates it (the sender's Send fails TooLarge).
//     A message longer than a plain PostRecv buffer completes that receive
//     with TooLarge; on tcp, rxm also resets the connection (the sender's
//     in-flight operations then complete with Unavailable).
//   * Software providers progress only when the target polls (DESIGN.md,
//     fabric/): one-sided operations to an endpoint land only while its owner
//     calls Poll()/Wait(). We ask for RMA ordering, which keeps shm from
//     doing RMA directly from the initiator (process_vm_*): that path skips
//     the target's queue and key check.
//   * Completion: tcp/verbs request FI_TRANSMIT_COMPLETE and shm sends and
//     writes FI_DELIVERY_COMPLETE, so Send/Write complete when the target's
//     provider has taken the data (not when it left our socket or entered
//     the peer's queue). On tcp that costs an acknowledgement message per
//     operation; OfiOptions::remote_completion = false drops it (and the
//     guarantee). A Send to a receiver with no posted buffer thus
//     completes once placed on shm (like receiver-not-ready retry), at once on
//     tcp (rxm buffers it).
//   * Ordering: FIFO per connection as far as libfabric promises it: shm
//     orders everything; tcp;ofi_rxm with atomics promises SAS, RAS, WAS and
//     order within RMA and within atomics, not across them (it emulates
//     atomics with messages over the same connection).
//   * Posting never blocks: FI_EAGAIN (full queues, or the first operation to
//     a peer that has not yet answered: shm's name exchange, rxm's connect,
//     both driven by the peer's progress) defers the operation to a backlog
//     retried by Poll(), in order per connection. Busy only when the
//     endpoint's cq_depth operations are outstanding.
//   * Timeouts: an initiator operation (Send/Write/Read/CompareSwap/FetchAdd)
//     outstanding for longer than EndpointOptions::op_timeout completes with
//     Timeout, and the connection counts as reset: the peer's other
//     outstanding operations complete with Unavailable; later operations
//     start afresh. Their late completions are dropped. libfabric cannot
//     cancel a posted RMA, so a late Read may still write its destination
//     after the Timeout (as on RDMA until the QP is reset); atomic results and
//     bounce buffers are ours and are dropped.
//   * Wait(): tcp/verbs park on the CQ's FI_WAIT_FD descriptor (after
//     fi_trywait). shm has no usable wait object in 1.17 (FI_WAIT_FD refused,
//     fi_cq_sread ignores its timeout), so Wait() spins briefly and then sleeps
//     in exponentially growing steps (50 us .. 1 ms), progressing in between.
#pragma once

#include <cstddef>
#include <memory>

#include "common/status.h"
#include "fabric/fabric.h"

namespace slip::fabric {

struct OfiOptions {
  // FI_OPT_MIN_MULTI_RECV: the largest (padded) message Send accepts and the
  // smallest buffer PostMultiRecv accepts. Larger values waste more of each
  // multi-receive buffer's tail (up to this many bytes); smaller ones limit
  // the message size. A multiple of kStride, the same on every endpoint of a
  // deployment. The default covers a 4 KiB payload with its headers (log
  // blocks, RPC frames).
  size_t max_multi_recv_message = 8 * 1024;

  // tcp/verbs: request FI_TRANSMIT_COMPLETE, so that Send/Write complete
  // only once the peer acknowledged them (fabric.h's "the target accepted
  // the data"; a dead peer gives an error or Timeout). false: they complete
  // when the data is handed to the local socket/queue, so a send or write
  // to a peer that just died may still complete OK and a dead peer shows up
  // only as later errors. That BREAKS fabric.h's completion rule and is for
  // deployments whose protocols never infer delivery from a completion
  // (request/response with their own timeouts; Write-then-Read for
  // durability still works, as the Read is answered by the peer). It saves
  // one acknowledgement per operation: on loopback tcp the 64 B send/recv
  // round trip drops from ~28-30 us to ~15-17 us (bench/results/
  // 2026-11-23-fabric-pingpong.md). shm ignores it (always
  // FI_DELIVERY_COMPLETE, see above).
  bool remote_completion = true;
};

Result<std::unique_ptr<Fabric>> OpenOfiFabric(const FabricOptions& options,
                                              const OfiOptions& ofi);

}  // namespace slip::fabric
