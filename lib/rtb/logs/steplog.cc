#include "rtb/logs/steplog.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <tuple>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/text.h"

namespace rtb::logs::steplog {
namespace {

// ---- Values ------------------------------------------------------------------------------------

using Kind = Literal::Kind;

// Recursion is bounded by the parser's nesting limit.
void flatten(const Literal& value, const std::string& prefix, std::map<std::string, double>& out) {
  switch (value.kind) {
    case Kind::kInt:
    case Kind::kFloat:
      if (!prefix.empty()) out[prefix] = value.number;
      break;
    case Kind::kBool:
      if (!prefix.empty()) out[prefix] = value.boolean ? 1.0 : 0.0;
      break;
    case Kind::kDict:
      for (const auto& [key, member] : value.entries) {
        if (key.kind != Kind::kString) continue;
        flatten(member, prefix.empty() ? key.text : prefix + "/" + key.text, out);
      }
      break;
    default:
      break;
  }
}

// ---- Line helpers ------------------------------------------------------------------------------

// Leading " \t" only (a value never starts with a line end), trailing ones too.
std::string_view trim(std::string_view text) { return trim_back(trim_front(text, " \t")); }

// Reads a (possibly signed) integer at the start of `text`; advances past it.
std::optional<std::int64_t> take_int(std::string_view& text) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return value;
}

std::optional<double> take_double(std::string_view& text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return value;
}

bool take(std::string_view& text, std::string_view literal) {
  if (text.substr(0, literal.size()) != literal) return false;
  text.remove_prefix(literal.size());
  return true;
}

// A number of a JSON object member: nullopt when absent or null; throws when of another type.
std::optional<double> number_member(const Literal& object, std::string_view key) {
  const Literal* member = object.find(key);
  if (member == nullptr || member->is_null()) return std::nullopt;
  if (!member->is_number()) fail("\"{}\" is not a number", key);
  return member->number;
}

// `number` (the value of `key`) as an integer; throws when it is not one.
std::int64_t integer_of(double number, std::string_view key) {
  if (!std::isfinite(number) || number != std::floor(number)) {
    fail("\"{}\" is not an integer", key);
  }
  // Converting a double outside int64's range is undefined behaviour: refuse it first.
  if (number < -0x1p63 || number >= 0x1p63) fail("\"{}\" is out of range", key);
  return static_cast<std::int64_t>(number);
}

std::optional<std::int64_t> int_member(const Literal& object, std::string_view key) {
  std::optional<double> number = number_member(object, key);
  if (!number) return std::nullopt;
  return integer_of(*number, key);
}

// A string member: nullopt when absent or null; throws when of another type.
std::optional<std::string> string_member(const Literal& object, std::string_view key) {
  const Literal* member = object.find(key);
  if (member == nullptr || member->is_null()) return std::nullopt;
  if (member->kind != Kind::kString) fail("\"{}\" is not a string", key);
  return member->text;
}

std::optional<bool> bool_member(const Literal& object, std::string_view key) {
  const Literal* member = object.find(key);
  if (member == nullptr || member->is_null()) return std::nullopt;
  if (member->kind != Kind::kBool) fail("\"{}\" is not true or false", key);
  return member->boolean;
}

// A list of integers (e.g. step numbers): empty when absent or null.
std::vector<std::int64_t> int_list_member(const Literal& object, std::string_view key) {
  std::vector<std::int64_t> out;
  const Literal* member = object.find(key);
  if (member == nullptr || member->is_null()) return out;
  if (!member->is_sequence()) fail("\"{}\" is not a list", key);
  for (const Literal& item : member->items) {
    if (!item.is_number()) fail("\"{}\" holds a non-number", key);
    out.push_back(integer_of(item.number, key));
  }
  return out;
}

// A scalar as text ("x", 3, true); nullopt for null or absent. Lists and objects are refused.
std::optional<std::string> scalar_text(const Literal& object, std::string_view key) {
  const Literal* member = object.find(key);
  if (member == nullptr || member->is_null()) return std::nullopt;
  switch (member->kind) {
    case Kind::kString:
      return member->text;
    case Kind::kBool:
      return member->boolean ? "true" : "false";
    case Kind::kInt:
    case Kind::kFloat:
      return fmt::format("{:g}", member->number);
    default:
      fail("\"{}\" is not a string, number or boolean", key);
  }
}

// A field of issue 25's contract with the wrong type: bench-report stops (exit 2) instead of
// skipping the line, since a skipped line would hide a set-up difference between arms.
class ContractError : public Error {
 public:
  explicit ContractError(const Error& error) : Error(error.message()) {}
};

// Runs `parse` and turns an error into a ContractError.
template <typename Parse>
auto contract_field(Parse&& parse) {
  try {
    return parse();
  } catch (const ContractError&) {
    throw;
  } catch (const Error& e) {
    throw ContractError(e);
  }
}

// An object member: nullptr when absent or null; throws when it is not an object.
const Literal* object_member(const Literal& object, std::string_view key) {
  const Literal* member = object.find(key);
  if (member == nullptr || member->is_null()) return nullptr;
  if (!member->is_dict()) fail("\"{}\" is not an object", key);
  return member;
}

// A string member that must be one of `allowed`.
std::optional<std::string> enum_member(const Literal& object, std::string_view key,
                                       std::initializer_list<std::string_view> allowed) {
  std::optional<std::string> value = string_member(object, key);
  if (!value) return value;
  for (std::string_view word : allowed) {
    if (*value == word) return value;
  }
  std::string words;
  for (std::string_view word : allowed)
    words += fmt::format("{}{}", words.empty() ? "" : ", ", word);
  fail("\"{}\" is \"{}\" (expected one of {})", key, *value, words);
}

std::optional<std::int64_t> count_member(const Literal& object, std::string_view key) {
  std::optional<std::int64_t> value = int_member(object, key);
  if (value && *value < 0) fail("\"{}\" is {}", key, *value);
  return value;
}

std::optional<double> seconds_member(const Literal& object, std::string_view key) {
  std::optional<double> value = number_member(object, key);
  if (value && !(std::isfinite(*value) && *value >= 0)) fail("\"{}\" is {}", key, *value);
  return value;
}

// The set-up fields of BENCH_SUMMARY (issue 25's contract); throws on a wrong type.
void parse_setup_fields(const Literal& json, BenchSummary& summary) {
  summary.final_rows = count_member(json, "final_rows");
  summary.boundary_free_step_s = seconds_member(json, "boundary_free_step_s");
  summary.fence_s = seconds_member(json, "fence_s");
  summary.microbatch_timing_why = string_member(json, "microbatch_timing_why");
  if (const Literal* path = object_member(json, "update_path")) {
    UpdatePath out;
    out.ran = enum_member(*path, "ran", {"fused", "explicit", "deferred", "mixed"}).value_or("");
    out.why = string_member(*path, "why").value_or("");
    summary.update_path = std::move(out);
  }
  if (const Literal* grad = object_member(json, "grad_norm")) {
    GradNormReport out;
    out.reported = bool_member(*grad, "reported").value_or(false);
    out.metric = string_member(*grad, "metric");
    out.steps = count_member(*grad, "steps").value_or(0);
    out.skip_step_on_spikes = bool_member(*grad, "skip_step_on_spikes");
    out.why = string_member(*grad, "why").value_or("");
    summary.grad_norm = std::move(out);
  }
  if (const Literal* weights = object_member(json, "weights")) {
    Weights out;
    out.source = enum_member(*weights, "source", {"random", "checkpoint"}).value_or("");
    out.path = string_member(*weights, "path");
    out.why = string_member(*weights, "why").value_or("");
    summary.weights = std::move(out);
  }
  if (const Literal* profiler = object_member(json, "profiler")) {
    Profiler out;
    out.by = enum_member(*profiler, "by", {"driver", "trainer", "none"}).value_or("");
    out.why = string_member(*profiler, "why").value_or("");
    summary.profiler = std::move(out);
  }
  if (const Literal* choices = object_member(json, "choices")) {
    for (const auto& [key, entry] : choices->entries) {
      // Each entry is the driver's {value, source}: anything else is a wrong type, not a line to
      // skip (a skipped choice would hide a set-up difference).
      if (key.kind != Kind::kString || !entry.is_dict() || entry.find("value") == nullptr ||
          entry.find("source") == nullptr) {
        fail("\"choices\" entry {} is not a {{value, source}} object",
             key.kind == Kind::kString ? fmt::format("\"{}\"", key.text) : std::string("key"));
      }
      const Literal* value = entry.find("value");
      // Settings with a list or object value are not part of the set-up bench-report compares.
      if (value != nullptr && (value->is_sequence() || value->is_dict())) continue;
      Choice choice;
      choice.value = scalar_text(entry, "value");
      choice.source = string_member(entry, "source").value_or("");
      summary.choices[key.text] = std::move(choice);
    }
  }
}

// BENCH_SUMMARY "token_dropping"; throws when a field has the wrong type.
TokenDropping token_dropping_of(const Literal& object) {
  if (!object.is_dict()) fail("\"token_dropping\" is not an object");
  TokenDropping out;
  out.verdict = string_member(object, "verdict").value_or("");
  out.why = string_member(object, "why").value_or("");
  out.dropped_tokens = number_member(object, "dropped_tokens");
  if (out.dropped_tokens && !(std::isfinite(*out.dropped_tokens) && *out.dropped_tokens >= 0)) {
    fail("\"token_dropping\" \"dropped_tokens\" is {}", *out.dropped_tokens);
  }
  out.counted_steps = int_member(object, "counted_steps");
  // "metric": one name, a list of names (several metrics counted), or null.
  if (const Literal* metric = object.find("metric"); metric != nullptr && !metric->is_null()) {
    if (metric->kind == Kind::kString) {
      out.metric = metric->text;
    } else if (metric->is_sequence()) {
      for (const Literal& item : metric->items) {
        if (item.kind != Kind::kString) fail("\"token_dropping\" \"metric\" holds a non-string");
        out.metric += (out.metric.empty() ? "" : ",") + item.text;
      }
    } else {
      fail("\"token_dropping\" \"metric\" is not a string or a list");
    }
  }
  out.capacity_factor = number_member(object, "capacity_factor");
  out.ragged_buffer_factor = number_member(object, "ragged_buffer_factor");
  contract_field([&] {
    out.replays = count_member(object, "replays");
    out.replay_counted_steps = count_member(object, "replay_counted_steps");
    out.retry_when_tokens_dropped = bool_member(object, "retry_when_tokens_dropped");
    return 0;
  });
  return out;
}

EventTiming event_timing(const Literal& value, std::string_view what) {
  if (!value.is_dict()) fail("{} is not an object", what);
  EventTiming event;
  event.dispatch_begin_ago_s = number_member(value, "dispatch_begin_ago_s");
  event.dispatch_end_ago_s = number_member(value, "dispatch_end_ago_s");
  event.ready_ago_s = number_member(value, "ready_ago_s");
  return event;
}

}  // namespace

// ---- Values ------------------------------------------------------------------------------------

Literal parse_value(std::string_view text, LiteralSyntax syntax) {
  // A parsed value takes tens of bytes per element: refuse absurd lines before building one.
  if (text.size() > kMaxValueBytes) {
    fail("{} bytes of {} in one line (at most {})", text.size(),
         syntax == LiteralSyntax::kJson ? "JSON" : "literal", kMaxValueBytes);
  }
  return parse_literal(text, {.syntax = syntax, .unwrap_calls = syntax == LiteralSyntax::kPython});
}

namespace {

// One `key: value` item of a console line, both trimmed.
struct LineField {
  std::string_view key, value;
};

// The `key: value` items of `text`, separated by `separator` ("loss: 1.5 - step_time: 2.1s");
// items (trimmed) without ": " are left out and counted in `*unkeyed`.
std::vector<LineField> line_fields(std::string_view text, std::string_view separator,
                                   std::size_t* unkeyed) {
  std::vector<LineField> fields;
  while (!text.empty()) {
    std::size_t end = text.find(separator);
    std::string_view item = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + separator.size());
    std::size_t colon = item.find(": ");
    if (colon == std::string_view::npos) {
      ++*unkeyed;
      continue;
    }
    fields.push_back({trim(item.substr(0, colon)), trim(item.substr(colon + 2))});
  }
  return fields;
}

// `text` as a Python number; nullopt for anything else (e.g. a printed array).
std::optional<double> python_number(std::string_view text) {
  try {
    Literal parsed = parse_value(text, LiteralSyntax::kPython);
    if (parsed.is_number()) return parsed.number;
  } catch (const Error&) {
  }
  return std::nullopt;
}

// ---- Log timestamps ----------------------------------------------------------------------------

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) {
  char lower = static_cast<char>(c | 0x20);
  return is_digit(c) || (lower >= 'a' && lower <= 'z');
}

// The `count` digits at text[at] as a number; nullopt when one is missing or not a digit.
std::optional<int> digits_at(std::string_view text, std::size_t at, std::size_t count) {
  if (at > text.size() || text.size() - at < count) return std::nullopt;
  int value = 0;
  for (std::size_t i = at; i < at + count; ++i) {
    if (!is_digit(text[i])) return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

bool leap_year(std::int64_t year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

int days_in_month(int month, bool leap) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && leap ? 29 : kDays[month - 1];
}

// Days before `month`/`day` in its year (January 1 is 0).
std::int64_t day_of_year(int month, int day, bool leap) {
  std::int64_t days = day - 1;
  for (int m = 1; m < month; ++m) days += days_in_month(m, leap);
  return days;
}

// `HH:MM:SS[<point>fraction]` at text[at], not followed by another digit: the time of day and its
// fraction's digits. `points` holds the characters that may start the fraction.
std::optional<std::pair<double, int>> time_of_day_at(std::string_view text, std::size_t at,
                                                     std::string_view points) {
  std::optional<int> hours = digits_at(text, at, 2);
  std::optional<int> minutes = digits_at(text, at + 3, 2);
  std::optional<int> secs = digits_at(text, at + 6, 2);
  if (!hours || !minutes || !secs || text[at + 2] != ':' || text[at + 5] != ':' || *hours > 23 ||
      *minutes > 59 || *secs > 60) {
    return std::nullopt;
  }
  double seconds = *hours * 3600.0 + *minutes * 60.0 + *secs;
  std::size_t end = at + 8;
  int digits = 0;
  if (end + 1 < text.size() && points.find(text[end]) != std::string_view::npos &&
      is_digit(text[end + 1])) {
    double scale = 0.1;
    for (++end; end < text.size() && is_digit(text[end]); ++end, ++digits) {
      if (digits < 12) seconds += (text[end] - '0') * scale;  // finer digits change nothing
      scale /= 10;
    }
  }
  if (end < text.size() && is_digit(text[end])) return std::nullopt;
  return std::pair{seconds, digits};
}

// glog/absl's `[IWEF]MMDD HH:MM:SS[.fraction]` at text[at].
std::optional<LogTimestamp> glog_timestamp_at(std::string_view text, std::size_t at) {
  if (std::string_view("IWEF").find(text[at]) == std::string_view::npos) return std::nullopt;
  std::optional<int> month = digits_at(text, at + 1, 2);
  std::optional<int> day = digits_at(text, at + 3, 2);
  if (!month || !day || at + 5 >= text.size() || text[at + 5] != ' ') return std::nullopt;
  // No year: February 29 is a date of some year.
  if (*month < 1 || *month > 12 || *day < 1 || *day > days_in_month(*month, true)) {
    return std::nullopt;
  }
  std::optional<std::pair<double, int>> time = time_of_day_at(text, at + 6, ".");
  if (!time) return std::nullopt;
  return LogTimestamp{false, 0, *month, *day, time->first, time->second};
}

// `YYYY-MM-DD HH:MM:SS[.,fraction]` or `YYYY-MM-DDTHH:MM:SS[.fraction]` at text[at].
std::optional<LogTimestamp> date_timestamp_at(std::string_view text, std::size_t at) {
  std::optional<int> year = digits_at(text, at, 4);
  std::optional<int> month = digits_at(text, at + 5, 2);
  std::optional<int> day = digits_at(text, at + 8, 2);
  if (!year || !month || !day || at + 10 >= text.size() || text[at + 4] != '-' ||
      text[at + 7] != '-' || (text[at + 10] != ' ' && text[at + 10] != 'T')) {
    return std::nullopt;
  }
  if (*year < 1 || *month < 1 || *month > 12 || *day < 1 ||
      *day > days_in_month(*month, leap_year(*year))) {
    return std::nullopt;
  }
  std::optional<std::pair<double, int>> time = time_of_day_at(text, at + 11, ".,");
  if (!time) return std::nullopt;
  return LogTimestamp{true, *year, *month, *day, time->first, time->second};
}

// Whether `a` is earlier than `b` (the same clock; glog's years as assigned).
bool earlier(const LogTimestamp& a, const LogTimestamp& b) {
  return std::tie(a.year, a.month, a.day, a.second_of_day) <
         std::tie(b.year, b.month, b.day, b.second_of_day);
}

// Seconds on a scale where every year has a February 29: only to find the nearest year.
double rough_instant(const LogTimestamp& t) {
  return (static_cast<double>(t.year) * 366 +
          static_cast<double>(day_of_year(t.month, t.day, true))) *
             86400.0 +
         t.second_of_day;
}

// A PEFT step log whose steps cannot be more apart than this to share an interval.
constexpr std::uint64_t kMaxSpreadSteps = 10000;

}  // namespace

std::map<std::string, double> numeric_leaves(const Literal& object) {
  std::map<std::string, double> out;
  flatten(object, "", out);
  return out;
}

const char* log_kind_name(LogKind kind) {
  return enum_name<LogKind::kTunixPeft>(
      kind, {"unknown", "bench", "orchestrator", "timing-only", "maxtext", "tunix-peft"});
}

// ---- RunLogParser ------------------------------------------------------------------------------

RunLogParser::RunLogParser(std::string source) { log_.source = std::move(source); }

void RunLogParser::warn(std::size_t number, const std::string& message) {
  // A huge log of bad lines must not grow memory: keep the first ones, count the rest.
  if (line_warnings_ >= kMaxLineWarnings) {
    ++dropped_warnings_;
    return;
  }
  ++line_warnings_;
  log_.diagnostics.push_back(
      {Severity::kWarning, where_of(log_.source, static_cast<std::int64_t>(number)), message});
}

void RunLogParser::warn_log(std::string message) {
  log_.diagnostics.push_back({Severity::kWarning, where_of(log_.source), std::move(message)});
}

StepRecord& RunLogParser::record(std::int64_t step, std::size_t number) {
  StepRecord& record = steps_[step];
  record.step = step;
  if (record.line == 0) record.line = number;
  return record;
}

std::optional<LogTimestamp> find_log_timestamp(std::string_view text) {
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (at > 0 && is_alnum(text[at - 1])) continue;
    if (std::optional<LogTimestamp> date = date_timestamp_at(text, at)) return date;
    if (std::optional<LogTimestamp> glog = glog_timestamp_at(text, at)) return glog;
  }
  return std::nullopt;
}

std::string line_format_list() {
  std::string out;
  for (const LineFormat& format : kLineFormats) {
    if (!out.empty()) out += ", ";
    out += format.shown;
  }
  return out;
}

void RunLogParser::feed(std::string_view line, std::size_t number) {
  log_.lines = number;
  for (const LineFormat& format : kLineFormats) {
    std::size_t at = line.find(format.marker);
    if (at == std::string_view::npos) continue;
    // What follows the marker; a JSON object from its opening brace.
    std::size_t skip = format.marker.size() - (format.marker.ends_with('{') ? 1 : 0);
    std::string_view rest = line.substr(at + skip);
    switch (format.kind) {
      case LineKind::kTiming:
        parse_timing(rest, number);
        break;
      case LineKind::kBenchStep:
        parse_bench_step(rest, number);
        break;
      case LineKind::kSummary:
        parse_summary(rest, number);
        break;
      case LineKind::kStepMetrics:
        parse_step_metrics(rest, number);
        break;
      case LineKind::kCompletedStep:
        parse_completed_step(rest, number);
        break;
      case LineKind::kTrainStep:
        parse_train_step(rest, line.substr(0, at), number);
        break;
      case LineKind::kDriver:
        parse_driver_line(line);
        break;
    }
    return;
  }
}

void RunLogParser::parse_driver_line(std::string_view line) {
  std::size_t at = line.find("bench_driver: failed: ");
  if (at != std::string_view::npos) {
    saw_bench_ = true;
    log_.failure = std::string(trim(line.substr(at + 22)));
    return;
  }
  at = line.find("[TrainerBench] ");
  if (at == std::string_view::npos) return;
  saw_bench_ = true;
  std::string_view rest = line.substr(at + 15);
  std::size_t marker = rest.find(": bench driver starting: ");
  if (marker == std::string_view::npos) return;
  if (log_.name.empty()) log_.name = std::string(trim(rest.substr(0, marker)));
  std::string_view counts = rest.substr(marker + 25);
  std::optional<std::int64_t> steps = take_int(counts);
  if (steps && take(counts, " steps x ")) {
    log_.planned_steps = steps;
    log_.planned_micro_steps = take_int(counts);
  }
}

void RunLogParser::parse_timing(std::string_view rest, std::size_t number) {
  std::optional<std::int64_t> step = take_int(rest);
  if (!step) {
    warn(number, "TRAINER_STEP_TIMING without a step number: line skipped");
    return;
  }
  if (take(rest, " unavailable:")) {
    log_.timing_unavailable.push_back(*step);
    return;
  }
  StepTiming timing;
  timing.step = *step;
  timing.line = number;
  if (take(rest, " policy_version=")) {
    timing.policy_version = take_int(rest);
    if (!timing.policy_version) {
      warn(number,
           fmt::format("TRAINER_STEP_TIMING step={}: bad policy_version: line skipped", *step));
      return;
    }
  }
  if (take(rest, " rtt_s=")) {
    std::optional<double> rtt = take_double(rest);
    if (!rtt) {
      warn(number, fmt::format("TRAINER_STEP_TIMING step={}: bad rtt_s: line skipped", *step));
      return;
    }
    timing.rtt_s = *rtt;
  }
  if (!take(rest, " timing=")) {
    warn(number, fmt::format("TRAINER_STEP_TIMING step={}: no timing= field: line skipped", *step));
    return;
  }
  try {
    Literal json = parse_value(trim(rest), LiteralSyntax::kJson);
    if (!json.is_dict()) fail("the timing is not a JSON object");
    std::optional<std::int64_t> version = int_member(json, "v");
    if (version && *version != 1)
      fail("schema version {} (bench-report reads version 1)", *version);
    timing.train_step = int_member(json, "train_step");
    const Literal* mb = json.find("mb");
    if (mb != nullptr && !mb->is_null()) {
      if (!mb->is_sequence()) fail("\"mb\" is not a list");
      for (std::size_t i = 0; i < mb->items.size(); ++i) {
        MicroBatchTiming entry;
        static_cast<EventTiming&>(entry) = event_timing(mb->items[i], fmt::format("mb[{}]", i));
        entry.index = int_member(mb->items[i], "i").value_or(static_cast<std::int64_t>(i));
        timing.mb.push_back(entry);
      }
    }
    const Literal* update = json.find("update");
    if (update != nullptr && !update->is_null()) timing.update = event_timing(*update, "update");
    const Literal* prepare = json.find("prepare");
    if (prepare != nullptr && !prepare->is_null()) {
      if (!prepare->is_dict()) fail("\"prepare\" is not an object");
      timing.prepare = PrepareTiming{number_member(*prepare, "recv_ago_s"),
                                     number_member(*prepare, "done_ago_s")};
    }
  } catch (const Error& e) {
    warn(number,
         fmt::format("TRAINER_STEP_TIMING step={}: malformed timing JSON ({}): line skipped", *step,
                     e.message()));
    return;
  }
  if (timings_.count(*step) != 0) {
    warn(number, fmt::format("TRAINER_STEP_TIMING step={} again (first at line {}): the later "
                             "line is used",
                             *step, timings_[*step].line));
  }
  timings_[*step] = std::move(timing);
}

void RunLogParser::parse_bench_step(std::string_view json_text, std::size_t number) {
  saw_bench_ = true;
  StepRecord parsed;
  try {
    Literal json = parse_value(trim(json_text), LiteralSyntax::kJson);
    if (!json.is_dict()) fail("not a JSON object");
    std::optional<std::int64_t> step = int_member(json, "step");
    if (!step) fail("no \"step\"");
    if (*step < 0) fail("\"step\" is {}", *step);
    parsed.step = *step;
    auto non_negative = [&](std::string_view key) {
      std::optional<double> value = number_member(json, key);
      if (value && !(std::isfinite(*value) && *value >= 0)) fail("\"{}\" is {}", key, *value);
      return value;
    };
    parsed.seconds = non_negative("seconds");
    if (const Literal* mb = json.find("microbatch_s"); mb != nullptr && !mb->is_null()) {
      if (!mb->is_sequence()) fail("\"microbatch_s\" is not a list");
      if (mb->items.size() > kMaxMicrobatchesPerStep) {
        fail("{} micro-batch times in one step (at most {})", mb->items.size(),
             kMaxMicrobatchesPerStep);
      }
      for (const Literal& item : mb->items) {
        if (!item.is_number()) fail("\"microbatch_s\" holds a non-number");
        if (!(std::isfinite(item.number) && item.number >= 0)) {
          fail("\"microbatch_s\" holds {}", item.number);
        }
        parsed.microbatch_s.push_back(item.number);
      }
    }
    parsed.tokens = non_negative("tokens");
    parsed.padded_tokens = non_negative("padded_tokens");
    parsed.tokens_per_s_per_chip = non_negative("tokens_per_s_per_chip");
    parsed.microbatch_timing = string_member(json, "microbatch_timing").value_or("");
    parsed.microbatch_timing_source = string_member(json, "microbatch_timing_source").value_or("");
    parsed.update = string_member(json, "update").value_or("");
    parsed.staged = bool_member(json, "staged");
    parsed.profiled = bool_member(json, "profiled").value_or(false);
    parsed.dropped_tokens = non_negative("dropped_tokens");
    contract_field([&] {
      parsed.train_step_s = seconds_member(json, "train_step_s");
      parsed.boundary_free_step_s = seconds_member(json, "boundary_free_step_s");
      parsed.replays = count_member(json, "replays");
      return 0;
    });
    if (const Literal* metrics = json.find("metrics"); metrics != nullptr && metrics->is_dict()) {
      parsed.metrics = numeric_leaves(*metrics);
    }
  } catch (const ContractError& e) {
    fail_at(log_.source, static_cast<std::int64_t>(number), "BENCH_STEP: {}", e.message());
  } catch (const Error& e) {
    warn(number, fmt::format("malformed BENCH_STEP JSON ({}): line skipped", e.message()));
    return;
  }
  if (auto previous = bench_step_lines_.find(parsed.step); previous != bench_step_lines_.end()) {
    warn(number, fmt::format("BENCH_STEP step={} again (first at line {}): the later line is used",
                             parsed.step, previous->second));
  }
  if (!parsed.microbatch_timing.empty() && parsed.microbatch_timing != "device" &&
      parsed.microbatch_timing != "dispatch") {
    // A mode this reader does not know must not be compared as if it were one it knows.
    warn(number, fmt::format("BENCH_STEP step={}: microbatch_timing \"{}\" is neither device nor "
                             "dispatch: its micro-batch times count as unlabelled",
                             parsed.step, parsed.microbatch_timing));
    parsed.microbatch_timing.clear();
  }
  bench_step_lines_[parsed.step] = number;
  StepRecord& target = record(parsed.step, number);
  // The line gives every field of the step but MaxText's rates and where the step was first seen;
  // of the metrics other lines gave the step, those the line does not name stay.
  parsed.seconds_from = "BENCH_STEP";
  parsed.line = target.line;
  parsed.tflops_per_device = target.tflops_per_device;
  parsed.tokens_per_s_per_device = target.tokens_per_s_per_device;
  parsed.metrics.merge(target.metrics);
  target = std::move(parsed);
}

void RunLogParser::parse_summary(std::string_view json_text, std::size_t number) {
  saw_bench_ = true;
  BenchSummary summary;
  summary.line = number;
  try {
    Literal json = parse_value(trim(json_text), LiteralSyntax::kJson);
    if (!json.is_dict()) fail("not a JSON object");
    if (const Literal* name = json.find("name"); name != nullptr && name->kind == Kind::kString) {
      summary.name = name->text;
    }
    summary.steps = int_member(json, "steps");
    summary.micro_steps = int_member(json, "micro_steps");
    summary.rows = int_member(json, "rows");
    summary.tokens_per_row = int_member(json, "tokens_per_row");
    summary.chips = int_member(json, "chips");
    summary.tokens_per_step = number_member(json, "tokens_per_step");
    summary.first_step_s = number_member(json, "first_step_s");
    summary.mean_step_s = number_member(json, "mean_step_s");
    summary.median_microbatch_s = number_member(json, "median_microbatch_s");
    summary.microbatch_timing = string_member(json, "microbatch_timing").value_or("");
    summary.tokens_per_s_per_chip = number_member(json, "tokens_per_s_per_chip");
    summary.real_tokens_per_s_per_chip = number_member(json, "real_tokens_per_s_per_chip");
    summary.profiled_steps = int_list_member(json, "profiled_steps");
    if (const Literal* stage = json.find("stage_boundary"); stage != nullptr && !stage->is_null()) {
      if (!stage->is_dict()) fail("\"stage_boundary\" is not an object");
      StageBoundary boundary;
      boundary.requested = scalar_text(*stage, "requested");
      boundary.resolved = scalar_text(*stage, "resolved");
      boundary.engaged = bool_member(*stage, "engaged");
      if (const Literal* staged = stage->find("staged_steps");
          staged != nullptr && staged->is_number()) {
        boundary.staged_step_count =
            contract_field([&] { return count_member(*stage, "staged_steps"); });
      } else {
        boundary.staged_steps = int_list_member(*stage, "staged_steps");
        if (staged != nullptr && !staged->is_null()) {
          boundary.staged_step_count = static_cast<std::int64_t>(boundary.staged_steps.size());
        }
      }
      boundary.latched_off = scalar_text(*stage, "latched_off");
      summary.stage_boundary = std::move(boundary);
    }
    if (const Literal* dropping = json.find("token_dropping");
        dropping != nullptr && !dropping->is_null()) {
      summary.token_dropping = token_dropping_of(*dropping);
    }
    contract_field([&] {
      parse_setup_fields(json, summary);
      return 0;
    });
  } catch (const ContractError& e) {
    fail_at(log_.source, static_cast<std::int64_t>(number), "BENCH_SUMMARY: {}", e.message());
  } catch (const Error& e) {
    warn(number, fmt::format("malformed BENCH_SUMMARY JSON ({}): line skipped", e.message()));
    return;
  }
  log_.summary = std::move(summary);
}

void RunLogParser::parse_train_step(std::string_view rest, std::string_view prefix,
                                    std::size_t number) {
  // "Train step %d - loss: %s - reward_mean: %.4f - ... - step_time: %.2fs": the step, then
  // " - key: value" pairs. Other lines that merely contain "Train step " are not ours.
  std::optional<std::int64_t> step = take_int(rest);
  if (step && (rest.starts_with(" training ") || rest.starts_with(" eval "))) {
    parse_peft_step(*step, rest.substr(1), prefix, number);
    return;
  }
  if (!step || !take(rest, " - ")) return;
  saw_orchestrator_ = true;
  std::map<std::string, double> fields;
  std::optional<double> step_time;
  std::size_t unkeyed = 0;
  for (auto [key, text] : line_fields(trim(rest), " - ", &unkeyed)) {
    if (key == "step_time" && !text.empty() && text.back() == 's') text.remove_suffix(1);
    std::optional<double> value = python_number(text);
    if (!value) continue;  // a field we do not read (e.g. a printed array)
    if (key == "step_time") {
      step_time = value;
    } else {
      fields[std::string(key)] = *value;
    }
  }
  if (auto previous = train_step_lines_.find(*step); previous != train_step_lines_.end()) {
    warn(number, fmt::format("Train step {} again (first at line {}): the later line is used",
                             *step, previous->second));
  }
  train_step_lines_[*step] = number;
  StepRecord& target = record(*step, number);
  if (step_time && target.seconds_from != "BENCH_STEP") {
    if (!std::isfinite(*step_time) || *step_time < 0) {
      warn(number, fmt::format("Train step {}: step_time {} ignored", *step, *step_time));
    } else {
      target.seconds = step_time;
      target.seconds_from = "Train step";
    }
  }
  // StepMetrics' dict is the full record; the console line fills only what it lacks.
  for (const auto& [key, value] : fields) target.metrics.emplace(key, value);
}

void RunLogParser::parse_step_metrics(std::string_view rest, std::size_t number) {
  std::optional<std::int64_t> step = take_int(rest);
  if (!step || !take(rest, "]")) return;
  rest = trim(rest);
  if (!take(rest, "trainer_metrics=")) return;
  saw_orchestrator_ = true;
  try {
    Literal dict = parse_value(rest, LiteralSyntax::kPython);
    if (!dict.is_dict()) fail("not a dict");
    StepRecord& target = record(*step, number);
    for (const auto& [key, value] : numeric_leaves(dict)) target.metrics[key] = value;
  } catch (const Error& e) {
    warn(number, fmt::format("[StepMetrics step={}]: unreadable trainer_metrics ({}): line skipped",
                             *step, e.message()));
  }
}

void RunLogParser::maxtext_warning(std::size_t number, std::string message) {
  if (maxtext_warnings_.size() < kMaxLineWarnings) {
    maxtext_warnings_.emplace_back(number, std::move(message));
  } else {
    ++maxtext_warnings_dropped_;
  }
}

void RunLogParser::parse_completed_step(std::string_view rest, std::size_t number) {
  // "N, key: value, key: value, ...": MaxText's metric_logger. Keys as MaxText writes them.
  std::optional<std::int64_t> step = take_int(rest);
  if (!step || !take(rest, ",")) return;
  saw_maxtext_ = true;
  std::optional<double> seconds;
  std::optional<double> tflops;
  std::optional<double> tokens_per_s;
  std::map<std::string, double> fields;
  std::size_t unkeyed = 0;
  for (const auto& [key, text] : line_fields(trim(rest), ", ", &unkeyed)) {
    std::optional<double> parsed = python_number(text);
    if (!parsed) continue;
    double value = *parsed;
    if (key == "seconds") {
      seconds = value;
    } else if (key == "TFLOP/s/device") {
      tflops = value;
    } else if (key == "Tokens/s/device") {
      tokens_per_s = value;
    } else {
      fields[std::string(key)] = value;
    }
  }
  if (!seconds) {
    maxtext_warning(
        number, fmt::format("completed step {} without a readable `seconds`: line skipped", *step));
    return;
  }
  if (!std::isfinite(*seconds) || *seconds < 0) {
    maxtext_warning(number, fmt::format("completed step {}: seconds {} ignored", *step, *seconds));
    return;
  }
  if (auto previous = completed_step_lines_.find(*step); previous != completed_step_lines_.end()) {
    // A restart that restores a checkpoint logs the steps after it again.
    maxtext_warning(
        number, fmt::format("completed step {} again (first at line {}): the later line is used",
                            *step, previous->second));
  }
  completed_step_lines_[*step] = number;
  StepRecord& target = maxtext_steps_[*step];
  target = StepRecord();
  target.step = *step;
  target.line = number;
  target.seconds = seconds;
  target.seconds_from = "completed step";
  target.tflops_per_device = tflops;
  target.tokens_per_s_per_device = tokens_per_s;
  for (const auto& [key, value] : fields) target.metrics[key] = value;
}

void RunLogParser::parse_peft_step(std::int64_t step, std::string_view rest,
                                   std::string_view prefix, std::size_t number) {
  // "training loss: L  - training perplexity: P" or "eval loss: L - eval perplexity: P".
  std::map<std::string, double> fields;
  std::size_t unkeyed = 0;
  std::vector<LineField> items = line_fields(rest, " - ", &unkeyed);
  if (unkeyed > 0) return;  // not Tunix's line
  for (const auto& [item_key, text] : items) {
    std::optional<double> value = python_number(text);
    if (!value) continue;
    std::string key(item_key);
    for (char& c : key) {
      if (c == ' ') c = '_';  // "training loss" -> "training_loss"
    }
    fields[key] = *value;
  }
  if (fields.empty()) return;
  saw_peft_ = true;
  StepRecord& target = peft_steps_[step];
  target.step = step;
  target.line = number;
  for (const auto& [key, value] : fields) target.metrics[key] = value;
  // The training line is logged when the step is done; the eval line when an evaluation is.
  if (rest.starts_with("training ")) stamp_peft_step(step, prefix, number);
}

void RunLogParser::stamp_peft_step(std::int64_t step, std::string_view prefix, std::size_t number) {
  ++peft_training_lines_[step];
  std::optional<LogTimestamp> at = find_log_timestamp(prefix);
  if (!at) return;  // e.g. the same record through Python's root logger (`INFO:absl:`)
  const char* clock = at->has_year ? "date" : "glog";
  if (stamp_clock_.empty()) stamp_clock_ = clock;
  if (stamp_clock_ != clock) return;  // another logger's copy: one clock times the run
  if (!at->has_year) {
    // glog has no year: each line takes the one that puts it nearest the line before it, so
    // the year rolls over at New Year, and a late line of the old year stays in it.
    if (previous_glog_) {
      std::int64_t best = previous_glog_->year;
      double best_distance = -1;
      for (std::int64_t year :
           {previous_glog_->year - 1, previous_glog_->year, previous_glog_->year + 1}) {
        at->year = year;
        double distance = std::fabs(rough_instant(*at) - rough_instant(*previous_glog_));
        if (best_distance < 0 || distance < best_distance) {
          best = year;
          best_distance = distance;
        }
      }
      at->year = best;
    }
    previous_glog_ = at;
    if (at->month == 2 && at->day == 29) {
      auto where = std::lower_bound(glog_leap_years_.begin(), glog_leap_years_.end(), at->year);
      if (where == glog_leap_years_.end() || *where != at->year) {
        glog_leap_years_.insert(where, at->year);
      }
    }
  }
  stamp_digits_ = std::max(stamp_digits_, at->digits);
  auto [found, inserted] = peft_stamps_.try_emplace(step, StepStamp{*at, number});
  if (!inserted && earlier(*at, found->second.at)) found->second = StepStamp{*at, number};
}

void RunLogParser::time_peft_steps() {
  if (peft_stamps_.empty()) return;
  LogTimestamps info;
  info.clock = stamp_clock_;
  info.digits = stamp_digits_;
  info.first_step = peft_stamps_.begin()->first;
  for (const auto& [step, lines] : peft_training_lines_) info.repeated_lines += lines - 1;
  // Days from a year's start to a date: the calendar's for a dated clock; for glog, whose years
  // are counted from the log's first, a year is a leap year when a February 29 was seen in it.
  auto leap_years_before = [&](std::int64_t year) {  // glog leap years in [0, year) or [year, 0)
    auto zero = std::lower_bound(glog_leap_years_.begin(), glog_leap_years_.end(), 0);
    auto at = std::lower_bound(glog_leap_years_.begin(), glog_leap_years_.end(), year);
    return static_cast<std::int64_t>(year >= 0 ? at - zero : zero - at);
  };
  auto day_number = [&](const LogTimestamp& t) -> std::int64_t {
    if (t.has_year) {
      std::int64_t y = t.year - 1;
      return 365 * y + y / 4 - y / 100 + y / 400 + day_of_year(t.month, t.day, leap_year(t.year));
    }
    bool leap = std::binary_search(glog_leap_years_.begin(), glog_leap_years_.end(), t.year);
    std::int64_t before = 365 * t.year + (t.year >= 0 ? 1 : -1) * leap_years_before(t.year);
    return before + day_of_year(t.month, t.day, leap);
  };
  // Seconds from the first timestamped step's day (large day numbers would cost precision).
  const std::int64_t origin = day_number(peft_stamps_.begin()->second.at);
  auto instant = [&](const LogTimestamp& t) {
    return static_cast<double>(day_number(t) - origin) * 86400.0 + t.second_of_day;
  };
  for (auto previous = peft_stamps_.begin(), next = std::next(previous); next != peft_stamps_.end();
       previous = next++) {
    const auto& [from, start] = *previous;
    const auto& [to, end] = *next;
    double span = instant(end.at) - instant(start.at);
    std::uint64_t steps = static_cast<std::uint64_t>(to) - static_cast<std::uint64_t>(from);
    std::string covered =
        steps == 1 ? fmt::format("step {}", to) : fmt::format("steps {}-{}", from + 1, to);
    if (span < 0) {
      warn(end.line, fmt::format("step {}'s first line is dated {:.6g} s before step {}'s: no "
                                 "interval for {}",
                                 to, -span, from, covered));
      continue;
    }
    if (steps > kMaxSpreadSteps) {
      warn(end.line,
           fmt::format("{} steps between the lines of step {} and step {}: their interval "
                       "is not spread (no time for {})",
                       steps, from, to, covered));
      continue;
    }
    for (std::int64_t step = from + 1;; ++step) {
      StepRecord& target = steps_[step];
      target.step = step;
      if (target.line == 0) target.line = end.line;
      target.seconds = span / static_cast<double>(steps);
      target.seconds_from = "log timestamps";
      if (step == to) break;
      info.spread_steps.push_back(step);
    }
  }
  if (!info.spread_steps.empty()) {
    warn_log(
        fmt::format("no timestamped `Train step N training loss` line for step{} {}: each "
                    "gap's interval is spread evenly over the steps it spans",
                    info.spread_steps.size() == 1 ? "" : "s", integer_ranges(info.spread_steps)));
  }
  log_.log_timestamps = std::move(info);
}

RunLog RunLogParser::finish() {
  if (finished_) fail("RunLogParser::finish called twice");
  finished_ = true;
  // MaxText's and Tunix PEFT's lines make the run only in a log that has none of the lines above:
  // a bench or e2e log may carry them from other code in the same pod, and they are not its steps.
  if (!saw_bench_ && !saw_orchestrator_ && timings_.empty() && steps_.empty()) {
    steps_ = saw_maxtext_ ? std::move(maxtext_steps_) : std::move(peft_steps_);
    if (saw_maxtext_) {
      for (const auto& [number, message] : maxtext_warnings_) warn(number, message);
      dropped_warnings_ += maxtext_warnings_dropped_;
    } else if (saw_peft_) {
      time_peft_steps();
    }
  } else {
    saw_maxtext_ = saw_peft_ = false;
  }
  for (auto& [step, record] : steps_) log_.steps.push_back(std::move(record));
  for (auto& [step, timing] : timings_) log_.timings.push_back(std::move(timing));
  std::sort(log_.timing_unavailable.begin(), log_.timing_unavailable.end());
  log_.timing_unavailable.erase(
      std::unique(log_.timing_unavailable.begin(), log_.timing_unavailable.end()),
      log_.timing_unavailable.end());

  if (saw_bench_) {
    log_.kind = LogKind::kBench;
  } else if (saw_orchestrator_) {
    log_.kind = LogKind::kOrchestrator;
  } else if (saw_maxtext_) {
    log_.kind = LogKind::kMaxText;
  } else if (saw_peft_) {
    log_.kind = LogKind::kTunixPeft;
  } else if (!log_.timings.empty()) {
    log_.kind = LogKind::kTimingOnly;
  }
  if (log_.summary && !log_.summary->name.empty()) log_.name = log_.summary->name;
  if (dropped_warnings_ > 0) {
    warn_log(fmt::format("{} more line warnings not shown", dropped_warnings_));
  }

  // Steps with a time: gaps between the first and last are missing steps.
  std::vector<std::int64_t> timed;
  for (const StepRecord& record : log_.steps) {
    if (record.seconds) timed.push_back(record.step);
  }
  if (timed.size() >= 2) {
    std::vector<std::int64_t> missing;
    for (std::size_t i = 1; i < timed.size(); ++i) {
      for (std::int64_t s = timed[i - 1] + 1; s < timed[i] && missing.size() < 1000; ++s) {
        missing.push_back(s);
      }
    }
    if (!missing.empty()) {
      warn_log(fmt::format("no step time for step{} {} (between steps {} and {})",
                           missing.size() == 1 ? "" : "s", integer_ranges(missing), timed.front(),
                           timed.back()));
    }
  }
  // Steps that have a step line but no TRAINER_STEP_TIMING, when the run logs timing at all.
  if (!log_.timings.empty() && !timed.empty()) {
    std::vector<std::int64_t> without;
    std::size_t t = 0;
    for (std::int64_t step : timed) {
      while (t < log_.timings.size() && log_.timings[t].step < step) ++t;
      bool has = t < log_.timings.size() && log_.timings[t].step == step;
      bool unavailable =
          std::binary_search(log_.timing_unavailable.begin(), log_.timing_unavailable.end(), step);
      if (!has && !unavailable) without.push_back(step);
    }
    if (!without.empty()) {
      warn_log(fmt::format("no TRAINER_STEP_TIMING for step{} {}", without.size() == 1 ? "" : "s",
                           integer_ranges(without)));
    }
  }
  if (!log_.timing_unavailable.empty()) {
    warn_log(fmt::format("TRAINER_STEP_TIMING unavailable for step{} {}",
                         log_.timing_unavailable.size() == 1 ? "" : "s",
                         integer_ranges(log_.timing_unavailable)));
  }

  // Partial: the driver failed, stopped before its summary, or logged fewer steps than planned.
  std::vector<std::string> reasons;
  if (!log_.failure.empty()) reasons.push_back("the driver failed: " + log_.failure);
  std::int64_t logged = static_cast<std::int64_t>(bench_step_lines_.size());
  if (log_.kind == LogKind::kBench) {
    std::optional<std::int64_t> planned = log_.planned_steps;
    if (!planned && log_.summary) planned = log_.summary->steps;
    if (planned && logged < *planned) {
      reasons.push_back(fmt::format("{} of {} planned steps logged", logged, *planned));
    }
    if (!log_.summary) reasons.push_back("no BENCH_SUMMARY (the run did not finish)");
  }
  if (!reasons.empty()) {
    log_.partial = true;
    for (std::size_t i = 0; i < reasons.size(); ++i) {
      log_.partial_reason += (i == 0 ? "" : "; ") + reasons[i];
    }
  }
  return std::move(log_);
}

RunLog parse_run_log(const std::string& path) {
  RunLogParser parser(display_name(path));
  feed_log_file(parser, path);
  return parser.finish();
}

RunLog parse_run_log_text(std::string_view text, const std::string& source) {
  RunLogParser parser(source);
  feed_log_text(parser, text);
  return parser.finish();
}

// ---- Timeline ----------------------------------------------------------------------------------

StepTimeline step_timeline(const StepTiming& timing) {
  StepTimeline out;
  out.step = timing.step;
  // The origin: the earliest dispatch_begin (largest ago) of the step's calls.
  std::optional<double> origin;
  auto widen = [&](const Ago& ago) {
    if (ago && (!origin || *ago > *origin)) origin = *ago;
  };
  for (const MicroBatchTiming& mb : timing.mb) widen(mb.dispatch_begin_ago_s);
  if (timing.update) widen(timing.update->dispatch_begin_ago_s);
  if (!origin) {
    for (const MicroBatchTiming& mb : timing.mb) {
      widen(mb.dispatch_end_ago_s);
      widen(mb.ready_ago_s);
    }
  }
  double zero = origin.value_or(0.0);
  auto at = [&](const Ago& ago) -> std::optional<double> {
    if (!ago) return std::nullopt;
    double t = zero - *ago;
    out.span_end = std::max(out.span_end, t);
    return t;
  };
  auto event = [&](const EventTiming& e) {
    return TimelineEvent{at(e.dispatch_begin_ago_s), at(e.dispatch_end_ago_s), at(e.ready_ago_s)};
  };

  bool idle_known = true;
  double idle_sum = 0;
  std::optional<double> previous_ready;
  for (std::size_t i = 0; i < timing.mb.size(); ++i) {
    MicroBatchSpan span;
    span.index = timing.mb[i].index;
    span.at = event(timing.mb[i]);
    if (span.at.ready) ++out.ready_known;
    bool previous_known = i == 0 || previous_ready.has_value();
    if (span.at.ready && previous_known) {
      std::optional<double> start = span.at.dispatch_end;
      if (i > 0) start = start ? std::max(*start, *previous_ready) : previous_ready;
      if (start) span.device_s = std::max(0.0, *span.at.ready - *start);
    }
    if (i > 0) {
      if (previous_ready && span.at.dispatch_begin) {
        span.idle_before_s = std::max(0.0, *span.at.dispatch_begin - *previous_ready);
        idle_sum += *span.idle_before_s;
      } else {
        idle_known = false;
      }
    }
    previous_ready = span.at.ready;
    out.mb.push_back(span);
  }
  if (timing.update) {
    out.update = event(*timing.update);
    if (!timing.mb.empty()) {
      if (previous_ready && out.update->dispatch_begin) {
        out.update_idle_before_s = std::max(0.0, *out.update->dispatch_begin - *previous_ready);
        idle_sum += *out.update_idle_before_s;
      } else {
        idle_known = false;
      }
    }
    // The micro-batch formula: the update starts on the device after its dispatch and after the
    // last micro-batch (Tunix's doc measures from dispatch_begin, which also counts the drain of
    // the last micro-batch).
    std::optional<double> start = out.update->dispatch_end;
    if (!timing.mb.empty()) {
      start = start && previous_ready ? std::optional<double>(std::max(*start, *previous_ready))
                                      : std::nullopt;
    }
    if (out.update->ready && start) out.update_s = std::max(0.0, *out.update->ready - *start);
  }
  if (timing.prepare) {
    out.has_prepare = true;
    out.prepare =
        TimelineEvent{at(timing.prepare->recv_ago_s), std::nullopt, at(timing.prepare->done_ago_s)};
    if (out.update && out.update->ready && out.prepare->dispatch_begin) {
      out.sync_wait_s = std::max(0.0, *out.prepare->dispatch_begin - *out.update->ready);
    }
  }
  if (idle_known && !timing.mb.empty()) out.idle_s = idle_sum;
  return out;
}

RunLog RunLogCache::get(const std::string& path) {
  if (path == "-") {
    if (stdin_used_) fail("- (stdin) can be given only once");
    stdin_used_ = true;
    return parse_run_log(path);
  }
  auto found = cache_.find(path);
  if (found == cache_.end()) found = cache_.emplace(path, parse_run_log(path)).first;
  return found->second;
}

}  // namespace rtb::logs::steplog
