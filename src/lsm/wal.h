// The write-ahead log (docs/formats/lsm_sst.md "WAL"): each record a batch
// of writes with its first sequence number, framed by its length and a
// CRC32C. A writer appends a record and syncs before the batch is
// acknowledged; a crash can tear only the record being written, so replay
// applies records up to the first one that does not check and reports where
// that was — what follows it was never acknowledged.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "lsm/file.h"
#include "lsm/format.h"

namespace slip::lsm {

struct WriteBatch {
  struct Op {
    ValueType type = ValueType::kValue;
    std::string key, value;
  };
  uint64_t sequence = 0;  // the first op's; op i has sequence + i
  std::vector<Op> ops;
};

std::string EncodeBatch(const WriteBatch& batch);
// Corruption when it does not decode whole.
Result<WriteBatch> DecodeBatch(std::string_view bytes);

// The log framing the WAL and the MANIFEST share: a record is `fixed32
// crc · fixed32 length · payload`. AppendRecord appends one and, unless
// told not to (a group of records sharing one sync), syncs it.
Status AppendRecord(WritableFile* file, std::string_view payload, bool sync = true);
struct RecordsRead {
  uint64_t records = 0;
  uint64_t end = 0;   // bytes of whole records: the log's valid length
  bool torn = false;  // bytes past `end` that are not a whole record
};
// Calls `fn` for each whole record in order, stopping at the first cut
// short or failing its CRC, or at the first error `fn` returns (then that
// error, unless it is Corruption of the payload: then the log ends there).
Result<RecordsRead> ReadRecords(const RandomAccessFile& file, const std::function<Status(std::string_view)>& fn);

class WalWriter {
 public:
  explicit WalWriter(WritableFile* file) : file_(file) {}
  // Appends the batch's record and syncs it.
  Status Add(const WriteBatch& batch);

 private:
  WritableFile* const file_;
};

struct WalReplay {
  uint64_t batches = 0;
  uint64_t end = 0;      // bytes of whole records: the log's valid length
  bool torn = false;     // bytes past `end` that are not a whole record
  uint64_t last_sequence = 0;  // of the last op replayed (0: none)
};
// Calls `apply` for each whole record in order, stopping at the first that
// does not check.
Result<WalReplay> ReplayWal(const RandomAccessFile& file, const std::function<Status(const WriteBatch&)>& apply);

}  // namespace slip::lsm
