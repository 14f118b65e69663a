#include "rtb/logs/memlog.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/literal.h"
#include "rtb/base/text.h"

namespace rtb::logs {
namespace {

constexpr std::size_t kMaxOomText = 300;

constexpr std::string_view kCostMarker = "Cost analysis: ";
constexpr std::string_view kMemoryMarker = "Memory analysis: ";
constexpr std::string_view kStatsOpen = "CompiledMemoryStats(";
constexpr std::string_view kPeakMarker = "TRAIN-KERNEL DEVICE PEAK: ";
constexpr std::string_view kStagingMarker = "WEIGHT-SYNC STAGING";
constexpr std::string_view kTopologyMarker = "Config param compile_topology: ";
constexpr std::string_view kUsageMarker = "XLA::TPU program HBM usage: ";
// MaxText's engine report table header, blanks collapsed (maxtext_engine_compile.py).
constexpr std::string_view kEngineTableHeader =
    "kernel arg out alias temp resident +state total host arg host out host alias host temp "
    "host state state not passed";

// The blanks of a log line: ' ', '\t' and the '\r' of a CRLF file.
std::string_view trim(std::string_view s) { return rtb::trim(s, kLineBlanks); }

std::string collapse_blanks(std::string_view s) {
  std::string out;
  bool blank = false;
  for (char c : trim(s)) {
    if (c == ' ' || c == '\t') {
      blank = true;
      continue;
    }
    if (blank && !out.empty()) out += ' ';
    blank = false;
    out += c;
  }
  return out;
}

std::vector<std::string_view> split_blanks(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
    std::size_t start = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t' && s[i] != '\r') ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::optional<double> parse_double(std::string_view s) {
  s = trim(s);
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return value;
}

// Sizes beyond this (1 EiB) are not memory sizes; bounding them keeps every sum in range.
constexpr double kMaxBytes = 1152921504606846976.0;

bool plausible_gib(double gib) { return gib >= 0 && gib * kBytesPerGiB <= kMaxBytes; }

long long gib_to_bytes(double gib) { return std::llround(gib * kBytesPerGiB); }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Cuts a UTF-8 text at most `max` bytes long without splitting a character.
std::string cut_utf8(std::string_view s, std::size_t max) {
  if (s.size() <= max) return std::string(s);
  std::size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return std::string(s.substr(0, end)) + "...";
}

bool is_kernel_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// `--- fwd_bwd ---`, possibly after a log prefix: the kernel name, or empty.
std::string_view section_name(std::string_view line) {
  line = trim(line);
  constexpr std::string_view kSuffix = " ---";
  if (line.size() < 9 || line.substr(line.size() - kSuffix.size()) != kSuffix) return {};
  std::string_view inner = line.substr(0, line.size() - kSuffix.size());
  std::size_t open = inner.rfind("--- ");
  if (open == std::string_view::npos) return {};
  std::string_view name = inner.substr(open + 4);
  if (name.empty() || !std::all_of(name.begin(), name.end(), is_kernel_name_char)) return {};
  return name;
}

// The first size written after `marker` in `text` ("(100.13G)" or "21.95G of").
std::optional<LoggedSize> size_after(std::string_view text, std::string_view marker) {
  std::size_t at = text.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + marker.size());
  std::size_t end = 0;
  while (end < rest.size() && rest[end] != ' ' && rest[end] != ')' && rest[end] != ',') ++end;
  std::string_view token = rest.substr(0, end);
  if (!token.empty() && token.back() == '.') token.remove_suffix(1);
  return parse_logged_size(token);
}

// The size written just before `marker` in `text` ("0B" of "0B reserved").
std::optional<LoggedSize> size_before(std::string_view text, std::string_view marker) {
  std::size_t at = text.find(marker);
  if (at == std::string_view::npos || at == 0) return std::nullopt;
  std::size_t start = text.find_last_of(" ,", at - 1);
  start = start == std::string_view::npos ? 0 : start + 1;
  return parse_logged_size(text.substr(start, at - start));
}

constexpr std::string_view kAllocateMarker = "Attempting to allocate ";
constexpr std::string_view kReserveMarker = "Attempting to reserve ";
constexpr std::string_view kFreeMarker = "There are ";
constexpr std::string_view kNotPossible = "That was not possible";

struct StatsField {
  std::string_view key;
  std::optional<long long> ProgramMemory::*field;
  bool required;
};

constexpr StatsField kStatsFields[] = {
    {"generated_code_size_in_bytes", &ProgramMemory::generated_code, true},
    {"argument_size_in_bytes", &ProgramMemory::argument, true},
    {"output_size_in_bytes", &ProgramMemory::output, true},
    {"alias_size_in_bytes", &ProgramMemory::alias, true},
    {"temp_size_in_bytes", &ProgramMemory::temp, true},
    {"host_generated_code_size_in_bytes", &ProgramMemory::host_generated_code, false},
    {"host_argument_size_in_bytes", &ProgramMemory::host_argument, false},
    {"host_output_size_in_bytes", &ProgramMemory::host_output, false},
    {"host_alias_size_in_bytes", &ProgramMemory::host_alias, false},
    {"host_temp_size_in_bytes", &ProgramMemory::host_temp, false},
};

// Reads `CompiledMemoryStats(k=v, ...)` (the text after the marker) into `program`. Returns an
// error message, empty on success.
std::string parse_stats(std::string_view text, ProgramMemory& program) {
  text = trim(text);
  if (text.substr(0, kStatsOpen.size()) != kStatsOpen) {
    if (text == "None") return "Memory analysis: None (the backend gave no memory analysis)";
    return fmt::format("Memory analysis: expected CompiledMemoryStats(...), found '{}'",
                       cut_utf8(text, 60));
  }
  text.remove_prefix(kStatsOpen.size());
  if (text.empty() || text.back() != ')') {
    return "Memory analysis: CompiledMemoryStats(...) is cut short (no closing ')')";
  }
  text.remove_suffix(1);
  ProgramMemory parsed;
  bool after_unknown = false;
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = text.find(", ", start);
    std::string_view item =
        text.substr(start, comma == std::string_view::npos ? comma : comma - start);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      // A fragment of an unknown field's value that holds ", " itself.
      if (!after_unknown && !trim(item).empty()) {
        return fmt::format("Memory analysis: '{}' is not key=value", cut_utf8(item, 60));
      }
    } else {
      std::string_view key = trim(item.substr(0, eq));
      std::string_view value = trim(item.substr(eq + 1));
      const StatsField* field = nullptr;
      for (const StatsField& f : kStatsFields) {
        if (f.key == key) field = &f;
      }
      after_unknown = field == nullptr;
      if (field) {
        long long number = 0;
        auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
        if (ec != std::errc() || end != value.data() + value.size() || value.empty() ||
            number < 0 || static_cast<double>(number) > kMaxBytes) {
          return fmt::format("Memory analysis: {}='{}' is not a byte count", key,
                             cut_utf8(value, 40));
        }
        parsed.*(field->field) = number;
      }
    }
    if (comma == std::string_view::npos) break;
    start = comma + 2;
  }
  for (const StatsField& f : kStatsFields) {
    if (f.required && !(parsed.*(f.field))) {
      return fmt::format("Memory analysis: CompiledMemoryStats has no {}", f.key);
    }
    program.*(f.field) = parsed.*(f.field);
  }
  program.resident = *program.argument + *program.output - *program.alias + *program.temp;
  program.has_memory = true;
  return {};
}

// Reads the dict (or one-element list of one) after `Cost analysis: `.
std::string parse_cost(std::string_view text, std::optional<CostAnalysis>& cost) {
  Literal value;
  try {
    value = parse_literal(text);
  } catch (const Error& e) {
    return "Cost analysis: " + e.message();
  }
  if (value.kind == Literal::Kind::kNone) return {};
  const Literal* dict = &value;
  if (value.kind == Literal::Kind::kList || value.kind == Literal::Kind::kTuple) {
    if (value.items.empty()) return {};
    dict = &value.items[0];
  }
  if (dict->kind != Literal::Kind::kDict) {
    return fmt::format("Cost analysis: a {}, not a dict", kind_name(dict->kind));
  }
  CostAnalysis out;
  auto number = [&](std::string_view key, std::optional<double>& target) {
    const Literal* v = dict->find(key);
    if (v && v->is_number()) target = v->number;
  };
  number("flops", out.flops);
  number("bytes accessed", out.bytes_accessed);
  number("transcendentals", out.transcendentals);
  number("optimal_seconds", out.optimal_seconds);
  cost = out;
  return {};
}

}  // namespace

namespace {

struct KindNames {
  MemLogKind kind;
  std::string_view name;  // for people
  std::string_view id;    // for JSON
};
constexpr KindNames kKindNames[] = {
    {MemLogKind::kEngineCompile, "engine compile", "engine_compile"},
    {MemLogKind::kTrainCompile, "train_compile", "train_compile"},
    {MemLogKind::kLiveRun, "live run", "live_run"},
    {MemLogKind::kUnknown, "unknown", "unknown"},
};

const KindNames& kind_names(MemLogKind kind) {
  for (const KindNames& names : kKindNames) {
    if (names.kind == kind) return names;
  }
  return kKindNames[std::size(kKindNames) - 1];
}

}  // namespace

std::string_view memlog_kind_name(MemLogKind kind) { return kind_names(kind).name; }

std::string_view memlog_kind_id(MemLogKind kind) { return kind_names(kind).id; }

std::string_view program_source_id(ProgramSource source) {
  return enum_name<ProgramSource::kTpuProgramUsage>(
      source, {"memory_analysis", "estimated_total", "tpu_program_usage"});
}

std::string_view oom_kind_id(OomKind kind) {
  return enum_name<OomKind::kOther>(kind, {"compile", "allocate", "reserve", "other"});
}

std::optional<long long> parse_byte_size(std::string_view text) {
  auto size = parse_logged_size(text);
  if (!size) return std::nullopt;
  return size->bytes;
}

std::string format_logged_size(const LoggedSize& size) {
  constexpr std::string_view kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (size.unit <= 0) return fmt::format("{} B", size.bytes);
  int unit = std::min<int>(size.unit, static_cast<int>(std::size(kUnits)) - 1);
  return fmt::format("{:.2f} {}", static_cast<double>(size.bytes) / std::pow(1024.0, unit),
                     kUnits[unit]);
}

std::optional<LoggedSize> parse_logged_size(std::string_view text) {
  text = trim(text);
  std::size_t end = 0;
  while (end < text.size() && ((text[end] >= '0' && text[end] <= '9') || text[end] == '.')) ++end;
  std::optional<double> number = parse_double(text.substr(0, end));
  if (!number) return std::nullopt;
  std::string_view unit = trim(text.substr(end));
  double scale = 1;
  int unit_power = 0;
  if (!unit.empty() && unit != "B") {
    constexpr std::string_view kUnits = "KMGTPE";
    std::size_t power = kUnits.find(static_cast<char>(std::toupper(unit[0])));
    std::string_view rest = unit.substr(1);
    if (power == std::string_view::npos || !(rest.empty() || rest == "B" || rest == "iB")) {
      return std::nullopt;
    }
    unit_power = static_cast<int>(power) + 1;
    scale = std::pow(1024.0, static_cast<double>(unit_power));
  }
  if (!(*number * scale <= kMaxBytes)) return std::nullopt;
  return LoggedSize{std::llround(*number * scale), unit_power};
}

struct MemLogParser::State {
  MemLog log;
  std::string section;             // the current `--- name ---`
  std::size_t current = SIZE_MAX;  // index of the program the next analysis line belongs to
  bool engine_marker = false;
  bool train_marker = false;
  bool in_engine_table = false;
  std::optional<std::size_t> usage_program;  // the aggregated XLA::TPU program HBM usage row
  std::map<std::string, int> name_counts;
  std::vector<std::size_t> failed;  // programs whose analysis line did not parse (already reported)
  // A runtime allocate/reserve failure whose "There are ... free" is still to come (a message
  // wrapped over lines): its index in log.ooms and how many more lines may continue it.
  std::optional<std::size_t> wrapped_oom;
  int wrapped_lines_left = 0;
  std::string unescaped;  // the current line without terminal escapes, when it had any

  std::vector<std::pair<std::size_t, Diagnostic>> problems;

  // "source:line", as the problems always said (even of a line 0).
  std::string where(std::size_t line) const {
    return fmt::format("{}:{}", display_name(log.source), line);
  }
  void problem(std::size_t line, const std::string& message) {
    problems.emplace_back(line, Diagnostic{Severity::kWarning, where(line), message});
  }

  std::size_t new_program(std::string_view base, std::size_t line, ProgramSource source) {
    std::string name(base);
    int n = ++name_counts[name];
    if (n > 1) name = fmt::format("{}#{}", base, n);
    ProgramMemory program;
    program.name = name;
    program.line = line;
    program.source = source;
    log.programs.push_back(std::move(program));
    return log.programs.size() - 1;
  }

  bool room_for_program(std::size_t line) {
    if (log.programs.size() < kMaxPrograms) return true;
    if (log.programs.size() == kMaxPrograms) {
      problem(line, fmt::format("more than {} programs; the rest are ignored", kMaxPrograms));
    }
    return false;
  }

  std::string default_name() const { return section.empty() ? "train_step" : section; }

  // The program an analysis line adds to: the current one unless it already has that part.
  std::optional<std::size_t> target(std::size_t line, bool for_memory) {
    if (current != SIZE_MAX) {
      const ProgramMemory& p = log.programs[current];
      bool taken = for_memory ? p.has_memory : (p.cost.has_value() || p.has_memory);
      if (!taken) return current;
    }
    if (!room_for_program(line)) return std::nullopt;
    current = new_program(default_name(), line, ProgramSource::kMemoryAnalysis);
    return current;
  }

  void on_section(std::string_view name, std::size_t line) {
    in_engine_table = false;
    section = std::string(name);
    if (!room_for_program(line)) return;
    current = new_program(name, line, ProgramSource::kMemoryAnalysis);
  }

  void on_cost(std::string_view rest, std::size_t line, bool truncated) {
    auto index = target(line, false);
    if (!index) return;
    if (truncated) {
      problem(line, fmt::format("Cost analysis: the line is longer than {} bytes", kMaxMemLogLine));
      failed.push_back(*index);
      return;
    }
    std::string error = parse_cost(rest, log.programs[*index].cost);
    if (!error.empty()) {
      problem(line, error);
      failed.push_back(*index);
    }
  }

  void on_memory(std::string_view rest, std::size_t line, bool truncated) {
    auto index = target(line, true);
    if (!index) return;
    if (truncated) {
      problem(line,
              fmt::format("Memory analysis: the line is longer than {} bytes", kMaxMemLogLine));
      failed.push_back(*index);
      return;
    }
    std::string error = parse_stats(rest, log.programs[*index]);
    if (!error.empty()) {
      problem(line, error);
      failed.push_back(*index);
    }
  }

  // "Total estimated memory size: 100.4 GB, estimated output size: 44.5 GB, ..." and the older
  // "Total memory size: 100.4 GB, Output size: 44.5 GB, ...".
  void on_estimated_total(std::string_view text, std::size_t line) {
    std::map<std::string, double> sizes;
    std::size_t start = 0;
    for (;;) {
      std::size_t comma = text.find(", ", start);
      std::string_view part =
          trim(text.substr(start, comma == std::string_view::npos ? comma : comma - start));
      std::string item = lower(part);
      std::size_t colon = item.find(" size:");
      if (colon != std::string::npos) {
        std::string label = item.substr(0, colon);
        for (std::string_view prefix : {"total ", "estimated "}) {
          if (label.rfind(prefix, 0) == 0) label.erase(0, prefix.size());
        }
        if (label.rfind("estimated ", 0) == 0) label.erase(0, 10);
        std::string_view value = trim(std::string_view(item).substr(colon + 6));
        if (!value.empty() && value.back() == '.') value.remove_suffix(1);
        if (value.size() > 3 && value.substr(value.size() - 3) == " gb") {
          auto gib = parse_double(value.substr(0, value.size() - 3));
          if (gib && plausible_gib(*gib)) sizes[label] = *gib;
        }
      }
      if (comma == std::string_view::npos) break;
      start = comma + 2;
    }
    for (std::string_view key : {"memory", "output", "temp", "argument"}) {
      if (!sizes.count(std::string(key))) {
        problem(line, fmt::format("a total memory size line without its {} size in GB",
                                  key == "memory" ? "total" : key));
        return;
      }
    }
    if (!room_for_program(line)) return;
    std::size_t index = new_program("train_step", line, ProgramSource::kEstimatedTotal);
    ProgramMemory& p = log.programs[index];
    p.argument = gib_to_bytes(sizes["argument"]);
    p.output = gib_to_bytes(sizes["output"]);
    p.temp = gib_to_bytes(sizes["temp"]);
    p.resident = gib_to_bytes(sizes["memory"]);
    // total = output + temp + argument - alias (max_utils), so alias is what the sum exceeds it by.
    p.alias = std::max(0LL, *p.argument + *p.output + *p.temp - p.resident);
    if (sizes.count("host temp")) p.host_temp = gib_to_bytes(sizes["host temp"]);
    p.has_memory = true;
    current = SIZE_MAX;
  }

  void on_program_usage(std::string_view text, std::size_t line) {
    std::size_t slash = text.find('/');
    if (slash == std::string_view::npos) return;
    auto used = parse_byte_size(text.substr(0, slash));
    auto capacity = parse_byte_size(text.substr(slash + 1));
    if (!used || !capacity) {
      problem(line, "XLA::TPU program HBM usage: expected 'USED / CAPACITY'");
      return;
    }
    if (!usage_program) {
      if (!room_for_program(line)) return;
      usage_program = new_program("tpu_programs", line, ProgramSource::kTpuProgramUsage);
      log.programs[*usage_program].count = 0;
    }
    ProgramMemory& p = log.programs[*usage_program];
    ++p.count;
    if (!p.has_memory || *used > p.resident) {
      p.resident = *used;
      p.capacity = *capacity;
      p.line = line;
      p.has_memory = true;
    }
    if (!log.capacity) log.capacity = *capacity;
  }

  void on_oom(std::string_view line_text, std::size_t line) {
    ++log.oom_lines;
    if (log.ooms.size() >= kMaxOomReports) return;
    OomReport oom;
    oom.line = line;
    oom.program = section;
    oom.text = cut_utf8(trim(line_text), kMaxOomText);
    std::string lowered = lower(line_text);
    if (auto at = line_text.find("HLO temporaries ("); at != std::string_view::npos) {
      oom.kind = OomKind::kCompile;
      oom.required = size_after(line_text, "HLO temporaries (");
      std::size_t avail = lowered.find("exceeds available ", at);
      if (avail != std::string::npos) {
        std::size_t space_start = avail + 18;
        // The space's name may end the line (a cut log, or CRLF line ends).
        std::size_t space_end =
            std::min(lowered.find_first_of(" \t\r", space_start), lowered.size());
        oom.memory_space = lowered.substr(space_start, space_end - space_start);
        if (space_end < lowered.size())
          oom.available = size_after(line_text.substr(space_end), "(");
      }
    }
    if (auto at = lowered.find("memory space "); at != std::string::npos) {
      std::size_t end = at + 13;
      while (end < lowered.size() && std::isalnum(static_cast<unsigned char>(lowered[end]))) ++end;
      oom.memory_space = lowered.substr(at + 13, end - at - 13);
    }
    // "Used 21.95G of 15.48G hbm."
    for (std::size_t at = line_text.find("Used "); at != std::string_view::npos;
         at = line_text.find("Used ", at + 5)) {
      std::string_view rest = line_text.substr(at + 5);
      std::size_t of = rest.find(" of ");
      if (of == std::string_view::npos || of > 24) continue;
      auto used = parse_logged_size(rest.substr(0, of));
      std::string_view after = rest.substr(of + 4);
      std::size_t blank = after.find(' ');
      auto capacity = parse_logged_size(after.substr(0, blank));
      if (!used || !capacity) continue;
      oom.kind = OomKind::kCompile;
      oom.required = used;
      oom.available = capacity;
      if (blank != std::string_view::npos) {
        std::string_view space = after.substr(blank + 1);
        std::size_t end = 0;
        while (end < space.size() && std::isalnum(static_cast<unsigned char>(space[end]))) ++end;
        if (end > 0) oom.memory_space = lower(space.substr(0, end));
      }
      break;
    }
    // "Attempting to allocate 64.00G. That was not possible. There are 10.51G free." and
    // "Attempting to reserve 14.96G at the bottom of memory. That was not possible. There are
    // 1.33G free, 0B reserved, and 1.33G reservable." What is free is not the capacity.
    for (auto [marker, kind] : {std::pair{kAllocateMarker, OomKind::kAllocate},
                                std::pair{kReserveMarker, OomKind::kReserve}}) {
      if (line_text.find(marker) == std::string_view::npos) continue;
      oom.kind = kind;
      oom.required = size_after(line_text, marker);
      read_free(line_text, oom);
      break;
    }
    if (oom.memory_space.empty() && lowered.find("hbm") != std::string::npos)
      oom.memory_space = "hbm";
    if (oom.memory_space == "hbm" && oom.available && !log.capacity)
      log.capacity = oom.available->bytes;
    bool wrapped = (oom.kind == OomKind::kAllocate || oom.kind == OomKind::kReserve) && !oom.free;
    log.ooms.push_back(std::move(oom));
    if (wrapped) {
      wrapped_oom = log.ooms.size() - 1;
      wrapped_lines_left = 2;
    }
  }

  // "There are 1.33G free, 0B reserved, and 1.33G reservable." (the last two for reserves).
  static void read_free(std::string_view text, OomReport& oom) {
    if (text.find(kFreeMarker) == std::string_view::npos) return;
    oom.free = size_after(text, kFreeMarker);
    oom.reserved = size_before(text, " reserved");
    oom.reservable = size_before(text, " reservable");
  }

  // A line that continues a wrapped allocate/reserve failure ("That was not possible." or
  // "There are ... free..."): added to that report. Returns false for any other line.
  bool continue_wrapped_oom(std::string_view line) {
    if (!wrapped_oom) return false;
    OomReport& oom = log.ooms[*wrapped_oom];
    bool free_line = line.find(kFreeMarker) != std::string_view::npos &&
                     line.find(" free") != std::string_view::npos;
    if (!free_line && line.find(kNotPossible) == std::string_view::npos) {
      wrapped_oom.reset();
      return false;
    }
    if (oom.text.size() < kMaxOomText) {
      oom.text = cut_utf8(oom.text + " " + std::string(trim(line)), kMaxOomText);
    }
    if (free_line) read_free(line, oom);
    if (oom.memory_space.empty() && lower(line).find("hbm") != std::string::npos)
      oom.memory_space = "hbm";
    if (free_line || --wrapped_lines_left == 0) wrapped_oom.reset();
    return true;
  }

  void on_table_row(std::string_view line) {
    std::vector<std::string_view> cells = split_blanks(line);
    if (cells.size() < 13) {
      in_engine_table = false;
      return;
    }
    std::vector<double> numbers;
    for (std::size_t i = 1; i < 13; ++i) {
      auto value = parse_double(cells[i]);
      if (!value || !plausible_gib(*value)) {
        in_engine_table = false;
        return;
      }
      numbers.push_back(*value);
    }
    for (auto it = log.programs.rbegin(); it != log.programs.rend(); ++it) {
      if (it->name == cells[0] && it->source == ProgramSource::kMemoryAnalysis) {
        it->state = gib_to_bytes(numbers[5]);        // +state
        it->host_state = gib_to_bytes(numbers[11]);  // host state
        return;
      }
    }
  }

  void add_line(std::string_view raw_line, std::size_t number, bool truncated) {
    log.lines = number;
    std::string_view line = strip_terminal_escapes(raw_line, unescaped);
    if (continue_wrapped_oom(line)) return;
    if (in_engine_table) {
      on_table_row(line);
      if (in_engine_table) return;
    }
    if (std::string_view name = section_name(line); !name.empty()) {
      on_section(name, number);
      return;
    }
    if (auto at = line.find(kCostMarker); at != std::string_view::npos) {
      on_cost(line.substr(at + kCostMarker.size()), number, truncated);
      return;
    }
    if (auto at = line.find(kMemoryMarker); at != std::string_view::npos) {
      on_memory(line.substr(at + kMemoryMarker.size()), number, truncated);
      return;
    }
    // print(compiled.memory_analysis()) without the label.
    if (auto at = line.find(kStatsOpen); at != std::string_view::npos) {
      on_memory(line.substr(at), number, truncated);
      return;
    }
    if (line.find("+state") != std::string_view::npos &&
        collapse_blanks(line) == kEngineTableHeader) {
      in_engine_table = true;
      return;
    }
    if (auto at = line.find(kPeakMarker); at != std::string_view::npos) {
      std::string_view rest = line.substr(at + kPeakMarker.size());
      std::size_t unit = rest.find(" GiB");
      if (auto gib = parse_double(rest.substr(0, unit)); gib && plausible_gib(*gib))
        log.device_peak = gib_to_bytes(*gib);
      return;
    }
    if (auto at = line.find(kStagingMarker); at != std::string_view::npos) {
      log.diagnostics.push_back(
          {Severity::kNote, where(number), cut_utf8(trim(line.substr(at)), kMaxOomText)});
      return;
    }
    if (auto at = line.find(kTopologyMarker); at != std::string_view::npos) {
      std::string_view value = trim(line.substr(at + kTopologyMarker.size()));
      if (!value.empty()) log.compile_topology = std::string(value);
      return;
    }
    for (std::string_view marker : {"Total estimated memory size: ", "Total memory size: "}) {
      if (auto at = line.find(marker); at != std::string_view::npos) {
        on_estimated_total(line.substr(at), number);
        return;
      }
    }
    if (auto at = line.find(kUsageMarker); at != std::string_view::npos) {
      on_program_usage(line.substr(at + kUsageMarker.size()), number);
      return;
    }
    if (line.find("Starting training_engine/maxtext_engine_compile.py") != std::string_view::npos ||
        line.find("Jitting and compiling the engine's kernels") != std::string_view::npos) {
      engine_marker = true;
    } else if (line.find("Starting train_compile.py") != std::string_view::npos ||
               line.find("Finished train_compile.py") != std::string_view::npos) {
      train_marker = true;
    }
    bool oom = line.find("RESOURCE_EXHAUSTED") != std::string_view::npos ||
               line.find("exceeds available HBM") != std::string_view::npos ||
               line.find("Ran out of memory") != std::string_view::npos ||
               line.find(kAllocateMarker) != std::string_view::npos ||
               line.find(kReserveMarker) != std::string_view::npos;
    if (!oom) {
      // "Used X of Y hbm" on a line of its own (a wrapped error message).
      std::size_t used = line.find("Used ");
      oom = used != std::string_view::npos && line.find(" hbm", used) != std::string_view::npos &&
            line.find(" of ", used) != std::string_view::npos;
    }
    if (oom) on_oom(line, number);
  }

  MemLog finish() {
    // A `--- name ---` line is a kernel header only in an engine compile's log; elsewhere (a
    // section of some other output) one without stats is not an error.
    bool engine_like =
        engine_marker ||
        std::any_of(log.programs.begin(), log.programs.end(), [](const ProgramMemory& p) {
          return p.source == ProgramSource::kMemoryAnalysis && (p.has_memory || p.cost.has_value());
        });
    std::vector<ProgramMemory> kept;
    for (std::size_t i = 0; i < log.programs.size(); ++i) {
      ProgramMemory& p = log.programs[i];
      if (p.has_memory) {
        kept.push_back(std::move(p));
      } else if (std::find(failed.begin(), failed.end(), i) != failed.end()) {
        continue;  // its malformed line is reported already
      } else if (p.cost) {
        problem(p.line, fmt::format("'{}' has a Cost analysis but no Memory analysis", p.name));
      } else if (engine_like) {
        problem(p.line, fmt::format("kernel '{}' has no Memory analysis", p.name));
      }
    }
    log.programs = std::move(kept);
    std::stable_sort(problems.begin(), problems.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [line, diagnostic] : problems) log.diagnostics.push_back(std::move(diagnostic));
    bool sections = std::any_of(log.programs.begin(), log.programs.end(), [](const auto& p) {
      return p.source == ProgramSource::kMemoryAnalysis && p.name.rfind("train_step", 0) != 0;
    });
    bool analyses = std::any_of(log.programs.begin(), log.programs.end(), [](const auto& p) {
      return p.source == ProgramSource::kMemoryAnalysis;
    });
    if (engine_marker || sections) {
      log.kind = MemLogKind::kEngineCompile;
    } else if (train_marker || analyses) {
      log.kind = MemLogKind::kTrainCompile;
    } else if (!log.programs.empty()) {
      log.kind = MemLogKind::kLiveRun;
    }
    return std::move(log);
  }
};

MemLogParser::MemLogParser(std::string source) : state_(std::make_unique<State>()) {
  state_->log.source = std::move(source);
}
MemLogParser::~MemLogParser() = default;

void MemLogParser::add_line(std::string_view line, std::size_t number, bool truncated) {
  state_->add_line(line, number, truncated);
}

MemLog MemLogParser::finish() { return state_->finish(); }

std::vector<std::string> MemLog::notes() const { return messages_of(diagnostics, Severity::kNote); }

std::vector<std::string> MemLog::problems() const {
  return texts_of(diagnostics, Severity::kWarning);
}

MemLog parse_memlog(std::string_view text, const std::string& source) {
  MemLogParser parser(source);
  std::size_t number = 0;
  while (!text.empty()) {
    std::size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    bool truncated = line.size() > kMaxMemLogLine;
    if (truncated) line = line.substr(0, kMaxMemLogLine);
    parser.add_line(line, ++number, truncated);
    if (newline == std::string_view::npos) break;
    text.remove_prefix(newline + 1);
  }
  return parser.finish();
}

MemLog read_memlog(const std::string& path) {
  MemLogParser parser(path);
  for_each_line(path, kMaxMemLogLine, [&](std::string_view line, std::size_t number, bool cut) {
    parser.add_line(line, number, cut);
    return true;
  });
  return parser.finish();
}

}  // namespace rtb::logs
