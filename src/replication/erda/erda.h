// The erda design's registry entry (replication/registry.h).
#pragma once

#include "replication/registry.h"

namespace slip::replication {

const Design& ErdaDesign();
const Design& ErdaRawDesign();
const Design& ErdaRedoDesign();

}  // namespace slip::replication
