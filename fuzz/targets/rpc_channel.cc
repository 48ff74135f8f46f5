// A live RpcChannel fed arbitrary messages (rpc/channel.h): sessions,
// HELLO, fragments and reassembly, the reply cache, authentication. The
// first byte picks the role and whether the channel holds a cluster
// secret; the rest is messages, each a 2-byte length and its bytes, sent
// from a raw endpoint on the simulated fabric:
//   server role: to a serving channel whose handler echoes; the raw
//     endpoint said a proper HELLO first (so session 0 exists);
//   client role: to a calling channel with three calls pending at the raw
//     endpoint (request ids follow from the HELLO the channel sent).
// Nothing may crash, hang or run a handler for a frame that does not
// authenticate.
#include "common/coding.h"
#include "fabric/sim/sim_fabric.h"
#include "fuzz/fuzz.h"
#include "rpc/channel.h"
#include "runtime/sim_runtime.h"

using namespace slip;

namespace {

constexpr runtime::Nanos kMs = runtime::kMillisecond;

std::string Hello(const std::string& address) {
  std::string p(22, '\0');
  p[0] = 2;
  return p + address;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool client_role = data[0] & 1;
  const bool keyed = data[0] & 2;
  runtime::SimRuntime rt(runtime::SimRuntimeOptions{.seed = 5});
  fabric::SimFabric fabric(rt);
  runtime::Executor* ex = rt.CreateExecutor("channel");
  runtime::Executor* rex = rt.CreateExecutor("raw");
  rpc::ChannelOptions o;
  o.max_payload = 1000;
  o.max_call_payload = 5000;
  o.reply_cache = 16;
  o.timeout = 5 * kMs;
  if (keyed) {
    o.keys = auth::KeySource::Fixed(auth::Keyring::Parse("current 1 " + std::string(64, 'a')).value());
    o.random = [](void* out, size_t n) { std::memset(out, 7, n); };
  }
  auto ch = rpc::RpcChannel::Open(ex, std::move(fabric.CreateEndpoint(0, ex, {})).value(), o);
  fuzz::Check(ch.ok(), "no channel");
  auto raw = std::move(fabric.CreateEndpoint(1, rex, {})).value();
  std::vector<std::byte> rbuf(64 * 1024);
  (void)raw->PostMultiRecv(rbuf.data(), rbuf.size(), nullptr, 1);
  rex->AddPoller([&] {
    fabric::Completion cs[8];
    const size_t n = raw->Poll(cs);
    for (size_t i = 0; i < n; ++i) {
      if (cs[i].buffer_released) (void)raw->PostMultiRecv(rbuf.data(), rbuf.size(), nullptr, 1);
    }
    return n > 0;
  });
  const fabric::PeerId to = *raw->AddPeer((*ch)->address());
  std::vector<std::vector<std::byte>> keep;
  auto send = [&](std::vector<std::byte> m) {
    keep.push_back(std::move(m));
    (void)raw->Send(to, keep.back().data(), keep.back().size(), nullptr, keep.size());
    rt.RunUntil(rt.Now() + kMs);
  };
  int runs = 0;
  if (client_role) {
    auto peer = (*ch)->Connect(raw->address());
    for (int i = 0; i < 3; ++i) {
      (*ch)->Call(*peer, 5, "call", {.timeout = 20 * kMs, .retries = 1}, [](Result<rpc::Response>) {});
    }
  } else {
    (*ch)->SetHandler([&](uint16_t, std::span<const std::byte> p, rpc::RpcChannel::Reply reply) {
      ++runs;
      reply(Code::kOk, std::string(reinterpret_cast<const char*>(p.data()), p.size()));
    });
    std::vector<std::byte> f;
    (void)rpc::EncodeFrame({rpc::FrameKind::kRequest, 0xFFFF, (uint64_t{0xFFFFFF} << 40) | 1, Code::kOk},
                           Hello(raw->address()), 1 << 16, &f);
    send(std::move(f));
  }
  rt.RunUntil(rt.Now() + kMs);
  size_t at = 1;
  while (at + 2 <= size) {
    const size_t len = std::min<size_t>(LoadLE<uint16_t>(data + at), size - at - 2);
    std::vector<std::byte> m(reinterpret_cast<const std::byte*>(data + at + 2),
                             reinterpret_cast<const std::byte*>(data + at + 2 + len));
    at += 2 + len;
    if (m.empty()) continue;
    // Sends are whole multiples of the stride, as a channel sends them.
    m.resize((m.size() + 63) / 64 * 64);
    send(std::move(m));
  }
  rt.RunUntil(rt.Now() + 100 * kMs);  // timers: retries, expiries
  if (keyed && !client_role) fuzz::Check(runs == 0, "a handler ran for an unauthenticated frame");
  return 0;
}

std::vector<std::string> SlipFuzzSeeds() {
  std::vector<std::string> seeds;
  auto message = [](const rpc::FrameHeader& h, std::string_view payload) {
    std::vector<std::byte> f;
    (void)rpc::EncodeFrame(h, payload, 1 << 16, &f);
    std::string m(2, '\0');
    StoreLE<uint16_t>(m.data(), static_cast<uint16_t>(f.size()));
    return m + std::string(reinterpret_cast<const char*>(f.data()), f.size());
  };
  for (uint8_t role = 0; role < 4; ++role) {
    std::string s(1, static_cast<char>(role));
    if (role & 1) {
      // Answers for the HELLO (id 0xFFFFFF << 40 | 1) and the calls after it.
      std::string session(4, '\0');
      s += message({rpc::FrameKind::kResponse, 0xFFFF, (uint64_t{0xFFFFFF} << 40) | 1, Code::kOk}, session);
      s += message({rpc::FrameKind::kResponse, 5, 2, Code::kOk}, "answer");
    } else {
      s += message({rpc::FrameKind::kRequest, 5, 1, Code::kOk}, "request");
      rpc::FrameHeader frag{rpc::FrameKind::kRequest, 5, 2, Code::kOk};
      frag.fragment = true;
      s += message(frag, std::string(900, 'a'));
      frag.offset = 900;
      frag.last_fragment = true;
      s += message(frag, std::string(100, 'b'));
    }
    seeds.push_back(s);
  }
  return seeds;
}
