// tools/common/tool: what every tool shares.
#include "common/tool.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace rtb::tool {
namespace {

TEST(ParseByteCount, PlainNumbersAndBinaryUnits) {
  EXPECT_EQ(parse_byte_count("1048576", "--x"), 1048576);
  EXPECT_EQ(parse_byte_count("512B", "--x"), 512);
  EXPECT_EQ(parse_byte_count("2K", "--x"), 2048);
  EXPECT_EQ(parse_byte_count("64MiB", "--x"), 64 << 20);
  EXPECT_EQ(parse_byte_count("1.5GiB", "--x"), 3LL << 29);
  EXPECT_EQ(parse_byte_count("1TiB", "--x"), 1LL << 40);
}

TEST(ParseByteCount, ErrorsNameTheOption) {
  auto message = [](const std::string& text) {
    return std::string(test::error_of([&] { parse_byte_count(text, "--budget"); }).what());
  };
  EXPECT_EQ(message("lots"), "--budget lots: expected a byte count such as 1048576 or 64MiB");
  EXPECT_EQ(message("-1"), "--budget -1: expected a byte count such as 1048576 or 64MiB");
  EXPECT_EQ(message("3MB"), "--budget 3MB: unknown unit 'MB' (B, KiB, MiB, GiB, TiB)");
  EXPECT_EQ(message("9000000TiB"), "--budget 9000000TiB: too large");
}

}  // namespace
}  // namespace rtb::tool
