#include "rubble/wire.h"

#include "lsm/format.h"

namespace slip::rubble {
namespace {

using lsm::GetVarint32;
using lsm::GetVarint64;
using lsm::PutVarint32;
using lsm::PutVarint64;

// Reads varints and length-prefixed strings; a failure is sticky, so a
// decoder checks once at the end.
class In {
 public:
  explicit In(std::string_view s) : s_(s) {}
  uint64_t U64() {
    auto v = ok_ ? GetVarint64(&s_) : std::nullopt;
    ok_ = ok_ && v.has_value();
    return v.value_or(0);
  }
  uint32_t U32() {
    const uint64_t v = U64();
    ok_ = ok_ && v <= UINT32_MAX;
    return static_cast<uint32_t>(v);
  }
  std::string_view Bytes() {
    const uint64_t n = U64();
    if (!ok_ || n > s_.size()) {
      ok_ = false;
      return {};
    }
    std::string_view out = s_.substr(0, n);
    s_.remove_prefix(n);
    return out;
  }
  Status Finish(const char* what) const {
    if (!ok_) return Status::Corruption(std::string(what) + ": shorter than its fields");
    if (!s_.empty()) return Status::Corruption(std::string(what) + ": trailing bytes");
    return Status::Ok();
  }
  bool ok() const { return ok_; }
  void Fail() { ok_ = false; }

 private:
  std::string_view s_;
  bool ok_ = true;
};

void PutBytes(std::string* out, std::string_view b) {
  PutVarint64(out, b.size());
  out->append(b);
}

void PutHeader(std::string* out, const ChainHeader& h) {
  PutVarint32(out, h.shard);
  PutVarint64(out, h.term);
  PutVarint32(out, h.sender);
}

ChainHeader GetHeader(In& in) {
  ChainHeader h;
  h.shard = in.U32();
  h.term = in.U64();
  h.sender = in.U32();
  return h;
}

}  // namespace

std::string EncodeItem(const ChainItem& item) {
  std::string out;
  PutHeader(&out, item.header);
  PutVarint32(&out, static_cast<uint32_t>(item.kind));
  if (item.kind == ChainItem::Kind::kWrite) {
    PutVarint64(&out, item.ticket.sequence);
    PutVarint64(&out, item.ticket.memtable);
    PutVarint64(&out, item.ticket.memtable_first);
    PutBytes(&out, lsm::EncodeBatch(item.batch));
  } else {
    PutBytes(&out, lsm::EncodeEdit(item.edit));
  }
  return out;
}

Result<ChainItem> DecodeItem(std::string_view bytes) {
  In in(bytes);
  ChainItem item;
  item.header = GetHeader(in);
  const uint32_t kind = in.U32();
  if (kind == static_cast<uint32_t>(ChainItem::Kind::kWrite)) {
    item.kind = ChainItem::Kind::kWrite;
    item.ticket.sequence = in.U64();
    item.ticket.memtable = in.U64();
    item.ticket.memtable_first = in.U64();
    const std::string_view batch = in.Bytes();
    SLIP_RETURN_IF_ERROR(in.Finish("RUBBLE_APPLY"));
    SLIP_ASSIGN_OR_RETURN(item.batch, lsm::DecodeBatch(batch));
    if (item.batch.sequence != item.ticket.sequence || item.batch.ops.empty()) {
      return Status::Corruption("RUBBLE_APPLY: a write whose ticket does not match its batch");
    }
    return item;
  }
  if (kind == static_cast<uint32_t>(ChainItem::Kind::kEdit)) {
    item.kind = ChainItem::Kind::kEdit;
    const std::string_view edit = in.Bytes();
    SLIP_RETURN_IF_ERROR(in.Finish("RUBBLE_APPLY"));
    SLIP_ASSIGN_OR_RETURN(item.edit, lsm::DecodeEdit(edit));
    return item;
  }
  SLIP_RETURN_IF_ERROR(in.Finish("RUBBLE_APPLY"));
  return Status::Corruption("RUBBLE_APPLY: unknown item kind " + std::to_string(kind));
}

std::string EncodeLink(const LinkRequest& r) {
  std::string out;
  PutHeader(&out, r.header);
  PutVarint32(&out, r.fresh ? 1 : 0);
  PutVarint32(&out, r.slot_count);
  PutVarint64(&out, r.slot_bytes);
  return out;
}

Result<LinkRequest> DecodeLink(std::string_view bytes) {
  In in(bytes);
  LinkRequest r;
  r.header = GetHeader(in);
  const uint32_t fresh = in.U32();
  r.fresh = fresh == 1;
  r.slot_count = in.U32();
  r.slot_bytes = in.U64();
  SLIP_RETURN_IF_ERROR(in.Finish("RUBBLE_LINK"));
  if (fresh > 1) return Status::Corruption("RUBBLE_LINK: fresh is neither 0 nor 1");
  return r;
}

std::string EncodeLinkResponse(const LinkResponse& r) {
  std::string out;
  PutBytes(&out, r.image);
  PutVarint64(&out, r.last_sequence);
  PutVarint64(&out, r.last_edit);
  return out;
}

Result<LinkResponse> DecodeLinkResponse(std::string_view bytes) {
  In in(bytes);
  LinkResponse r;
  r.image = std::string(in.Bytes());
  r.last_sequence = in.U64();
  r.last_edit = in.U64();
  SLIP_RETURN_IF_ERROR(in.Finish("RUBBLE_LINK's answer"));
  if (r.image.empty()) return Status::Corruption("RUBBLE_LINK's answer names no image");
  return r;
}

std::string EncodeSeedChunk(const SeedChunk& c) {
  std::string out;
  PutHeader(&out, c.header);
  PutVarint64(&out, c.seed_id);
  PutVarint64(&out, c.offset);
  PutVarint64(&out, c.total);
  PutBytes(&out, c.bytes);
  return out;
}

Result<SeedChunk> DecodeSeedChunk(std::string_view bytes) {
  In in(bytes);
  SeedChunk c;
  c.header = GetHeader(in);
  c.seed_id = in.U64();
  c.offset = in.U64();
  c.total = in.U64();
  c.bytes = in.Bytes();
  SLIP_RETURN_IF_ERROR(in.Finish("RUBBLE_SEED"));
  if (c.offset > c.total || c.bytes.size() > c.total - c.offset) {
    return Status::Corruption("RUBBLE_SEED: a part beyond the seed's end");
  }
  return c;
}

std::string EncodeSeed(const lsm::FollowerSeed& seed) {
  std::string out;
  PutBytes(&out, lsm::EncodeEdit(seed.version));
  PutVarint64(&out, seed.last_sequence);
  PutVarint64(&out, seed.mems.size());
  for (const auto& m : seed.mems) {
    PutVarint64(&out, m.id);
    PutVarint64(&out, m.first_sequence);
    PutVarint64(&out, m.entries.size());
    for (const auto& [sequence, op] : m.entries) {
      PutVarint64(&out, sequence);
      PutVarint32(&out, static_cast<uint32_t>(op.type));
      PutBytes(&out, op.key);
      PutBytes(&out, op.value);
    }
  }
  return out;
}

Result<lsm::FollowerSeed> DecodeSeed(std::string_view bytes) {
  In in(bytes);
  lsm::FollowerSeed seed;
  const std::string_view version = in.Bytes();
  seed.last_sequence = in.U64();
  const uint64_t mems = in.U64();
  // Each MemTable takes at least 3 bytes: a count beyond that is damage,
  // not an allocation to attempt.
  if (mems > bytes.size()) in.Fail();
  for (uint64_t i = 0; in.ok() && i < mems; ++i) {
    lsm::FollowerSeed::Mem m;
    m.id = in.U64();
    m.first_sequence = in.U64();
    const uint64_t n = in.U64();
    if (n > bytes.size()) in.Fail();
    for (uint64_t j = 0; in.ok() && j < n; ++j) {
      const uint64_t sequence = in.U64();
      const uint32_t type = in.U32();
      lsm::WriteBatch::Op op;
      op.key = std::string(in.Bytes());
      op.value = std::string(in.Bytes());
      if (type != static_cast<uint32_t>(lsm::ValueType::kValue) &&
          type != static_cast<uint32_t>(lsm::ValueType::kDeletion)) {
        in.Fail();
      }
      op.type = static_cast<lsm::ValueType>(type);
      m.entries.emplace_back(sequence, std::move(op));
    }
    seed.mems.push_back(std::move(m));
  }
  SLIP_RETURN_IF_ERROR(in.Finish("a follower's seed"));
  SLIP_ASSIGN_OR_RETURN(seed.version, lsm::DecodeEdit(version));
  if (!seed.version.snapshot) return Status::Corruption("a follower's seed whose version is not a snapshot");
  return seed;
}

std::string EncodeSlotReport(const SlotReport& r) {
  std::string out;
  PutHeader(&out, r.header);
  PutVarint64(&out, r.number);
  PutVarint64(&out, r.watermark);
  PutVarint64(&out, r.slots.size());
  for (uint32_t s : r.slots) PutVarint32(&out, s);
  return out;
}

Result<SlotReport> DecodeSlotReport(std::string_view bytes) {
  In in(bytes);
  SlotReport r;
  r.header = GetHeader(in);
  r.number = in.U64();
  r.watermark = in.U64();
  const uint64_t n = in.U64();
  if (n > bytes.size()) in.Fail();
  for (uint64_t i = 0; in.ok() && i < n; ++i) r.slots.push_back(in.U32());
  SLIP_RETURN_IF_ERROR(in.Finish("RUBBLE_SLOTS"));
  return r;
}

}  // namespace slip::rubble
