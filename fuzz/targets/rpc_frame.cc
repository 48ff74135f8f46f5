// RPC frames (docs/formats/wire.md): a received message is frames back to
// back; decoding walks them as RpcChannel::OnMessage does.
#include "fuzz/fuzz.h"
#include "rpc/frame.h"

using namespace slip;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auth::SessionKey key;
  key.bytes[0] = 1;
  std::span<const std::byte> buf = fuzz::Bytes(data, size);
  (void)rpc::PeekHeader(buf);
  while (!buf.empty()) {
    auto f = rpc::DecodeFrame(buf, 1 << 16);
    if (!f.ok()) break;
    fuzz::Check(f->frame_bytes > 0 && f->frame_bytes <= buf.size(), "frame size outside the message");
    fuzz::Check(f->payload.data() >= buf.data() && f->payload.data() + f->payload.size() <= buf.data() + buf.size(),
                "payload outside the message");
    if (f->signed_frame) (void)rpc::VerifyFrame(*f, key);
    // What decodes re-encodes to the same bytes (up to the padding).
    std::vector<std::byte> again;
    const std::string_view payload(reinterpret_cast<const char*>(f->payload.data()), f->payload.size());
    fuzz::Check(rpc::EncodeFrame(f->header, payload, 1 << 16, &again, f->signed_frame ? &key : nullptr).ok(),
                "a decoded frame does not encode");
    auto g = rpc::DecodeFrame(again, 1 << 16);
    fuzz::Check(g.ok() && g->header.request_id == f->header.request_id && g->header.method == f->header.method &&
                    g->header.status == f->header.status && g->payload.size() == f->payload.size(),
                "a re-encoded frame decodes differently");
    buf = buf.subspan(f->frame_bytes);
  }
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  std::vector<std::string> seeds;
  auth::SessionKey key;
  key.bytes[0] = 1;
  std::vector<std::byte> all;
  for (int i = 0; i < 4; ++i) {
    rpc::FrameHeader h{i % 2 ? rpc::FrameKind::kResponse : rpc::FrameKind::kRequest, static_cast<uint16_t>(i),
                       (uint64_t{3} << 40) | static_cast<uint64_t>(i + 1), i % 2 ? Code::kNotFound : Code::kOk};
    h.fragment = i == 3;
    h.last_fragment = i == 3;
    std::vector<std::byte> f;
    (void)rpc::EncodeFrame(h, std::string(i * 40, 'p'), 1 << 16, &f, i >= 2 ? &key : nullptr);
    seeds.emplace_back(reinterpret_cast<const char*>(f.data()), f.size());
    all.insert(all.end(), f.begin(), f.end());
  }
  seeds.emplace_back(reinterpret_cast<const char*>(all.data()), all.size());
  return seeds;
}
