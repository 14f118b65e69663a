// Small text helpers shared by every domain: trimming with an explicit blank set (log lines,
// HLO statements and CSV fields do not agree on which characters are blank), byte sizes and
// integer runs for people, and log lines without terminal colour codes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

// `text` with ASCII 'A'-'Z' lower-cased and every other byte as it is (setting words, flag
// values, environment values: never locale-dependent, never a UTF-8 sequence changed).
inline std::string lower_ascii(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

enum class ByteUnits {
  kBinary,   // powers of 1024: B, KiB, MiB, ... EiB (memory, HLO buffers)
  kDecimal,  // powers of 1000: B, KB, MB, GB, TB (file sizes)
};

// "1023 B", "1.5 KiB", "416.0 MiB" (kBinary) or "999 B", "1.5 KB" (kDecimal): one decimal above
// bytes; the largest unit of the set takes whatever is left.
std::string human_bytes(std::int64_t bytes, ByteUnits units = ByteUnits::kBinary);

// Sorted integers with each run of consecutive ones collapsed: {1, 2, 3, 5} -> "1-3,5"; "" for
// none (step lists in logs and reports).
std::string integer_ranges(const std::vector<std::int64_t>& sorted);

// The lines of `text` without their '\n'; a final newline does not start another line
// ("a\n\nb\n" is "a", "", "b").
std::vector<std::string_view> split_lines(std::string_view text);

// `text` (one paragraph) broken at spaces into lines of at most `width` columns (a longer word
// gets a line of its own), joined by '\n' without a final one.
std::string wrap_words(std::string_view text, std::size_t width);

// `line` without terminal escape sequences (ESC [ ... final byte, ESC ] ... BEL or ESC \, and
// two-byte ESC sequences), as coloured consoles and notebooks leave in logs; `line` itself (no
// copy) when it holds no ESC, else a view of `buffer`, which it overwrites.
std::string_view strip_terminal_escapes(std::string_view line, std::string& buffer);

}  // namespace rtb
