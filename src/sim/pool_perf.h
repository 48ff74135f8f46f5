// Performance runs of DINOMO's pool designs on the cost model (docs/model.md,
// "dinomo-fig5"): what sim/perf.cc is for NodeCore clusters, for KVS nodes
// over a disaggregated pool. The real node code (dinomo::KvsNode, or
// dinomo::CloverNode for Clover) against the real pool (dinomo::Pool and its
// server side) on the simulated fabric, with every executor on a machine of
// its own and charged the named costs of its steps:
//
//   clients    a machine per client_hosts; each client an executor keeping
//              threads_per_client operations in flight; a request and its
//              answer are messages (transport + RPC layer at both ends).
//   KVS nodes  a machine of node_cores per node, `workers` threads each. A
//              thread is a node of its own to the pool (its log, its cache
//              of cache_share of the data over the node's threads): DINOMO
//              is built on Anna, whose threads share nothing, and owns keys
//              by a global ring (key -> node) and a local one (-> thread).
//              Clover: any thread of any node serves any key.
//   the pool   a machine of pool_cores threads: the nodes' calls (segments
//              allocated and sealed, Clover's inserts), each seal merging
//              the segment into the index (Cost::kMerge per entry). The
//              nodes' one-sided operations cost its CPU nothing (an RDMA
//              NIC); its NIC serialises what it sends (READ answers).
//
// Not modelled: the paper's routing node (clients hold the map), Clover's
// metadata server as a machine of its own (its inserts go to the pool's
// threads, its chain-advancing GC pass runs free every 500 us).
#pragma once

#include <string_view>

#include "sim/cluster_sim.h"

namespace slip::sim {

// Whether RunPoolPerf runs `design`: dinomo, dinomo-s (shortcut-only
// caches) and clover.
bool IsPoolPerfDesign(std::string_view design);

// One run: load options.perf->workload.records records, warm up, measure.
// ok = false with the reason for what it cannot run (scans or
// read-modify-writes, synchronous clients, another design) or a load that
// did not finish.
ClusterSimResult RunPoolPerf(const ClusterSimOptions& options);

}  // namespace slip::sim
