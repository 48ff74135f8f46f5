// The tailwind design's registry entry (replication/registry.h).
#pragma once

#include "replication/registry.h"

namespace slip::replication {

const Design& TailwindDesign();

}  // namespace slip::replication
