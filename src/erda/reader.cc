#include "erda/reader.h"

#include <algorithm>

#include "common/hash.h"

namespace slip::erda {

struct OneSidedReader::Op {
  std::string key;
  uint64_t hash = 0;
  Done done;
  std::vector<IndexWord> words;  // candidate entries, window order
  size_t word = 0;               // the candidate being tried
  bool tried_old = false;        // of that candidate
  bool damaged = false;          // some version of the key failed its check
  uint32_t units = 0;            // the object being read
  std::vector<std::byte> buf;    // where the READ lands
};

OneSidedReader::OneSidedReader(fabric::Endpoint* ep, fabric::PeerId server, fabric::RemoteMemory remote,
                               Layout layout, log::Limits limits, ReaderOptions options)
    : ep_(ep), server_(server), remote_(remote), layout_(layout), limits_(limits), options_(options) {}

OneSidedReader::~OneSidedReader() = default;

void OneSidedReader::Get(std::string key, Done done) {
  ++stats_.gets;
  auto op = std::make_shared<Op>();
  op->hash = HashKey(key);
  op->key = std::move(key);
  op->done = std::move(done);
  op->buf.resize(kWindowBytes);
  Issue(op, layout_.WindowOffset(op->hash), kWindowBytes);
}

void OneSidedReader::Issue(std::shared_ptr<Op> op, uint64_t remote_offset, size_t len) {
  const uint64_t ctx = (uint64_t{options_.context_tag} << 56) | (next_++ & ((uint64_t{1} << 56) - 1));
  ++stats_.reads;
  Status s = ep_->Read(server_, op->buf.data(), len, nullptr, remote_, remote_offset, ctx);
  if (!s.ok()) return Finish(op, s);
  ops_.emplace(ctx, std::move(op));
}

bool OneSidedReader::OnCompletion(const fabric::Completion& c) {
  if (c.context >> 56 != options_.context_tag) return false;
  auto it = ops_.find(c.context);
  if (it == ops_.end()) return false;
  std::shared_ptr<Op> op = std::move(it->second);
  ops_.erase(it);
  if (c.status != Code::kOk) {
    Finish(op, Status(c.status, "one-sided read from the server failed"));
  } else if (op->units == 0) {  // the window arrived
    op->words = BucketTable::WordsIn(op->buf, op->hash);
    if (op->words.empty()) {
      Finish(op, Status::NotFound("no such key"));
    } else {
      NextVersion(op);
    }
  } else {
    OnObject(op, op->buf.size());
  }
  return true;
}

void OneSidedReader::NextVersion(std::shared_ptr<Op> op) {
  while (op->word < op->words.size()) {
    const IndexWord w = op->words[op->word];
    const uint32_t units = op->tried_old ? w.old_offset() : w.new_offset();
    if (units != 0 && uint64_t{units} * IndexWord::kUnit < layout_.head_bytes) {
      op->units = units;
      const uint64_t in_head = uint64_t{units} * IndexWord::kUnit;
      const size_t seg_left = static_cast<size_t>(layout_.segment_bytes - in_head % layout_.segment_bytes);
      return ReadObject(op, units, std::min(options_.first_read, seg_left));
    }
    // No (more) versions in this entry: the next candidate.
    ++op->word;
    op->tried_old = false;
  }
  Finish(op, op->damaged ? Status::Unavailable("no version of the key checks out one-sidedly; ask the server")
                         : Status::NotFound("no such key"));
}

void OneSidedReader::ReadObject(std::shared_ptr<Op> op, uint64_t units, size_t len) {
  op->buf.assign(len, std::byte{0});
  Issue(op, layout_.ObjectOffset(layout_.HeadOf(op->hash), static_cast<uint32_t>(units)), len);
}

void OneSidedReader::OnObject(std::shared_ptr<Op> op, size_t requested) {
  // A larger object than the first READ fetched: read it whole.
  if (auto size = PeekObjectBytes(op->buf, limits_); size.ok() && *size > requested) {
    const uint64_t in_head = uint64_t{op->units} * IndexWord::kUnit;
    if (in_head % layout_.segment_bytes + *size <= layout_.segment_bytes) {
      return ReadObject(op, op->units, *size);
    }
  }
  Engine::Found f = Engine::Examine(op->buf, op->key, limits_);
  switch (f.kind) {
    case Engine::Found::kValue:
      if (op->tried_old) ++stats_.old_version;
      return Finish(op, std::move(f.value));
    case Engine::Found::kDeleted:
      return Finish(op, Status::NotFound("deleted"));
    case Engine::Found::kOtherKey:
      ++op->word;  // another key with this fingerprint: its entry, not ours
      op->tried_old = false;
      break;
    case Engine::Found::kBad:
      op->damaged = true;
      if (op->tried_old) {
        ++op->word;
        op->tried_old = false;
      } else {
        op->tried_old = true;
      }
      break;
  }
  op->units = 0;
  NextVersion(op);
}

void OneSidedReader::Finish(std::shared_ptr<Op> op, Result<std::string> r) {
  if (!r.ok() && r.status().Is(Code::kUnavailable)) ++stats_.inconclusive;
  op->done(std::move(r));
}

}  // namespace slip::erda
