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

Status WalWriter::Add(const WriteBatch& batch) {
  const std::string payload = EncodeBatch(batch);
  if (payload.size() > kMaxRecord) return Status::TooLarge("a write batch of " + std::to_string(payload.size()) + " bytes");
  std::string len;
  PutFixed32(&len, static_cast<uint32_t>(payload.size()));
  uint32_t crc = Crc32c(0, len.data(), len.size());
  crc = Crc32c(crc, payload.data(), payload.size());
  std::string record;
  PutFixed32(&record, crc);
  record += len;
  record += payload;
  SLIP_RETURN_IF_ERROR(file_->Append(record));
  return file_->Sync();
}

Result<WalReplay> ReplayWal(const RandomAccessFile& file, const std::function<Status(const WriteBatch&)>& apply) {
  WalReplay r;
  std::string scratch;
  const uint64_t size = file.size();
  while (r.end < size) {
    if (size - r.end < kRecordHeader) {
      r.torn = true;
      break;
    }
    SLIP_ASSIGN_OR_RETURN(std::string_view header, file.Read(r.end, kRecordHeader, &scratch));
    const uint32_t crc = DecodeFixed32(header.data()), len = DecodeFixed32(header.data() + 4);
    if (len > kMaxRecord || len > size - r.end - kRecordHeader) {
      r.torn = true;
      break;
    }
    std::string header_copy(header);
    std::string body_scratch;
    SLIP_ASSIGN_OR_RETURN(std::string_view body, file.Read(r.end + kRecordHeader, len, &body_scratch));
    uint32_t want = Crc32c(0, header_copy.data() + 4, 4);
    want = Crc32c(want, body.data(), body.size());
    if (want != crc) {
      r.torn = true;
      break;
    }
    auto batch = DecodeBatch(body);
    if (!batch.ok()) {
      r.torn = true;  // a record that checks but does not decode: written by something else
      break;
    }
    SLIP_RETURN_IF_ERROR(apply(*batch));
    ++r.batches;
    if (!batch->ops.empty()) r.last_sequence = batch->sequence + batch->ops.size() - 1;
    r.end += kRecordHeader + len;
  }
  return r;
}

}  // namespace slip::lsm
