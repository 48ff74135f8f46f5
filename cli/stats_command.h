// `slip stats --dir DIR`: a live terminal table of the whole cluster — per
// node and in total: operations/s, latency quantiles at the primaries, CPU,
// term, lease, writes in flight — from every node's STATS, refreshed every
// interval (docs/metrics.md).
#pragma once

#include <cstdint>
#include <string>

namespace slip::cli {

struct StatsOptions {
  std::string dir;
  std::string zookeeper;
  std::string secret_file;
  double interval_s = 1.0;
  uint32_t count = 0;   // tables to print (0: until interrupted)
  bool plain = false;   // no screen clearing between tables (logs, pipes)
};

int RunStats(const StatsOptions& o);

}  // namespace slip::cli
