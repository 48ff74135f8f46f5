#include "pm/media_model.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <queue>

#include "common/random.h"

namespace slip::pm {
namespace {

TEST(MediaModelTest, SequentialStreamCostsOneMediaByteperByte) {
  MediaModel m;
  for (uint64_t off = 0; off < (64 << 20); off += 128) m.Write(off, 128);
  m.Drain();
  EXPECT_EQ(m.stats().requested_bytes, uint64_t{64} << 20);
  EXPECT_DOUBLE_EQ(m.stats().dlwa(), 1.0);
  EXPECT_EQ(m.stats().media_read_bytes, 0u);
}

TEST(MediaModelTest, ScatteredSmallWritesCostAWholeLineEach) {
  MediaModel m;
  Random rng(1);
  for (int i = 0; i < 100000; ++i) m.Write(rng.Uniform(uint64_t{1} << 34) / 256 * 256, 64);
  m.Drain();
  EXPECT_NEAR(m.stats().dlwa(), 4.0, 0.01);
  EXPECT_NEAR(static_cast<double>(m.stats().media_read_bytes) /
                  static_cast<double>(m.stats().media_write_bytes), 1.0, 0.01);
}

TEST(MediaModelTest, UnalignedWritesRoundToSubBlocks) {
  MediaModel m;
  m.Write(60, 8);  // touches sub-blocks 0 and 1
  EXPECT_EQ(m.stats().requested_bytes, 128u);
  m.Write(0, 0);
  EXPECT_EQ(m.stats().requested_bytes, 128u);
}

// The note's calibration (docs/papers/rowan.md §6.2): closed-loop writers, each
// appending `size` bytes to its own log 1 +- 0.6 time units after its
// previous write; DLWA as the paper's Fig. 2 measured it.
double ClosedLoopDlwa(int streams, uint64_t size, uint64_t seed) {
  MediaModel m;
  Random rng(seed);
  using Next = std::pair<double, int>;  // (time, stream)
  std::priority_queue<Next, std::vector<Next>, std::greater<>> q;
  std::vector<uint64_t> tail(streams);
  for (int s = 0; s < streams; ++s) {
    tail[s] = uint64_t(s) * (uint64_t{1} << 30);  // each log in its own GiB
    q.push({rng.NextDouble(), s});
  }
  for (int i = 0; i < 400000; ++i) {
    auto [t, s] = q.top();
    q.pop();
    m.Write(tail[s], size);
    tail[s] += size;
    q.push({t + 1 + (rng.NextDouble() * 1.2 - 0.6), s});
  }
  return m.stats().dlwa();
}

TEST(MediaModelTest, ReproducesTheCalibratedKnee) {
  for (uint64_t size : {64, 128}) {
    std::printf("  DLWA %3llu B:", static_cast<unsigned long long>(size));
    for (int streams : {1, 72, 90, 108, 144}) std::printf("  %d streams %.3f", streams, ClosedLoopDlwa(streams, size, 1));
    std::printf("\n");
  }
  // Model values from the note's calibration; the paper measured ~1 below
  // 90 streams, 2.48 (64 B) and 1.58 (128 B) at 144.
  EXPECT_NEAR(ClosedLoopDlwa(1, 64, 1), 1.0, 0.01);
  EXPECT_NEAR(ClosedLoopDlwa(72, 64, 1), 1.00, 0.05);
  EXPECT_NEAR(ClosedLoopDlwa(144, 64, 1), 2.47, 0.15);
  EXPECT_NEAR(ClosedLoopDlwa(72, 128, 1), 1.00, 0.05);
  EXPECT_NEAR(ClosedLoopDlwa(144, 128, 1), 1.53, 0.12);
}

}  // namespace
}  // namespace slip::pm
