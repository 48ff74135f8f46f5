#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <string>

#include "common/random.h"

namespace slip {
namespace {

TEST(Crc32cTest, KnownVectors) {
  // RFC 3720 B.4 test vectors.
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(0, zeros.data(), zeros.size()), 0x8A9136AAu);
  std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(0, ones.data(), ones.size()), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[i] = static_cast<char>(i);
  EXPECT_EQ(Crc32c(0, ascending.data(), ascending.size()), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32cTest, ExtendEqualsWhole) {
  Random rng(7);
  std::string buf(1000, '\0');
  for (auto& c : buf) c = static_cast<char>(rng.Next());
  for (size_t split : {0u, 1u, 7u, 8u, 9u, 500u, 999u, 1000u}) {
    uint32_t a = Crc32c(0, buf.data(), split);
    EXPECT_EQ(Crc32c(a, buf.data() + split, buf.size() - split), Crc32c(0, buf.data(), buf.size()))
        << "split " << split;
  }
}

}  // namespace
}  // namespace slip
