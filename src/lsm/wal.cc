#include "lsm/wal.h"

#include "common/crc32c.h"

namespace slip::lsm {

namespace {
// Record: fixed32 crc (of the length and the payload) | fixed32 length | payload.
constexpr size_t kRecordHeader = 8;
constexpr uint32_t kMaxRecord = 256u << 20;
}  // namespace

std::string EncodeBatch(const WriteBatch& batch) {
  std::string out;
  PutFixed64(&out, batch.sequence);
  PutVarint32(&out, static_cast<uint32_t>(batch.ops.size()));
  for (const WriteBatch::Op& op : batch.ops) {
    out.push_back(static_cast<char>(op.type));
    PutVarint32(&out, static_cast<uint32_t>(op.key.size()));
    out.append(op.key);
    PutVarint32(&out, static_cast<uint32_t>(op.value.size()));
    out.append(op.value);
  }
  return out;
}

Result<WriteBatch> DecodeBatch(std::string_view in) {
  if (in.size() < 8) return Status::Corruption("a write batch shorter than its sequence");
  WriteBatch b;
  b.sequence = DecodeFixed64(in.data());
  in.remove_prefix(8);
  auto n = GetVarint32(&in);
  if (!n || *n > in.size()) return Status::Corruption("a write batch's count does not decode");
  for (uint32_t i = 0; i < *n; ++i) {
    if (in.empty() || static_cast<uint8_t>(in[0]) > static_cast<uint8_t>(ValueType::kValue)) {
      return Status::Corruption("a write batch op of an unknown type");
    }
    WriteBatch::Op op;
    op.type = static_cast<ValueType>(in[0]);
    in.remove_prefix(1);
    auto klen = GetVarint32(&in);
    if (!klen || *klen > in.size()) return Status::Corruption("a write batch key does not decode");
    op.key.assign(in.substr(0, *klen));
    in.remove_prefix(*klen);
    auto vlen = GetVarint32(&in);
    if (!vlen || *vlen > in.size()) return Status::Corruption("a write batch value does not decode");
    op.value.assign(in.substr(0, *vlen));
    in.remove_prefix(*vlen);
    b.ops.push_back(std::move(op));
  }
  if (!in.empty()) return Status::Corruption("bytes after a write batch's last op");
  if (b.ops.size() > kMaxSequence - b.sequence) return Status::Corruption("a write batch past the last sequence");
  return b;
}

Status AppendRecord(WritableFile* file, std::string_view payload, bool sync) {
  if (payload.size() > kMaxRecord) return Status::TooLarge("a log record of " + std::to_string(payload.size()) + " bytes");
  std::string len;
  PutFixed32(&len, static_cast<uint32_t>(payload.size()));
  uint32_t crc = Crc32c(0, len.data(), len.size());
  crc = Crc32c(crc, payload.data(), payload.size());
  std::string record;
  PutFixed32(&record, crc);
  record += len;
  record += payload;
  SLIP_RETURN_IF_ERROR(file->Append(record));
  return sync ? file->Sync() : Status::Ok();
}

Result<RecordsRead> ReadRecords(const RandomAccessFile& file, const std::function<Status(std::string_view)>& fn) {
  RecordsRead r;
  const uint64_t size = file.size();
  while (r.end < size) {
    std::string scratch, body_scratch;
    if (size - r.end < kRecordHeader) {
      r.torn = true;
      break;
    }
    SLIP_ASSIGN_OR_RETURN(std::string_view h, file.Read(r.end, kRecordHeader, &scratch));
    const std::string header(h);
    const uint32_t crc = DecodeFixed32(header.data()), len = DecodeFixed32(header.data() + 4);
    if (len > kMaxRecord || len > size - r.end - kRecordHeader) {
      r.torn = true;
      break;
    }
    SLIP_ASSIGN_OR_RETURN(std::string_view body, file.Read(r.end + kRecordHeader, len, &body_scratch));
    uint32_t want = Crc32c(0, header.data() + 4, 4);
    want = Crc32c(want, body.data(), body.size());
    if (want != crc) {
      r.torn = true;
      break;
    }
    if (Status s = fn(body); !s.ok()) {
      // A record that checks but does not decode was written by something
      // else: the log ends there, as at a tear.
      if (!s.Is(Code::kCorruption)) return s;
      r.torn = true;
      break;
    }
    ++r.records;
    r.end += kRecordHeader + len;
  }
  return r;
}

Status WalWriter::Add(const WriteBatch& batch) { return AppendRecord(file_, EncodeBatch(batch)); }

Result<WalReplay> ReplayWal(const RandomAccessFile& file, const std::function<Status(const WriteBatch&)>& apply) {
  WalReplay r;
  SLIP_ASSIGN_OR_RETURN(RecordsRead read, ReadRecords(file, [&](std::string_view payload) -> Status {
                          SLIP_ASSIGN_OR_RETURN(WriteBatch batch, DecodeBatch(payload));
                          Status s = apply(batch);
                          // The apply's own Corruption must not read as a torn log.
                          if (s.Is(Code::kCorruption)) return Status::Aborted("applying a batch: " + s.message());
                          if (s.ok() && !batch.ops.empty()) r.last_sequence = batch.sequence + batch.ops.size() - 1;
                          return s;
                        }));
  r.batches = read.records;
  r.end = read.end;
  r.torn = read.torn;
  return r;
}

}  // namespace slip::lsm
