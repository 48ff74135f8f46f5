#include "replication/testing/campaign.h"

#include "replication/registry.h"
#include "replication/testing/model.h"

namespace slip::replication::testing {

SeedResult RunReplicationSeed(const CampaignOptions& o) {
  SeedResult r;
  Random rng(o.seed * 0x9e3779b97f4a7c15ull + 1);
  WorldOptions wo;
  wo.protocol = o.protocol;
  wo.seed = o.seed;
  wo.segment_size = 64 << 10;
  wo.pm_bytes = 12 << 20;
  wo.bug_ack_early = o.bug_ack_early;
  wo.file_class = o.file_class || o.bug_skip_persist;
  wo.bug_skip_persist = o.bug_skip_persist;
  // The shared-log designs take several workers' writes into one remote log.
  if (DesignOf(o.protocol).senders_share_a_log) wo.senders = 2;
  // PM persistence trails placement, as DMA completion does.
  const uint64_t delay_draw = rng.Uniform(3001);
  wo.fabric.dma_persist_delay = static_cast<runtime::Nanos>(delay_draw * o.max_persist_delay / 3000);
  ReplicationWorld w(wo);
  fabric::LinkFaults jitter;
  jitter.jitter = static_cast<runtime::Nanos>(rng.Uniform(4000));
  w.fabric().SetDefaultFaults(jitter);
  auto note = [&](std::string line) {
    if (o.trace) r.trace.push_back("t=" + std::to_string(w.rt().Now() / 1000) + "us " + std::move(line));
  };

  const int slow = 1 + static_cast<int>(rng.Uniform(2));
  const auto slow_by = static_cast<runtime::Nanos>(rng.Uniform(40)) * runtime::kMicrosecond;
  w.SlowNode(slow, slow_by);
  note("backup " + std::to_string(slow) + " slow by " + std::to_string(slow_by / 1000) + "us; jitter " +
       std::to_string(jitter.jitter) + "ns; persist delay " +
       std::to_string(wo.fabric.dma_persist_delay) + "ns");

  Workload load(w, 0, {1, 2}, o.seed);
  load.Start(o.writes, 8);
  for (int i = 0; i < o.backup_crashes; ++i) {
    const auto wait = static_cast<runtime::Nanos>(100 + rng.Uniform(1500)) * runtime::kMicrosecond;
    if (w.RunUntil([&] { return load.done(); }, wait)) break;
    const int victim = 1 + static_cast<int>(rng.Uniform(2));
    note("power loss at backup " + std::to_string(victim) + " (acked so far " + std::to_string(load.acked) + ")");
    w.CrashAndRestart(victim, o.seed * 131 + static_cast<uint64_t>(i));
    ++r.faults;
  }
  if (!w.RunUntil([&] { return load.done(); }, 60 * runtime::kSecond)) {
    r.violation = "the load did not finish in 60 s of virtual time (acked " + std::to_string(load.acked) + ")";
  }
  r.acked = static_cast<uint64_t>(load.acked);
  r.failed = static_cast<uint64_t>(load.failed);
  note("load done: " + std::to_string(load.acked) + " acked, " + std::to_string(load.failed) + " failed");

  // The primary loses power last; its own log must hold what it acked, too.
  load.stopped = true;
  w.CrashAndRestart(0, o.seed * 7 + 3);
  ++r.faults;
  note("power loss at primary 0");
  w.RunUntil([] { return false; }, 5 * runtime::kMillisecond);

  for (int n : {1, 2, 0}) {
    if (!r.violation.empty()) break;
    Status s = w.Settle(n);
    if (!s.ok()) {
      r.violation = "node " + std::to_string(n) + " could not catch up: " + s.ToString();
      break;
    }
    std::string bad = Model::Check(*w.node(n).store, load.model.acked);
    if (!bad.empty()) r.violation = "acknowledged write lost at node " + std::to_string(n) + ": " + bad;
  }
  if (!r.violation.empty()) note("VIOLATION: " + r.violation);
  return r;
}

}  // namespace slip::replication::testing
