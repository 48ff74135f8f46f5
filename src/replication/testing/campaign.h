// A seeded fault campaign for one replication design, on ReplicationWorld:
// a primary replicates a write load to two backups over a jittery simulated
// fabric while backups lose power (PM crash model) and restart, one backup
// is slow, and finally the primary loses power too. Then every acknowledged
// write must be on every replica (docs/papers/rowan.md I1, docs/papers/tailwind.md §6).
//
// This is the designs' share of the simulation campaign (issue 7) at the
// replication layer: the whole-cluster simulation (sim/cluster_sim) runs
// rpc-kv with failover and a linearizability checker; the one-sided designs
// join it here until that harness runs over the simulated fabric.
//
// The same seed always gives the same run (and trace).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replication/design.h"

namespace slip::replication::testing {

struct CampaignOptions {
  Protocol protocol = Protocol::kRowan;
  uint64_t seed = 1;
  int writes = 600;
  int backup_crashes = 3;
  bool bug_ack_early = false;  // the injected bug the campaign must catch
  // The file durability class (WorldOptions::file_class), and its injected
  // bug: backups that answer REPL_PERSIST without persisting.
  bool file_class = false;
  bool bug_skip_persist = false;
  bool trace = false;
  // Upper bound of the seeded placement-to-persistence delay, ns (each seed
  // draws one in [0, max]): a one-sided Write is placed, and acknowledged to
  // its initiator, before it is persistent, as a DMA through a PCIe root
  // complex is. 0 persists on placement.
  uint64_t max_persist_delay = 3000;
};

struct SeedResult {
  uint64_t acked = 0, failed = 0;  // writes
  uint64_t faults = 0;             // power losses injected
  std::string violation;           // empty: every invariant held
  std::vector<std::string> trace;  // with CampaignOptions::trace
};

SeedResult RunReplicationSeed(const CampaignOptions& options);

}  // namespace slip::replication::testing
