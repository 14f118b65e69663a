// Tests of base/text: trimming with explicit blank sets, lines, byte sizes for people, terminal
// escapes.
#include "rtb/base/text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace rtb {
namespace {

struct TrimCase {
  std::string_view text;
  std::string_view blanks;
  std::string_view trimmed;
};

TEST(Trim, RemovesTheGivenBlanksOnBothSides) {
  const TrimCase cases[] = {
      {"  a b \t\r\n", kWhitespace, "a b"},  // the default set: " \t\r\n"
      {"\n\r\tx", kWhitespace, "x"},
      {" \t\r\n ", kWhitespace, ""},
      {"", kWhitespace, ""},
      {"x", kWhitespace, "x"},
      {" a\r", kLineBlanks, "a"},  // " \t\r": a newline stays
      {"\na\n", kLineBlanks, "\na\n"},
      {" \t\r", kLineBlanks, ""},
  };
  for (const TrimCase& c : cases) {
    EXPECT_EQ(trim(c.text, c.blanks), c.trimmed) << "text: '" << c.text << "'";
  }
  EXPECT_EQ(trim("\t x \n"), "x");  // default argument
}

TEST(Trim, FrontAndBackCanTakeDifferentSets) {
  EXPECT_EQ(trim_front("\r a \t\r\n", " \t"), "\r a \t\r\n");
  EXPECT_EQ(trim_back(trim_front(" \ta \t\r\n", " \t")), "a");
  EXPECT_EQ(trim_front("  a  "), "a  ");
  EXPECT_EQ(trim_back("  a  "), "  a");
  EXPECT_EQ(trim_back("   ").size() + trim_front("   ").size(), 0u);
}

TEST(Trim, ResultIsASliceOfTheInput) {
  std::string_view text = "  abc  ";
  EXPECT_EQ(trim(text).data(), text.data() + 2);
}

TEST(LowerAscii, OnlyAsciiLettersChange) {
  EXPECT_EQ(lower_ascii("TRUE On yes"), "true on yes");
  EXPECT_EQ(lower_ascii("A-Z_09"), "a-z_09");
  EXPECT_EQ(lower_ascii("\xC3\x89t\xC3\xA9"), "\xC3\x89t\xC3\xA9");  // UTF-8 bytes kept
  EXPECT_EQ(lower_ascii(""), "");
}

TEST(HumanBytes, BinaryAndDecimalUnits) {
  const std::tuple<std::int64_t, ByteUnits, std::string_view> cases[] = {
      {0, ByteUnits::kBinary, "0 B"},
      {1023, ByteUnits::kBinary, "1023 B"},
      {1536, ByteUnits::kBinary, "1.5 KiB"},
      {416LL << 20, ByteUnits::kBinary, "416.0 MiB"},
      {3LL << 30, ByteUnits::kBinary, "3.0 GiB"},
      {5LL << 60, ByteUnits::kBinary, "5.0 EiB"},
      {999, ByteUnits::kDecimal, "999 B"},
      {1000, ByteUnits::kDecimal, "1.0 KB"},
      {1500000, ByteUnits::kDecimal, "1.5 MB"},
      {5'368'709'120, ByteUnits::kDecimal, "5.4 GB"},
      {2'000'000'000'000'000, ByteUnits::kDecimal, "2000.0 TB"},  // TB is the largest unit
  };
  for (const auto& [bytes, units, text] : cases) EXPECT_EQ(human_bytes(bytes, units), text);
  EXPECT_EQ(human_bytes(2048), "2.0 KiB");  // binary by default
}

TEST(SplitLines, AFinalNewlineStartsNoLineButEmptyLinesCount) {
  using Lines = std::vector<std::string_view>;
  EXPECT_EQ(split_lines(""), Lines{});
  EXPECT_EQ(split_lines("\n"), Lines{""});
  EXPECT_EQ(split_lines("a"), Lines{"a"});
  EXPECT_EQ(split_lines("a\n\nb\n"), (Lines{"a", "", "b"}));
  EXPECT_EQ(split_lines("a\r\nb"), (Lines{"a\r", "b"})) << "only '\\n' ends a line";
}

TEST(WrapWords, BreaksAtSpacesWithinTheWidth) {
  EXPECT_EQ(wrap_words("aa bb cc dd", 5), "aa bb\ncc dd");
  EXPECT_EQ(wrap_words("aa bb cc", 6), "aa bb\ncc");
  EXPECT_EQ(wrap_words("  aa   bb  ", 80), "aa bb");
  EXPECT_EQ(wrap_words("a verylongword b", 4), "a\nverylongword\nb");
  EXPECT_EQ(wrap_words("", 10), "");
}

TEST(IntegerRanges, CollapsesRunsOfConsecutiveIntegers) {
  EXPECT_EQ(integer_ranges({}), "");
  EXPECT_EQ(integer_ranges({7}), "7");
  EXPECT_EQ(integer_ranges({1, 2, 3, 5}), "1-3,5");
  EXPECT_EQ(integer_ranges({-2, -1, 0, 4, 5, 9}), "-2-0,4-5,9");
  EXPECT_EQ(integer_ranges({3, 3}), "3,3") << "a repeat is not a run";
}

TEST(StripTerminalEscapes, RemovesColourCodesAndHyperlinks) {
  std::string buffer;
  std::string_view plain = "no escapes here";
  EXPECT_EQ(strip_terminal_escapes(plain, buffer).data(), plain.data()) << "no copy";
  EXPECT_EQ(strip_terminal_escapes("\x1b[0;31mError\x1b[0m: \x1b[38;5;241m1.5G\x1b[39m", buffer),
            "Error: 1.5G");
  EXPECT_EQ(strip_terminal_escapes("a\x1b]8;;https://x.y\x07link\x1b]8;;\x1b\\b", buffer), "alinkb")
      << "OSC hyperlinks, ended by BEL and by ST";
  EXPECT_EQ(strip_terminal_escapes("\x1b(Bx\x1b"
                                   "7y\x1b[?25lz\x1b",
                                   buffer),
            "xyz");
}

}  // namespace
}  // namespace rtb
