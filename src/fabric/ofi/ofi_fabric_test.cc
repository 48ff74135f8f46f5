// Provider-specific tests of the libfabric fabric on shm and tcp;ofi_rxm:
// endpoints of one process on loopback, plus a second process that only
// polls (one-sided operations need no receiver worker; a dead peer fails
// operations instead of hanging them).
#include "fabric/ofi/ofi_fabric.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "fabric/ofi/ofi_test_util.h"
#include "fabric/ofi/region_lock.h"
#include "fabric/ofi/shm_regions.h"

namespace slip::fabric {
namespace {

using testing::ChildTarget;
using testing::kChildRegionBytes;
using testing::kGenerous;
using testing::Pump;
using namespace std::chrono_literals;

// Heap buffer aligned to the stride, as multi-recv buffers must be.
struct AlignedBuf {
  explicit AlignedBuf(size_t n) : len(n) {
    p = static_cast<std::byte*>(std::aligned_alloc(kStride, n));
    std::memset(p, 0, n);
  }
  ~AlignedBuf() { std::free(p); }
  AlignedBuf(const AlignedBuf&) = delete;
  AlignedBuf& operator=(const AlignedBuf&) = delete;
  std::byte* p;
  size_t len;
};

void Fill(std::byte* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = std::byte(static_cast<uint8_t>(seed + i * 7));
}
bool Matches(const std::byte* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != std::byte(static_cast<uint8_t>(seed + i * 7))) return false;
  }
  return true;
}

class OfiFabricTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { fabric_ = Open(OfiOptions{}); }

  std::unique_ptr<Fabric> Open(const OfiOptions& ofi) {
    auto f = OpenOfiFabric(FabricOptions{.provider = GetParam(), .node_address = ""}, ofi);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(*f) : nullptr;
  }

  std::unique_ptr<Endpoint> NewEndpoint(Fabric* fabric = nullptr,
                                        std::chrono::nanoseconds op_timeout = 2s) {
    if (fabric == nullptr) fabric = fabric_.get();
    auto ep = fabric->CreateEndpoint(
        EndpointOptions{.name = "test", .cq_depth = 1024, .op_timeout = op_timeout});
    EXPECT_TRUE(ep.ok()) << ep.status().ToString();
    if (!ep.ok()) return nullptr;
    pump_.Add(ep->get());
    return std::move(*ep);
  }

  PeerId Connect(Endpoint* from, Endpoint* to) {
    auto p = from->AddPeer(to->address());
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? *p : 0;
  }

  Completion MustTake(Endpoint* ep, uint64_t ctx) {
    auto c = pump_.Take(ep, ctx);
    EXPECT_TRUE(c.has_value()) << "no completion for context " << ctx;
    return c.value_or(Completion{.context = ctx, .status = Code::kAborted});
  }

  // A child target and an endpoint with `op_timeout` connected to it by
  // one Write that went through (tcp's connection, shm's mapping made).
  struct ChildPeer {
    std::optional<ChildTarget> child;
    std::unique_ptr<Endpoint> a;
    PeerId peer = 0;
    RemoteMemory rm;
  };
  void ConnectChild(std::chrono::nanoseconds op_timeout, ChildPeer* out) {
    auto child = ChildTarget::Spawn(GetParam());
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    out->child.emplace(std::move(*child));
    out->a = NewEndpoint(nullptr, op_timeout);
    auto p = out->a->AddPeer(out->child->address());
    ASSERT_TRUE(p.ok());
    out->peer = *p;
    out->rm = out->child->remote();
    std::vector<std::byte> buf(256);
    ASSERT_TRUE(out->a->Write(out->peer, buf.data(), buf.size(), nullptr, out->rm, 0, 1).ok());
    ASSERT_EQ(MustTake(out->a.get(), 1).status, Code::kOk);
  }

  std::unique_ptr<Fabric> fabric_;
  Pump pump_;
};

TEST_P(OfiFabricTest, UnknownProviderIsInvalidArgument) {
  auto f = OpenOfiFabric(FabricOptions{.provider = "carrier-pigeon", .node_address = ""});
  EXPECT_EQ(f.status().code(), Code::kInvalidArgument);
}

TEST_P(OfiFabricTest, SendRecvKeepsOrderAndTrueLengths) {
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  constexpr int kMessages = 64;
  std::vector<std::vector<std::byte>> bufs(kMessages, std::vector<std::byte>(512));
  for (int i = 0; i < kMessages; ++i) {
    ASSERT_TRUE(b->PostRecv(bufs[i].data(), bufs[i].size(), nullptr, 1000 + i).ok());
  }
  std::vector<std::vector<std::byte>> msgs(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    msgs[i].resize(1 + (i * 37) % 400);  // mostly not multiples of 64
    Fill(msgs[i].data(), msgs[i].size(), static_cast<uint8_t>(i));
    ASSERT_TRUE(a->Send(to_b, msgs[i].data(), msgs[i].size(), nullptr, i).ok());
  }
  for (int i = 0; i < kMessages; ++i) {
    Completion s = MustTake(a.get(), i);
    EXPECT_EQ(s.status, Code::kOk);
    EXPECT_EQ(s.op, Op::kSend);
  }
  // Receive buffers are consumed in posting order, so buffer i must hold
  // message i: FIFO on the connection.
  for (int i = 0; i < kMessages; ++i) {
    Completion r = MustTake(b.get(), 1000 + i);
    ASSERT_EQ(r.status, Code::kOk) << i;
    EXPECT_EQ(r.op, Op::kRecv);
    EXPECT_EQ(r.len, msgs[i].size()) << "unpadded length reported for a single receive";
    EXPECT_EQ(r.data, bufs[i].data());
    EXPECT_TRUE(Matches(bufs[i].data(), msgs[i].size(), static_cast<uint8_t>(i))) << i;
  }
}

TEST_P(OfiFabricTest, RecvIntoUnalignedBufferOfExactSize) {
  // The sender pads 100 B to 128 B; a 100 B receive buffer must still work
  // and must not be written past its end.
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  std::vector<std::byte> buf(100 + 64, std::byte{0xEE});
  ASSERT_TRUE(b->PostRecv(buf.data(), 100, nullptr, 7).ok());
  std::vector<std::byte> msg(100);
  Fill(msg.data(), msg.size(), 3);
  ASSERT_TRUE(a->Send(to_b, msg.data(), msg.size(), nullptr, 1).ok());
  Completion r = MustTake(b.get(), 7);
  ASSERT_EQ(r.status, Code::kOk);
  EXPECT_EQ(r.len, 100u);
  EXPECT_TRUE(Matches(buf.data(), 100, 3));
  for (size_t i = 100; i < buf.size(); ++i) ASSERT_EQ(buf[i], std::byte{0xEE}) << i;
  EXPECT_EQ(MustTake(a.get(), 1).status, Code::kOk);
}

TEST_P(OfiFabricTest, MessageLargerThanReceiveBufferIsTooLarge) {
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  std::vector<std::byte> buf(128);
  ASSERT_TRUE(b->PostRecv(buf.data(), 100, nullptr, 7).ok());
  std::vector<std::byte> msg(120);
  ASSERT_TRUE(a->Send(to_b, msg.data(), msg.size(), nullptr, 1).ok());
  EXPECT_EQ(MustTake(b.get(), 7).status, Code::kTooLarge);
}

TEST_P(OfiFabricTest, MultiRecvPlacesPaddedMessagesBackToBack) {
  auto a = NewEndpoint();
  auto a2 = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  const PeerId to_b2 = Connect(a2.get(), b.get());
  AlignedBuf buf(64 * 1024);
  auto mr = b->Register(buf.p, buf.len, Endpoint::kLocal);
  ASSERT_TRUE(mr.ok()) << mr.status().ToString();
  ASSERT_TRUE(b->PostMultiRecv(buf.p, buf.len, &*mr, 99).ok());

  const std::vector<size_t> sizes = {64, 100, 128, 192, 4096, 4160};
  std::vector<std::vector<std::byte>> msgs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    msgs.emplace_back(sizes[i]);
    Fill(msgs.back().data(), sizes[i], static_cast<uint8_t>(10 + i));
  }
  // One sender first, so the expected offsets are exact.
  size_t expect_off = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(a->Send(to_b, msgs[i].data(), sizes[i], nullptr, i).ok());
    Completion r = MustTake(b.get(), 99);
    ASSERT_EQ(r.status, Code::kOk) << sizes[i];
    ASSERT_NE(r.data, nullptr);
    EXPECT_EQ(static_cast<size_t>(r.data - buf.p), expect_off) << "size " << sizes[i];
    EXPECT_EQ(r.len, (sizes[i] + 63) / 64 * 64) << "padded length in a multi-recv buffer";
    EXPECT_TRUE(Matches(r.data, sizes[i], static_cast<uint8_t>(10 + i)));
    EXPECT_FALSE(r.buffer_released);
    expect_off += r.len;
    EXPECT_EQ(MustTake(a.get(), i).status, Code::kOk);
  }
  // Then two senders interleaved: every placement stays stride-aligned and
  // no two messages overlap.
  std::vector<std::pair<size_t, size_t>> spans;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ASSERT_TRUE(a->Send(to_b, msgs[i].data(), sizes[i], nullptr, 100 + i).ok());
    ASSERT_TRUE(a2->Send(to_b2, msgs[i].data(), sizes[i], nullptr, 200 + i).ok());
  }
  for (size_t i = 0; i < 2 * sizes.size(); ++i) {
    Completion r = MustTake(b.get(), 99);
    ASSERT_EQ(r.status, Code::kOk);
    const size_t off = static_cast<size_t>(r.data - buf.p);
    EXPECT_EQ(off % kStride, 0u);
    EXPECT_EQ(off, expect_off) << "back to back";
    EXPECT_EQ(r.len % kStride, 0u);
    spans.emplace_back(off, r.len);
    expect_off += r.len;
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    EXPECT_GE(spans[i].first, spans[i - 1].first + spans[i - 1].second);
  }
}

TEST_P(OfiFabricTest, MultiRecvOverflowMovesToNextBuffer) {
  // max_multi_recv_message 4 KiB and 8 KiB buffers: two 3000 B messages
  // (3008 padded) fit the first buffer; its free tail (2176 B) is then below
  // the limit, so the buffer retires and the third message starts the second
  // buffer. The tail stays untouched.
  auto small = Open(OfiOptions{.max_multi_recv_message = 4096});
  ASSERT_NE(small, nullptr);
  auto a = NewEndpoint(small.get());
  auto b = NewEndpoint(small.get());
  const PeerId to_b = Connect(a.get(), b.get());
  AlignedBuf buf1(8192), buf2(8192);
  std::memset(buf1.p, 0xCD, buf1.len);
  ASSERT_TRUE(b->PostMultiRecv(buf1.p, buf1.len, nullptr, 1).ok());
  ASSERT_TRUE(b->PostMultiRecv(buf2.p, buf2.len, nullptr, 2).ok());
  // Too small for this endpoint's limit: refused, not silently truncating.
  AlignedBuf tiny(1024);
  EXPECT_EQ(b->PostMultiRecv(tiny.p, tiny.len, nullptr, 3).code(), Code::kInvalidArgument);

  std::vector<std::byte> msg(3000);
  for (int i = 0; i < 3; ++i) {
    Fill(msg.data(), msg.size(), static_cast<uint8_t>(i));
    ASSERT_TRUE(a->Send(to_b, msg.data(), msg.size(), nullptr, i).ok());
    ASSERT_EQ(MustTake(a.get(), i).status, Code::kOk);
  }
  Completion m0 = MustTake(b.get(), 1);
  Completion m1 = MustTake(b.get(), 1);
  ASSERT_EQ(m0.status, Code::kOk);
  ASSERT_EQ(m1.status, Code::kOk);
  EXPECT_EQ(m0.data, buf1.p);
  EXPECT_EQ(m1.data, buf1.p + 3008);
  EXPECT_TRUE(Matches(m1.data, 3000, 1));
  // The release may ride on the last message (rxm) or come alone (shm).
  bool released = m1.buffer_released;
  if (!released) {
    Completion rel = MustTake(b.get(), 1);
    EXPECT_EQ(rel.status, Code::kOk);
    EXPECT_TRUE(rel.buffer_released);
    EXPECT_EQ(rel.len, 0u);
    released = rel.buffer_released;
  }
  EXPECT_TRUE(released);
  Completion m2 = MustTake(b.get(), 2);
  ASSERT_EQ(m2.status, Code::kOk);
  EXPECT_EQ(m2.data, buf2.p);
  EXPECT_TRUE(Matches(m2.data, 3000, 2));
  for (size_t i = 2 * 3008; i < buf1.len; ++i) ASSERT_EQ(buf1.p[i], std::byte{0xCD}) << i;
}

TEST_P(OfiFabricTest, MultiRecvLimitIsEnforcedWhenPosting) {
  // libfabric cannot skip a multi-receive buffer for a message longer than
  // its free tail, so both ends of that case are refused up front: buffers
  // shorter than max_multi_recv_message, and messages longer than it.
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  const size_t limit = OfiOptions{}.max_multi_recv_message;
  AlignedBuf tiny(limit - kStride), exact(limit);
  EXPECT_EQ(b->PostMultiRecv(tiny.p, tiny.len, nullptr, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(b->PostMultiRecv(tiny.p + 1, kStride, nullptr, 1).code(), Code::kInvalidArgument)
      << "unaligned";
  ASSERT_TRUE(b->PostMultiRecv(exact.p, exact.len, nullptr, 2).ok());

  std::vector<std::byte> msg(limit + 1);
  Fill(msg.data(), msg.size(), 4);
  EXPECT_EQ(a->Send(to_b, msg.data(), limit + 1, nullptr, 10).code(), Code::kTooLarge);
  EXPECT_EQ(a->Send(to_b, msg.data(), limit - 1, nullptr, 11).code(), Code::kOk)
      << "pads to exactly the limit";
  Completion r = MustTake(b.get(), 2);
  ASSERT_EQ(r.status, Code::kOk);
  EXPECT_EQ(r.data, exact.p);
  EXPECT_EQ(r.len, limit);
  EXPECT_TRUE(Matches(exact.p, limit - 1, 4));
  if (!r.buffer_released) {
    Completion rel = MustTake(b.get(), 2);
    EXPECT_TRUE(rel.buffer_released) << "a full buffer retires";
  }
  EXPECT_EQ(MustTake(a.get(), 11).status, Code::kOk);
  EXPECT_EQ(pump_.Idle(a.get(), 20ms), 0u) << "the refused send must not complete";
}

TEST_P(OfiFabricTest, BadInputIsAnErrorNotACrash) {
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  EXPECT_EQ(a->AddPeer("").status().code(), Code::kInvalidArgument);
  if (GetParam() == "tcp") {
    EXPECT_EQ(a->AddPeer("short").status().code(), Code::kInvalidArgument);
  }
  AlignedBuf target(4096);
  auto tmr = b->Register(target.p, target.len, Endpoint::kRemoteRead | Endpoint::kRemoteWrite);
  ASSERT_TRUE(tmr.ok());
  EXPECT_EQ(b->Register(nullptr, 64, Endpoint::kLocal).status().code(), Code::kInvalidArgument);
  MemoryRegion forged = *tmr;
  forged.id = 12345;
  EXPECT_EQ(b->Deregister(forged).code(), Code::kNotFound);
  std::vector<std::byte> buf(64);
  EXPECT_EQ(a->Write(to_b, nullptr, 64, nullptr, tmr->remote, 0, 1).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(a->Read(to_b, nullptr, 64, nullptr, tmr->remote, 0, 2).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(b->PostRecv(nullptr, 64, nullptr, 3).code(), Code::kInvalidArgument);
  EXPECT_EQ(a->Send(to_b, nullptr, 64, nullptr, 4).code(), Code::kInvalidArgument);
  // A local buffer outside the region it claims to be in.
  EXPECT_EQ(b->PostRecv(target.p + 4000, 200, &*tmr, 5).code(), Code::kInvalidArgument);
  EXPECT_EQ(pump_.Idle(a.get(), 20ms), 0u);
  // Still usable afterwards.
  ASSERT_TRUE(a->Write(to_b, buf.data(), 64, nullptr, tmr->remote, 0, 6).ok());
  EXPECT_EQ(MustTake(a.get(), 6).status, Code::kOk);
}

TEST_P(OfiFabricTest, MessageWaitsForBufferPostedLater) {
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  // A send buffer belongs to the fabric until its completion.
  std::vector<std::vector<std::byte>> msgs(3, std::vector<std::byte>(256));
  for (int i = 0; i < 3; ++i) {
    Fill(msgs[i].data(), 256, static_cast<uint8_t>(i));
    ASSERT_TRUE(a->Send(to_b, msgs[i].data(), 256, nullptr, i).ok());
  }
  // Nothing posted: no receive completion, and nothing is lost meanwhile.
  EXPECT_EQ(pump_.Idle(b.get(), 50ms), 0u);
  AlignedBuf buf(64 * 1024);
  ASSERT_TRUE(b->PostMultiRecv(buf.p, buf.len, nullptr, 5).ok());
  for (int i = 0; i < 3; ++i) {
    Completion r = MustTake(b.get(), 5);
    ASSERT_EQ(r.status, Code::kOk);
    EXPECT_EQ(r.data, buf.p + 256 * i);
    EXPECT_TRUE(Matches(r.data, 256, static_cast<uint8_t>(i)));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(MustTake(a.get(), i).status, Code::kOk);
}

TEST_P(OfiFabricTest, WriteThenReadIsThePersistIdiom) {
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  AlignedBuf target(16 * 1024);
  auto tmr = b->Register(target.p, target.len, Endpoint::kRemoteRead | Endpoint::kRemoteWrite);
  ASSERT_TRUE(tmr.ok()) << tmr.status().ToString();
  AlignedBuf local(8192);
  auto lmr = a->Register(local.p, local.len, Endpoint::kLocal);
  ASSERT_TRUE(lmr.ok());

  Fill(local.p, 4096, 42);
  ASSERT_TRUE(a->Write(to_b, local.p, 4096, &*lmr, tmr->remote, 1024, 1).ok());
  // Read of the same range, posted right behind the write without waiting
  // for its completion: ordering on the connection makes it see the data.
  ASSERT_TRUE(a->Read(to_b, local.p + 4096, 4096, &*lmr, tmr->remote, 1024, 2).ok());
  Completion w = MustTake(a.get(), 1);
  Completion r = MustTake(a.get(), 2);
  EXPECT_EQ(w.status, Code::kOk);
  EXPECT_EQ(w.op, Op::kWrite);
  ASSERT_EQ(r.status, Code::kOk);
  EXPECT_EQ(r.op, Op::kRead);
  EXPECT_TRUE(Matches(local.p + 4096, 4096, 42));
  EXPECT_TRUE(Matches(target.p + 1024, 4096, 42)) << "data placed in the target's memory";
  // Unregistered local buffers work too.
  std::vector<std::byte> plain(300);
  Fill(plain.data(), plain.size(), 9);
  ASSERT_TRUE(a->Write(to_b, plain.data(), plain.size(), nullptr, tmr->remote, 0, 3).ok());
  std::vector<std::byte> back(300);
  ASSERT_TRUE(a->Read(to_b, back.data(), back.size(), nullptr, tmr->remote, 0, 4).ok());
  EXPECT_EQ(MustTake(a.get(), 3).status, Code::kOk);
  EXPECT_EQ(MustTake(a.get(), 4).status, Code::kOk);
  EXPECT_TRUE(Matches(back.data(), back.size(), 9));
  EXPECT_TRUE(b->Deregister(*tmr).ok());
  EXPECT_EQ(b->Deregister(*tmr).code(), Code::kNotFound);
}

TEST_P(OfiFabricTest, BadRemoteRangeIsRejectedWithoutPosting) {
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  AlignedBuf target(4096);
  auto tmr = b->Register(target.p, target.len,
                         Endpoint::kRemoteRead | Endpoint::kRemoteWrite |
                             Endpoint::kRemoteAtomic);
  ASSERT_TRUE(tmr.ok());
  std::vector<std::byte> buf(128);
  uint64_t old = 0;
  const RemoteMemory& rm = tmr->remote;
  EXPECT_EQ(a->Write(to_b, buf.data(), 128, nullptr, rm, 4096 - 64, 1).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(a->Read(to_b, buf.data(), 1, nullptr, rm, 4096, 2).code(), Code::kInvalidArgument);
  EXPECT_EQ(a->Read(to_b, buf.data(), 8, nullptr, rm, UINT64_MAX - 2, 3).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(a->CompareSwap(to_b, rm, 4092, 0, 1, &old, 4).code(), Code::kInvalidArgument);
  EXPECT_EQ(a->FetchAdd(to_b, rm, 4, 1, &old, 5).code(), Code::kInvalidArgument)
      << "unaligned atomic";
  EXPECT_EQ(a->Write(77, buf.data(), 8, nullptr, rm, 0, 6).code(), Code::kInvalidArgument)
      << "unknown peer";
  EXPECT_EQ(pump_.Idle(a.get(), 20ms), 0u) << "a rejected operation must not complete";
  // The exact end of the registration is fine.
  ASSERT_TRUE(a->Write(to_b, buf.data(), 64, nullptr, rm, 4096 - 64, 7).ok());
  EXPECT_EQ(MustTake(a.get(), 7).status, Code::kOk);
}

// Memory keys are random (docs/security.md): a peer given one region's key
// learns nothing of another's, and a guess of a nearby number finds
// nothing (a counter made them 1, 2, 3, ...).
TEST_P(OfiFabricTest, MemoryKeysAreUnpredictable) {
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  std::vector<std::unique_ptr<AlignedBuf>> bufs;
  std::vector<uint64_t> keys;
  for (int i = 0; i < 8; ++i) {
    bufs.push_back(std::make_unique<AlignedBuf>(4096));
    auto mr = b->Register(bufs.back()->p, 4096, Endpoint::kRemoteRead | Endpoint::kRemoteWrite);
    ASSERT_TRUE(mr.ok());
    keys.push_back(mr->remote.key);
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end()) << "distinct";
  int small_steps = 0;
  for (size_t i = 1; i < keys.size(); ++i) small_steps += keys[i] - keys[i - 1] < 1000;
  EXPECT_EQ(small_steps, 0) << "keys in sequence";
  // A forged descriptor: a real address, a guessed key.
  RemoteMemory guess{.addr = 0, .key = keys.back() + 1, .len = 4096};
  auto mr0 = b->Register(bufs[0]->p, 4096, Endpoint::kRemoteRead | Endpoint::kRemoteWrite);
  ASSERT_TRUE(mr0.ok());
  guess.addr = mr0->remote.addr;
  std::vector<std::byte> src(64, std::byte{7});
  ASSERT_TRUE(a->Write(to_b, src.data(), 64, nullptr, guess, 0, 1).ok());
  EXPECT_NE(MustTake(a.get(), 1).status, Code::kOk) << "a guessed key writes nothing";
  EXPECT_EQ(bufs[0]->p[0], std::byte{0});
}

TEST_P(OfiFabricTest, AtomicsUnderContention) {
  auto target = NewEndpoint();
  AlignedBuf words(64);
  auto tmr = target->Register(words.p, words.len, Endpoint::kRemoteAtomic);
  ASSERT_TRUE(tmr.ok());
  constexpr int kClients = 3;
  constexpr int kOps = 150;
  std::vector<std::unique_ptr<Endpoint>> clients;
  std::vector<PeerId> peers;
  for (int i = 0; i < kClients; ++i) {
    auto ep = fabric_->CreateEndpoint(EndpointOptions{.name = "client"});
    ASSERT_TRUE(ep.ok());
    auto p = (*ep)->AddPeer(target->address());
    ASSERT_TRUE(p.ok());
    peers.push_back(*p);
    clients.push_back(std::move(*ep));
  }
  // Each client thread owns its endpoint; the target's NIC thread polls.
  std::atomic<bool> stop{false};
  std::thread nic([&] {
    std::array<Completion, 16> out;
    while (!stop.load()) {
      (void)target->Poll(out);
      std::this_thread::yield();
    }
  });
  std::vector<std::vector<uint64_t>> faa_olds(kClients);
  std::vector<int> cas_attempts(kClients, 0);
  std::vector<std::string> errors(kClients);
  auto run_op = [](Endpoint* ep, uint64_t ctx) -> Code {
    std::array<Completion, 1> out;
    const auto deadline = std::chrono::steady_clock::now() + kGenerous;
    while (std::chrono::steady_clock::now() < deadline) {
      if (ep->Poll(out) == 1) return out[0].context == ctx ? out[0].status : Code::kAborted;
      std::this_thread::yield();
    }
    return Code::kTimeout;
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      Endpoint* ep = clients[c].get();
      uint64_t ctx = 0;
      for (int i = 0; i < kOps; ++i) {
        uint64_t old = 0;
        Status s = ep->FetchAdd(peers[c], tmr->remote, 0, 1, &old, ++ctx);
        if (!s.ok()) return void(errors[c] = s.ToString());
        if (Code code = run_op(ep, ctx); code != Code::kOk) {
          return void(errors[c] = "faa " + std::string(CodeName(code)));
        }
        faa_olds[c].push_back(old);
        // CAS increment of the second word: retry until our swap wins.
        uint64_t seen = 0;
        for (;;) {
          uint64_t prior = 0;
          ++cas_attempts[c];
          s = ep->CompareSwap(peers[c], tmr->remote, 8, seen, seen + 1, &prior, ++ctx);
          if (!s.ok()) return void(errors[c] = s.ToString());
          if (Code code = run_op(ep, ctx); code != Code::kOk) {
            return void(errors[c] = "cas " + std::string(CodeName(code)));
          }
          if (prior == seen) break;
          seen = prior;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  nic.join();
  for (int c = 0; c < kClients; ++c) ASSERT_EQ(errors[c], "") << "client " << c;
  uint64_t w[2];
  std::memcpy(w, words.p, sizeof(w));
  EXPECT_EQ(w[0], uint64_t{kClients * kOps});
  EXPECT_EQ(w[1], uint64_t{kClients * kOps});
  // Fetch-and-add hands out every prior value exactly once.
  std::set<uint64_t> olds;
  for (auto& v : faa_olds) olds.insert(v.begin(), v.end());
  EXPECT_EQ(olds.size(), size_t{kClients * kOps});
  EXPECT_EQ(*olds.rbegin(), uint64_t{kClients * kOps - 1});
}

TEST_P(OfiFabricTest, OneSidedOpsNeedOnlyThePollingTarget) {
  // The child never posts a buffer or looks at its memory: it only waits on
  // and polls its endpoint, like a node's NIC thread with no worker. It waits
  // up to 1 s at a time, so this also checks that incoming operations wake it.
  auto child = ChildTarget::Spawn(GetParam());
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  auto a = NewEndpoint();
  auto p = a->AddPeer(child->address());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const RemoteMemory& rm = child->remote();
  ASSERT_EQ(rm.len, kChildRegionBytes);

  // The child initialised byte i to i % 251.
  std::vector<uint8_t> got(512);
  ASSERT_TRUE(a->Read(*p, got.data(), got.size(), nullptr, rm, 1000, 1).ok());
  ASSERT_EQ(MustTake(a.get(), 1).status, Code::kOk);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], (1000 + i) % 251) << i;

  const auto start = std::chrono::steady_clock::now();
  constexpr int kRounds = 20;
  std::vector<std::byte> data(4096), back(4096);
  for (int round = 0; round < kRounds; ++round) {
    Fill(data.data(), data.size(), static_cast<uint8_t>(round));
    const uint64_t off = 4096 * static_cast<uint64_t>(round % 8);
    ASSERT_TRUE(a->Write(*p, data.data(), data.size(), nullptr, rm, off, 10).ok());
    ASSERT_TRUE(a->Read(*p, back.data(), back.size(), nullptr, rm, off, 11).ok());
    ASSERT_EQ(MustTake(a.get(), 10).status, Code::kOk);
    ASSERT_EQ(MustTake(a.get(), 11).status, Code::kOk);
    ASSERT_TRUE(Matches(back.data(), back.size(), static_cast<uint8_t>(round)));
  }
  // 40 operations against a target parked for up to 1 s each time: if an
  // operation did not wake it, this would take ~40 s.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);

  uint64_t old = 99;
  ASSERT_TRUE(a->Write(*p, &old, 8, nullptr, rm, 60000, 20).ok());
  ASSERT_EQ(MustTake(a.get(), 20).status, Code::kOk);
  ASSERT_TRUE(a->FetchAdd(*p, rm, 60000, 5, &old, 21).ok());
  ASSERT_EQ(MustTake(a.get(), 21).status, Code::kOk);
  EXPECT_EQ(old, 99u);
  ASSERT_TRUE(a->CompareSwap(*p, rm, 60000, 104, 7, &old, 22).ok());
  ASSERT_EQ(MustTake(a.get(), 22).status, Code::kOk);
  EXPECT_EQ(old, 104u);
  ASSERT_TRUE(a->CompareSwap(*p, rm, 60000, 104, 8, &old, 23).ok());
  ASSERT_EQ(MustTake(a.get(), 23).status, Code::kOk);
  EXPECT_EQ(old, 7u) << "failed compare leaves the word";
}

// shm (1.17) posts under a spinlock in the target's region (region_lock.h).
// A target killed while it held that lock — here: the target killed, then
// its lock word set held through a mapping of its region — would leave
// every later post spinning in libfabric for ever. The endpoint sees the
// lock held and does not post: the operations fail within op_timeout.
TEST_P(OfiFabricTest, APeerKilledHoldingItsRegionLockFailsOpsInsteadOfHangingThem) {
  if (GetParam() != "shm") GTEST_SKIP() << "shm's region locks only";
  constexpr auto kOpTimeout = 500ms;
  ChildPeer cp;
  ASSERT_NO_FATAL_FAILURE(ConnectChild(kOpTimeout, &cp));
  std::vector<std::byte> buf(256);
  ASSERT_NE(ofi_internal::RegionLockWatch::Open(cp.child->address()), nullptr)
      << "the installed libfabric's shm region header is not the layout region_lock.h knows: posts are unguarded";

  // The child's region, mapped here before it dies (its file is swept then).
  auto name = ofi_internal::OurRegionName(cp.child->address());
  ASSERT_TRUE(name.ok());
  const int fd = ::open(("/dev/shm/" + *name).c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* header = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  ASSERT_NE(header, MAP_FAILED);
  cp.child->Kill();
  auto* lock = reinterpret_cast<int*>(static_cast<char*>(header) + ofi_internal::kShmRegionLockOffset);
  // Held (glibc x86: 1 is free), by a process that is gone — if the child
  // did not die holding it already.
  __atomic_store_n(lock, 0, __ATOMIC_RELEASE);

  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(cp.a->Write(cp.peer, buf.data(), buf.size(), nullptr, cp.rm, 0, 2).ok());
  ASSERT_TRUE(cp.a->Send(cp.peer, buf.data(), 64, nullptr, 3).ok());
  for (uint64_t ctx : {2, 3}) {
    auto c = pump_.Take(cp.a.get(), ctx, kOpTimeout + 5s);
    ASSERT_TRUE(c.has_value()) << "operation " << ctx << " hung on a dead peer's region lock";
    EXPECT_TRUE(c->status == Code::kUnavailable || c->status == Code::kTimeout) << CodeName(c->status);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, kOpTimeout + 2s);
  EXPECT_EQ(__atomic_load_n(lock, __ATOMIC_ACQUIRE), 0) << "nobody took the lock";
  ::munmap(header, 4096);
}

TEST_P(OfiFabricTest, DeadPeerFailsWithinOpTimeout) {
  constexpr auto kOpTimeout = 500ms;
  ChildPeer cp;
  ASSERT_NO_FATAL_FAILURE(ConnectChild(kOpTimeout, &cp));
  std::vector<std::byte> buf(256);

  cp.child->Kill();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(cp.a->Write(cp.peer, buf.data(), buf.size(), nullptr, cp.rm, 0, 2).ok());
  ASSERT_TRUE(cp.a->Read(cp.peer, buf.data(), buf.size(), nullptr, cp.rm, 0, 3).ok());
  uint64_t old = 0;
  ASSERT_TRUE(cp.a->FetchAdd(cp.peer, cp.rm, 0, 1, &old, 4).ok());
  for (uint64_t ctx : {2, 3, 4}) {
    auto c = pump_.Take(cp.a.get(), ctx, kOpTimeout + 5s);
    ASSERT_TRUE(c.has_value()) << "operation " << ctx << " hung on a dead peer";
    EXPECT_TRUE(c->status == Code::kUnavailable || c->status == Code::kTimeout)
        << "ctx " << ctx << ": " << CodeName(c->status);
    std::printf("%s: op %d -> %s after %lld ms\n", GetParam().c_str(), static_cast<int>(c->op),
                std::string(CodeName(c->status)).c_str(),
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - start)
                                           .count()));
  }
  // "Within op_timeout" plus scheduling slack for a loaded 2-core machine.
  EXPECT_LT(std::chrono::steady_clock::now() - start, kOpTimeout + 2s);
  // A send to the dead peer fails too (shm: nobody acknowledges delivery;
  // tcp: connection refused/reset), and so does every later attempt.
  for (uint64_t ctx : {5, 6}) {
    ASSERT_TRUE(cp.a->Send(cp.peer, buf.data(), 64, nullptr, ctx).ok());
    auto s = pump_.Take(cp.a.get(), ctx, kOpTimeout + 5s);
    ASSERT_TRUE(s.has_value());
    EXPECT_TRUE(s->status == Code::kUnavailable || s->status == Code::kTimeout)
        << CodeName(s->status);
  }
}

TEST_P(OfiFabricTest, WaitReturnsOnTimeoutAndOnCompletion) {
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  const PeerId to_b = Connect(a.get(), b.get());
  auto start = std::chrono::steady_clock::now();
  b->Wait(30ms);
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 25ms);
  EXPECT_LT(waited, 2s);

  AlignedBuf buf(64 * 1024);
  ASSERT_TRUE(b->PostMultiRecv(buf.p, buf.len, nullptr, 1).ok());
  std::vector<std::byte> msg(64);
  ASSERT_TRUE(a->Send(to_b, msg.data(), msg.size(), nullptr, 2).ok());
  // a must progress its send (tcp) before b can see it; give it a thread.
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    std::array<Completion, 4> out;
    while (!stop.load()) {
      (void)a->Poll(out);
      std::this_thread::sleep_for(100us);
    }
  });
  std::array<Completion, 4> out;
  size_t got = 0;
  start = std::chrono::steady_clock::now();
  while (got == 0 && std::chrono::steady_clock::now() - start < kGenerous) {
    b->Wait(5s);
    got = b->Poll(out);
  }
  stop = true;
  sender.join();
  ASSERT_EQ(got, 1u);
  EXPECT_EQ(out[0].context, 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << "Wait must return on arrival";
}

// A peer's post makes an endpoint's wait fd readable, so an executor
// parked on it wakes: tcp's is its completion queue's, which sees every
// event; shm (no wait object) has a doorbell its peers ring after each
// post, which sees only those (an executor still polls every max_park).
TEST_P(OfiFabricTest, APeersPostMakesTheWaitFdReadable) {
  const bool shm = GetParam() == "shm";
  auto a = NewEndpoint();
  auto b = NewEndpoint();
  ASSERT_GE(b->wait_fd(), 0);
  EXPECT_EQ(b->wait_fd_sees_all(), !shm);
  const PeerId to_b = Connect(a.get(), b.get());
  AlignedBuf buf(64 * 1024);
  ASSERT_TRUE(b->PostMultiRecv(buf.p, buf.len, nullptr, 1).ok());
  std::vector<std::byte> msg(64);
  auto readable = [&] {
    pollfd p{b->wait_fd(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  };
  // Delivers message `ctx`, a progressing as b would only when woken.
  auto deliver = [&](uint64_t ctx) {
    ASSERT_TRUE(a->Send(to_b, msg.data(), msg.size(), nullptr, ctx).ok());
    if (shm) {
      EXPECT_TRUE(readable()) << "the send did not ring b's doorbell";
    }
    std::array<Completion, 4> out;
    const auto start = std::chrono::steady_clock::now();
    bool received = false, sent = false;
    // b as a parked executor runs it: asks CanBlock, blocks on the fd
    // (here up to 10 ms, a's progress in between), looks when woken.
    while (!received && std::chrono::steady_clock::now() - start < kGenerous) {
      const size_t done = a->Poll(out);
      for (size_t i = 0; i < done; ++i) sent |= out[i].context == ctx && out[i].status == Code::kOk;
      if (b->CanBlock()) {
        pollfd p{b->wait_fd(), POLLIN, 0};
        if (::poll(&p, 1, 10) != 1) continue;
      }
      const size_t n = b->Poll(out);
      for (size_t i = 0; i < n; ++i) received |= out[i].op == Op::kRecv && out[i].status == Code::kOk;
    }
    EXPECT_TRUE(received) << "message " << ctx << " never woke b";
    if (!sent) {
      EXPECT_EQ(MustTake(a.get(), ctx).status, Code::kOk);
    }
  };
  deliver(2);  // the first: shm maps the names
  // Idle again: it may block, and nothing rings it while nothing is posted.
  std::array<Completion, 4> out;
  (void)b->Poll(out);
  EXPECT_TRUE(b->CanBlock());
  std::this_thread::sleep_for(20ms);
  if (shm) {
    EXPECT_FALSE(readable()) << "rung with nothing posted";
  }
  EXPECT_TRUE(b->CanBlock());
  deliver(3);
}

INSTANTIATE_TEST_SUITE_P(Providers, OfiFabricTest, ::testing::Values("shm", "tcp"),
                         [](const auto& param_info) { return param_info.param; });

TEST(OfiVerbsTest, VerbsIsNotSupportedWithoutDevice) {
  auto f = OpenOfiFabric(FabricOptions{.provider = "verbs", .node_address = ""});
  if (!f.ok()) {
    EXPECT_EQ(f.status().code(), Code::kNotSupported) << f.status().ToString();
    GTEST_SKIP() << "no RDMA device: " << f.status().ToString();
  }
  // A machine with a device: the basics must work there too.
  auto ep = (*f)->CreateEndpoint(EndpointOptions{.name = "verbs"});
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  auto ep2 = (*f)->CreateEndpoint(EndpointOptions{.name = "verbs2"});
  ASSERT_TRUE(ep2.ok());
  Pump pump;
  pump.Add(ep->get());
  pump.Add(ep2->get());
  auto p = (*ep)->AddPeer((*ep2)->address());
  ASSERT_TRUE(p.ok());
  AlignedBuf target(4096), local(4096);
  auto tmr = (*ep2)->Register(target.p, target.len, Endpoint::kRemoteWrite | Endpoint::kRemoteRead);
  ASSERT_TRUE(tmr.ok());
  Fill(local.p, 4096, 5);
  ASSERT_TRUE((*ep)->Write(*p, local.p, 4096, nullptr, tmr->remote, 0, 1).ok());
  auto c = pump.Take(ep->get(), 1);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->status, Code::kOk);
  EXPECT_TRUE(Matches(target.p, 4096, 5));
}

}  // namespace
}  // namespace slip::fabric
