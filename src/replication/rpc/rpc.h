// The rpc-kv design's registry entry (replication/registry.h).
#pragma once

#include "replication/registry.h"

namespace slip::replication {

const Design& RpcDesign();

}  // namespace slip::replication
