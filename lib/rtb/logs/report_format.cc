#include "rtb/logs/report_format.h"

#include <fmt/format.h>

#include <cmath>

#include "rtb/base/text.h"

namespace rtb::logs::report {

std::string compress(const std::vector<std::int64_t>& values) {
  return values.empty() ? "none" : integer_ranges(values);
}

std::string seconds(double value) {
  if (!std::isfinite(value)) return "?";
  if (value == 0.0) return "0";
  if (std::fabs(value) >= 1.0) return fmt::format("{:.3f}", value);
  return fmt::format("{:.4g}", value);
}

std::string spread(double value, double reference) {
  if (!std::isfinite(value)) return "?";
  if (std::fabs(reference) >= 1.0) return fmt::format("{:.3f}", value);
  return seconds(value);
}

std::string scientific(double value) {
  if (value == 0.0) return "0";
  if (std::isinf(value)) return "inf";
  std::string text = fmt::format("{:.1e}", value);
  for (const char* from : {"e-0", "e+0"}) {
    std::size_t at = text.find(from);
    if (at != std::string::npos) text.erase(at + 2, 1);
  }
  if (text.size() > 3 && text.compare(text.size() - 3, 3, "e+0") == 0) text.resize(text.size() - 3);
  return text;
}

std::string grouped(double value) {
  if (!std::isfinite(value)) return "?";
  std::string digits = fmt::format("{:.0f}", std::fabs(value));
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (value < 0 && digits != "0" ? "-" : "") + out;
}

std::string percent(double ratio) { return fmt::format("{:+.2f}%", (ratio - 1.0) * 100.0); }

}  // namespace rtb::logs::report
