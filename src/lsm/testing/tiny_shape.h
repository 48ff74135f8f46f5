// An engine shape for tests: MemTables and tables of a few KB, so a few
// thousand writes flush and compact through several levels; jobs run in the
// writer (deterministic).
#pragma once

#include <cstddef>

#include "lsm/db.h"

namespace slip::lsm::testing {

inline DbOptions TinyShape(FileSystem* fs, size_t table_kb = 4) {
  DbOptions o;
  o.fs = fs;
  o.background = false;
  o.memtable_bytes = table_kb << 10;
  o.target_file_bytes = table_kb << 10;
  o.level1_bytes = 4 * (table_kb << 10);
  o.l0_compaction_trigger = 2;
  o.l0_slowdown = 6;
  o.l0_stop = 8;
  o.levels = 4;
  o.table.block_bytes = 512;
  o.block_cache_bytes = 8 * (table_kb << 10);
  return o;
}

}  // namespace slip::lsm::testing
