#include "lsm/merge.h"

#include <queue>

namespace slip::lsm {

namespace {

class MemSource final : public EntrySource {
 public:
  explicit MemSource(const MemTable& mem) : it_(mem) { it_.SeekToFirst(); }
  bool Valid() const override { return it_.Valid(); }
  std::string_view key() const override { return it_.key(); }
  std::string_view value() const override { return it_.value(); }
  void Next() override { it_.Next(); }
  Status status() const override { return Status::Ok(); }

 private:
  MemTable::Iterator it_;  // streams: no copy of the entries
};

class TableEntrySource final : public EntrySource {
 public:
  explicit TableEntrySource(const Table& table) : it_(table.NewIterator()) { it_->SeekToFirst(); }
  bool Valid() const override { return it_->Valid(); }
  std::string_view key() const override { return it_->key(); }
  std::string_view value() const override { return it_->value(); }
  void Next() override { it_->Next(); }
  Status status() const override { return it_->status(); }

 private:
  std::unique_ptr<Table::Iterator> it_;  // one data block in memory at a time
};

}  // namespace

std::unique_ptr<EntrySource> MemTableSource(const MemTable& mem) { return std::make_unique<MemSource>(mem); }
std::unique_ptr<EntrySource> TableSource(const Table& table) { return std::make_unique<TableEntrySource>(table); }

Result<CompactionStats> Compact(const std::vector<EntrySource*>& sources, const CompactionOptions& options,
                                const std::function<Status(std::string_view, std::string_view)>& out) {
  // A min-heap of sources by their current key; ties (the same internal
  // key in two sources) go to the earlier source.
  auto later = [&](size_t a, size_t b) {
    const int c = CompareInternalKeys(sources[a]->key(), sources[b]->key());
    return c != 0 ? c > 0 : a > b;
  };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
  for (size_t i = 0; i < sources.size(); ++i) {
    SLIP_RETURN_IF_ERROR(sources[i]->status());
    if (sources[i]->Valid()) heap.push(i);
  }
  CompactionStats stats;
  std::string current_key;  // the user key whose versions are being met
  bool have_key = false;
  // Of the previous version of current_key (kept or dropped); above every
  // sequence when there was none.
  constexpr uint64_t kNoneYet = UINT64_MAX;
  uint64_t last_sequence = kNoneYet;
  while (!heap.empty()) {
    const size_t i = heap.top();
    heap.pop();
    EntrySource* s = sources[i];
    ++stats.input;
    const auto parsed = ParseInternalKey(s->key());
    if (!parsed) return Status::Corruption("a compaction input key does not decode");
    if (!have_key || parsed->user_key != current_key) {
      current_key.assign(parsed->user_key);
      have_key = true;
      last_sequence = kNoneYet;
    }
    bool drop = false;
    if (last_sequence <= options.oldest_snapshot) {
      ++stats.shadowed;  // a newer version every reader sees hides this one
      drop = true;
    } else if (parsed->type == ValueType::kDeletion && parsed->sequence <= options.oldest_snapshot &&
               options.bottommost) {
      ++stats.tombstones;
      drop = true;
    }
    last_sequence = parsed->sequence;
    if (!drop) {
      SLIP_RETURN_IF_ERROR(out(s->key(), s->value()));
      ++stats.output;
    }
    s->Next();
    SLIP_RETURN_IF_ERROR(s->status());
    if (s->Valid()) heap.push(i);
  }
  return stats;
}

}  // namespace slip::lsm
