#include "fabric/contract/contract_test_suite.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "common/random.h"

namespace slip::fabric::contract {

// ---------------------------------------------------------------------------
// FabricHarness bookkeeping

const std::vector<Completion>& FabricHarness::completions(int i) const {
  static const std::vector<Completion> kNone;
  if (i < 0 || static_cast<size_t>(i) >= completions_.size()) return kNone;
  return completions_[i];
}

std::optional<Completion> FabricHarness::Find(int i, uint64_t context, Op op) const {
  for (const Completion& c : completions(i)) {
    if (c.context == context && c.op == op) return c;
  }
  return std::nullopt;
}

std::vector<Completion> FabricHarness::Messages(int i) const {
  std::vector<Completion> out;
  for (const Completion& c : completions(i)) {
    if (c.op == Op::kRecv && c.status == Code::kOk && c.data != nullptr && c.len > 0) {
      out.push_back(c);
    }
  }
  return out;
}

size_t FabricHarness::PollEndpoint(int i) {
  if (static_cast<size_t>(i) >= completions_.size()) completions_.resize(i + 1);
  Completion batch[64];
  size_t total = 0;
  for (;;) {
    size_t n = endpoint(i).Poll(batch);
    completions_[i].insert(completions_[i].end(), batch, batch + n);
    total += n;
    if (n < std::size(batch)) return total;
  }
}

std::string HarnessName(const ::testing::TestParamInfo<HarnessFactory>& info) {
  return info.param.name;
}

void PrintTo(const HarnessFactory& factory, std::ostream* os) { *os << factory.name; }

AlignedBuffer::AlignedBuffer(size_t len)
    : data_(static_cast<std::byte*>(::operator new(len, std::align_val_t{kStride}))), len_(len) {
  std::memset(data_, 0, len_);
}

AlignedBuffer::~AlignedBuffer() { ::operator delete(data_, std::align_val_t{kStride}); }

// ---------------------------------------------------------------------------
// Fixture

void FabricContractTest::SetUp() {
  harness_ = GetParam().make();
  ASSERT_NE(harness_, nullptr);
}

void FabricContractTest::TearDown() {
  if (harness_ != nullptr) {
    for (auto& [node, mr] : registrations_) {
      if (std::find(killed_.begin(), killed_.end(), node) != killed_.end()) continue;
      EXPECT_TRUE(ep(node).Deregister(mr).ok());
    }
    registrations_.clear();
    harness_.reset();
  }
  buffers_.clear();  // last: no endpoint can touch them any more
}

AlignedBuffer& FabricContractTest::Buffer(size_t len) {
  buffers_.push_back(std::make_unique<AlignedBuffer>(len));
  return *buffers_.back();
}

EndpointOptions FabricContractTest::DefaultOptions() {
  EndpointOptions o;
  o.name = "contract";
  o.op_timeout = std::chrono::seconds(2);
  return o;
}

bool FabricContractTest::StartNodes(int n, EndpointOptions options) {
  Status s = harness_->Start(n, options);
  if (s.Is(Code::kNotSupported)) {
    // GTEST_SKIP returns from the enclosing void function: give it one.
    [&] { GTEST_SKIP() << "provider not available: " << s.ToString(); }();
    return false;
  }
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok();
}

Status FabricContractTest::PostRetrying(const std::function<Status()>& post) {
  for (int attempt = 0;; ++attempt) {
    Status s = post();
    if (!s.Is(Code::kBusy) || attempt > 100000) return s;
    DriveFor(std::chrono::microseconds(50));
  }
}

std::optional<Completion> FabricContractTest::Await(int i, uint64_t context, Op op) {
  DriveUntil([&] { return harness_->Has(i, context, op); });
  return harness_->Find(i, context, op);
}

bool FabricContractTest::DriveUntil(const std::function<bool()>& cond) {
  return harness_->DriveUntil(cond, kPatience);
}

void FabricContractTest::DriveFor(std::chrono::nanoseconds d) {
  harness_->DriveUntil([] { return false; }, d);
}

MemoryRegion FabricContractTest::Register(int i, const AlignedBuffer& buf) {
  auto r = ep(i).Register(buf.data(), buf.size(),
                          Endpoint::kRemoteRead | Endpoint::kRemoteWrite | Endpoint::kRemoteAtomic);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return MemoryRegion{};
  registrations_.emplace_back(i, *r);
  return *r;
}

Status FabricContractTest::Kill(int i) {
  killed_.push_back(i);
  return harness_->KillNode(i);
}

namespace {

constexpr size_t RoundUp(size_t n) { return (n + kStride - 1) / kStride * kStride; }

// Deterministic payload whose first 8 bytes (when there is room) carry `tag`,
// so a received message names itself.
std::vector<std::byte> Payload(size_t len, uint64_t tag) {
  std::vector<std::byte> p(len);
  Random rng(tag * 7919 + len);
  for (auto& b : p) b = static_cast<std::byte>(rng.Next());
  if (len >= sizeof(tag)) std::memcpy(p.data(), &tag, sizeof(tag));
  return p;
}

uint64_t TagOf(const Completion& c) {
  uint64_t tag;
  std::memcpy(&tag, c.data, sizeof(tag));
  return tag;
}

uint64_t LoadWord(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void StoreWord(std::byte* p, uint64_t v) { std::memcpy(p, &v, sizeof(v)); }

bool IsDeadPeerCode(Code c) { return c == Code::kUnavailable || c == Code::kTimeout; }

constexpr std::byte kUntouched{0xEE};

bool AllEqual(const std::byte* p, size_t n, std::byte v) {
  return std::all_of(p, p + n, [v](std::byte b) { return b == v; });
}

// Completions of one endpoint not yet consumed: lets a state machine react to
// each completion once without rescanning the whole history.
class Cursor {
 public:
  Cursor(const FabricHarness& h, int node) : h_(h), node_(node) {}
  std::vector<Completion> Next() {
    const auto& all = h_.completions(node_);
    std::vector<Completion> out(all.begin() + static_cast<ptrdiff_t>(seen_), all.end());
    seen_ = all.size();
    return out;
  }

 private:
  const FabricHarness& h_;
  int node_;
  size_t seen_ = 0;
};

}  // namespace

// ---------------------------------------------------------------------------
// Ordering

// FIFO per connection: one sender's messages are placed in posting order.
TEST_P(FabricContractTest, SendsArriveInPostingOrderWithinAConnection) {
  if (!StartNodes(2)) return;
  constexpr int kMessages = 300;
  AlignedBuffer& rbuf = Buffer(kMessages * 256);
  MemoryRegion rmr = Register(1, rbuf);
  ASSERT_TRUE(ep(1).PostMultiRecv(rbuf.data(), rbuf.size(), &rmr, 7).ok());

  std::vector<std::vector<std::byte>> sent;
  for (int m = 0; m < kMessages; ++m) sent.push_back(Payload(8 + (m * 37) % 200, m));
  for (int m = 0; m < kMessages; ++m) {
    ASSERT_TRUE(PostRetrying([&] {
                  return ep(0).Send(peer(0, 1), sent[m].data(), sent[m].size(), nullptr, m);
                }).ok());
  }
  ASSERT_TRUE(DriveUntil([&] { return h().Messages(1).size() == kMessages; }))
      << "received " << h().Messages(1).size() << " of " << kMessages;
  auto got = h().Messages(1);
  for (int m = 0; m < kMessages; ++m) {
    ASSERT_EQ(TagOf(got[m]), static_cast<uint64_t>(m)) << "message " << m << " out of order";
    EXPECT_EQ(got[m].len, RoundUp(sent[m].size()));
    EXPECT_EQ(std::memcmp(got[m].data, sent[m].data(), sent[m].size()), 0);
    EXPECT_EQ(got[m].context, 7u);
  }
  ASSERT_TRUE(DriveUntil([&] {
    for (int m = 0; m < kMessages; ++m) {
      if (!h().Has(0, m, Op::kSend)) return false;
    }
    return true;
  }));
  for (int m = 0; m < kMessages; ++m) EXPECT_EQ(h().Find(0, m, Op::kSend)->status, Code::kOk);
}

// Writes on one connection are placed in order, and a Read posted after them
// observes all of them (the "Write then Read" idiom), without waiting for the
// writes' completions in between.
TEST_P(FabricContractTest, ReadAfterWritesObservesThemAll) {
  if (!StartNodes(2)) return;
  constexpr size_t kSpan = 512;
  constexpr int kWrites = 64;
  AlignedBuffer& target = Buffer(4096);
  MemoryRegion tmr = Register(1, target);
  AlignedBuffer& src = Buffer(kWrites * 64 + kSpan);
  MemoryRegion smr = Register(0, src);

  std::vector<std::byte> expect(kSpan, std::byte{0});
  Random rng(42);
  for (int w = 0; w < kWrites; ++w) {
    size_t len = 8 * rng.Range(1, 8);
    size_t off = 8 * rng.Uniform((kSpan - len) / 8 + 1);
    std::byte* s = src.data() + w * 64;
    for (size_t b = 0; b < len; ++b) s[b] = static_cast<std::byte>(rng.Next());
    std::memcpy(expect.data() + off, s, len);
    ASSERT_TRUE(PostRetrying([&] {
                  return ep(0).Write(peer(0, 1), s, len, &smr, tmr.remote, off, 1000 + w);
                }).ok());
  }
  std::byte* dst = src.data() + kWrites * 64;
  ASSERT_TRUE(PostRetrying([&] {
                return ep(0).Read(peer(0, 1), dst, kSpan, &smr, tmr.remote, 0, 1);
              }).ok());
  auto read = Await(0, 1, Op::kRead);
  ASSERT_TRUE(read.has_value());
  ASSERT_EQ(read->status, Code::kOk);
  EXPECT_EQ(std::memcmp(dst, expect.data(), kSpan), 0);
  EXPECT_EQ(std::memcmp(target.data(), expect.data(), kSpan), 0);
  ASSERT_TRUE(DriveUntil([&] {
    for (int w = 0; w < kWrites; ++w) {
      if (!h().Has(0, 1000 + w, Op::kWrite)) return false;
    }
    return true;
  }));
  for (int w = 0; w < kWrites; ++w) EXPECT_EQ(h().Find(0, 1000 + w, Op::kWrite)->status, Code::kOk);
}

// A Read completes only after an earlier Send on the same connection has been
// placed in the target's receive buffer (Rowan's SEND + READ).
TEST_P(FabricContractTest, ReadCompletesAfterEarlierSendIsPlaced) {
  if (!StartNodes(2)) return;
  AlignedBuffer& rbuf = Buffer(kMultiRecvBuffer);
  MemoryRegion rmr = Register(1, rbuf);
  ASSERT_TRUE(ep(1).PostMultiRecv(rbuf.data(), rbuf.size(), &rmr, 5).ok());
  AlignedBuffer& local = Buffer(64);
  MemoryRegion lmr = Register(0, local);

  auto msg = Payload(4160, 99);  // larger than typical MTUs: several packets
  ASSERT_TRUE(PostRetrying([&] {
                return ep(0).Send(peer(0, 1), msg.data(), msg.size(), nullptr, 1);
              }).ok());
  ASSERT_TRUE(PostRetrying([&] {
                return ep(0).Read(peer(0, 1), local.data(), 8, &lmr, rmr.remote, 0, 2);
              }).ok());
  auto read = Await(0, 2, Op::kRead);
  ASSERT_TRUE(read.has_value());
  ASSERT_EQ(read->status, Code::kOk);
  // The message is in the buffer now, whether or not node 1 polled its
  // completion yet.
  EXPECT_EQ(std::memcmp(rbuf.data(), msg.data(), msg.size()), 0);
  EXPECT_EQ(std::memcmp(local.data(), msg.data(), 8), 0);
}

// Silent (unsignalled) Sends and Writes chained before a Read, as the
// replicator posts them: they land like any other, report nothing, and the
// Read's completion vouches for them.
TEST_P(FabricContractTest, SilentOperationsReportNothingWhenTheySucceed) {
  if (!StartNodes(2)) return;
  AlignedBuffer& rbuf = Buffer(kMultiRecvBuffer);
  MemoryRegion rmr = Register(1, rbuf);
  ASSERT_TRUE(ep(1).PostMultiRecv(rbuf.data(), rbuf.size(), &rmr, 5).ok());
  AlignedBuffer& target = Buffer(4096);
  MemoryRegion tmr = Register(1, target);
  AlignedBuffer& local = Buffer(4096);
  MemoryRegion lmr = Register(0, local);

  auto msg = Payload(4160, 7);
  auto data = Payload(512, 8);
  std::memcpy(local.data(), data.data(), data.size());
  constexpr uint32_t kChained = kMore | kSilent;
  ASSERT_TRUE(PostRetrying([&] {
                return ep(0).Send(peer(0, 1), msg.data(), msg.size(), nullptr, 1, kChained);
              }).ok());
  ASSERT_TRUE(PostRetrying([&] {
                return ep(0).Write(peer(0, 1), local.data(), data.size(), &lmr, tmr.remote, 64, 2, kChained);
              }).ok());
  ASSERT_TRUE(PostRetrying([&] {
                return ep(0).Read(peer(0, 1), local.data() + 1024, 8, &lmr, tmr.remote, 64, 3);
              }).ok());
  auto read = Await(0, 3, Op::kRead);
  ASSERT_TRUE(read.has_value());
  ASSERT_EQ(read->status, Code::kOk);
  EXPECT_EQ(std::memcmp(rbuf.data(), msg.data(), msg.size()), 0);
  EXPECT_EQ(std::memcmp(target.data() + 64, data.data(), data.size()), 0);
  EXPECT_EQ(std::memcmp(local.data() + 1024, data.data(), 8), 0);
  // The receiver sees the message as usual; the sender hears nothing of
  // the silent operations, then or later.
  ASSERT_TRUE(Await(1, 5, Op::kRecv).has_value());
  DriveFor(std::chrono::milliseconds(5));
  EXPECT_FALSE(h().Has(0, 1, Op::kSend));
  EXPECT_FALSE(h().Has(0, 2, Op::kWrite));
  EXPECT_EQ(h().completions(0).size(), 1u);
}

// A silent operation that fails completes with its error, and before the
// Read posted behind it: the replicator never takes that Read's success for
// the failed Write's.
TEST_P(FabricContractTest, SilentFailureIsReportedBeforeALaterCompletion) {
  if (!StartNodes(2)) return;
  AlignedBuffer& target = Buffer(256);
  MemoryRegion tmr = Register(1, target);
  AlignedBuffer& local = Buffer(256);
  MemoryRegion lmr = Register(0, local);
  std::memset(local.data(), 0x5A, 64);
  RemoteMemory forged = tmr.remote;
  forged.key ^= 0x5bd1e995u;
  Status s = ep(0).Write(peer(0, 1), local.data(), 64, &lmr, forged, 0, 1, kMore | kSilent);
  if (!s.ok()) GTEST_SKIP() << "refused at posting: " << s.ToString();
  ASSERT_TRUE(PostRetrying([&] {
                return ep(0).Read(peer(0, 1), local.data() + 128, 8, &lmr, tmr.remote, 0, 2);
              }).ok());
  ASSERT_TRUE(DriveUntil([&] { return h().Has(0, 1, Op::kWrite) && h().Has(0, 2, Op::kRead); }));
  const auto& all = h().completions(0);
  size_t write_at = all.size(), read_at = all.size();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].context == 1 && all[i].op == Op::kWrite) write_at = std::min(write_at, i);
    if (all[i].context == 2 && all[i].op == Op::kRead) read_at = std::min(read_at, i);
  }
  EXPECT_NE(all[write_at].status, Code::kOk);
  EXPECT_LT(write_at, read_at);
  EXPECT_TRUE(AllEqual(target.data(), target.size(), std::byte{0}));
}

// ---------------------------------------------------------------------------
// Multi-receive buffers

// Back to back at 64 B stride, in order, lengths padded, contents intact, and
// nothing written past the last message.
TEST_P(FabricContractTest, MultiRecvPlacesMessagesBackToBackAtStride) {
  if (!StartNodes(2)) return;
  const std::vector<size_t> sizes = {64, 100, 128, 192, 4096, 4160};
  AlignedBuffer& rbuf = Buffer(kMultiRecvBuffer);
  std::memset(rbuf.data(), static_cast<int>(kUntouched), rbuf.size());
  MemoryRegion rmr = Register(1, rbuf);
  ASSERT_TRUE(ep(1).PostMultiRecv(rbuf.data(), rbuf.size(), &rmr, 3).ok());

  std::vector<std::vector<std::byte>> sent;
  for (size_t m = 0; m < sizes.size(); ++m) sent.push_back(Payload(sizes[m], m));
  for (size_t m = 0; m < sizes.size(); ++m) {
    ASSERT_TRUE(PostRetrying([&] {
                  return ep(0).Send(peer(0, 1), sent[m].data(), sent[m].size(), nullptr, m);
                }).ok());
  }
  ASSERT_TRUE(DriveUntil([&] { return h().Messages(1).size() == sizes.size(); }));
  auto got = h().Messages(1);
  size_t expected_offset = 0;
  for (size_t m = 0; m < sizes.size(); ++m) {
    SCOPED_TRACE("message of " + std::to_string(sizes[m]) + " B");
    size_t offset = static_cast<size_t>(got[m].data - rbuf.data());
    EXPECT_EQ(offset % kStride, 0u);
    EXPECT_EQ(offset, expected_offset);
    EXPECT_EQ(got[m].len, RoundUp(sizes[m]));
    EXPECT_EQ(got[m].context, 3u);
    EXPECT_EQ(std::memcmp(got[m].data, sent[m].data(), sizes[m]), 0);
    expected_offset = offset + RoundUp(sizes[m]);
  }
  EXPECT_TRUE(AllEqual(rbuf.data() + expected_offset, rbuf.size() - expected_offset, kUntouched))
      << "bytes written past the last placed message";
}

// Two senders share one buffer: placements tile the buffer without overlap,
// each sender's messages keep their order, contents intact.
TEST_P(FabricContractTest, MultiRecvIsSharedByManySenders) {
  if (!StartNodes(3)) return;
  constexpr int kPerSender = 40;
  AlignedBuffer& rbuf = Buffer(std::max<size_t>(2 * kPerSender * 320, kMultiRecvBuffer));
  MemoryRegion rmr = Register(1, rbuf);
  ASSERT_TRUE(ep(1).PostMultiRecv(rbuf.data(), rbuf.size(), &rmr, 9).ok());

  std::vector<std::vector<std::byte>> sent;  // index = sender_slot * kPerSender + m
  for (int s = 0; s < 2; ++s) {
    for (int m = 0; m < kPerSender; ++m) {
      sent.push_back(Payload(8 + (m * 53 + s * 11) % 300, s * kPerSender + m));
    }
  }
  for (int m = 0; m < kPerSender; ++m) {
    for (int s = 0; s < 2; ++s) {
      const int node = s == 0 ? 0 : 2;
      const auto& p = sent[s * kPerSender + m];
      ASSERT_TRUE(PostRetrying([&] {
                    return ep(node).Send(peer(node, 1), p.data(), p.size(), nullptr, m);
                  }).ok());
    }
  }
  ASSERT_TRUE(DriveUntil([&] { return h().Messages(1).size() == 2 * kPerSender; }));
  auto got = h().Messages(1);
  std::sort(got.begin(), got.end(),
            [](const Completion& a, const Completion& b) { return a.data < b.data; });
  size_t next_offset = 0;
  int last_index[2] = {-1, -1};
  for (const Completion& c : got) {
    EXPECT_EQ(static_cast<size_t>(c.data - rbuf.data()), next_offset) << "gap or overlap";
    next_offset = static_cast<size_t>(c.data - rbuf.data()) + c.len;
    uint64_t tag = TagOf(c);
    ASSERT_LT(tag, sent.size());
    const int s = static_cast<int>(tag / kPerSender);
    const int m = static_cast<int>(tag % kPerSender);
    EXPECT_GT(m, last_index[s]) << "sender " << s << " reordered";
    last_index[s] = m;
    EXPECT_EQ(c.len, RoundUp(sent[tag].size()));
    EXPECT_EQ(std::memcmp(c.data, sent[tag].data(), sent[tag].size()), 0);
  }
}

// Overflow from one multi-receive buffer to the next, as every provider can
// honour it (see "Multi-receive buffers" in contract_test_suite.h): more
// messages than buffer A holds, of the sizes protocols send. Each message
// lies entirely in one buffer, at the 64 B stride, back to back from the
// buffer's start; none is split, lost or reordered; buffers are used in
// posting order and none is skipped; A retires (reported before anything
// lands in B) with an unwritten tail shorter than kMaxRetiredTail that stays
// untouched; B, which keeps plenty of room, neither retires nor lets
// anything spill into C.
TEST_P(FabricContractTest, MultiRecvOverflowsToTheNextBuffer) {
  if (!StartNodes(2)) return;
  constexpr size_t kA = 32 * 1024, kB = 64 * 1024, kC = 32 * 1024;
  const std::vector<size_t> cycle = {64, 100, 128, 192, 4096, 4160};  // 8768 B padded
  constexpr int kMessages = 30;  // 43840 B padded: more than A, far less than A + B
  AlignedBuffer* bufs[3] = {&Buffer(kA), &Buffer(kB), &Buffer(kC)};
  for (int k = 0; k < 3; ++k) {
    std::memset(bufs[k]->data(), static_cast<int>(kUntouched), bufs[k]->size());
    MemoryRegion mr = Register(1, *bufs[k]);
    ASSERT_TRUE(ep(1).PostMultiRecv(bufs[k]->data(), bufs[k]->size(), &mr, 100 + k).ok());
  }
  std::vector<std::vector<std::byte>> sent;
  for (int m = 0; m < kMessages; ++m) sent.push_back(Payload(cycle[m % cycle.size()], m));
  for (int m = 0; m < kMessages; ++m) {
    ASSERT_TRUE(PostRetrying([&] {
                  return ep(0).Send(peer(0, 1), sent[m].data(), sent[m].size(), nullptr, m);
                }).ok());
  }
  ASSERT_TRUE(DriveUntil([&] { return h().Messages(1).size() == kMessages; }))
      << "received " << h().Messages(1).size() << " of " << kMessages;
  auto got = h().Messages(1);

  int buf_of_prev = 0;
  size_t next_offset[3] = {0, 0, 0};  // end of the last message in each buffer
  int first_in_b = -1;
  for (int m = 0; m < kMessages; ++m) {
    SCOPED_TRACE("message " + std::to_string(m) + " of " + std::to_string(sent[m].size()) + " B");
    const Completion& c = got[m];
    ASSERT_EQ(TagOf(c), static_cast<uint64_t>(m)) << "lost or reordered";
    ASSERT_EQ(c.len, RoundUp(sent[m].size()));
    int k = 0;
    while (k < 3 && !(c.data >= bufs[k]->data() && c.data < bufs[k]->data() + bufs[k]->size())) {
      ++k;
    }
    ASSERT_LT(k, 3) << "placed outside every posted buffer";
    const size_t offset = static_cast<size_t>(c.data - bufs[k]->data());
    EXPECT_LE(offset + c.len, bufs[k]->size()) << "split across buffers";
    EXPECT_EQ(c.context, static_cast<uint64_t>(100 + k));
    EXPECT_EQ(offset % kStride, 0u);
    ASSERT_GE(k, buf_of_prev) << "went back to a retired buffer";
    ASSERT_LE(k, buf_of_prev + 1) << "skipped a posted buffer";
    EXPECT_EQ(offset, next_offset[k]) << "not back to back";
    EXPECT_EQ(std::memcmp(c.data, sent[m].data(), sent[m].size()), 0);
    if (k == 1 && first_in_b < 0) first_in_b = m;
    next_offset[k] = offset + c.len;
    buf_of_prev = k;
  }
  ASSERT_GE(first_in_b, 1) << "nothing overflowed from A to B";
  EXPECT_EQ(next_offset[2], 0u) << "C was used although B had room";
  const size_t a_tail = kA - next_offset[0];
  EXPECT_LT(a_tail, kMaxRetiredTail) << "A retired with " << a_tail << " B free";
  EXPECT_TRUE(AllEqual(bufs[0]->data() + next_offset[0], a_tail, kUntouched))
      << "A's tail was written";
  EXPECT_TRUE(AllEqual(bufs[1]->data() + next_offset[1], kB - next_offset[1], kUntouched));
  EXPECT_TRUE(AllEqual(bufs[2]->data(), kC, kUntouched));

  // A is reported released, no later than the first message placed in B.
  const auto& all = h().completions(1);
  auto released_a = std::find_if(all.begin(), all.end(), [](const Completion& c) {
    return c.op == Op::kRecv && c.context == 100 && c.buffer_released;
  });
  auto first_b = std::find_if(all.begin(), all.end(), [&](const Completion& c) {
    return c.op == Op::kRecv && c.data == got[first_in_b].data;
  });
  ASSERT_NE(released_a, all.end()) << "buffer A never reported released";
  EXPECT_LT(released_a - all.begin(), first_b - all.begin())
      << "A's release was reported after a message in B";
  for (const Completion& c : all) {
    if (c.context != 100) {
      EXPECT_FALSE(c.buffer_released) << "buffer " << c.context << " has room";
    }
  }
}

// No buffer posted: the message is not lost; it lands once one is posted.
TEST_P(FabricContractTest, MessageWaitsForAPostedBuffer) {
  if (!StartNodes(2)) return;
  auto msg = Payload(100, 77);
  ASSERT_TRUE(PostRetrying([&] {
                return ep(0).Send(peer(0, 1), msg.data(), msg.size(), nullptr, 1);
              }).ok());
  DriveFor(std::chrono::milliseconds(20));
  EXPECT_TRUE(h().Messages(1).empty());

  AlignedBuffer& rbuf = Buffer(kMultiRecvBuffer);
  MemoryRegion rmr = Register(1, rbuf);
  ASSERT_TRUE(ep(1).PostMultiRecv(rbuf.data(), rbuf.size(), &rmr, 2).ok());
  ASSERT_TRUE(DriveUntil([&] { return h().Messages(1).size() == 1; }));
  auto got = h().Messages(1);
  EXPECT_EQ(got[0].data, rbuf.data());
  EXPECT_EQ(got[0].len, 128u);
  EXPECT_EQ(std::memcmp(got[0].data, msg.data(), msg.size()), 0);
  auto sc = Await(0, 1, Op::kSend);
  ASSERT_TRUE(sc.has_value());
  EXPECT_EQ(sc->status, Code::kOk);
}

// Receiver-not-ready under load: 3 senders each stream kPerSender messages,
// keeping kWindow sends in flight, into a receiver that has only a few
// buffers posted (4 single-message buffers, or 2 multi-receive buffers) and
// reposts each one as soon as it has consumed it, as a server's receive loop
// does. Most messages reach the receiver while no buffer is free; none may be
// lost, duplicated, reordered within its sender, or corrupted, and every send
// completes OK. No timing is asserted: the bound only turns a hang into a
// failure.
void FabricContractTest::StreamIntoFewReceiveBuffers(bool multi_recv) {
  constexpr int kSenders = 3;
  constexpr int kPerSender = 2000;
  constexpr int kWindow = 32;
  constexpr int kSingleBuffers = 4;
  constexpr size_t kSingleLen = 256;  // >= every padded message below
  constexpr int kMultiBuffers = 2;
  constexpr int kRx = 0;
  if (!StartNodes(kSenders + 1)) return;

  // Message m of sender s: 8..207 bytes, tagged s * kPerSender + m.
  std::vector<std::vector<std::byte>> sent;
  sent.reserve(kSenders * kPerSender);
  for (int s = 0; s < kSenders; ++s) {
    for (int m = 0; m < kPerSender; ++m) {
      sent.push_back(Payload(8 + static_cast<size_t>(m * 37 + s * 11) % 200,
                             static_cast<uint64_t>(s * kPerSender + m)));
    }
  }

  // Receive buffers; a completion's context is its buffer's index.
  const int nbufs = multi_recv ? kMultiBuffers : kSingleBuffers;
  const size_t buf_len = multi_recv ? kMultiRecvBuffer : kSingleLen;
  AlignedBuffer& rbuf = Buffer(static_cast<size_t>(nbufs) * buf_len);
  MemoryRegion rmr = Register(kRx, rbuf);
  auto buf_at = [&](uint64_t k) { return rbuf.data() + k * buf_len; };
  auto post = [&](uint64_t k) {
    return multi_recv ? ep(kRx).PostMultiRecv(buf_at(k), buf_len, &rmr, k)
                      : ep(kRx).PostRecv(buf_at(k), buf_len, &rmr, k);
  };
  for (int k = 0; k < nbufs; ++k) ASSERT_TRUE(post(static_cast<uint64_t>(k)).ok());

  std::string failure;  // the first violation seen
  auto fail = [&](const std::string& what) {
    if (failure.empty()) failure = what;
  };
  std::vector<uint64_t> to_repost;  // reposts refused with Busy, retried
  std::vector<int> next(kSenders, 0), posted(kSenders, 0), acked(kSenders, 0);
  int received = 0;
  Cursor rx(h(), kRx);
  std::vector<Cursor> tx;
  for (int s = 0; s < kSenders; ++s) tx.emplace_back(h(), s + 1);

  auto step = [&] {
    for (const Completion& c : rx.Next()) {
      if (c.op != Op::kRecv || c.status != Code::kOk) {
        fail(std::string("receiver: unexpected completion, status ") +
             std::string(CodeName(c.status)));
        continue;
      }
      if (c.context >= static_cast<uint64_t>(nbufs)) {
        fail("receiver: unknown buffer context " + std::to_string(c.context));
        continue;
      }
      if (c.data != nullptr && c.len > 0) {
        const std::byte* b = buf_at(c.context);
        if (c.data < b || c.data + c.len > b + buf_len ||
            (multi_recv && (c.data - b) % static_cast<ptrdiff_t>(kStride) != 0)) {
          fail("receiver: message placed outside its buffer or off the stride");
          continue;
        }
        const uint64_t tag = TagOf(c);
        const uint64_t s = tag / kPerSender;
        const int m = static_cast<int>(tag % kPerSender);
        if (s >= static_cast<uint64_t>(kSenders)) {
          fail("receiver: garbage tag " + std::to_string(tag));
          continue;
        }
        if (m != next[s]) {
          fail("sender " + std::to_string(s) + ": got message " + std::to_string(m) +
               ", expected " + std::to_string(next[s]) +
               (m < next[s] ? " (duplicate or reordered)" : " (lost or reordered)"));
        }
        const auto& p = sent[tag];
        const size_t want_len = multi_recv ? RoundUp(p.size()) : p.size();
        if (c.len != want_len || std::memcmp(c.data, p.data(), p.size()) != 0) {
          fail("sender " + std::to_string(s) + " message " + std::to_string(m) +
               ": wrong length or contents");
        }
        next[s] = m + 1;
        ++received;
      }
      // Reposting at once, as a receive loop does: a single buffer after its
      // message, a multi-receive buffer once retired.
      if (!multi_recv || c.buffer_released) to_repost.push_back(c.context);
    }
    while (!to_repost.empty()) {
      Status st = post(to_repost.back());
      if (st.Is(Code::kBusy)) break;
      if (!st.ok()) fail("repost: " + st.ToString());
      to_repost.pop_back();
    }
    for (int s = 0; s < kSenders; ++s) {
      for (const Completion& c : tx[s].Next()) {
        if (c.op != Op::kSend || c.status != Code::kOk) {
          fail("sender " + std::to_string(s) + ": send completed with " +
               std::string(CodeName(c.status)));
        }
        ++acked[s];
      }
      while (posted[s] < kPerSender && posted[s] - acked[s] < kWindow) {
        const auto& p = sent[s * kPerSender + posted[s]];
        Status st = ep(s + 1).Send(peer(s + 1, kRx), p.data(), p.size(), nullptr,
                                   static_cast<uint64_t>(posted[s]));
        if (st.Is(Code::kBusy)) break;
        if (!st.ok()) fail("Send: " + st.ToString());
        ++posted[s];
      }
    }
    if (!failure.empty()) return true;
    if (received < kSenders * kPerSender) return false;
    for (int s = 0; s < kSenders; ++s) {
      if (acked[s] < kPerSender) return false;
    }
    return true;
  };
  const bool finished = DriveUntil(step);
  ASSERT_TRUE(failure.empty()) << failure;
  std::string progress;
  for (int s = 0; s < kSenders; ++s) {
    progress += " sender " + std::to_string(s) + ": " + std::to_string(next[s]) + " received, " +
                std::to_string(acked[s]) + "/" + std::to_string(posted[s]) + " acked;";
  }
  ASSERT_TRUE(finished) << "stalled:" << progress;
  // Nothing arrives twice, not even late.
  DriveFor(std::chrono::milliseconds(5));
  (void)step();
  EXPECT_TRUE(failure.empty()) << failure;
  EXPECT_EQ(received, kSenders * kPerSender);
}

TEST_P(FabricContractTest, StreamIntoFewSingleReceiveBuffersLosesNothing) {
  StreamIntoFewReceiveBuffers(/*multi_recv=*/false);
}

TEST_P(FabricContractTest, StreamIntoFewMultiReceiveBuffersLosesNothing) {
  StreamIntoFewReceiveBuffers(/*multi_recv=*/true);
}

// ---------------------------------------------------------------------------
// One-sided operations and atomics

// Large writes and reads (several MTUs) move every byte.
TEST_P(FabricContractTest, LargeWriteAndReadMoveEveryByte) {
  if (!StartNodes(2)) return;
  constexpr size_t kLen = 64 * 1024 + 40;
  AlignedBuffer& target = Buffer(kLen + 64);
  AlignedBuffer& src = Buffer(kLen);
  AlignedBuffer& back = Buffer(kLen);
  MemoryRegion tmr = Register(1, target);
  MemoryRegion smr = Register(0, src);
  MemoryRegion bmr = Register(0, back);
  auto p = Payload(kLen, 5);
  std::memcpy(src.data(), p.data(), kLen);
  ASSERT_TRUE(PostRetrying([&] {
                return ep(0).Write(peer(0, 1), src.data(), kLen, &smr, tmr.remote, 24, 1);
              }).ok());
  ASSERT_TRUE(PostRetrying([&] {
                return ep(0).Read(peer(0, 1), back.data(), kLen, &bmr, tmr.remote, 24, 2);
              }).ok());
  auto w = Await(0, 1, Op::kWrite);
  auto r = Await(0, 2, Op::kRead);
  ASSERT_TRUE(w.has_value() && r.has_value());
  EXPECT_EQ(w->status, Code::kOk);
  EXPECT_EQ(r->status, Code::kOk);
  EXPECT_EQ(std::memcmp(target.data() + 24, p.data(), kLen), 0);
  EXPECT_EQ(std::memcmp(back.data(), p.data(), kLen), 0);
  EXPECT_TRUE(AllEqual(target.data(), 24, std::byte{0}));
}

// 3 endpoints x 200 FetchAdd(+1) on one word: the final value is exact and
// every returned old value is distinct (together exactly 0..599).
TEST_P(FabricContractTest, FetchAddUnderContentionIsExact) {
  if (!StartNodes(4)) return;
  constexpr int kClients = 3;
  constexpr int kOps = 200;
  AlignedBuffer& target = Buffer(64);
  MemoryRegion tmr = Register(0, target);
  std::vector<uint64_t> olds(kClients * kOps, ~uint64_t{0});
  // Interleave posting across clients so their operations meet at the target.
  for (int k = 0; k < kOps; ++k) {
    for (int c = 0; c < kClients; ++c) {
      const int node = c + 1;
      uint64_t* old = &olds[c * kOps + k];
      ASSERT_TRUE(PostRetrying([&] {
                    return ep(node).FetchAdd(peer(node, 0), tmr.remote, 0, 1, old, k);
                  }).ok());
    }
  }
  ASSERT_TRUE(DriveUntil([&] {
    for (int c = 0; c < kClients; ++c) {
      for (int k = 0; k < kOps; ++k) {
        if (!h().Has(c + 1, k, Op::kFetchAdd)) return false;
      }
    }
    return true;
  }));
  for (int c = 0; c < kClients; ++c) {
    for (int k = 0; k < kOps; ++k) EXPECT_EQ(h().Find(c + 1, k, Op::kFetchAdd)->status, Code::kOk);
  }
  EXPECT_EQ(LoadWord(target.data()), uint64_t{kClients * kOps});
  std::vector<uint64_t> sorted = olds;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint64_t> want(kClients * kOps);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(sorted, want) << "old values are not exactly 0..599";
  // Each client sees its own increments in order (FIFO per connection).
  for (int c = 0; c < kClients; ++c) {
    for (int k = 1; k < kOps; ++k) EXPECT_LT(olds[c * kOps + k - 1], olds[c * kOps + k]);
  }
  // And a one-sided Read agrees.
  AlignedBuffer& local = Buffer(64);
  MemoryRegion lmr = Register(1, local);
  ASSERT_TRUE(ep(1).Read(peer(1, 0), local.data(), 8, &lmr, tmr.remote, 0, 9999).ok());
  auto r = Await(1, 9999, Op::kRead);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(LoadWord(local.data()), uint64_t{kClients * kOps});
}

// CompareSwap as a spin lock protecting a non-atomic read-modify-write done
// with one-sided Read and Write: no increment is lost, and the lock is never
// held by two clients.
TEST_P(FabricContractTest, CompareSwapLockGivesMutualExclusion) {
  if (!StartNodes(4)) return;
  constexpr int kClients = 3;
  constexpr int kRounds = 20;
  constexpr uint64_t kLockOff = 0, kCounterOff = 64;
  AlignedBuffer& target = Buffer(128);
  MemoryRegion tmr = Register(0, target);

  enum class St { kAcquire, kRead, kWrite, kRelease, kDone };
  struct Client {
    Client(int n, const FabricHarness& harness, AlignedBuffer& b)
        : node(n), buf(b), cursor(harness, n) {}
    int node;
    St st = St::kAcquire;
    int rounds = 0;
    uint64_t seq = 0;        // context of the outstanding op
    uint64_t old = 0;        // CAS result
    bool must_issue = true;  // the next op is not posted yet (first, or Busy)
    AlignedBuffer& buf;
    MemoryRegion mr;
    Cursor cursor;
  };
  std::vector<std::unique_ptr<Client>> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(std::make_unique<Client>(c + 1, h(), Buffer(64)));
    clients.back()->mr = Register(c + 1, clients.back()->buf);
  }
  int holder = -1;
  int overlaps = 0;
  Status failure;

  auto issue = [&](Client& cl) -> Status {
    const uint64_t id = static_cast<uint64_t>(cl.node);
    const PeerId p = peer(cl.node, 0);
    ++cl.seq;
    switch (cl.st) {
      case St::kAcquire:
        return ep(cl.node).CompareSwap(p, tmr.remote, kLockOff, 0, id, &cl.old, cl.seq);
      case St::kRead:
        return ep(cl.node).Read(p, cl.buf.data(), 8, &cl.mr, tmr.remote, kCounterOff, cl.seq);
      case St::kWrite:
        return ep(cl.node).Write(p, cl.buf.data(), 8, &cl.mr, tmr.remote, kCounterOff, cl.seq);
      case St::kRelease:
        holder = -1;
        return ep(cl.node).CompareSwap(p, tmr.remote, kLockOff, id, 0, &cl.old, cl.seq);
      case St::kDone:
        return Status::Ok();
    }
    return Status::Ok();
  };

  // Advance every client's state machine as its completions arrive.
  bool finished = DriveUntil([&] {
    bool all_done = true;
    for (auto& clp : clients) {
      Client& cl = *clp;
      for (const Completion& c : cl.cursor.Next()) {
        if (c.context != cl.seq) continue;
        if (c.status != Code::kOk) {
          failure = Status(c.status, "op failed");
          return true;
        }
        switch (cl.st) {
          case St::kAcquire:
            if (cl.old == 0) {
              if (holder != -1) ++overlaps;
              holder = cl.node;
              cl.st = St::kRead;
            }
            break;
          case St::kRead:
            StoreWord(cl.buf.data(), LoadWord(cl.buf.data()) + 1);
            cl.st = St::kWrite;
            break;
          case St::kWrite:
            cl.st = St::kRelease;
            break;
          case St::kRelease:
            if (cl.old != static_cast<uint64_t>(cl.node)) ++overlaps;
            cl.st = ++cl.rounds == kRounds ? St::kDone : St::kAcquire;
            break;
          case St::kDone:
            break;
        }
        cl.must_issue = cl.st != St::kDone;
      }
      if (cl.must_issue) {
        Status s = issue(cl);
        if (s.ok()) {
          cl.must_issue = false;
        } else if (s.Is(Code::kBusy)) {
          --cl.seq;  // retried on a later turn
        } else {
          failure = s;
          return true;
        }
      }
      all_done = all_done && cl.st == St::kDone;
    }
    return all_done;
  });
  ASSERT_TRUE(failure.ok()) << failure.ToString();
  ASSERT_TRUE(finished) << "lock protocol stalled";
  EXPECT_EQ(overlaps, 0);
  EXPECT_EQ(LoadWord(target.data() + kCounterOff), uint64_t{kClients * kRounds});
  EXPECT_EQ(LoadWord(target.data() + kLockOff), 0u);
}

// A failed CompareSwap returns the current value and changes nothing.
TEST_P(FabricContractTest, CompareSwapReturnsCurrentValueOnMismatch) {
  if (!StartNodes(2)) return;
  AlignedBuffer& target = Buffer(64);
  StoreWord(target.data() + 8, 5);
  MemoryRegion tmr = Register(1, target);
  uint64_t old1 = 0, old2 = 0;
  ASSERT_TRUE(ep(0).CompareSwap(peer(0, 1), tmr.remote, 8, 7, 9, &old1, 1).ok());
  ASSERT_TRUE(ep(0).CompareSwap(peer(0, 1), tmr.remote, 8, 5, 9, &old2, 2).ok());
  auto c1 = Await(0, 1, Op::kCompareSwap);
  auto c2 = Await(0, 2, Op::kCompareSwap);
  ASSERT_TRUE(c1.has_value() && c2.has_value());
  EXPECT_EQ(c1->status, Code::kOk);
  EXPECT_EQ(c2->status, Code::kOk);
  EXPECT_EQ(old1, 5u);
  EXPECT_EQ(old2, 5u);
  EXPECT_EQ(LoadWord(target.data() + 8), 9u);
}

// One-sided operations involve no handler at the target: the target only
// drives progress, gets no completion for them, and its posted receive
// buffer stays untouched.
TEST_P(FabricContractTest, OneSidedOpsInvolveNoTargetHandler) {
  if (!StartNodes(2)) return;
  AlignedBuffer& target = Buffer(4096);
  AlignedBuffer& rbuf = Buffer(kMultiRecvBuffer);
  AlignedBuffer& local = Buffer(4096);
  std::memset(rbuf.data(), static_cast<int>(kUntouched), rbuf.size());
  MemoryRegion tmr = Register(1, target);
  MemoryRegion rmr = Register(1, rbuf);
  MemoryRegion lmr = Register(0, local);
  ASSERT_TRUE(ep(1).PostMultiRecv(rbuf.data(), rbuf.size(), &rmr, 1).ok());
  const size_t before = h().completions(1).size();

  auto p = Payload(1000, 3);
  std::memcpy(local.data(), p.data(), p.size());
  uint64_t cas_old = 1, faa_old = 1;
  ASSERT_TRUE(ep(0).Write(peer(0, 1), local.data(), 1000, &lmr, tmr.remote, 64, 1).ok());
  ASSERT_TRUE(ep(0).Read(peer(0, 1), local.data() + 2048, 1000, &lmr, tmr.remote, 64, 2).ok());
  ASSERT_TRUE(ep(0).CompareSwap(peer(0, 1), tmr.remote, 0, 0, 11, &cas_old, 3).ok());
  ASSERT_TRUE(ep(0).FetchAdd(peer(0, 1), tmr.remote, 8, 4, &faa_old, 4).ok());
  ASSERT_TRUE(DriveUntil([&] {
    return h().Has(0, 1, Op::kWrite) && h().Has(0, 2, Op::kRead) &&
           h().Has(0, 3, Op::kCompareSwap) && h().Has(0, 4, Op::kFetchAdd);
  }));
  for (auto [ctx, op] : {std::pair{1, Op::kWrite}, {2, Op::kRead}, {3, Op::kCompareSwap},
                         {4, Op::kFetchAdd}}) {
    EXPECT_EQ(h().Find(0, ctx, op)->status, Code::kOk) << "context " << ctx;
  }
  EXPECT_EQ(std::memcmp(target.data() + 64, p.data(), 1000), 0);
  EXPECT_EQ(std::memcmp(local.data() + 2048, p.data(), 1000), 0);
  EXPECT_EQ(cas_old, 0u);
  EXPECT_EQ(faa_old, 0u);
  EXPECT_EQ(LoadWord(target.data()), 11u);
  EXPECT_EQ(LoadWord(target.data() + 8), 4u);

  DriveFor(std::chrono::milliseconds(5));
  EXPECT_EQ(h().completions(1).size(), before) << "the target saw a completion for a one-sided op";
  EXPECT_TRUE(AllEqual(rbuf.data(), rbuf.size(), kUntouched)) << "one-sided op consumed a recv buffer";
}

// Out-of-range accesses fail with InvalidArgument (at posting or in the
// completion), never crash, never touch memory outside the registration,
// and leave the connection usable.
TEST_P(FabricContractTest, OutOfRangeRemoteAccessFails) {
  if (!StartNodes(2)) return;
  AlignedBuffer& target = Buffer(256);
  AlignedBuffer& local = Buffer(256);
  MemoryRegion tmr = Register(1, target);
  MemoryRegion lmr = Register(0, local);
  std::memset(local.data(), 0x5A, local.size());
  RemoteMemory narrow = tmr.remote;
  narrow.len = 128;  // a peer's view of the first 128 B only

  auto expect_invalid = [&](Status posted, uint64_t ctx, Op op) {
    if (!posted.ok()) {
      EXPECT_EQ(posted.code(), Code::kInvalidArgument) << posted.ToString();
      return;
    }
    auto c = Await(0, ctx, op);
    ASSERT_TRUE(c.has_value()) << "no completion for context " << ctx;
    EXPECT_EQ(c->status, Code::kInvalidArgument) << "context " << ctx;
  };
  uint64_t old = 0;
  expect_invalid(ep(0).Write(peer(0, 1), local.data(), 16, &lmr, narrow, 120, 1), 1, Op::kWrite);
  expect_invalid(ep(0).Read(peer(0, 1), local.data(), 8, &lmr, narrow, 128, 2), 2, Op::kRead);
  expect_invalid(ep(0).FetchAdd(peer(0, 1), narrow, 128, 1, &old, 3), 3, Op::kFetchAdd);
  expect_invalid(ep(0).CompareSwap(peer(0, 1), narrow, 4, 0, 1, &old, 4), 4, Op::kCompareSwap);
  expect_invalid(ep(0).Write(peer(0, 1), local.data(), 8, &lmr, narrow, ~uint64_t{0} - 3, 5),
                 5, Op::kWrite);
  DriveFor(std::chrono::milliseconds(5));
  EXPECT_TRUE(AllEqual(target.data(), target.size(), std::byte{0}));

  ASSERT_TRUE(ep(0).Write(peer(0, 1), local.data(), 8, &lmr, narrow, 120, 6).ok());
  auto ok = Await(0, 6, Op::kWrite);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->status, Code::kOk);
  EXPECT_EQ(LoadWord(target.data() + 120), 0x5A5A5A5A5A5A5A5Aull);
}

// A key the target never issued is refused (non-OK), memory untouched.
TEST_P(FabricContractTest, UnknownKeyIsRefused) {
  if (!StartNodes(2)) return;
  AlignedBuffer& target = Buffer(256);
  AlignedBuffer& local = Buffer(256);
  MemoryRegion tmr = Register(1, target);
  MemoryRegion lmr = Register(0, local);
  std::memset(local.data(), 0x5A, local.size());
  RemoteMemory forged = tmr.remote;
  forged.key ^= 0x5bd1e995u;
  Status s = ep(0).Write(peer(0, 1), local.data(), 64, &lmr, forged, 0, 1);
  if (s.ok()) {
    auto c = Await(0, 1, Op::kWrite);
    ASSERT_TRUE(c.has_value());
    EXPECT_NE(c->status, Code::kOk);
  }
  DriveFor(std::chrono::milliseconds(5));
  EXPECT_TRUE(AllEqual(target.data(), target.size(), std::byte{0}));
}

// ---------------------------------------------------------------------------
// Failures

// Operations to a dead peer complete with Unavailable or Timeout (or are
// refused at posting with one of those) within op_timeout: never hang. Other
// peers are unaffected.
TEST_P(FabricContractTest, DeadPeerGivesAnErrorNotAHang) {
  EndpointOptions options = DefaultOptions();
  options.op_timeout = std::chrono::milliseconds(300);
  if (!StartNodes(3, options)) return;
  AlignedBuffer& r1 = Buffer(kMultiRecvBuffer);
  AlignedBuffer& r2 = Buffer(kMultiRecvBuffer);
  AlignedBuffer& local = Buffer(4096);
  MemoryRegion r1mr = Register(1, r1);
  MemoryRegion r2mr = Register(2, r2);
  MemoryRegion lmr = Register(0, local);
  ASSERT_TRUE(ep(1).PostMultiRecv(r1.data(), r1.size(), &r1mr, 1).ok());
  ASSERT_TRUE(ep(2).PostMultiRecv(r2.data(), r2.size(), &r2mr, 2).ok());
  auto hello = Payload(64, 1);
  ASSERT_TRUE(ep(0).Send(peer(0, 1), hello.data(), hello.size(), nullptr, 10).ok());
  ASSERT_TRUE(DriveUntil([&] { return h().Messages(1).size() == 1; })) << "warm-up failed";

  ASSERT_TRUE(Kill(1).ok());
  const RemoteMemory dead = r1mr.remote;
  uint64_t old = 0;
  struct Attempt {
    uint64_t ctx;
    Op op;
    Status posted;
  };
  std::vector<Attempt> attempts;
  attempts.push_back({20, Op::kSend, ep(0).Send(peer(0, 1), hello.data(), 64, nullptr, 20)});
  attempts.push_back(
      {21, Op::kWrite, ep(0).Write(peer(0, 1), local.data(), 64, &lmr, dead, 0, 21)});
  attempts.push_back({22, Op::kRead, ep(0).Read(peer(0, 1), local.data(), 64, &lmr, dead, 0, 22)});
  attempts.push_back({23, Op::kFetchAdd, ep(0).FetchAdd(peer(0, 1), dead, 0, 1, &old, 23)});
  attempts.push_back(
      {24, Op::kCompareSwap, ep(0).CompareSwap(peer(0, 1), dead, 8, 0, 1, &old, 24)});
  for (const Attempt& a : attempts) {
    SCOPED_TRACE("context " + std::to_string(a.ctx));
    if (!a.posted.ok()) {
      EXPECT_TRUE(IsDeadPeerCode(a.posted.code())) << a.posted.ToString();
      continue;
    }
    auto c = Await(0, a.ctx, a.op);
    ASSERT_TRUE(c.has_value()) << "operation to a dead peer hung";
    EXPECT_TRUE(IsDeadPeerCode(c->status)) << CodeName(c->status);
  }

  // Node 2 is still reachable.
  ASSERT_TRUE(ep(0).Send(peer(0, 2), hello.data(), hello.size(), nullptr, 30).ok());
  ASSERT_TRUE(DriveUntil([&] { return h().Messages(2).size() == 1; }));
  auto sc = Await(0, 30, Op::kSend);
  ASSERT_TRUE(sc.has_value());
  EXPECT_EQ(sc->status, Code::kOk);
}

}  // namespace slip::fabric::contract
