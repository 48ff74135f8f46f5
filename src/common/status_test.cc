#include "common/status.h"

#include <gtest/gtest.h>

namespace slip {
namespace {

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  SLIP_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(StatusTest, OkIsDefaultAndPrints) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = Status::Corruption("bad crc at 64");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.Is(Code::kCorruption));
  EXPECT_EQ(s.ToString(), "Corruption: bad crc at 64");
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  auto r = Quarter(6);  // 6/2 = 3 is odd
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
}

TEST(StatusTest, CodesAreStableOnTheWire) {
  // Renumbering breaks persisted and wire formats.
  EXPECT_EQ(static_cast<int>(Code::kNotFound), 1);
  EXPECT_EQ(static_cast<int>(Code::kStaleTerm), 8);
  EXPECT_EQ(static_cast<int>(Code::kNotSupported), 12);
  EXPECT_EQ(static_cast<int>(Code::kUnauthenticated), 13);
}

}  // namespace
}  // namespace slip
