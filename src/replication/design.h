// Designs are configurations (DESIGN.md): `--design` names how a primary
// replicates. The deployment (sharded primary-backup, RPC clients, PM logs
// plus a DRAM index) is the same for all of these; only the replication
// protocol differs. `Protocol` names a design in options structs; what a
// design *is* lives in its folder, found through replication/registry.h.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace slip::replication {

enum class Protocol : uint8_t {
  kRpc,       // rpc-kv: a backup worker appends each entry and replies
  kRowan,     // rowan-kv: Send into the backup's one shared multi-receive log
  kRWrite,    // rwrite-kv: one-sided Write into a private remote log per sender
  kBatch,     // batch-kv: rwrite plus sender batching (256 B or 5 us)
  kShare,     // share-kv: one remote log per (sender node, backup), tail reserved locally
  kTailwind,  // tailwind: private buffer per primary, running checksum, backups idle
  kErda,      // erda: clients read and write primaries one-sidedly; rowan's replication
  kErdaRaw,   // erda-raw: clients write one-sidedly (read after write), the node copies
  kErdaRedo,  // erda-redo: two-sided; the node stages a redo record, then copies
};

// "rpc-kv", "rowan-kv", "rwrite-kv", "batch-kv", "share-kv", "tailwind",
// "erda", "erda-raw", "erda-redo".
const char* DesignName(Protocol p);
// InvalidArgument naming the known designs for anything else.
Result<Protocol> ParseDesign(std::string_view name);
const std::vector<Protocol>& AllProtocols();
// Whether replication writes one-sidedly (no backup worker on the data path).
bool IsOneSided(Protocol p);

}  // namespace slip::replication
