// Versions and version edits (docs/formats/lsm_sst.md "Version edits"): the
// set of SST files per level is changed only by numbered edits applied
// strictly in order — a flush adds a file to level 0, a compaction deletes
// its inputs and adds its outputs in one edit. RubbleDB ships these edits
// from a chain's head to its secondaries, which apply them as they come, so
// an edit is a value that encodes, decodes and checks itself.
//
// The MANIFEST is the log of edits (the WAL's framing): recovery replays it
// up to the first record that does not check.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "lsm/file.h"

namespace slip::lsm {

constexpr int kLevels = 7;

struct FileMeta {
  uint64_t number = 0;  // names the file
  uint64_t size = 0;
  std::string smallest, largest;  // internal keys
  uint64_t smallest_sequence = 0, largest_sequence = 0;
  // RubbleDB: the slot a secondary holds the file in (0: a file of its own).
  uint32_t slot = 0;
  bool operator==(const FileMeta&) const = default;
};

struct VersionEdit {
  uint64_t id = 0;  // applied in order: id = the version's last edit + 1
  std::optional<uint64_t> log_number;        // WALs below it are obsolete
  std::optional<uint64_t> next_file_number;  // file numbers below it are taken
  std::optional<uint64_t> last_sequence;     // every write up to it is in the tables or the logs
  // RubbleDB: the MemTable this edit's flush holds (secondaries drop theirs).
  std::optional<uint64_t> flushed_memtable;
  std::vector<std::pair<int, uint64_t>> deleted;  // (level, file number)
  std::vector<std::pair<int, FileMeta>> added;    // (level, file)
  // The whole version after edit `id`, not a change to the one before: the
  // first edit of a rewritten MANIFEST, or what seeds a new replica.
  bool snapshot = false;
  bool operator==(const VersionEdit&) const = default;
};

std::string EncodeEdit(const VersionEdit& edit);
// Corruption when it does not decode whole (an unknown tag included).
Result<VersionEdit> DecodeEdit(std::string_view bytes);

class Version {
 public:
  // Applies `edit` or changes nothing: InvalidArgument unless its id is the
  // next, it deletes only files the version has, adds no file it has, and
  // leaves every level above 0 with files sorted and not overlapping. A
  // snapshot edit applies only to a version no edit was applied to.
  Status Apply(const VersionEdit& edit);

  const std::vector<FileMeta>& files(int level) const { return levels_[level]; }
  // The edit that makes an empty version this one.
  VersionEdit Snapshot() const;
  uint64_t last_edit() const { return last_edit_; }
  uint64_t log_number() const { return log_number_; }
  uint64_t next_file_number() const { return next_file_number_; }
  uint64_t last_sequence() const { return last_sequence_; }
  bool operator==(const Version&) const = default;

 private:
  std::vector<FileMeta> levels_[kLevels];
  uint64_t last_edit_ = 0, log_number_ = 0, next_file_number_ = 1, last_sequence_ = 0;
};

struct ManifestRecovery {
  Version version;
  uint64_t edits = 0;
  uint64_t end = 0;   // the MANIFEST's valid length
  bool torn = false;  // bytes past `end` that are not a whole edit
};
// Replays a MANIFEST. An edit that checks but does not apply (out of order,
// say) is Corruption: the log was not written by this engine's rules.
Result<ManifestRecovery> RecoverManifest(const RandomAccessFile& file);
// Appends `edit` to a MANIFEST and syncs it.
Status AppendEdit(WritableFile* manifest, const VersionEdit& edit);

}  // namespace slip::lsm
