#include "server/erda_mirror.h"

#include <algorithm>

#include "common/hash.h"
#include "erda/index_word.h"
#include "log/entry.h"

namespace slip::server {

using erda::BucketTable;
using erda::IndexWord;
using erda::Slot;

uint32_t ErdaMirror::DefaultBuckets(uint64_t region_bytes) {
  const uint64_t entries = region_bytes / 256;
  const uint64_t buckets = entries / erda::kEntriesPerBucket;
  return static_cast<uint32_t>(std::clamp<uint64_t>(buckets, 64, uint64_t{1} << 26));
}

Result<std::unique_ptr<ErdaMirror>> ErdaMirror::Create(const store::Store* store, uint32_t num_buckets) {
  if (num_buckets < erda::kProbeBuckets) {
    return Status::InvalidArgument("an erda table needs at least " + std::to_string(erda::kProbeBuckets) + " buckets");
  }
  const uint64_t region_bytes = store->region().size();
  if (region_bytes / IndexWord::kUnit > IndexWord::kMaxOffset) {
    return Status::InvalidArgument("a store region of " + std::to_string(region_bytes) +
                                   " bytes is too large for erda's 31-bit index word offsets (16 GiB)");
  }
  SLIP_ASSIGN_OR_RETURN(auto region, pm::PmRegion::Anonymous(BucketTable::Bytes(num_buckets), pm::RegionOptions{}));
  return std::unique_ptr<ErdaMirror>(new ErdaMirror(store, std::move(region), num_buckets));
}

ErdaMirror::ErdaMirror(const store::Store* store, std::unique_ptr<pm::PmRegion> region, uint32_t num_buckets)
    : store_(store), region_(std::move(region)), table_(region_.get(), 0, num_buckets) {}

void ErdaMirror::Rebuild() {
  store_->ForEachIndexedKey([this](uint64_t hash, std::string_view key) { Changed(hash, key); });
}

std::optional<std::string_view> ErdaMirror::KeyAt(uint64_t offset) const {
  const pm::PmRegion& r = store_->region();
  if (offset >= r.size()) return std::nullopt;
  const std::byte* p = r.at(offset);
  auto d = log::DecodeBlock({p, r.size() - offset}, store_->options().limits);
  if (!d.status.ok() || d.block.seq != 0) return std::nullopt;
  if (d.block.type != log::EntryType::kPut && d.block.type != log::EntryType::kDel) return std::nullopt;
  if (d.block.single()) return d.block.key();
  // Block 0 of a multi-block entry starts with the key when it holds it whole.
  if (d.block.chunk.size() < d.block.key_len) return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(d.block.chunk.data()), d.block.key_len);
}

void ErdaMirror::Changed(uint64_t hash, std::string_view key) {
  // Both buckets of the window: every change to a window's entries happens
  // under its two stripes, so the overflow mark can never be crowded out.
  const uint32_t home = table_.HomeBucket(hash);
  std::mutex& a = stripes_[home % stripes_.size()];
  std::mutex& b = stripes_[(home + 1) % stripes_.size()];
  std::unique_lock<std::mutex> first(&a < &b ? a : b);
  std::unique_lock<std::mutex> second;
  if (&a != &b) second = std::unique_lock<std::mutex>(&a < &b ? b : a);

  const std::optional<uint64_t> at = store_->Locate(key);
  // Our entry: the one with our fingerprint whose word names our key (or
  // names nothing readable: a place freed since, which only our key's
  // changes could have left there).
  std::optional<Slot> mine;
  bool other_live = false;
  for (Slot s : table_.Find(hash)) {
    const IndexWord w = table_.Load(s);
    const auto k = w.valid() ? KeyAt(uint64_t{w.new_offset()} * IndexWord::kUnit) : std::nullopt;
    if (!k || *k == key) {
      mine = s;
      break;
    }
    if (store_->Locate(*k).has_value()) other_live = true;  // a true 64-bit collision
  }
  std::lock_guard<std::mutex> stats(stats_mu_);
  ++stats_.updates;
  if (!at) {
    if (mine) {
      table_.Release(*mine);
      ++stats_.released;
    }
    return;
  }
  const uint32_t units = static_cast<uint32_t>(*at / IndexWord::kUnit);
  if (mine) {
    const IndexWord w = table_.Load(*mine);
    if (!w.valid()) {
      table_.Store(*mine, IndexWord::Create(units));
    } else if (w.new_offset() != units) {
      table_.Store(*mine, w.Updated(units));
    }
    return;
  }
  if (!other_live) {
    if (auto s = table_.Claim(hash, /*keep_one=*/true); s.ok()) {
      table_.Store(*s, IndexWord::Create(units));
      ++stats_.created;
      return;
    }
  }
  table_.MarkOverflow(hash);
  ++stats_.overflowed;
}

ErdaMirror::Stats ErdaMirror::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

}  // namespace slip::server
