#include "rtb/bench/driver_settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <system_error>
#include <utility>

#include "rtb/base/error.h"
#include "rtb/base/text.h"

// Generated at build time from tools/render-bench/driver/settings.tsv (cmake/embed.cmake).
namespace rtb::embedded {
std::string_view driver_settings_table();
}  // namespace rtb::embedded

namespace rtb::bench {
namespace {

// What Python's str.strip() and the regex \s remove, in ASCII: the driver trims with them.
constexpr std::string_view kPythonBlanks = " \t\n\v\f\r\x1c\x1d\x1e\x1f";
constexpr std::int64_t kSegmentAlign = 64;  // the driver's SEGMENT_ALIGN
constexpr std::string_view kColumns = "name\tkind\tdefault\toption\tmeaning";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// An integer of any size, as Python keeps it: a sign and its digits without leading zeros.
struct Integer {
  bool negative = false;
  std::string digits;  // "0" for zero (never negative)

  std::optional<std::int64_t> to_int64() const {
    std::string text = negative ? "-" : "";
    text.append(digits);
    std::int64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
  }
  bool less_than(std::int64_t bound) const {
    if (std::optional<std::int64_t> value = to_int64()) return *value < bound;
    return negative;  // beyond 64 bits: below every bound when negative, above when not
  }
  std::int64_t remainder(std::int64_t divisor) const {  // of the magnitude
    std::int64_t r = 0;
    for (char c : digits) r = (r * 10 + (c - '0')) % divisor;
    return r;
  }
};

Integer make_integer(bool negative, std::string digits) {
  std::size_t first = digits.find_first_not_of('0');
  digits = first == std::string::npos ? "0" : digits.substr(first);
  return {negative && digits != "0", std::move(digits)};
}

// Digits with single underscores between them (Python's digitpart), from `text[at]` on; appends
// them without underscores to `out` and returns where they end, or npos when there are none.
std::size_t digit_part(std::string_view text, std::size_t at, std::string& out) {
  std::size_t start = at;
  while (at < text.size()) {
    if (is_digit(text[at])) {
      out += text[at++];
    } else if (text[at] == '_' && at > start && at + 1 < text.size() && is_digit(text[at + 1])) {
      ++at;
    } else {
      break;
    }
  }
  return at == start ? std::string_view::npos : at;
}

// Whether `text` starts with '-', and where what follows its sign ('+' or '-', if any) begins.
std::pair<bool, std::size_t> leading_sign(std::string_view text) {
  if (text.empty() || (text[0] != '+' && text[0] != '-')) return {false, 0};
  return {text[0] == '-', 1};
}

// `text` (trimmed) as Python's int(text, 10) reads it: a sign, then digits with single
// underscores between them.
std::optional<Integer> python_int(std::string_view text) {
  auto [negative, at] = leading_sign(text);
  std::string digits;
  if (digit_part(text, at, digits) != text.size()) return std::nullopt;
  return make_integer(negative, std::move(digits));
}

// `text` (trimmed) as Python's float() reads it: a decimal number with an optional exponent
// (underscores between digits), or inf, infinity or nan in any case, each with an optional sign.
// Out of double's range it is an infinity or zero, as in Python.
std::optional<double> python_float(std::string_view text) {
  auto [negative, at] = leading_sign(text);
  std::string word = lower_ascii(text.substr(at));
  if (word == "inf" || word == "infinity") {
    return negative ? -HUGE_VAL : HUGE_VAL;
  }
  if (word == "nan") return std::nan("");
  std::string whole, fraction, exponent;
  std::size_t end = digit_part(text, at, whole);
  if (end == std::string_view::npos) end = at;
  if (end < text.size() && text[end] == '.') {
    std::size_t after = digit_part(text, end + 1, fraction);
    end = after == std::string_view::npos ? end + 1 : after;
  }
  if (whole.empty() && fraction.empty()) return std::nullopt;
  bool negative_exponent = false;
  if (end < text.size() && (text[end] == 'e' || text[end] == 'E')) {
    std::size_t sign = end + 1;
    if (sign < text.size() && (text[sign] == '+' || text[sign] == '-')) {
      negative_exponent = text[sign] == '-';
      ++sign;
    }
    end = digit_part(text, sign, exponent);
    if (end == std::string_view::npos) return std::nullopt;
  }
  if (end != text.size()) return std::nullopt;
  // What from_chars reads: no '+', no underscores, a digit before any '.'.
  std::string plain = negative ? "-" : "";
  plain.append(whole.empty() ? "0" : whole);
  if (!fraction.empty()) plain.append(".").append(fraction);
  if (!exponent.empty()) plain.append(negative_exponent ? "e-" : "e").append(exponent);
  double value = 0;
  auto [stop, ec] = std::from_chars(plain.data(), plain.data() + plain.size(), value);
  if (ec == std::errc::result_out_of_range) {
    // Overflow or underflow: by the decimal position of the first nonzero digit.
    std::string digits = whole + fraction;
    std::size_t first = digits.find_first_not_of('0');
    std::int64_t position = static_cast<std::int64_t>(whole.size()) -
                            static_cast<std::int64_t>(first == std::string::npos ? 0 : first);
    std::int64_t shift = 0;
    for (char c : exponent) shift = std::min<std::int64_t>(shift * 10 + (c - '0'), 1'000'000'000);
    position += negative_exponent ? -shift : shift;
    double magnitude = position > 0 ? HUGE_VAL : 0.0;
    return negative ? -magnitude : magnitude;
  }
  if (ec != std::errc() || stop != plain.data() + plain.size()) return std::nullopt;
  return value;
}

// `text` as the driver's window pattern reads it: `\s*(-?\d+)\s*:\s*(-?\d+)\s*`.
std::optional<std::pair<Integer, Integer>> python_window(std::string_view text) {
  std::size_t at = 0;
  auto blanks = [&] {
    while (at < text.size() && kPythonBlanks.find(text[at]) != std::string_view::npos) ++at;
  };
  auto number = [&]() -> std::optional<Integer> {
    bool negative = at < text.size() && text[at] == '-';
    if (negative) ++at;
    std::size_t start = at;
    while (at < text.size() && is_digit(text[at])) ++at;
    if (at == start) return std::nullopt;
    return make_integer(negative, std::string(text.substr(start, at - start)));
  };
  blanks();
  std::optional<Integer> start = number();
  if (!start) return std::nullopt;
  blanks();
  if (at == text.size() || text[at] != ':') return std::nullopt;
  ++at;
  blanks();
  std::optional<Integer> count = number();
  if (!count) return std::nullopt;
  blanks();
  if (at != text.size()) return std::nullopt;
  return std::make_pair(*start, *count);
}

std::optional<std::string> int_refusal(std::string_view text, std::optional<std::int64_t> minimum) {
  std::optional<Integer> value = python_int(text);
  if (!value) return "not an integer";
  if (minimum && value->less_than(*minimum)) return fmt::format("must be >= {}", *minimum);
  return std::nullopt;
}

// The kind column parsed into `setting`; false when it is not one of the kinds.
bool parse_kind(DriverSetting& setting) {
  const std::string& kind = setting.kind;
  static const std::pair<std::string_view, SettingKind> kPlain[] = {
      {"int", SettingKind::kInt},
      {"bool", SettingKind::kBool},
      {"pad_align", SettingKind::kPadAlign},
      {"window", SettingKind::kWindow},
      {"argv", SettingKind::kArgv},
      {"targets", SettingKind::kTargets},
      {"text", SettingKind::kText}};
  for (const auto& [word, type] : kPlain) {
    if (kind == word) {
      setting.type = type;
      return true;
    }
  }
  if (kind.rfind("int>=", 0) == 0) {
    std::optional<Integer> minimum = python_int(std::string_view(kind).substr(5));
    if (!minimum || !minimum->to_int64()) return false;
    setting.type = SettingKind::kInt;
    setting.int_minimum = minimum->to_int64();
    return true;
  }
  if (kind.rfind("float>=", 0) == 0) {
    std::optional<double> minimum = python_float(std::string_view(kind).substr(7));
    if (!minimum || !std::isfinite(*minimum)) return false;
    setting.type = SettingKind::kFloat;
    setting.float_minimum = *minimum;
    return true;
  }
  if (kind.rfind("choice:", 0) == 0) {
    std::string_view words = std::string_view(kind).substr(7);
    while (true) {
      std::size_t bar = words.find('|');
      std::string word(words.substr(0, bar));
      bool plain = !word.empty() && word == lower_ascii(word) &&
                   word.find_first_of(kPythonBlanks) == std::string::npos;
      if (!plain || std::count(setting.choices.begin(), setting.choices.end(), word)) return false;
      setting.choices.push_back(word);
      if (bar == std::string_view::npos) break;
      words.remove_prefix(bar + 1);
    }
    setting.type = SettingKind::kChoice;
    return true;
  }
  return false;
}

bool valid_name(std::string_view name) {
  if (name.empty() || !(name[0] >= 'A' && name[0] <= 'Z')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_'; });
}

bool valid_option(std::string_view option) {
  if (option == "argv" || option == "orch" || option == "rollout" || option == "arm" ||
      option == "-")
    return true;
  if (option.size() < 3 || option.rfind("--", 0) != 0 || !(option[2] >= 'a' && option[2] <= 'z'))
    return false;
  return std::all_of(option.begin() + 2, option.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || is_digit(c) || c == '-'; });
}

[[noreturn]] void refuse(const DriverSetting& setting, std::string_view value,
                         const std::string& reason) {
  fail("{} {}: {}", setting.option, value, reason);
}

}  // namespace

std::vector<DriverSetting> parse_driver_settings(std::string_view text, std::string_view source) {
  const std::string file(source);
  std::vector<DriverSetting> settings;
  std::set<std::string, std::less<>> names, options;
  bool header = false;
  std::int64_t number = 0;
  for (std::string_view line : split_lines(text)) {
    ++number;
    auto bad = [&](std::string_view what) {
      fail_at(file, number, "internal error: the driver settings table: {}", what);
    };
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      if (line != kColumns)
        bad("expected the header line of columns name, kind, default, option, meaning");
      header = true;
      continue;
    }
    std::vector<std::string_view> fields;
    for (std::size_t start = 0;;) {
      std::size_t tab = line.find('\t', start);
      fields.push_back(line.substr(start, tab == std::string_view::npos ? tab : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    if (fields.size() != 5) bad(fmt::format("{} tab-separated columns, expected 5", fields.size()));
    for (std::string_view field : fields) {
      if (field.empty() || trim(field, kPythonBlanks).size() != field.size())
        bad("an empty column, or one with white space around it");
    }
    DriverSetting setting;
    setting.name = fields[0];
    setting.kind = fields[1];
    setting.default_value = fields[2];
    setting.option = fields[3];
    setting.meaning = fields[4];
    setting.line = number;
    if (!valid_name(setting.name))
      bad(fmt::format("'{}' is not an environment variable name", setting.name));
    if (!names.insert(setting.name).second) bad(fmt::format("{} is given twice", setting.name));
    if (!parse_kind(setting)) bad(fmt::format("{}: unknown kind '{}'", setting.name, setting.kind));
    if (!valid_option(setting.option))
      bad(fmt::format("{}: option '{}' is neither --name, argv, orch, rollout, arm nor -",
                      setting.name, setting.option));
    if (setting.has_option() && !options.insert(setting.option).second)
      bad(fmt::format("{}: option {} belongs to another setting too", setting.name,
                      setting.option));
    if (setting.default_value != "-") {
      if (std::optional<std::string> why = refusal(setting, setting.default_value))
        bad(fmt::format("{}: default '{}': {}", setting.name, setting.default_value, *why));
    }
    settings.push_back(std::move(setting));
  }
  if (!header) fail_at(file, 0, "internal error: the driver settings table has no header line");
  return settings;
}

const std::vector<DriverSetting>& driver_settings() {
  static const std::vector<DriverSetting> kTable =
      parse_driver_settings(embedded::driver_settings_table(), kDriverSettingsSource);
  return kTable;
}

const DriverSetting* find_driver_setting(std::string_view name) {
  for (const DriverSetting& setting : driver_settings()) {
    if (setting.name == name) return &setting;
  }
  return nullptr;
}

const DriverSetting* find_driver_setting_by_option(std::string_view option) {
  if (option.rfind("--", 0) != 0) return nullptr;
  for (const DriverSetting& setting : driver_settings()) {
    if (setting.option == option) return &setting;
  }
  return nullptr;
}

const DriverSetting& driver_setting(std::string_view name) {
  const DriverSetting* setting = find_driver_setting(name);
  if (setting == nullptr)
    fail_at(std::string(kDriverSettingsSource), 0, "internal error: no driver setting {}", name);
  return *setting;
}

std::optional<bool> bool_word(std::string_view value) {
  static const std::set<std::string, std::less<>> kTrue = {"1", "true", "yes", "on", "t", "y"};
  static const std::set<std::string, std::less<>> kFalse = {"0", "false", "no", "off", "f", "n"};
  std::string word = lower_ascii(trim(value, kPythonBlanks));
  if (kTrue.count(word)) return true;
  if (kFalse.count(word)) return false;
  return std::nullopt;
}

std::optional<std::string> refusal(const DriverSetting& setting, std::string_view value) {
  std::string_view text = trim(value, kPythonBlanks);
  if (text.empty()) return std::nullopt;  // unset: the driver's default
  switch (setting.type) {
    case SettingKind::kInt:
      return int_refusal(text, setting.int_minimum);
    case SettingKind::kFloat: {
      std::optional<double> number = python_float(text);
      if (!number) return "not a number";
      if (!std::isfinite(*number)) return "must be finite";
      if (*number < setting.float_minimum)
        return fmt::format("must be >= {:g}", setting.float_minimum);
      return std::nullopt;
    }
    case SettingKind::kChoice: {
      std::string word = lower_ascii(text);
      if (std::find(setting.choices.begin(), setting.choices.end(), word) != setting.choices.end())
        return std::nullopt;
      return fmt::format("must be one of {}", fmt::join(setting.choices, "|"));
    }
    case SettingKind::kBool:
      if (bool_word(text)) return std::nullopt;
      return "not a boolean (true/false, 1/0, yes/no, on/off)";
    case SettingKind::kPadAlign:
      if (std::optional<std::string> why = int_refusal(text, 1)) return why;
      if (python_int(text)->remainder(kSegmentAlign) != 0)
        return fmt::format("must be a multiple of the segment alignment {}", kSegmentAlign);
      return std::nullopt;
    case SettingKind::kWindow: {
      auto window = python_window(value);
      if (!window) return "expected START:COUNT (timed steps, 0-based start)";
      if (window->first.negative) return "START must be >= 0";
      if (window->second.less_than(1)) return "COUNT must be >= 1";
      return std::nullopt;
    }
    case SettingKind::kArgv:
    case SettingKind::kTargets:
    case SettingKind::kText:
      return std::nullopt;
  }
  return std::nullopt;
}

std::string checked_setting(const DriverSetting& setting, std::string_view value) {
  if (std::optional<std::string> why = refusal(setting, value)) refuse(setting, value, *why);
  std::string_view text = trim(value, kPythonBlanks);
  bool words = setting.type == SettingKind::kChoice || setting.type == SettingKind::kBool;
  return words ? lower_ascii(text) : std::string(text);
}

std::optional<std::int64_t> int_setting(const DriverSetting& setting, std::string_view value,
                                        std::int64_t highest) {
  std::string text = checked_setting(setting, value);
  if (text.empty()) return std::nullopt;
  Integer number = *python_int(text);
  std::optional<std::int64_t> parsed = number.to_int64();
  if (!parsed && number.negative) {
    refuse(setting, value,
           fmt::format("out of range (at least {})", std::numeric_limits<std::int64_t>::min()));
  }
  if (!parsed || *parsed > highest)
    refuse(setting, value, fmt::format("out of range (at most {})", highest));
  return parsed;
}

std::optional<double> float_setting(const DriverSetting& setting, std::string_view value) {
  std::string text = checked_setting(setting, value);
  if (text.empty()) return std::nullopt;
  return python_float(text);
}

std::optional<std::pair<std::int64_t, std::int64_t>> window_setting(const DriverSetting& setting,
                                                                    std::string_view value,
                                                                    std::int64_t highest) {
  std::string text = checked_setting(setting, value);
  if (text.empty()) return std::nullopt;
  auto [start, count] = *python_window(text);
  std::optional<std::int64_t> first = start.to_int64(), second = count.to_int64();
  if (!first || !second || *first > highest || *second > highest)
    refuse(setting, value, fmt::format("out of range (at most {})", highest));
  return std::make_pair(*first, *second);
}

std::optional<std::string> window_beyond_steps(std::pair<std::int64_t, std::int64_t> window,
                                               std::int64_t steps) {
  if (window.first + window.second <= steps) return std::nullopt;
  return fmt::format("ends after the last timed step (STEPS={}: steps 0..{})", steps, steps - 1);
}

}  // namespace rtb::bench
