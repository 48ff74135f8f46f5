// The DINOMO pool's and Clover's messages (docs/formats/dinomo_pool.md):
// the selector byte picks the decoder; what decodes re-encodes stably.
#include "fuzz/fuzz.h"
#include "proto/pool.h"

using namespace slip;

namespace {

const auto kEncode = [](const auto& m) { return proto::Encode(m); };
using fuzz::RoundTrip;
using Bytes = std::span<const std::byte>;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto in = fuzz::Bytes(data + 1, size - 1);
  switch (data[0] % 13) {
    case 0: RoundTrip(in, [](Bytes b) { return proto::DecodePoolIndexResponse(b, 1 << 20); }, kEncode); break;
    case 1: RoundTrip(in, [](Bytes b) { return proto::DecodePoolPersistRequest(b); }, kEncode); break;
    case 2: RoundTrip(in, [](Bytes b) { return proto::DecodeCloverInsertRequest(b); }, kEncode); break;
    case 3: RoundTrip(in, [](Bytes b) { return proto::DecodeCloverHeadResponse(b); }, kEncode); break;
    case 4: RoundTrip(in, [](Bytes b) { return proto::DecodePoolKeysResponse(b); }, kEncode); break;
    case 5: RoundTrip(in, [](Bytes b) { return proto::DecodePoolKeyRequest(b); }, kEncode); break;
    case 6: RoundTrip(in, [](Bytes b) { return proto::DecodePoolAdoptRequest(b); }, kEncode); break;
    case 7: RoundTrip(in, [](Bytes b) { return proto::DecodePoolAdoptResponse(b); }, kEncode); break;
    case 8: RoundTrip(in, [](Bytes b) { return proto::DecodePoolNodeRequest(b); }, kEncode); break;
    case 9: RoundTrip(in, [](Bytes b) { return proto::DecodePoolLayoutResponse(b); }, kEncode); break;
    case 10: RoundTrip(in, [](Bytes b) { return proto::DecodePoolAllocateResponse(b); }, kEncode); break;
    case 11: RoundTrip(in, [](Bytes b) { return proto::DecodePoolSealRequest(b); }, kEncode); break;
    case 12: RoundTrip(in, [](Bytes b) { return proto::DecodePoolMergedResponse(b); }, kEncode); break;
  }
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  using fuzz::Tagged;
  return {
      Tagged(0, proto::Encode(proto::PoolIndexResponse{})),   Tagged(1, proto::Encode(proto::PoolPersistRequest{})),
      Tagged(2, proto::Encode(proto::CloverInsertRequest{})), Tagged(3, proto::Encode(proto::CloverHeadResponse{})),
      Tagged(4, proto::Encode(proto::PoolKeysResponse{})),    Tagged(5, proto::Encode(proto::PoolKeyRequest{})),
      Tagged(6, proto::Encode(proto::PoolAdoptRequest{})),    Tagged(7, proto::Encode(proto::PoolAdoptResponse{})),
      Tagged(8, proto::Encode(proto::PoolNodeRequest{})),     Tagged(9, proto::Encode(proto::PoolLayoutResponse{})),
      Tagged(10, proto::Encode(proto::PoolAllocateResponse{})), Tagged(11, proto::Encode(proto::PoolSealRequest{})),
      Tagged(12, proto::Encode(proto::PoolMergedResponse{})),
  };
}
