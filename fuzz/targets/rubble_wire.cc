// RubbleDB's chain messages (docs/formats/rubble_messages.md): the selector
// byte picks the decoder; what decodes re-encodes stably.
#include "fuzz/fuzz.h"
#include "rubble/wire.h"

using namespace slip;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 6) {
    case 0: fuzz::RoundTrip(in, rubble::DecodeItem, rubble::EncodeItem); break;
    case 1: fuzz::RoundTrip(in, rubble::DecodeLink, rubble::EncodeLink); break;
    case 2: fuzz::RoundTrip(in, rubble::DecodeLinkResponse, rubble::EncodeLinkResponse); break;
    case 3: fuzz::RoundTrip(in, rubble::DecodeSeedChunk, rubble::EncodeSeedChunk); break;
    case 4: fuzz::RoundTrip(in, rubble::DecodeSeed, rubble::EncodeSeed); break;
    case 5: fuzz::RoundTrip(in, rubble::DecodeSlotReport, rubble::EncodeSlotReport); break;
  }
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  using fuzz::Tagged;
  rubble::ChainItem write;
  write.batch.sequence = 4;
  write.batch.ops = {{lsm::ValueType::kValue, "k", "v"}};
  rubble::ChainItem edit;
  edit.kind = rubble::ChainItem::Kind::kEdit;
  lsm::FollowerSeed seed;
  seed.last_sequence = 9;
  seed.mems = {{.id = 1, .first_sequence = 2, .entries = {{2, {lsm::ValueType::kValue, "a", "b"}}}}};
  return {
      Tagged(0, rubble::EncodeItem(write)),
      Tagged(0, rubble::EncodeItem(edit)),
      Tagged(1, rubble::EncodeLink({.header = {}, .fresh = true, .slot_count = 4, .slot_bytes = 1 << 20})),
      Tagged(2, rubble::EncodeLinkResponse({.image = "/x/slots", .last_sequence = 3, .last_edit = 1})),
      Tagged(3, rubble::EncodeSeedChunk({.header = {}, .seed_id = 1, .offset = 0, .total = 5, .bytes = "abcde"})),
      Tagged(4, rubble::EncodeSeed(seed)),
      Tagged(5, rubble::EncodeSlotReport({.header = {}, .number = 2, .watermark = 5, .slots = {1, 2, 3}})),
  };
}
