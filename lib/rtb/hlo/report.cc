#include "rtb/hlo/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/json.h"
#include "rtb/base/svg.h"
#include "rtb/base/text.h"

namespace rtb::hlo {
namespace {

// ---- small formatting helpers -------------------------------------------------------------------

std::string with_commas(std::int64_t value) {
  std::string digits = std::to_string(value < 0 ? -value : value);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return value < 0 ? fmt::format("-{}", out) : out;
}

std::string signed_bytes(std::int64_t delta) {
  if (delta == 0) return "0";
  return fmt::format("{}{}", delta > 0 ? "+" : "-", human_bytes(delta > 0 ? delta : -delta));
}

std::string signed_count(std::int64_t delta) {
  if (delta == 0) return "0";
  return fmt::format("{}{}", delta > 0 ? "+" : "", with_commas(delta));
}

std::string executions_text(std::int64_t executions, bool known) {
  return fmt::format("{}{}", known ? "" : ">=", with_commas(executions));
}

// Names are printed with '%' as in the dump, so they can be searched for.
std::string pct(const std::string& name) { return name.empty() ? "-" : fmt::format("%{}", name); }

// Exposed entries, heaviest first (weighted exposed bytes, then file order).
std::vector<std::size_t> ranked_exposed(const Analysis& analysis) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < analysis.collectives.size(); ++i) {
    if (analysis.collectives[i].exposed()) order.push_back(i);
  }
  auto weight = [&](std::size_t i) {
    const Collective& c = analysis.collectives[i];
    long double w = static_cast<long double>(c.bytes) * static_cast<long double>(c.executions);
    return w;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return weight(a) > weight(b); });
  return order;
}

// ---- JSON ---------------------------------------------------------------------------------------

constexpr json::Writer::Layout kOneLine = json::Writer::Layout::kOneLine;

// A 1-based line, or null for none (0).
std::optional<std::int64_t> line_or_null(std::int64_t line) {
  return line > 0 ? std::optional<std::int64_t>(line) : std::nullopt;
}

// The line of a diagnostic's "file:line" (`file` the analysis' own), 0 when it names none.
std::int64_t line_of(const Diagnostic& diagnostic, const std::string& file) {
  if (diagnostic.where.size() <= file.size() + 1) return 0;
  return std::strtoll(diagnostic.where.c_str() + file.size() + 1, nullptr, 10);
}

// The fields of `t`, into the object open in `j`.
void write_totals(json::Writer& j, const Totals& t) {
  j.field("instances", t.instances);
  j.field("executions", t.executions);
  j.field("bytes", t.bytes);
  j.field("overlapped", t.overlapped);
  j.field("exposed", t.exposed);
  j.field("exposed_bytes", t.exposed_bytes);
  j.field("unpaired", t.unpaired);
  j.field("executions_unknown", t.executions_unknown);
}

// `t` as an object on one line.
void write_totals_object(json::Writer& j, const Totals& t) {
  j.begin_object(kOneLine);
  write_totals(j, t);
  j.end_object();
}

void write_collective(json::Writer& j, std::size_t index, const Collective& c) {
  j.begin_object(kOneLine);
  j.field("index", index);
  j.field("kind", c.kind);
  j.field("category", category_name(c.category));
  j.field("computation", c.computation);
  j.field("start", json::null_if_empty(c.start));
  j.field("done", json::null_if_empty(c.done));
  j.field("wrapper", json::null_if_empty(c.wrapper));
  j.field("start_line", line_or_null(c.start_line));
  j.field("done_line", line_or_null(c.done_line));
  j.field("async", c.async);
  j.field("status", status_name(c.status));
  j.field("exposed", c.paired_or_sync() ? std::optional<bool>(c.exposed()) : std::nullopt);
  j.field("bytes", c.bytes);
  j.field("bytes_known", c.bytes_known);
  j.field("window_instructions", c.window_instructions);
  j.field("window_compute", c.window_compute);
  j.list("compute", c.compute_sample);
  j.field("executions", c.executions);
  j.field("executions_known", c.executions_known);
  j.field("op_name", json::null_if_empty(c.op_name));
  j.field("in_truncated_computation", c.in_truncated_computation);
  j.end_object();
}

// Writes the report object into `j` (the comparison document nests two). The entries of the
// lists are one line each.
void write_report(json::Writer& j, const Analysis& analysis, const ReportOptions& options) {
  j.begin_object();
  j.field("schema", "rtb.hlo-overlap/1");
  j.field("file", analysis.file);
  j.field("module", analysis.module);
  j.field("scheduled", analysis.scheduled);
  j.field("truncated", analysis.truncated);
  j.field("truncated_line",
          analysis.truncated ? line_or_null(analysis.truncated_line) : std::nullopt);
  j.field("truncation_reason", analysis.truncated
                                   ? std::optional<std::string_view>(analysis.truncation_reason)
                                   : std::nullopt);
  j.field("computations", analysis.computations);
  j.field("instructions", analysis.instructions);
  j.field("lines", analysis.lines);
  j.field("bytes_read", analysis.bytes_read);
  j.key("collectives").begin_array();
  for (std::size_t i = 0; i < analysis.collectives.size(); ++i) {
    write_collective(j, i, analysis.collectives[i]);
  }
  j.end_array();
  j.key("summary").begin_object();
  for (const KindTotals& k : analysis.by_kind) {
    j.key(k.kind).begin_object(kOneLine);
    j.field("category", category_name(k.category));
    write_totals(j, k.totals);
    j.end_object();
  }
  j.end_object();
  j.key("total");
  write_totals_object(j, analysis.total);
  j.key("total_collectives");
  write_totals_object(j, analysis.total_collectives);
  j.key("by_computation").begin_array();
  for (const ComputationTotals& c : analysis.by_computation) {
    j.begin_object(kOneLine);
    j.field("computation", c.computation);
    j.field("computation_executions", c.executions);
    j.field("computation_executions_known", c.executions_known);
    write_totals(j, c.totals);
    j.end_object();
  }
  j.end_array();
  std::vector<std::size_t> top = ranked_exposed(analysis);
  if (top.size() > options.top) top.resize(options.top);
  j.list("top_exposed", top);
  j.key("warnings").begin_array();
  for (const Diagnostic& d : analysis.diagnostics) {
    j.begin_object(kOneLine);
    j.field("line", line_or_null(line_of(d, analysis.file)));
    j.field("message", d.message);
    j.end_object();
  }
  j.end_array();
  j.field("warnings_dropped", analysis.warnings_dropped);
  write_json(j, "diagnostics", diagnostics_of(analysis));
  j.end_object();
}

// ---- text tables --------------------------------------------------------------------------------

struct Table {
  std::vector<std::string> header;
  std::vector<bool> left;  // left-aligned columns
  std::vector<std::vector<std::string>> rows;

  std::string str(const std::string& indent = "") const {
    std::vector<std::size_t> width(header.size(), 0);
    for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
    for (const auto& row : rows) {
      for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    auto line = [&](const std::vector<std::string>& cells) {
      std::string out = indent;
      for (std::size_t c = 0; c < cells.size(); ++c) {
        if (c > 0) out += "  ";
        std::string pad(width[c] - cells[c].size(), ' ');
        out += left[c] ? cells[c] + (c + 1 == cells.size() ? "" : pad) : pad + cells[c];
      }
      return out + "\n";
    };
    std::string out = line(header);
    for (const auto& row : rows) out += line(row);
    return out;
  }
};

std::vector<std::string> totals_cells(const Totals& t) {
  return {with_commas(t.instances),  with_commas(t.executions), human_bytes(t.bytes),
          with_commas(t.overlapped), with_commas(t.exposed),    human_bytes(t.exposed_bytes),
          with_commas(t.unpaired)};
}

std::string describe_window(const Collective& c) {
  if (!c.async) return "synchronous";
  if (c.status == Status::kUnpairedStart) return "no done";
  if (c.status == Status::kUnpairedDone) return "no start";
  std::string out = fmt::format("{} instr, {} compute", c.window_instructions, c.window_compute);
  if (!c.compute_sample.empty()) {
    out += " (";
    for (std::size_t i = 0; i < c.compute_sample.size(); ++i) {
      out += fmt::format("{}{}", i == 0 ? "%" : ", %", c.compute_sample[i]);
    }
    if (static_cast<std::int64_t>(c.compute_sample.size()) < c.window_compute) out += ", ...";
    out += ")";
  }
  return out;
}

std::string entry_line(const Collective& c) {
  std::string names = c.async ? fmt::format("{} -> {}", pct(c.start), pct(c.done)) : pct(c.start);
  std::string line = c.start_line > 0 ? std::to_string(c.start_line) : std::to_string(c.done_line);
  return fmt::format("{} {} in {} (line {}): {}, {} x {}, {}", c.kind, names, pct(c.computation),
                     line, status_name(c.status), human_bytes(c.bytes),
                     executions_text(c.executions, c.executions_known), describe_window(c));
}

}  // namespace

std::string format_text(const Analysis& a, const ReportOptions& options) {
  std::string out;
  out +=
      fmt::format("{}: module {}{}, {} computations, {} instructions, {} lines\n", a.file, a.module,
                  a.scheduled ? " (scheduled)" : " (NOT scheduled)", with_commas(a.computations),
                  with_commas(a.instructions), with_commas(a.lines));
  if (a.truncated) {
    out += fmt::format("TRUNCATED at line {}: {}; the report covers the text before it\n",
                       a.truncated_line, a.truncation_reason);
  }
  const Totals& t = a.total_collectives;
  out += fmt::format(
      "collectives: {} in the text, {} executions; overlapped {}, exposed {} ({} of {})\n",
      with_commas(t.instances), with_commas(t.executions), with_commas(t.overlapped),
      with_commas(t.exposed), human_bytes(t.exposed_bytes), human_bytes(t.bytes));
  if (a.collectives.empty()) {
    out += "no collectives, copies or other asynchronous ops\n";
  } else {
    out += "\nBy kind (counts and bytes weighted by executions; unpaired = entries in the text):\n";
    Table kinds{{"kind", "category", "entries", "executions", "bytes", "overlapped", "exposed",
                 "exposed bytes", "unpaired"},
                {true, true, false, false, false, false, false, false, false},
                {}};
    for (const KindTotals& k : a.by_kind) {
      std::vector<std::string> row{k.kind, std::string(category_name(k.category))};
      for (std::string& cell : totals_cells(k.totals)) row.push_back(std::move(cell));
      kinds.rows.push_back(std::move(row));
    }
    std::vector<std::string> all{"all", ""};
    for (std::string& cell : totals_cells(a.total)) all.push_back(std::move(cell));
    kinds.rows.push_back(std::move(all));
    out += kinds.str("  ");

    out += "\nBy computation:\n";
    Table computations{{"computation", "runs", "entries", "executions", "bytes", "overlapped",
                        "exposed", "exposed bytes", "unpaired"},
                       {true, false, false, false, false, false, false, false, false},
                       {}};
    for (const ComputationTotals& c : a.by_computation) {
      std::vector<std::string> row{pct(c.computation),
                                   executions_text(c.executions, c.executions_known)};
      for (std::string& cell : totals_cells(c.totals)) row.push_back(std::move(cell));
      computations.rows.push_back(std::move(row));
    }
    out += computations.str("  ");

    std::vector<std::size_t> top = ranked_exposed(a);
    if (!top.empty() && options.top > 0) {
      std::size_t shown = std::min(top.size(), options.top);
      out += fmt::format("\nTop {} exposed (by bytes x executions, of {}):\n", shown, top.size());
      for (std::size_t r = 0; r < shown; ++r) {
        const Collective& c = a.collectives[top[r]];
        out += fmt::format("  {:>2}. {}\n", r + 1, entry_line(c));
        if (!c.op_name.empty()) out += fmt::format("      op_name: {}\n", c.op_name);
      }
    }
    std::vector<std::size_t> unpaired;
    for (std::size_t i = 0; i < a.collectives.size(); ++i) {
      if (!a.collectives[i].paired_or_sync()) unpaired.push_back(i);
    }
    if (!unpaired.empty()) {
      out += fmt::format("\nUnpaired ({}):\n", unpaired.size());
      for (std::size_t i : unpaired) {
        const Collective& c = a.collectives[i];
        std::string why =
            c.status == Status::kUnpairedStart
                ? (c.in_truncated_computation ? "its computation is cut off by the end of the dump"
                                              : "no done in this computation")
                : "its operand is not a start in this computation";
        out += fmt::format("  {}: {}\n", entry_line(c), why);
      }
    }
    if (options.list) {
      out += "\nAll entries:\n";
      for (std::size_t i = 0; i < a.collectives.size(); ++i) {
        out += fmt::format("  {:>4} {}\n", i, entry_line(a.collectives[i]));
      }
    }
  }
  if (!a.diagnostics.empty()) {
    out += fmt::format("\nWarnings ({}):\n", a.diagnostics.size() + a.warnings_dropped);
    for (const Diagnostic& d : a.diagnostics) {
      std::int64_t line = line_of(d, a.file);
      out += line > 0 ? fmt::format("  line {}: {}\n", line, d.message)
                      : fmt::format("  {}\n", d.message);
    }
    if (a.warnings_dropped > 0) out += fmt::format("  ... and {} more\n", a.warnings_dropped);
  }
  return out;
}

std::vector<Diagnostic> diagnostics_of(const Analysis& analysis) {
  std::vector<Diagnostic> all = analysis.diagnostics;
  if (!analysis.scheduled) {
    all.push_back({Severity::kWarning, where_of(analysis.file),
                   "the module is not scheduled; windows are indicative"});
  }
  if (analysis.truncated) {
    all.push_back(
        {Severity::kWarning, where_of(analysis.file, analysis.truncated_line),
         "truncated dump: " + analysis.truncation_reason + "; reporting what precedes it"});
  }
  return all;
}

std::string format_json(const Analysis& analysis, const ReportOptions& options) {
  json::Writer j;
  write_report(j, analysis, options);
  return std::move(j).str();
}

namespace {

struct KindPair {
  std::optional<KindTotals> a;
  std::optional<KindTotals> b;
};

std::map<std::string, KindPair> pair_kinds(const Analysis& a, const Analysis& b) {
  std::map<std::string, KindPair> kinds;
  for (const KindTotals& k : a.by_kind) kinds[k.kind].a = k;
  for (const KindTotals& k : b.by_kind) kinds[k.kind].b = k;
  return kinds;
}

// B - A, as an object on one line.
void write_delta(json::Writer& j, const Totals& a, const Totals& b) {
  Totals d;
  d.instances = b.instances - a.instances;
  d.executions = b.executions - a.executions;
  d.bytes = b.bytes - a.bytes;
  d.overlapped = b.overlapped - a.overlapped;
  d.exposed = b.exposed - a.exposed;
  d.exposed_bytes = b.exposed_bytes - a.exposed_bytes;
  d.unpaired = b.unpaired - a.unpaired;
  d.executions_unknown = b.executions_unknown - a.executions_unknown;
  write_totals_object(j, d);
}

}  // namespace

std::vector<std::string> compare_differences(const Analysis& a, const Analysis& b) {
  std::vector<std::string> out;
  for (const auto& [kind, pair] : pair_kinds(a, b)) {
    const Totals x = pair.a ? pair.a->totals : Totals{};
    const Totals y = pair.b ? pair.b->totals : Totals{};
    std::vector<std::string> parts;
    auto count = [&](const char* label, std::int64_t from, std::int64_t to) {
      if (from != to) parts.push_back(fmt::format("{} {} -> {}", label, from, to));
    };
    auto bytes = [&](const char* label, std::int64_t from, std::int64_t to) {
      if (from != to) {
        parts.push_back(fmt::format("{} {} -> {}", label, human_bytes(from), human_bytes(to)));
      }
    };
    count("entries", x.instances, y.instances);
    count("executions", x.executions, y.executions);
    bytes("bytes", x.bytes, y.bytes);
    count("overlapped", x.overlapped, y.overlapped);
    count("exposed", x.exposed, y.exposed);
    bytes("exposed bytes", x.exposed_bytes, y.exposed_bytes);
    count("unpaired", x.unpaired, y.unpaired);
    if (parts.empty()) continue;
    std::string line = kind + ":";
    for (std::size_t i = 0; i < parts.size(); ++i) line += (i == 0 ? " " : ", ") + parts[i];
    if (!pair.a) line += " (only in B)";
    if (!pair.b) line += " (only in A)";
    out.push_back(std::move(line));
  }
  return out;
}

std::string format_compare_text(const Analysis& a, const Analysis& b) {
  std::string out;
  out += fmt::format("A: {} (module {}, {} instructions{})\n", a.file, a.module,
                     with_commas(a.instructions), a.truncated ? ", TRUNCATED" : "");
  out += fmt::format("B: {} (module {}, {} instructions{})\n", b.file, b.module,
                     with_commas(b.instructions), b.truncated ? ", TRUNCATED" : "");
  Table totals{{"", "A", "B", "delta"}, {true, false, false, false}, {}};
  auto add_totals = [&](const std::string& label, const Totals& x, const Totals& y) {
    totals.rows.push_back({label + " exposed bytes", human_bytes(x.exposed_bytes),
                           human_bytes(y.exposed_bytes),
                           signed_bytes(y.exposed_bytes - x.exposed_bytes)});
    totals.rows.push_back({label + " exposed", with_commas(x.exposed), with_commas(y.exposed),
                           signed_count(y.exposed - x.exposed)});
    totals.rows.push_back({label + " overlapped", with_commas(x.overlapped),
                           with_commas(y.overlapped), signed_count(y.overlapped - x.overlapped)});
    totals.rows.push_back({label + " bytes", human_bytes(x.bytes), human_bytes(y.bytes),
                           signed_bytes(y.bytes - x.bytes)});
    totals.rows.push_back({label + " unpaired", with_commas(x.unpaired), with_commas(y.unpaired),
                           signed_count(y.unpaired - x.unpaired)});
  };
  add_totals("collectives", a.total_collectives, b.total_collectives);
  add_totals("all entries", a.total, b.total);
  out += fmt::format("\n{}", totals.str("  "));
  out += "\nBy kind (weighted by executions):\n";
  Table kinds{{"kind", "entries A", "entries B", "exposed A", "exposed B", "delta",
               "exposed bytes A", "exposed bytes B", "delta"},
              {true, false, false, false, false, false, false, false, false},
              {}};
  for (const auto& [kind, pair] : pair_kinds(a, b)) {
    Totals x = pair.a ? pair.a->totals : Totals{};
    Totals y = pair.b ? pair.b->totals : Totals{};
    kinds.rows.push_back(
        {kind, with_commas(x.instances), with_commas(y.instances), with_commas(x.exposed),
         with_commas(y.exposed), signed_count(y.exposed - x.exposed), human_bytes(x.exposed_bytes),
         human_bytes(y.exposed_bytes), signed_bytes(y.exposed_bytes - x.exposed_bytes)});
  }
  out += kinds.str("  ");
  std::vector<std::string> differences = compare_differences(a, b);
  if (differences.empty()) {
    out += "\nsame: no per-kind total differs\n";
  } else {
    out += fmt::format("\ndifferent: {} kind{} differ{}\n", differences.size(),
                       differences.size() == 1 ? "" : "s", differences.size() == 1 ? "s" : "");
    for (const std::string& line : differences) out += fmt::format("  {}\n", line);
  }
  return out;
}

std::string format_compare_json(const Analysis& a, const Analysis& b,
                                const ReportOptions& options) {
  json::Writer j;
  j.begin_object();
  j.field("schema", "rtb.hlo-overlap-compare/1");
  j.key("a");
  write_report(j, a, options);
  j.key("b");
  write_report(j, b, options);
  j.key("delta").begin_object();
  j.key("total");
  write_delta(j, a.total, b.total);
  j.key("total_collectives");
  write_delta(j, a.total_collectives, b.total_collectives);
  j.key("by_kind").begin_object();
  for (const auto& [kind, pair] : pair_kinds(a, b)) {
    j.key(kind);
    write_delta(j, pair.a ? pair.a->totals : Totals{}, pair.b ? pair.b->totals : Totals{});
  }
  j.end_object();
  j.end_object();
  std::vector<std::string> differences = compare_differences(a, b);
  j.field("same", differences.empty());
  // On one line, as the first version printed them.
  j.key("differences").begin_array(kOneLine);
  for (const std::string& difference : differences) j.value(difference);
  j.end_array();
  j.end_object();
  return std::move(j).str();
}

// ---- SVG ----------------------------------------------------------------------------------------

namespace {

constexpr double kMargin = 16;
constexpr double kMinCell = 3;        // width of one instruction in full rows
constexpr double kMaxCell = 12;       // ... and at most, for short schedules
constexpr std::size_t kPerRow = 400;  // instructions per row
constexpr double kStrip = 14;         // height of the instruction strip
constexpr double kLane = 6;           // height of one window bar
constexpr double kLaneGap = 2;
constexpr double kRowGap = 22;
constexpr double kLabel = 64;  // room for the row's first index on the left

const char* kComputeColour = "#1f4e79";
const char* kOtherColour = "#d9d9d9";
const char* kAsyncColour = "#f58518";
const char* kSyncColour = "#d62728";
const char* kOverlappedColour = "#54a24b";
const char* kExposedColour = "#e45756";
const char* kUnpairedColour = "#9d9d9d";

struct Bar {
  std::size_t row;
  std::size_t first;  // instruction range [first, last] within the row
  std::size_t last;
  std::size_t window;
  std::size_t lane = 0;
};

std::string instruction_colour(const ScheduledInstruction& instruction) {
  using R = ScheduledInstruction::Role;
  if (instruction.compute) return kComputeColour;
  switch (instruction.role) {
    case R::kStart:
    case R::kUpdate:
    case R::kDone:
      return kAsyncColour;
    case R::kSyncCollective:
      return kSyncColour;
    default:
      return kOtherColour;
  }
}

}  // namespace

std::string render_svg(const Analysis& analysis) {
  if (!analysis.schedule || analysis.schedule->instructions.empty()) {
    fail("nothing to draw: no computation with collectives or asynchronous ops{}",
         analysis.collectives.empty() ? "" : " matched");
  }
  const Schedule& schedule = *analysis.schedule;
  const std::size_t n = schedule.instructions.size();
  const std::size_t rows = (n + kPerRow - 1) / kPerRow;
  const std::size_t per_row = std::min(n, kPerRow);
  // Full rows use 3 units per instruction; a short schedule is stretched to the same width.
  const double cell = std::clamp(
      kMinCell * static_cast<double>(kPerRow) / static_cast<double>(per_row), kMinCell, kMaxCell);

  // Window bars, split at row ends, each row's bars packed into lanes greedily.
  std::vector<Bar> bars;
  for (std::size_t w = 0; w < schedule.windows.size(); ++w) {
    const Schedule::Window& window = schedule.windows[w];
    const Collective& c = analysis.collectives[window.collective];
    if (!c.async) continue;
    std::size_t first = window.start >= 0 ? static_cast<std::size_t>(window.start) : 0;
    std::size_t last = window.done >= 0 ? static_cast<std::size_t>(window.done) : n - 1;
    for (std::size_t row = first / kPerRow; row <= last / kPerRow; ++row) {
      std::size_t from = std::max(first, row * kPerRow);
      std::size_t to = std::min(last, row * kPerRow + kPerRow - 1);
      bars.push_back(Bar{row, from, to, w});
    }
  }
  std::vector<std::size_t> lanes_in_row(rows, 0);
  {
    std::vector<std::vector<std::size_t>> lane_ends(rows);  // last instruction per lane
    std::stable_sort(bars.begin(), bars.end(), [](const Bar& x, const Bar& y) {
      return x.row != y.row ? x.row < y.row : x.first < y.first;
    });
    for (Bar& bar : bars) {
      auto& ends = lane_ends[bar.row];
      std::size_t lane = 0;
      while (lane < ends.size() && ends[lane] >= bar.first) ++lane;
      if (lane == ends.size()) ends.push_back(0);
      ends[lane] = bar.last;
      bar.lane = lane;
      lanes_in_row[bar.row] = std::max(lanes_in_row[bar.row], lane + 1);
    }
  }
  std::vector<double> row_top(rows, 0);
  const double header = 78;
  double y = kMargin + header;
  for (std::size_t r = 0; r < rows; ++r) {
    row_top[r] = y;
    y += kStrip + 4 + static_cast<double>(lanes_in_row[r]) * (kLane + kLaneGap) + kRowGap;
  }
  const std::string title = fmt::format("%{} ({}): {} instructions in schedule order, {} per row",
                                        schedule.computation, analysis.module, n, per_row);
  // Rough text widths (sans-serif averages ~0.6 em) so that the header is never cut off.
  const double header_width = kMargin * 2 + 14 * 0.62 * static_cast<double>(title.size());
  const double legend_width = 920;
  const double width = kMargin * 2 + kLabel * 2 + static_cast<double>(per_row) * cell;
  svg::Document doc(std::max({width, header_width, legend_width}), y + kMargin);
  doc.set_title(fmt::format("hlo-overlap: schedule of %{}", schedule.computation));
  doc.set_background("white");

  // Header and legend.
  std::int64_t overlapped = 0;
  std::int64_t exposed = 0;
  std::int64_t unpaired = 0;
  for (const Schedule::Window& window : schedule.windows) {
    const Collective& c = analysis.collectives[window.collective];
    overlapped += c.status == Status::kOverlapped;
    exposed += c.status == Status::kExposed;
    unpaired += !c.paired_or_sync();
  }
  doc.text(kMargin, kMargin + 14, title, svg::Font::sized(14).with_bold());
  doc.text(kMargin, kMargin + 32,
           fmt::format("{} entries: {} overlapped, {} exposed, {} unpaired. Hover for names.",
                       schedule.windows.size(), overlapped, exposed, unpaired),
           svg::Font::sized(11));
  double lx = kMargin;
  double ly = kMargin + 50;
  auto legend = [&](const char* colour, const std::string& label, double h) {
    doc.rect(lx, ly - h, 10, h, svg::Paint::filled(colour));
    doc.text(lx + 14, ly, label, svg::Font::sized(11));
    lx += 24 + 6.5 * static_cast<double>(label.size());
  };
  legend(kComputeColour, "compute", 10);
  legend(kAsyncColour, "async start/done", 10);
  legend(kSyncColour, "synchronous collective", 10);
  legend(kOtherColour, "other", 10);
  legend(kOverlappedColour, "window: overlapped", kLane);
  legend(kExposedColour, "window: exposed", kLane);
  legend(kUnpairedColour, "window: unpaired", kLane);

  // Instruction strips: runs of the same colour become one rectangle (few elements), but every
  // compute, async and collective instruction keeps its own tooltip.
  for (std::size_t r = 0; r < rows; ++r) {
    double top = row_top[r];
    std::size_t begin = r * kPerRow;
    std::size_t end = std::min(n, begin + kPerRow);
    doc.text(kMargin + kLabel - 6, top + kStrip - 3, std::to_string(begin),
             svg::Font::sized(10).with_anchor(svg::Anchor::kEnd).with_fill("#666"));
    doc.text(kMargin + kLabel + static_cast<double>(end - begin) * cell + 4, top + kStrip - 3,
             std::to_string(end - 1), svg::Font::sized(10).with_fill("#666"));
    double x0 = kMargin + kLabel;
    std::size_t i = begin;
    while (i < end) {
      const ScheduledInstruction& instruction = schedule.instructions[i];
      std::string colour = instruction_colour(instruction);
      std::size_t j = i + 1;
      if (colour == kOtherColour) {
        while (j < end && instruction_colour(schedule.instructions[j]) == kOtherColour) ++j;
      }
      std::string tooltip =
          j == i + 1 ? fmt::format("#{} %{} ({})", i, instruction.name, instruction.opcode)
                     : fmt::format("#{}..#{}: {} other instructions", i, j - 1, j - i);
      doc.rect(x0 + static_cast<double>(i - begin) * cell, top,
               static_cast<double>(j - i) * cell - (j - i == 1 ? 0.5 : 0), kStrip,
               svg::Paint::filled(colour), tooltip);
      i = j;
    }
  }
  // Window bars.
  for (const Bar& bar : bars) {
    const Schedule::Window& window = schedule.windows[bar.window];
    const Collective& c = analysis.collectives[window.collective];
    const char* colour = c.status == Status::kOverlapped ? kOverlappedColour
                         : c.status == Status::kExposed  ? kExposedColour
                                                         : kUnpairedColour;
    double x = kMargin + kLabel + static_cast<double>(bar.first - bar.row * kPerRow) * cell;
    double w = static_cast<double>(bar.last - bar.first + 1) * cell;
    double top = row_top[bar.row] + kStrip + 4 + static_cast<double>(bar.lane) * (kLane + kLaneGap);
    std::string tooltip = fmt::format(
        "{} {} -> {}: {}, {}, window {} instructions with {} compute{}{}", c.kind, pct(c.start),
        pct(c.done), status_name(c.status), human_bytes(c.bytes), c.window_instructions,
        c.window_compute, c.op_name.empty() ? "" : "; op_name ", c.op_name);
    doc.rect(x, top, w, kLane, svg::Paint::filled(colour), tooltip);
  }
  // Synchronous collectives: a red mark above the strip.
  for (const Schedule::Window& window : schedule.windows) {
    const Collective& c = analysis.collectives[window.collective];
    if (c.async || window.start < 0) continue;
    std::size_t i = static_cast<std::size_t>(window.start);
    std::size_t r = i / kPerRow;
    double cx = kMargin + kLabel + static_cast<double>(i - r * kPerRow) * cell + cell / 2;
    double top = row_top[r];
    std::vector<svg::Point> marker{{cx - 3, top - 7}, {cx + 3, top - 7}, {cx, top - 1}};
    doc.polygon(
        marker, svg::Paint::filled(kSyncColour),
        fmt::format("{} {} (synchronous, exposed): {}{}{}", c.kind, pct(c.start),
                    human_bytes(c.bytes), c.op_name.empty() ? "" : "; op_name ", c.op_name));
  }
  return doc.str();
}

}  // namespace rtb::hlo
