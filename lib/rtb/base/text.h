// Small text helpers shared by every domain: trimming with an explicit blank set (log lines,
// HLO statements and CSV fields do not agree on which characters are blank) and byte sizes for
// people.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rtb {

// Blank sets. kWhitespace is the default; kLineBlanks keeps a '\n' (callers that trim one line
// where a newline would be a format error, not padding).
inline constexpr std::string_view kWhitespace = " \t\r\n";
inline constexpr std::string_view kLineBlanks = " \t\r";

// `text` without leading characters of `blanks`.
inline std::string_view trim_front(std::string_view text, std::string_view blanks = kWhitespace) {
  std::size_t begin = text.find_first_not_of(blanks);
  return begin == std::string_view::npos ? std::string_view() : text.substr(begin);
}

// `text` without trailing characters of `blanks`.
inline std::string_view trim_back(std::string_view text, std::string_view blanks = kWhitespace) {
  std::size_t last = text.find_last_not_of(blanks);
  return last == std::string_view::npos ? std::string_view() : text.substr(0, last + 1);
}

// `text` without leading or trailing characters of `blanks`.
inline std::string_view trim(std::string_view text, std::string_view blanks = kWhitespace) {
  return trim_back(trim_front(text, blanks), blanks);
}

enum class ByteUnits {
  kBinary,   // powers of 1024: B, KiB, MiB, ... EiB (memory, HLO buffers)
  kDecimal,  // powers of 1000: B, KB, MB, GB, TB (file sizes)
};

// "1023 B", "1.5 KiB", "416.0 MiB" (kBinary) or "999 B", "1.5 KB" (kDecimal): one decimal above
// bytes; the largest unit of the set takes whatever is left.
std::string human_bytes(std::int64_t bytes, ByteUnits units = ByteUnits::kBinary);

}  // namespace rtb
