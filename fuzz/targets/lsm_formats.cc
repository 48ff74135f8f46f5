// The LSM engine's on-disk formats (docs/formats/lsm_sst.md): a block, a
// whole table, a write batch, a version edit, and the record framing of
// the WAL and the MANIFEST. The selector byte picks which.
#include "fuzz/fuzz.h"
#include "lsm/block.h"
#include "lsm/file.h"
#include "lsm/format.h"
#include "lsm/table.h"
#include "lsm/version.h"
#include "lsm/wal.h"

using namespace slip;

namespace {

// The input as a file.
class StringFile final : public lsm::RandomAccessFile {
 public:
  explicit StringFile(std::string_view bytes) : bytes_(bytes) {}
  Result<std::string_view> Read(uint64_t offset, size_t n, std::string*) const override {
    if (offset > bytes_.size() || n > bytes_.size() - offset) return Status::Corruption("read past the end");
    return bytes_.substr(offset, n);
  }
  uint64_t size() const override { return bytes_.size(); }

 private:
  std::string_view bytes_;
};

class StringSink final : public lsm::WritableFile {
 public:
  Status Append(std::string_view data) override {
    bytes += data;
    return Status::Ok();
  }
  Status Sync() override { return Status::Ok(); }
  uint64_t size() const override { return bytes.size(); }
  std::string bytes;
};

void WalkBlock(std::string_view contents) {
  auto b = lsm::Block::Parse(contents);
  if (!b.ok()) return;
  auto it = b->NewIterator();
  size_t n = 0;
  for (it.SeekToFirst(); it.Valid() && n < 100000; it.Next(), ++n) {
    (void)lsm::ParseInternalKey(it.key());
  }
  auto jt = b->NewIterator();
  jt.Seek("m");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 6) {
    case 0:
      WalkBlock(in);
      if (auto opened = lsm::OpenBlock(in); opened.ok()) WalkBlock(*opened);
      break;
    case 1: {
      StringFile f(in);
      auto t = lsm::Table::Open(&f);
      if (!t.ok()) break;
      (void)(*t)->Get("key");
      size_t n = 0;
      (void)(*t)->ForEach([&](std::string_view, std::string_view) { ++n; });
      break;
    }
    case 2: {
      auto b = lsm::DecodeBatch(in);
      if (!b.ok()) break;
      const std::string again = lsm::EncodeBatch(*b);
      auto c = lsm::DecodeBatch(again);
      fuzz::Check(c.ok() && lsm::EncodeBatch(*c) == again, "a batch re-encodes differently");
      break;
    }
    case 3: {
      auto e = lsm::DecodeEdit(in);
      if (!e.ok()) break;
      const std::string again = lsm::EncodeEdit(*e);
      auto g = lsm::DecodeEdit(again);
      fuzz::Check(g.ok() && lsm::EncodeEdit(*g) == again, "an edit re-encodes differently");
      break;
    }
    case 4: {
      StringFile f(in);
      auto r = lsm::ReplayWal(f, [](const lsm::WriteBatch&) { return Status::Ok(); });
      if (r.ok()) fuzz::Check(r->end <= in.size(), "a WAL longer than its file");
      break;
    }
    case 5: {
      StringFile f(in);
      (void)lsm::RecoverManifest(f);
      break;
    }
  }
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  using fuzz::Tagged;
  std::vector<std::string> seeds;
  lsm::BlockBuilder bb(4);
  for (int i = 0; i < 10; ++i) bb.Add(lsm::InternalKey("key" + std::to_string(i), 10 + i, lsm::ValueType::kValue), "v");
  seeds.push_back(Tagged(0, bb.Finish()));
  StringSink table;
  lsm::TableBuilder tb({}, &table);
  for (int i = 0; i < 50; ++i) {
    (void)tb.Add(lsm::InternalKey("key" + std::to_string(100 + i), 5, lsm::ValueType::kValue), std::string(40, 'x'));
  }
  (void)tb.Finish();
  seeds.push_back(Tagged(1, table.bytes));
  lsm::WriteBatch batch;
  batch.sequence = 7;
  batch.ops = {{lsm::ValueType::kValue, "a", "1"}, {lsm::ValueType::kDeletion, "b", ""}};
  seeds.push_back(Tagged(2, lsm::EncodeBatch(batch)));
  lsm::VersionEdit edit;
  seeds.push_back(Tagged(3, lsm::EncodeEdit(edit)));
  StringSink wal;
  lsm::WalWriter w(&wal);
  (void)w.Add(batch);
  (void)w.Add(batch);
  seeds.push_back(Tagged(4, wal.bytes));
  StringSink manifest;
  (void)lsm::AppendRecord(&manifest, lsm::EncodeEdit(edit));
  seeds.push_back(Tagged(5, manifest.bytes));
  return seeds;
}
