// What the C++ unit tests share.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/error.h"

namespace rtb::test {

// A fixture under testdata/ (RTB_TESTDATA_DIR is set by CMakeLists.txt).
inline std::string testdata(std::string_view name) {
  return std::string(RTB_TESTDATA_DIR) + "/" + std::string(name);
}

// The lines of `text` without their '\n' (no empty last line for a trailing newline).
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// The rtb::Error that `call` throws; a test failure (and an empty Error) when it throws none.
template <typename Call>
Error error_of(Call&& call) {
  try {
    std::forward<Call>(call)();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "expected an rtb::Error, none was thrown";
  return Error("", 0, "");
}

}  // namespace rtb::test

// --- appended by the bench/k8s/tools helper (session 3) ---
#include <initializer_list>

namespace rtb::test {

// A table of cases for a function of one argument: EXPECT_EQ(function(input), expected) for each
// {input, expected}, naming the input when they differ. Input and Expected default to C strings;
// give them for other types, e.g. expect_cases<std::int64_t>(parse, {{"2K", 2048}}).
template <typename Expected = const char*, typename Input = const char*, typename Function>
void expect_cases(const Function& function,
                  std::initializer_list<std::pair<Input, Expected>> cases) {
  for (const auto& [input, expected] : cases) EXPECT_EQ(function(input), expected) << input;
}

}  // namespace rtb::test
