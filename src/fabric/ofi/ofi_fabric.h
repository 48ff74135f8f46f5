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
//     libfabric retires a multi-receive buffer as soon as its free tail is
//     smaller than FI_OPT_MIN_MULTI_RECV, which we set to
//     OfiOptions::max_multi_recv_message. So a buffer can retire a little
//     earlier than "when the next message does not fit" (the tail left
//     unwritten is < max_multi_recv_message), and:
//       REQUIRES: no message sent to a multi-receive buffer exceeds
//                 max_multi_recv_message (padded). libfabric truncates such a
//                 message, and shm 1.17 then corrupts its buffer bookkeeping.
//       PostMultiRecv refuses buffers shorter than max_multi_recv_message.
//   * Software providers progress only when the target polls (DESIGN.md,
//     fabric/): one-sided operations to an endpoint land only while its owner
//     calls Poll()/Wait().
//   * Timeouts: an initiator operation (Send/Write/Read/CompareSwap/FetchAdd)
//     outstanding for longer than EndpointOptions::op_timeout completes with
//     Timeout; the peer is then marked unreachable, its other outstanding
//     operations complete with Unavailable, and later operations to that PeerId
//     complete with Unavailable without being posted (AddPeer again to retry).
//     libfabric cannot cancel a posted RMA, so a late Read may still write its
//     destination buffer after the Timeout (as on RDMA until the QP is reset);
//     atomic results and bounce buffers are ours and are dropped.
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
  // FI_OPT_MIN_MULTI_RECV: the largest (padded) message any peer sends into a
  // multi-receive buffer of this fabric's endpoints, and the smallest buffer
  // PostMultiRecv accepts. Larger values waste more of each buffer's tail;
  // smaller ones limit the message size. A multiple of kStride.
  size_t max_multi_recv_message = 16 * 1024;
};

Result<std::unique_ptr<Fabric>> OpenOfiFabric(const FabricOptions& options,
                                              const OfiOptions& ofi);

}  // namespace slip::fabric
