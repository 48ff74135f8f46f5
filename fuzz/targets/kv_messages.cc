// The KV service's messages (docs/formats/kv_messages.md): the selector byte
// picks the decoder. Whatever decodes must re-encode to bytes that decode
// and re-encode to the same bytes.
#include "fuzz/fuzz.h"
#include "proto/kv.h"

using namespace slip;

namespace {

const auto kEncode = [](const auto& m) { return proto::Encode(m); };
using fuzz::RoundTrip;
using Bytes = std::span<const std::byte>;

const log::Limits kLimits{.max_key = 1024, .max_value = 1 << 16};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto in = fuzz::Bytes(data + 1, size - 1);
  switch (data[0] % 15) {
    case 0: RoundTrip(in, [](Bytes b) { return proto::DecodeKvRequest(b, kLimits); }, kEncode); break;
    case 1: RoundTrip(in, [](Bytes b) { return proto::DecodeKvResponse(b, kLimits); }, kEncode); break;
    case 2: RoundTrip(in, [](Bytes b) { return proto::DecodeReplicateRequest(b, kLimits); }, kEncode); break;
    case 3: RoundTrip(in, [](Bytes b) { return proto::DecodeShardTailRequest(b); }, kEncode); break;
    case 4: RoundTrip(in, [](Bytes b) { return proto::DecodeShardTailResponse(b, kLimits); }, kEncode); break;
    case 5: RoundTrip(in, [](Bytes b) { return proto::DecodeReplOpenRequest(b); }, kEncode); break;
    case 6: RoundTrip(in, [](Bytes b) { return proto::DecodeReplOpenResponse(b); }, kEncode); break;
    case 7: RoundTrip(in, [](Bytes b) { return proto::DecodeReplPersistRequest(b); }, kEncode); break;
    case 8: RoundTrip(in, [](Bytes b) { return proto::DecodeReplCloseRequest(b); }, kEncode); break;
    case 9: RoundTrip(in, [](Bytes b) { return proto::DecodeErdaGrantRequest(b); }, kEncode); break;
    case 10: RoundTrip(in, [](Bytes b) { return proto::DecodeErdaGrantResponse(b); }, kEncode); break;
    case 11: RoundTrip(in, [](Bytes b) { return proto::DecodeErdaReserveRequest(b, kLimits); }, kEncode); break;
    case 12: RoundTrip(in, [](Bytes b) { return proto::DecodeErdaReserveResponse(b); }, kEncode); break;
    case 13: RoundTrip(in, [](Bytes b) { return proto::DecodeErdaCommitRequest(b, kLimits); }, kEncode); break;
    case 14: RoundTrip(in, [](Bytes b) { return proto::DecodePutIfRequest(b, kLimits); }, kEncode); break;
  }
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  using fuzz::Tagged;
  proto::ShardTailResponse tail;
  tail.term = 3;
  tail.more = true;
  proto::TailEntry e;
  e.meta = {log::EntryType::kPut, 2, 9};
  e.key = "key";
  e.value = "value";
  tail.entries = {e, e};
  return {
      Tagged(0, proto::Encode(proto::KvRequest{.term = 4, .shard = 2, .key = "user42", .value = "v"})),
      Tagged(1, proto::Encode(proto::KvResponse{.term = 4, .version = 7, .value = "value"})),
      Tagged(2, proto::Encode(proto::ReplicateRequest{.term = 1, .meta = {log::EntryType::kPut, 1, 5}, .key = "k",
                                                      .value = "v"})),
      Tagged(3, proto::Encode(proto::ShardTailRequest{})),
      Tagged(4, proto::Encode(tail)),
      Tagged(5, proto::Encode(proto::ReplOpenRequest{})),
      Tagged(6, proto::Encode(proto::ReplOpenResponse{})),
      Tagged(7, proto::Encode(proto::ReplPersistRequest{})),
      Tagged(8, proto::Encode(proto::ReplCloseRequest{})),
      Tagged(9, proto::Encode(proto::ErdaGrantRequest{})),
      Tagged(10, proto::Encode(proto::ErdaGrantResponse{})),
      Tagged(11, proto::Encode(proto::ErdaReserveRequest{})),
      Tagged(12, proto::Encode(proto::ErdaReserveResponse{})),
      Tagged(13, proto::Encode(proto::ErdaCommitRequest{})),
      Tagged(14, proto::Encode(proto::PutIfRequest{proto::PutCondition::kIfAbsent, {.term = 4, .shard = 2, .key = "k", .value = "v"}})),
  };
}
