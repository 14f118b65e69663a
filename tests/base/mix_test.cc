// Tests of base/mix: SplitMix64's finalizer.
#include "rtb/base/mix.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace rtb {
namespace {

// The first outputs of the SplitMix64 stream seeded with 0 (the reference implementation's
// splitmix64.c: state += gamma, then the finalizer).
TEST(Mix64, GivesSplitMix64sStream) {
  std::uint64_t state = 0;
  EXPECT_EQ(mix64(state += kGoldenGamma), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(mix64(state += kGoldenGamma), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(mix64(state += kGoldenGamma), 0x06c45d188009454fULL);
  static_assert(mix64(0) == 0);  // usable at compile time; zero is its fixed point
}

}  // namespace
}  // namespace rtb
