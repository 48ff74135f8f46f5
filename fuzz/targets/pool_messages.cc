// The DINOMO pool's and Clover's messages (docs/formats/dinomo_pool.md):
// the selector byte picks the decoder; what decodes re-encodes stably.
#include "fuzz/fuzz.h"
#include "proto/pool.h"

using namespace slip;

namespace {

template <typename Decode>
void RoundTrip(std::span<const std::byte> in, Decode decode) {
  auto a = decode(in);
  if (!a.ok()) return;
  const std::string e1 = proto::Encode(*a);
  auto b = decode(fuzz::Bytes(e1));
  fuzz::Check(b.ok(), "a re-encoded message does not decode");
  fuzz::Check(proto::Encode(*b) == e1, "a message re-encodes differently");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto in = fuzz::Bytes(data + 1, size - 1);
  switch (data[0] % 13) {
    case 0: RoundTrip(in, [](auto b) { return proto::DecodePoolIndexResponse(b, 1 << 20); }); break;
    case 1: RoundTrip(in, [](auto b) { return proto::DecodePoolPersistRequest(b); }); break;
    case 2: RoundTrip(in, [](auto b) { return proto::DecodeCloverInsertRequest(b); }); break;
    case 3: RoundTrip(in, [](auto b) { return proto::DecodeCloverHeadResponse(b); }); break;
    case 4: RoundTrip(in, [](auto b) { return proto::DecodePoolKeysResponse(b); }); break;
    case 5: RoundTrip(in, [](auto b) { return proto::DecodePoolKeyRequest(b); }); break;
    case 6: RoundTrip(in, [](auto b) { return proto::DecodePoolAdoptRequest(b); }); break;
    case 7: RoundTrip(in, [](auto b) { return proto::DecodePoolAdoptResponse(b); }); break;
    case 8: RoundTrip(in, [](auto b) { return proto::DecodePoolNodeRequest(b); }); break;
    case 9: RoundTrip(in, [](auto b) { return proto::DecodePoolLayoutResponse(b); }); break;
    case 10: RoundTrip(in, [](auto b) { return proto::DecodePoolAllocateResponse(b); }); break;
    case 11: RoundTrip(in, [](auto b) { return proto::DecodePoolSealRequest(b); }); break;
    case 12: RoundTrip(in, [](auto b) { return proto::DecodePoolMergedResponse(b); }); break;
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
