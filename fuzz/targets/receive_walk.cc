// A backup's receive segment (docs/formats/pm_layout.md): whatever bytes a
// peer's one-sided writes or sends left in it, the digest walk and then a
// recovery of the whole store over it must neither crash nor index a block
// that does not check. The same bytes as one shared-log message: the NIC
// role's seal check (replication/seal.h) must not crash, and accepts only a
// whole SEAL block that covers exactly the rest.
#include <cstring>

#include "common/hash.h"
#include "fuzz/fuzz.h"
#include "log/entry.h"
#include "pm/region.h"
#include "replication/seal.h"
#include "store/store.h"

using namespace slip;

namespace {

store::StoreOptions Options() {
  store::StoreOptions o;
  o.geometry.segment_size = 64 << 10;
  o.geometry.num_shards = 4;
  o.max_block_bytes = 8192;
  o.limits.max_key = 1024;
  o.limits.max_value = 1 << 20;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool prefix = data[0] & 1;
  const auto in = fuzz::Bytes(data + 1, size - 1);
  if (auto token = replication::ReadSeal(in)) {
    auto d = log::DecodeBlock(in.first(replication::kSealBytes), log::Limits{});
    fuzz::Check(d.status.ok() && d.block.type == log::EntryType::kSeal, "a seal accepted that does not decode");
    std::byte again[replication::kSealBytes];
    replication::EncodeSeal(*token, static_cast<uint32_t>(in.size() - replication::kSealBytes), again);
    fuzz::Check(std::memcmp(again, in.data(), sizeof(again)) == 0, "a seal accepted that its encoder would not write");
  }
  auto region = pm::PmRegion::Anonymous(1 << 20, {});
  fuzz::Check(region.ok(), "no region");
  auto st = store::Store::Open(region->get(), Options());
  fuzz::Check(st.ok(), "no store");
  auto seg = (*st)->AllocateReceiveSegment();
  fuzz::Check(seg.ok(), "no receive segment");
  const uint64_t ss = (*st)->segments().segment_size();
  std::byte* base = (*st)->segments().SegmentBase(*seg);
  std::memcpy(base, in.data(), std::min<size_t>(in.size(), ss));
  auto end = (*st)->DigestReceived(*seg, 0, ss, prefix ? store::Store::ReceiveWalk::kPrefix
                                                       : store::Store::ReceiveWalk::kFinal);
  fuzz::Check(end.ok() && *end <= ss, "digest walked past its segment");
  // Recovery over the same bytes.
  st->reset();
  auto again = store::Store::Open(region->get(), Options());
  fuzz::Check(again.ok() || again.status().Is(Code::kCorruption), "recovery failed other than Corruption");
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  std::string blocks;
  for (uint64_t v = 1; v <= 4; ++v) {
    const std::string key = "key" + std::to_string(v), value(v * 300, 'v');
    auto layout = log::PlanEntry(key.size(), value.size(), v == 4 ? 256 : 8192);
    if (!layout.ok()) continue;
    const uint16_t shard = static_cast<uint16_t>(ShardOfHash(HashKey(key), 4));
    auto e = log::EncodeEntry({log::EntryType::kPut, shard, v}, key, value, *layout);
    blocks.append(reinterpret_cast<const char*>(e.data()), e.size());
    if (v == 2) blocks.append(128, '\0');  // a hole
  }
  // One sealed shared-log message: seal + one block.
  std::string sealed(replication::kSealBytes, '\0');
  auto layout = log::PlanEntry(1, 5, 8192);
  auto e = log::EncodeEntry({log::EntryType::kPut, 0, 9}, "k", "value", *layout);
  replication::EncodeSeal(0x1234, static_cast<uint32_t>(e.size()), reinterpret_cast<std::byte*>(sealed.data()));
  sealed.append(reinterpret_cast<const char*>(e.data()), e.size());
  return {fuzz::Tagged(0, blocks), fuzz::Tagged(1, blocks), fuzz::Tagged(0, sealed)};
}
