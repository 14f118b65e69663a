// Tests of base/text: trimming with explicit blank sets and byte sizes for people.
#include "rtb/base/text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>

namespace rtb {
namespace {

TEST(Trim, DefaultBlanksAreSpaceTabCarriageReturnAndNewline) {
  EXPECT_EQ(trim("  a b \t\r\n"), "a b");
  EXPECT_EQ(trim("\n\r\tx"), "x");
  EXPECT_EQ(trim(" \t\r\n "), "");
  EXPECT_EQ(trim(""), "");
  EXPECT_EQ(trim("x"), "x");
}

TEST(Trim, LineBlanksKeepANewline) {
  EXPECT_EQ(trim(" a\r", kLineBlanks), "a");
  EXPECT_EQ(trim("\na\n", kLineBlanks), "\na\n");
  EXPECT_EQ(trim(" \t\r", kLineBlanks), "");
}

TEST(Trim, FrontAndBackCanTakeDifferentSets) {
  std::string_view text = "\r a \t\r\n";
  EXPECT_EQ(trim_front(text, " \t"), "\r a \t\r\n");
  EXPECT_EQ(trim_back(trim_front(" \ta \t\r\n", " \t")), "a");
  EXPECT_EQ(trim_front("  a  "), "a  ");
  EXPECT_EQ(trim_back("  a  "), "  a");
  EXPECT_EQ(trim_back("   "), "");
  EXPECT_EQ(trim_front("   "), "");
}

TEST(Trim, ResultIsASliceOfTheInput) {
  std::string_view text = "  abc  ";
  EXPECT_EQ(trim(text).data(), text.data() + 2);
}

TEST(HumanBytes, BinaryUnits) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1536), "1.5 KiB");
  EXPECT_EQ(human_bytes(416LL << 20), "416.0 MiB");
  EXPECT_EQ(human_bytes(3LL << 30), "3.0 GiB");
  EXPECT_EQ(human_bytes(5LL << 60), "5.0 EiB");
}

TEST(HumanBytes, DecimalUnitsStopAtTerabytes) {
  EXPECT_EQ(human_bytes(999, ByteUnits::kDecimal), "999 B");
  EXPECT_EQ(human_bytes(1000, ByteUnits::kDecimal), "1.0 KB");
  EXPECT_EQ(human_bytes(1500000, ByteUnits::kDecimal), "1.5 MB");
  EXPECT_EQ(human_bytes(5'368'709'120, ByteUnits::kDecimal), "5.4 GB");
  EXPECT_EQ(human_bytes(2'000'000'000'000'000, ByteUnits::kDecimal), "2000.0 TB");
}

}  // namespace
}  // namespace rtb
