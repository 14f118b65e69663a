#include "rtb/base/text.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>

namespace rtb {

std::string human_bytes(std::int64_t bytes, ByteUnits units) {
  static constexpr std::array<std::string_view, 7> kBinaryUnits = {"B",   "KiB", "MiB", "GiB",
                                                                   "TiB", "PiB", "EiB"};
  static constexpr std::array<std::string_view, 5> kDecimalUnits = {"B", "KB", "MB", "GB", "TB"};
  bool binary = units == ByteUnits::kBinary;
  double step = binary ? 1024 : 1000;
  std::size_t largest = binary ? kBinaryUnits.size() - 1 : kDecimalUnits.size() - 1;
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= step && unit < largest) {
    value /= step;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} B", bytes);
  return fmt::format("{:.1f} {}", value, binary ? kBinaryUnits[unit] : kDecimalUnits[unit]);
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string wrap_words(std::string_view text, std::size_t width) {
  std::string out;
  std::size_t column = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t begin = text.find_first_not_of(' ', at);
    if (begin == std::string_view::npos) break;
    std::size_t end = std::min(text.find(' ', begin), text.size());
    std::string_view word = text.substr(begin, end - begin);
    if (column > 0 && column + 1 + word.size() > width) {
      out += '\n';
      column = 0;
    } else if (column > 0) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    at = end;
  }
  return out;
}

std::string integer_ranges(const std::vector<std::int64_t>& sorted) {
  std::string out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(sorted[i]) : fmt::format("{}-{}", sorted[i], sorted[j]);
    i = j + 1;
  }
  return out;
}

std::string_view strip_terminal_escapes(std::string_view line, std::string& buffer) {
  constexpr char kEsc = '\x1b';
  if (line.find(kEsc) == std::string_view::npos) return line;
  buffer.clear();
  std::size_t i = 0;
  while (i < line.size()) {
    if (line[i] != kEsc) {
      buffer += line[i++];
      continue;
    }
    ++i;
    if (i >= line.size()) break;
    char type = line[i++];
    if (type == '[') {
      // CSI: parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, one final byte 0x40-0x7E.
      while (i < line.size() && line[i] >= 0x20 && line[i] <= 0x3F) ++i;
      if (i < line.size() && line[i] >= 0x40 && line[i] <= 0x7E) ++i;
    } else if (type == ']' || type == 'P' || type == 'X' || type == '^' || type == '_') {
      // OSC and the other string sequences end at BEL or at ESC \ (ST).
      while (i < line.size() && line[i] != '\a' &&
             !(line[i] == kEsc && i + 1 < line.size() && line[i + 1] == '\\'))
        ++i;
      if (i < line.size()) i += line[i] == '\a' ? 1 : 2;
    } else {
      // Two-byte sequences (ESC 7, ESC =) and ESC ( B: intermediates, then one final byte.
      --i;
      while (i < line.size() && line[i] >= 0x20 && line[i] <= 0x2F) ++i;
      if (i < line.size()) ++i;
    }
  }
  return buffer;
}

}  // namespace rtb
