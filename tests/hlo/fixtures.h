// Helpers shared by the hlo-overlap unit tests: the fixtures in testdata/hlo.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace rtb::hlo::fixtures {

inline std::string fixture_path(const std::string& name) {
  return std::string(RTB_TESTDATA_DIR) + "/hlo/" + name;
}

// Every dump in testdata/hlo and testdata/hlo/bad.
inline std::vector<std::string> all_fixture_paths() {
  std::vector<std::string> paths;
  for (const char* dir : {"/hlo", "/hlo/bad"}) {
    for (const auto& entry :
         std::filesystem::directory_iterator(std::string(RTB_TESTDATA_DIR) + dir)) {
      if (entry.is_regular_file()) paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

inline std::string read_fixture(const std::string& name) {
  std::ifstream in(fixture_path(name), std::ios::binary);
  EXPECT_TRUE(in.good()) << name;
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// 1-based line of the first occurrence of `needle` in `text`.
inline std::int64_t line_of(const std::string& text, const std::string& needle) {
  std::size_t at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle;
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
}

}  // namespace rtb::hlo::fixtures
