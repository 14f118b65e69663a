// Tests of base/memory: anonymous mappings and the arrays that live in them.
#include "rtb/base/memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <utility>

namespace rtb {
namespace {

TEST(AnonymousMapping, IsZeroFilledAndWritable) {
  for (PageAdvice advice :
       {PageAdvice::kNone, PageAdvice::kPopulateWrite, PageAdvice::kHugePages}) {
    // 4 MiB: above the huge-page threshold, below the populate one.
    AnonymousMapping mapping(std::size_t{4} << 20, advice);
    ASSERT_NE(mapping.data(), nullptr);
    EXPECT_EQ(mapping.bytes(), std::size_t{4} << 20);
    auto* bytes = static_cast<unsigned char*>(mapping.data());
    EXPECT_TRUE(
        std::all_of(bytes, bytes + mapping.bytes(), [](unsigned char b) { return b == 0; }));
    bytes[mapping.bytes() - 1] = 7;
    EXPECT_EQ(bytes[mapping.bytes() - 1], 7);
  }
}

// Huge pages come in whole 2 MiB pages: from 1 MiB on the mapping is rounded up to them (so the
// kernel can align it and back all of it); below, and with other advice, it is what was asked.
TEST(AnonymousMapping, HugePagesRoundUpToWholePages) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  EXPECT_EQ(AnonymousMapping(kMiB + kMiB / 2, PageAdvice::kHugePages).bytes(), 2 * kMiB);
  EXPECT_EQ(AnonymousMapping(kMiB, PageAdvice::kHugePages).bytes(), 2 * kMiB);
  EXPECT_EQ(AnonymousMapping(3 * kMiB, PageAdvice::kHugePages).bytes(), 4 * kMiB);
  EXPECT_EQ(AnonymousMapping(kMiB / 2, PageAdvice::kHugePages).bytes(), kMiB / 2);
  EXPECT_EQ(AnonymousMapping(kMiB + kMiB / 2, PageAdvice::kNone).bytes(), kMiB + kMiB / 2);
  AnonymousMapping last(kMiB + 1, PageAdvice::kHugePages);
  static_cast<unsigned char*>(last.data())[last.bytes() - 1] = 1;  // all of it is mapped
}

TEST(AnonymousMapping, ZeroBytesMapsNothing) {
  AnonymousMapping mapping(0, PageAdvice::kPopulateWrite);
  EXPECT_EQ(mapping.data(), nullptr);
}

TEST(AnonymousMapping, MovesOwnership) {
  AnonymousMapping first(4096, PageAdvice::kNone);
  void* address = first.data();
  AnonymousMapping second = std::move(first);
  EXPECT_EQ(second.data(), address);
  EXPECT_EQ(first.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from state
  AnonymousMapping third;
  third = std::move(second);
  EXPECT_EQ(third.data(), address);
  EXPECT_EQ(third.bytes(), 4096u);
}

TEST(AnonymousMapping, ImpossibleSizeThrowsBadAlloc) {
  EXPECT_THROW(AnonymousMapping(~std::size_t{0} >> 1, PageAdvice::kNone), std::bad_alloc);
  EXPECT_THROW(AnonymousMapping(~std::size_t{0} - 5, PageAdvice::kHugePages), std::bad_alloc);
}

TEST(LargeArray, IndexesSpansAndStartsAtZero) {
  LargeArray<std::int16_t> array(1000, PageAdvice::kPopulateWrite);
  ASSERT_EQ(array.size(), 1000u);
  EXPECT_EQ(array.span().size(), 1000u);
  EXPECT_EQ(array[999], 0);
  array[3] = -5;
  EXPECT_EQ(array.data()[3], -5);
  const LargeArray<std::int16_t>& view = array;
  EXPECT_EQ(view.span()[3], -5);
  LargeArray<std::int16_t> empty;
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.data(), nullptr);
}

}  // namespace
}  // namespace rtb
