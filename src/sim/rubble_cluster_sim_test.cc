// The whole-cluster RubbleDB campaign (sim/rubble_campaign.h), 200 seeds.
// One seed: SLIP_RUBBLE_CLUSTER_SEED=17 build/src/sim/rubble_cluster_sim_test
// More: SLIP_RUBBLE_CLUSTER_SEEDS=1000; node logs: SLIP_SIM_LOG=info.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "common/log.h"
#include "sim/rubble_campaign.h"

namespace slip::sim {
namespace {

TEST(RubbleClusterSim, KillsCutOffsAndRejoinsUnderTheManagerStayLinearizable) {
  uint64_t first = 1, last = 200;
  if (const char* n = std::getenv("SLIP_RUBBLE_CLUSTER_SEEDS")) last = std::strtoull(n, nullptr, 10);
  if (const char* one = std::getenv("SLIP_RUBBLE_CLUSTER_SEED")) first = last = std::strtoull(one, nullptr, 10);
  // The nodes' own log lines (one seed at a time, please): SLIP_SIM_LOG=info.
  logging::SetLevel(logging::Level::kError);
  if (const char* level = std::getenv("SLIP_SIM_LOG")) {
    if (auto l = logging::ParseLevel(level); l.ok()) logging::SetLevel(*l);
  }
  uint64_t ops = 0, unknown = 0, refused = 0, kills = 0, restarts = 0, terms = 0, seeded = 0;
  uint64_t flushed = 0, compacted = 0;  // seeds whose engines flushed, compacted
  for (uint64_t seed = first; seed <= last; ++seed) {
    const RubbleCampaignResult r = RunRubbleCampaign({.seed = seed, .base_dir = "", .design = ""});
    if (first == last) std::printf("  seed %llu: trace hash %016llx\n", static_cast<unsigned long long>(seed),
                                   static_cast<unsigned long long>(r.trace_hash));
    ASSERT_TRUE(r.ok) << "seed " << seed << ": " << r.failure
                      << "\n  replay: SLIP_RUBBLE_CLUSTER_SEED=" << seed << " build/src/sim/rubble_cluster_sim_test";
    ops += r.ops;
    unknown += r.unknown;
    refused += r.refused;
    kills += r.kills;
    restarts += r.restarts;
    terms += r.terms;
    seeded += r.seeded;
    flushed += r.flushes_ns > 0;
    compacted += r.compactions_ns > 0;
  }
  std::printf("  %llu seeds: %llu operations checked (%llu with unknown outcome), %llu refused with StaleTerm; "
              "%llu processes stopped, %llu started again, %llu replicas seeded, %llu terms in all; "
              "engines flushed on %llu seeds, compacted on %llu\n",
              static_cast<unsigned long long>(last - first + 1), static_cast<unsigned long long>(ops),
              static_cast<unsigned long long>(unknown), static_cast<unsigned long long>(refused),
              static_cast<unsigned long long>(kills), static_cast<unsigned long long>(restarts),
              static_cast<unsigned long long>(seeded), static_cast<unsigned long long>(terms),
              static_cast<unsigned long long>(flushed), static_cast<unsigned long long>(compacted));
}

}  // namespace
}  // namespace slip::sim
