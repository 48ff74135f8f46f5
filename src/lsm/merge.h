// Compaction's core (issue "RubbleDB"; docs/formats/lsm_sst.md "Compaction"):
// a k-way merge of sorted sources — MemTables and SSTs — into one stream in
// internal-key order that keeps, of each user key, only what some reader
// can still see.
//
// For each user key the merge meets its versions newest first. A version is
// dropped when a newer one of the key is visible to every reader (its
// sequence at or below `oldest_snapshot`): no reader can see past it. A
// tombstone visible to every reader is dropped too when the output is the
// bottommost level (nothing older of the key remains below to hide).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "lsm/format.h"
#include "lsm/memtable.h"
#include "lsm/table.h"

namespace slip::lsm {

// A sorted stream of (internal key, value).
class EntrySource {
 public:
  virtual ~EntrySource() = default;
  virtual bool Valid() const = 0;
  virtual std::string_view key() const = 0;
  virtual std::string_view value() const = 0;
  virtual void Next() = 0;
  // Not OK once the source hit damage (then !Valid()).
  virtual Status status() const = 0;
};

// A MemTable's entries (it must outlive the source and not change).
std::unique_ptr<EntrySource> MemTableSource(const MemTable& mem);
// A table's entries, block by block (the table must outlive the source).
std::unique_ptr<EntrySource> TableSource(const Table& table);

struct CompactionOptions {
  uint64_t oldest_snapshot = kMaxSequence;  // the oldest sequence a reader may still read at
  bool bottommost = false;                  // nothing of these keys lies below the output
};

struct CompactionStats {
  uint64_t input = 0, output = 0;
  uint64_t shadowed = 0;    // versions dropped under a newer one every reader sees
  uint64_t tombstones = 0;  // tombstones dropped at the bottommost level
};

// Merges `sources` (each in internal-key order; for one user key a newer
// version in an earlier source and an older in a later one is fine) into
// `out`, in internal-key order. Stops with the first source's damage or
// `out`'s error.
Result<CompactionStats> Compact(const std::vector<EntrySource*>& sources, const CompactionOptions& options,
                                const std::function<Status(std::string_view key, std::string_view value)>& out);

}  // namespace slip::lsm
