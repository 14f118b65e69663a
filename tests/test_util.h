// What the C++ unit tests share.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/text.h"

namespace rtb {

// The GoogleTest matchers the tests use, declared once for every test in namespace rtb.
using ::testing::ContainsRegex;
using ::testing::ElementsAre;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

}  // namespace rtb

namespace rtb::test {

// A fixture under testdata/ (RTB_TESTDATA_DIR is set by CMakeLists.txt).
inline std::string testdata(std::string_view name) {
  return std::string(RTB_TESTDATA_DIR) + "/" + std::string(name);
}

// The lines of `text` without their '\n' (no empty last line for a trailing newline).
inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string_view> lines = split_lines(text);
  return {lines.begin(), lines.end()};
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

// What the rtb::Error that `call` throws says in full ("file:line: message"); a test failure
// (and "") when it throws none.
template <typename Call>
std::string what_of(Call&& call) {
  return error_of(std::forward<Call>(call)).what();
}

// A table of cases for a function of one argument: EXPECT_EQ(function(input), expected) for each
// {input, expected}, naming the input of a case that fails. Expected and Input default to C
// strings; give them for other types: expect_cases<int, std::string_view>(element_bits,
// {{"pred", 8}, {"f32", 32}}).
template <typename Expected = const char*, typename Input = const char*, typename Function>
void expect_cases(const Function& function,
                  std::initializer_list<std::pair<Input, Expected>> cases) {
  for (const auto& [input, expected] : cases) {
    EXPECT_EQ(function(input), expected) << "input: " << ::testing::PrintToString(input);
  }
}

// The same for a function of several arguments: EXPECT_EQ(function(arguments...), expected) for
// each {{arguments...}, expected}, naming the arguments of a case that fails. The result's type
// comes first, then the arguments': expect_calls<const char*, const char*, int>(wrap_words,
// {{{"aa bb", 2}, "aa\nbb"}}).
template <typename Expected, typename... Arguments, typename Function>
void expect_calls(const Function& function,
                  std::initializer_list<std::pair<std::tuple<Arguments...>, Expected>> cases) {
  for (const auto& [arguments, expected] : cases) {
    EXPECT_EQ(std::apply(function, arguments), expected)
        << "arguments: " << ::testing::PrintToString(arguments);
  }
}

// EXPECT_THAT(text, HasSubstr(part)) for each of `parts`.
inline void expect_contains(std::string_view text, std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts) EXPECT_THAT(std::string(text), ::testing::HasSubstr(part));
}

// For each {key, value} of `entries`: `map` holds the key, with that value. A key it lacks fails as
// missing (where `map[key]` would read as an empty value).
template <typename Map>
void expect_entries(const Map& map,
                    std::initializer_list<std::pair<std::string_view, std::string_view>> entries) {
  for (const auto& [key, value] : entries) {
    auto found = map.find(std::string(key));
    if (found == map.end()) {
      ADD_FAILURE() << "no key " << key << " (expected the value " << value << ")";
    } else {
      EXPECT_EQ(found->second, value) << "key: " << key;
    }
  }
}

// A new empty directory under the system's temporary directory, removed with what it holds when
// the object goes: `TempDir dir("rtb_npy_test"); write_npy(dir / "a.npy", ...)`.
class TempDir {
 public:
  explicit TempDir(std::string_view prefix) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / (std::string(prefix) + "_XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << pattern << " failed";
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace rtb::test

namespace rtb {

// The helpers above that most tests use, like the matchers at the top.
using test::lines_of;
using test::testdata;

}  // namespace rtb
