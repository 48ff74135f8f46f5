// A seeded campaign of a whole RubbleDB cluster on virtual time: three
// nodes (server::RubbleServer, as `slip server` runs it for the chain
// designs, its engines without threads on the simulator's executors — see
// RubbleServerEnv::jobs), the real configuration manager (cluster::Manager)
// on an in-memory store, node leases, and clients that write at each
// shard's head, read at its tail, and refresh their map when refused.
// Engines are shaped tiny, so every few writes flush and compact and their
// tables ship into the followers' slot images (real files, under /dev/shm
// when there is one).
//
// Mid-run one node dies — a head, a middle or a tail, whatever it is of
// each shard — or, on every third seed, is cut off (no lease renewals, no
// new configurations) while it goes on serving whoever reaches it, until
// it stops as the process does once its lease is gone. The manager
// replaces it; later the node comes back (empty when it was replaced, as
// `slip server` does) and is seeded again. On odd seeds a killed node
// (not a cut-off one) comes back at once instead, within its lease: nobody
// declared it failed, so it returns with its data (cluster::Resync) while
// the followers of the shards it heads still run seeds of its last life
// and the heads it follows still count it seeded. On every other seed a
// second node dies once the first is back (on every fourth it too comes
// back at once), so a re-seeded replica must be whole.
// A node the manager declared failed while it lived also stops and comes
// back. On every fourth seed the whole cluster also stops at once and
// starts again (heads recover from their WALs, followers are seeded again).
// The design is rubble-all-compact on every third seed; on every
// fifth the followers' images have so few slots that heads wait for free
// ones now and then.
//
// Every client operation goes into a history checked for linearizability
// (sim/linearizability.h); at the end, with every replica synced, every key
// is read once more at its tail. Calls between nodes are delayed by a
// seeded jitter, so chain items arrive out of order too.
//
// Run by rubble_cluster_sim_test (200 seeds) and `slip sim --design rubble`
// (or rubble-all-compact) --seeds A..B | --seed N.
#pragma once

#include <cstdint>
#include <string>

namespace slip::sim {

struct RubbleCampaignOptions {
  uint64_t seed = 1;
  // Where the nodes' files go (a directory of its own is made under it and
  // removed afterwards); empty: /dev/shm when there is one (fastest), else
  // the temporary directory.
  std::string base_dir;
  // "rubble" or "rubble-all-compact"; empty: the seed chooses (all-compact
  // on every third).
  std::string design;
};

struct RubbleCampaignResult {
  bool ok = false;
  std::string failure;
  uint64_t ops = 0, unknown = 0, refused = 0;
  uint64_t kills = 0, restarts = 0, seeded = 0, terms = 0;
  uint64_t flushes_ns = 0, compactions_ns = 0;  // the engines' jobs ran (CPU > 0)
  uint64_t trace_hash = 0;  // of every event run: equal for equal seeds
};

RubbleCampaignResult RunRubbleCampaign(const RubbleCampaignOptions& options);

}  // namespace slip::sim
