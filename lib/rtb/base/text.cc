#include "rtb/base/text.h"

#include <fmt/format.h>

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

}  // namespace rtb
