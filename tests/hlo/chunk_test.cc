// Tests of the 64-byte classification of the HLO splitter (chunk.h).
#include "rtb/hlo/chunk.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace rtb::hlo {
namespace {

// Every classifier this machine runs (the dispatching one, SSE2, and AVX2 where the CPU has it)
// agrees with the portable one, which lists the bytes one by one.
TEST(HloChunk, SimdClassificationMatchesPortable) {
  std::vector<std::pair<std::string, ChunkMasks (*)(const char*)>> classifiers = {
      {"dispatching", classify_chunk}};
#if defined(__SSE2__)
  classifiers.emplace_back("sse2", classify_chunk_sse2);
#endif
#if defined(RTB_HLO_HAVE_AVX2)
  if (cpu_has_avx2()) classifiers.emplace_back("avx2", classify_chunk_avx2);
#endif
  std::mt19937 random(6);
  using namespace std::string_literals;
  const std::string alphabet = "\"\\()[]{}\n\0 abc=,%"s;  // NUL included
  for (int round = 0; round < 2000; ++round) {
    char bytes[64];
    for (char& b : bytes) {
      b = round % 2 == 0 ? alphabet[random() % alphabet.size()] : static_cast<char>(random());
    }
    for (const auto& [name, classify] : classifiers) {
      ASSERT_EQ(classify(bytes), classify_chunk_portable(bytes)) << name << ", round " << round;
    }
  }
}

TEST(HloChunk, PortableClassesEveryByte) {
  char bytes[64] = "x\"\\([{)]}\n";  // the rest is NUL
  ChunkMasks m = classify_chunk_portable(bytes);
  EXPECT_EQ(m.quote, 0b10u);
  EXPECT_EQ(m.backslash, 0b100u);
  EXPECT_EQ(m.open, 0b111000u);
  EXPECT_EQ(m.close, 0b111000000u);
  EXPECT_EQ(m.newline, 0b1000000000u);
  EXPECT_EQ(m.zero, ~std::uint64_t{0} << 10);
}

TEST(HloChunk, PrefixXorMarksBytesInsideQuotes) {
  EXPECT_EQ(prefix_xor(0b1001), 0b0111u);
  EXPECT_EQ(prefix_xor(0), 0u);
  EXPECT_EQ(prefix_xor(1), ~std::uint64_t{0});
}

}  // namespace
}  // namespace rtb::hlo
