// The erda design's registry entry (replication/registry.h).
#pragma once

#include "replication/registry.h"

namespace slip::replication {

const Design& ErdaDesign();

}  // namespace slip::replication
