#include "lsm/version.h"

#include <algorithm>
#include <set>

#include "lsm/format.h"
#include "lsm/wal.h"

namespace slip::lsm {

namespace {

// Tags: persisted, never renumbered.
enum Tag : uint32_t {
  kId = 1,
  kLogNumber = 2,
  kNextFile = 3,
  kLastSequence = 4,
  kFlushedMemTable = 5,
  kDeleted = 6,
  kAdded = 7,
  kSnapshot = 8,
};

void PutString(std::string* out, std::string_view s) {
  PutVarint32(out, static_cast<uint32_t>(s.size()));
  out->append(s);
}

std::optional<std::string> GetString(std::string_view* in) {
  std::string_view probe = *in;
  auto n = GetVarint32(&probe);
  if (!n || *n > probe.size()) return std::nullopt;
  std::string s(probe.substr(0, *n));
  probe.remove_prefix(*n);
  *in = probe;
  return s;
}

}  // namespace

std::string EncodeEdit(const VersionEdit& e) {
  std::string out;
  PutVarint32(&out, kId);
  PutVarint64(&out, e.id);
  auto opt = [&](Tag t, const std::optional<uint64_t>& v) {
    if (!v) return;
    PutVarint32(&out, t);
    PutVarint64(&out, *v);
  };
  opt(kLogNumber, e.log_number);
  opt(kNextFile, e.next_file_number);
  opt(kLastSequence, e.last_sequence);
  opt(kFlushedMemTable, e.flushed_memtable);
  if (e.snapshot) opt(kSnapshot, 1);
  for (const auto& [level, number] : e.deleted) {
    PutVarint32(&out, kDeleted);
    PutVarint32(&out, static_cast<uint32_t>(level));
    PutVarint64(&out, number);
  }
  for (const auto& [level, f] : e.added) {
    PutVarint32(&out, kAdded);
    PutVarint32(&out, static_cast<uint32_t>(level));
    PutVarint64(&out, f.number);
    PutVarint64(&out, f.size);
    PutString(&out, f.smallest);
    PutString(&out, f.largest);
    PutVarint64(&out, f.smallest_sequence);
    PutVarint64(&out, f.largest_sequence);
    PutVarint32(&out, f.slot);
  }
  return out;
}

Result<VersionEdit> DecodeEdit(std::string_view in) {
  VersionEdit e;
  bool has_id = false;
  auto bad = [](const std::string& what) { return Status::Corruption("a version edit's " + what + " does not decode"); };
  auto level_of = [](std::optional<uint32_t> l) { return l && *l < kLevels; };
  while (!in.empty()) {
    auto tag = GetVarint32(&in);
    if (!tag) return bad("tag");
    switch (*tag) {
      case kId:
      case kLogNumber:
      case kNextFile:
      case kLastSequence:
      case kFlushedMemTable:
      case kSnapshot: {
        auto v = GetVarint64(&in);
        if (!v) return bad("number");
        if (*tag == kId) {
          e.id = *v;
          has_id = true;
        } else if (*tag == kLogNumber) {
          e.log_number = *v;
        } else if (*tag == kNextFile) {
          e.next_file_number = *v;
        } else if (*tag == kLastSequence) {
          e.last_sequence = *v;
        } else if (*tag == kSnapshot) {
          if (*v != 1) return bad("snapshot mark");
          e.snapshot = true;
        } else {
          e.flushed_memtable = *v;
        }
        break;
      }
      case kDeleted: {
        auto level = GetVarint32(&in);
        auto number = level_of(level) ? GetVarint64(&in) : std::nullopt;
        if (!number) return bad("deleted file");
        e.deleted.emplace_back(static_cast<int>(*level), *number);
        break;
      }
      case kAdded: {
        auto level = GetVarint32(&in);
        if (!level_of(level)) return bad("added file's level");
        FileMeta f;
        auto number = GetVarint64(&in), size = number ? GetVarint64(&in) : std::nullopt;
        auto smallest = size ? GetString(&in) : std::nullopt, largest = smallest ? GetString(&in) : std::nullopt;
        auto lo = largest ? GetVarint64(&in) : std::nullopt, hi = lo ? GetVarint64(&in) : std::nullopt;
        auto slot = hi ? GetVarint32(&in) : std::nullopt;
        if (!slot) return bad("added file");
        f.number = *number;
        f.size = *size;
        f.smallest = std::move(*smallest);
        f.largest = std::move(*largest);
        f.smallest_sequence = *lo;
        f.largest_sequence = *hi;
        f.slot = *slot;
        if (f.smallest.size() < 8 || f.largest.size() < 8 || CompareInternalKeys(f.smallest, f.largest) > 0) {
          return bad("added file's key range");
        }
        e.added.emplace_back(static_cast<int>(*level), std::move(f));
        break;
      }
      default:
        return Status::Corruption("a version edit with unknown tag " + std::to_string(*tag));
    }
  }
  if (!has_id) return bad("id");
  return e;
}

VersionEdit Version::Snapshot() const {
  VersionEdit e;
  e.id = last_edit_;
  e.snapshot = true;
  e.log_number = log_number_;
  e.next_file_number = next_file_number_;
  e.last_sequence = last_sequence_;
  for (int level = 0; level < kLevels; ++level) {
    for (const FileMeta& f : levels_[level]) e.added.emplace_back(level, f);
  }
  return e;
}

Status Version::Apply(const VersionEdit& e) {
  if (e.snapshot) {
    if (last_edit_ != 0 || e.id == 0 || !e.deleted.empty()) {
      return Status::InvalidArgument("snapshot edit " + std::to_string(e.id) + " onto a version with edits, or deleting");
    }
    Version empty;
    empty.last_edit_ = e.id - 1;
    VersionEdit as_change = e;
    as_change.snapshot = false;
    SLIP_RETURN_IF_ERROR(empty.Apply(as_change));
    *this = std::move(empty);
    return Status::Ok();
  }
  if (e.id != last_edit_ + 1) {
    return Status::InvalidArgument("edit " + std::to_string(e.id) + " after edit " + std::to_string(last_edit_));
  }
  Version next = *this;
  for (const auto& [level, number] : e.deleted) {
    auto& files = next.levels_[level];
    auto it = std::find_if(files.begin(), files.end(), [n = number](const FileMeta& f) { return f.number == n; });
    if (it == files.end()) {
      return Status::InvalidArgument("edit " + std::to_string(e.id) + " deletes file " + std::to_string(number) +
                                     ", not at level " + std::to_string(level));
    }
    files.erase(it);
  }
  for (const auto& [level, f] : e.added) {
    for (const auto& files : next.levels_) {
      for (const FileMeta& g : files) {
        if (g.number == f.number) {
          return Status::InvalidArgument("edit " + std::to_string(e.id) + " adds file " + std::to_string(f.number) +
                                         " twice");
        }
      }
    }
    next.levels_[level].push_back(f);
    next.next_file_number_ = std::max(next.next_file_number_, f.number + 1);
  }
  // Level 0 in the order files were added (newest last); the others by key,
  // with no two files overlapping.
  for (int level = 1; level < kLevels; ++level) {
    auto& files = next.levels_[level];
    std::sort(files.begin(), files.end(),
              [](const FileMeta& a, const FileMeta& b) { return CompareInternalKeys(a.smallest, b.smallest) < 0; });
    for (size_t i = 1; i < files.size(); ++i) {
      if (CompareInternalKeys(files[i - 1].largest, files[i].smallest) >= 0) {
        return Status::InvalidArgument("edit " + std::to_string(e.id) + " leaves level " + std::to_string(level) +
                                       " with files " + std::to_string(files[i - 1].number) + " and " +
                                       std::to_string(files[i].number) + " overlapping");
      }
    }
  }
  if (e.log_number) next.log_number_ = std::max(next.log_number_, *e.log_number);
  if (e.next_file_number) next.next_file_number_ = std::max(next.next_file_number_, *e.next_file_number);
  if (e.last_sequence) next.last_sequence_ = std::max(next.last_sequence_, *e.last_sequence);
  next.last_edit_ = e.id;
  *this = std::move(next);
  return Status::Ok();
}

Result<ManifestRecovery> RecoverManifest(const RandomAccessFile& file) {
  ManifestRecovery r;
  Status broken;
  auto read = ReadRecords(file, [&](std::string_view payload) -> Status {
    SLIP_ASSIGN_OR_RETURN(VersionEdit e, DecodeEdit(payload));
    if (Status s = r.version.Apply(e); !s.ok()) {
      broken = Status::Corruption("the MANIFEST's edit " + std::to_string(e.id) + " does not apply: " + s.message());
      return Status::Aborted("stop");
    }
    return Status::Ok();
  });
  if (!broken.ok()) return broken;
  if (!read.ok()) return read.status();
  r.edits = read->records;
  r.end = read->end;
  r.torn = read->torn;
  return r;
}

Status AppendEdit(WritableFile* manifest, const VersionEdit& edit) { return AppendRecord(manifest, EncodeEdit(edit)); }

}  // namespace slip::lsm
