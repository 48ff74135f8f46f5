// The rowan design's registry entry (replication/registry.h).
#pragma once

#include "replication/registry.h"

namespace slip::replication {

const Design& RowanDesign();

}  // namespace slip::replication
