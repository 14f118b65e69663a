#include "rtb/base/utf8.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace rtb::utf8 {
namespace {

constexpr std::size_t npos = std::string_view::npos;

TEST(Utf8, SequenceLengths) {
  EXPECT_EQ(sequence_length("a", 0), 1u);
  EXPECT_EQ(sequence_length("\xc3\xa9", 0), 2u);
  EXPECT_EQ(sequence_length("\xe2\x82\xac", 0), 3u);
  EXPECT_EQ(sequence_length("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(sequence_length("\x80", 0), 0u);              // a continuation byte alone
  EXPECT_EQ(sequence_length("\xc1\xbf", 0), 0u);          // overlong
  EXPECT_EQ(sequence_length("\xe0\x9f\xbf", 0), 0u);      // overlong
  EXPECT_EQ(sequence_length("\xed\xbf\xbf", 0), 0u);      // surrogate
  EXPECT_EQ(sequence_length("\xf4\x90\x80\x80", 0), 0u);  // above U+10FFFF
  EXPECT_EQ(sequence_length("\xf5\x80\x80\x80", 0), 0u);
  EXPECT_EQ(sequence_length("\xe2\x82", 0), 0u);  // cut at the end
}

TEST(Utf8, FindInvalidGivesTheFirstBadOffset) {
  EXPECT_EQ(find_invalid(""), npos);
  EXPECT_EQ(find_invalid("plain ascii"), npos);
  EXPECT_EQ(find_invalid("caf\xc3\xa9 ok"), npos);
  EXPECT_EQ(find_invalid("caf\xe9"), 3u);
  EXPECT_EQ(find_invalid("\xc3\xa9\xc3"), 2u);
  EXPECT_EQ(find_invalid(std::string("nul\0is valid utf-8", 19)), npos);
}

// ASCII is skipped eight bytes at a time: a bad byte or a valid sequence at any offset of a
// word, after any run of ASCII, is still seen where it is.
TEST(Utf8, FindInvalidSeesEveryOffsetAfterLongAscii) {
  for (std::size_t before = 0; before < 24; ++before) {
    for (std::size_t after : {0, 1, 7, 8, 9, 17}) {
      std::string ascii(before, 'a'), tail(after, 'z');
      EXPECT_EQ(find_invalid(ascii + "\xff" + tail), before) << before << " " << after;
      EXPECT_EQ(find_invalid(ascii + "\xc3\xa9" + tail), npos) << before << " " << after;
      EXPECT_EQ(find_invalid(ascii + "\xc3\xa9" + tail + "\xc3"), before + 2 + after);
    }
  }
}

TEST(Utf8, AppendEncodesEveryLengthAndReadsBack) {
  std::string out;
  for (std::uint32_t code : {0x41u, 0xe9u, 0x20acu, 0x1f600u}) append(out, code);
  EXPECT_EQ(out, "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(find_invalid(out), npos);
}

}  // namespace
}  // namespace rtb::utf8
