// Tests of the 64-byte classification of the HLO splitter (chunk.h).
#include "rtb/hlo/chunk.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

namespace rtb::hlo {
namespace {

TEST(HloChunk, SimdClassificationMatchesPortable) {
  std::mt19937 random(6);
  const std::string alphabet = "\"\\()[]{}\n\0 abc=,%";
  for (int round = 0; round < 2000; ++round) {
    char bytes[64];
    for (char& b : bytes) {
      b = round % 2 == 0 ? alphabet[random() % alphabet.size()] : static_cast<char>(random());
    }
    ASSERT_EQ(classify_chunk(bytes), classify_chunk_portable(bytes)) << "round " << round;
  }
}

TEST(HloChunk, PrefixXorMarksBytesInsideQuotes) {
  EXPECT_EQ(prefix_xor(0b1001), 0b0111u);
  EXPECT_EQ(prefix_xor(0), 0u);
  EXPECT_EQ(prefix_xor(1), ~std::uint64_t{0});
}

}  // namespace
}  // namespace rtb::hlo
