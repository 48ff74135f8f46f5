// `slip soak`: a real cluster of processes under a write-heavy load while
// processes are SIGKILLed and restarted, then every acknowledged write and
// the whole history are checked (docs/security.md "Kill soak").
#pragma once

#include <cstdint>
#include <string>

namespace slip::cli {

struct SoakOptions {
  std::string dir;                 // a new (or empty) directory: the soak starts its own cluster
  std::string design = "rowan-kv";
  uint32_t kills = 10;             // processes killed in all
  uint32_t nodes = 3, shards = 12, replication = 3;
  std::string provider = "tcp";
  std::string pm;                  // durability class (slip cluster up --pm); empty: its default
  uint32_t threads = 4;            // client threads, each writing keys of its own
  uint32_t keys = 120;
  uint32_t value_size = 100;
  uint32_t interval_ms = 1000;     // load between a recovery and the next kill
  uint32_t down_ms = 1000;         // a killed process stays down 0.2x..2x this
  uint32_t lease_ms = 1000;
  uint64_t seed = 1;
  bool keep = false;               // leave the cluster directory (logs) behind
  std::string report;              // also write the summary (markdown) here
};

// 0 when nothing acknowledged was lost and the history is linearizable.
int RunSoak(const SoakOptions& o);

}  // namespace slip::cli
