// tools/common/tool: what every tool shares.
#include "common/tool.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace rtb::tool {
namespace {

TEST(ParseByteCount, PlainNumbersAndBinaryUnits) {
  test::expect_cases<std::int64_t>([](const char* text) { return parse_byte_count(text, "--x"); },
                                   {{"1048576", 1048576},
                                    {"512B", 512},
                                    {"2K", 2048},
                                    {"64MiB", 64 << 20},
                                    {"1.5GiB", 3LL << 29},
                                    {"1TiB", 1LL << 40}});
}

TEST(ParseByteCount, ErrorsNameTheOption) {
  auto message = [](const std::string& text) {
    return std::string(test::error_of([&] { parse_byte_count(text, "--budget"); }).what());
  };
  test::expect_cases(message,
                     {{"lots", "--budget lots: expected a byte count such as 1048576 or 64MiB"},
                      {"-1", "--budget -1: expected a byte count such as 1048576 or 64MiB"},
                      {"3MB", "--budget 3MB: unknown unit 'MB' (B, KiB, MiB, GiB, TiB)"},
                      {"9000000TiB", "--budget 9000000TiB: too large"}});
}

}  // namespace
}  // namespace rtb::tool
