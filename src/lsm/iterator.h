// Iterators over internal keys (lsm/format.h) that can seek: what a scan
// merges — the MemTables, level 0's tables one by one, and each deeper
// level as one run of tables that do not overlap. Each holds what it reads
// (shared pointers), so a scan outlives a flush or a compaction that
// replaces its sources.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lsm/memtable.h"
#include "lsm/merge.h"
#include "lsm/table.h"

namespace slip::lsm {

class InternalIterator : public EntrySource {
 public:
  // At the first entry at or after `internal_key` in internal-key order.
  virtual void Seek(std::string_view internal_key) = 0;
  virtual void SeekToFirst() = 0;
};

std::unique_ptr<InternalIterator> NewMemTableIterator(std::shared_ptr<const MemTable> mem);
std::unique_ptr<InternalIterator> NewTableIterator(std::shared_ptr<const Table> table);
// Tables whose key ranges do not overlap, in order; `largest[i]` is table
// i's largest internal key.
std::unique_ptr<InternalIterator> NewConcatenatingIterator(std::vector<std::shared_ptr<const Table>> tables,
                                                           std::vector<std::string> largest);
// Every child's entries in internal-key order; of equal keys, the earlier
// child's first.
std::unique_ptr<InternalIterator> NewMergingIterator(std::vector<std::unique_ptr<InternalIterator>> children);

}  // namespace slip::lsm
