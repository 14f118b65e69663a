#include "rtb/logs/memlog_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "rtb/base/io.h"
#include "rtb/base/json.h"
#include "rtb/logs/text_table.h"

namespace rtb::logs {
namespace {

std::string gib_cell(std::optional<long long> bytes) {
  return bytes ? fmt::format("{:.2f}", static_cast<double>(*bytes) / kBytesPerGiB) : "-";
}

std::string delta_gib(std::optional<long long> a, std::optional<long long> b) {
  if (!a || !b) return "";
  return fmt::format("{:+.2f}", static_cast<double>(*b - *a) / kBytesPerGiB);
}

std::string number_cell(std::optional<double> value) {
  return value ? fmt::format("{:.4g}", *value) : "-";
}

std::string delta_number(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || !std::isfinite(*a) || !std::isfinite(*b)) return "";
  return fmt::format("{:+.4g}", *b - *a);
}

std::string oom_summary(const MemLog& log) {
  if (log.oom_lines == 0) return "-";
  // The first report that gives numbers, else the first.
  const OomReport* best = &log.ooms.front();
  for (const OomReport& oom : log.ooms) {
    if (oom.required) {
      best = &oom;
      break;
    }
  }
  std::string text = fmt::format("line {}: ", best->line);
  std::string space = best->memory_space.empty() ? "memory" : best->memory_space;
  // Sizes in the unit the log printed them in; a second size in the same unit omits it.
  auto size = [](const std::optional<LoggedSize>& s) { return format_logged_size(*s); };
  auto same_unit_size = [&](const std::optional<LoggedSize>& s, const LoggedSize& first) {
    std::string out = size(s);
    return s->unit == first.unit && s->unit > 0 ? out.substr(0, out.rfind(' ')) : out;
  };
  bool runtime = best->kind == OomKind::kAllocate || best->kind == OomKind::kReserve;
  if (runtime && best->required) {
    if (!best->memory_space.empty()) text += best->memory_space + ": ";
    text += best->kind == OomKind::kAllocate
                ? "allocating " + size(best->required) + " failed"
                : "reserving " + size(best->required) + " for a program failed";
    if (best->free) text += ", " + size(best->free) + " free";
    if (best->reserved) text += ", " + size(best->reserved) + " reserved";
    if (best->reservable) text += ", " + size(best->reservable) + " reservable";
  } else if (best->required && best->available) {
    text += fmt::format("{} {} needed, {} available", space, size(best->required),
                        same_unit_size(best->available, *best->required));
  } else {
    text += "out of memory";
    if (!best->memory_space.empty()) text += " (" + best->memory_space + ")";
  }
  if (log.oom_lines > 1) text += fmt::format(" [{} lines]", log.oom_lines);
  return text;
}

std::string verdict_text(const LogVerdict& verdict, const MemLog& log) {
  if (verdict.oom) return "DOES NOT FIT (out of memory reported)";
  if (!verdict.fits) return "unknown";
  if (verdict.disagreement) {
    return *verdict.fits ? "fits (measured usage; the estimate says it does not)"
                         : "DOES NOT FIT (measured usage; the estimate says it fits)";
  }
  if (*verdict.fits) return "fits";
  std::string names;
  for (std::size_t i = 0; i < verdict.programs.size(); ++i) {
    if (verdict.programs[i].fits == false)
      names += (names.empty() ? "" : ", ") + log.programs[i].name;
  }
  return "DOES NOT FIT (" + names + ")";
}

struct Row {
  std::string label;
  std::vector<std::string> cells;   // one per log
  std::vector<std::string> deltas;  // one per log after the first
};

const ProgramMemory* find_program(const MemLog& log, const std::string& name, std::size_t* index) {
  for (std::size_t i = 0; i < log.programs.size(); ++i) {
    if (log.programs[i].name == name) {
      if (index) *index = i;
      return &log.programs[i];
    }
  }
  return nullptr;
}

std::vector<std::string> program_names(const Summary& summary) {
  std::vector<std::string> names;
  for (const MemLog& log : summary.logs) {
    for (const ProgramMemory& p : log.programs) {
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
    }
  }
  return names;
}

// Byte counts as the Writer takes them.
std::optional<std::int64_t> bytes(std::optional<long long> value) {
  if (!value) return std::nullopt;
  return static_cast<std::int64_t>(*value);
}

std::optional<std::int64_t> bytes(const std::optional<LoggedSize>& value) {
  if (!value) return std::nullopt;
  return static_cast<std::int64_t>(value->bytes);
}

double gib(long long bytes) { return static_cast<double>(bytes) / kBytesPerGiB; }

// The sentence naming a disagreement between MaxText's estimate and libtpu's measurement.
std::string disagreement_note(const MemLog& log, const LogVerdict& verdict) {
  const EstimateDisagreement& d = *verdict.disagreement;
  const ProgramMemory& estimate = log.programs[d.estimate];
  const ProgramMemory& measured = log.programs[d.measured];
  return fmt::format(
      "MaxText's compile-time estimate for {} (line {}) is {:.2f} GiB, {} the {:.2f} GiB HBM "
      "per device, but libtpu measured {:.2f} GiB for the largest program it loaded (line {}), "
      "which {}: the verdict follows the measurement (a compile-time estimate can be off)",
      estimate.name, estimate.line, gib(estimate.need()), d.measured_fits ? "more than" : "within",
      verdict.hbm->gib, gib(measured.need()), measured.line,
      d.measured_fits ? "fits" : "does not fit");
}

// GiB with four decimals: stable figures to diff between runs.
std::string json_fixed(std::optional<double> value) {
  return value ? fmt::format("{:.4f}", *value) : "null";
}

std::string json_gib(std::optional<long long> bytes) {
  return json_fixed(bytes ? std::optional<double>(static_cast<double>(*bytes) / kBytesPerGiB)
                          : std::nullopt);
}

using Bytes = std::optional<long long>;
constexpr json::Writer::Layout kOneLine = json::Writer::Layout::kOneLine;

// The byte rows of a program in the table, in order; host rows that are zero in every log (no
// host offload) are left out.
struct ByteRow {
  const char* label;
  Bytes (*get)(const ProgramMemory&);
  bool hide_if_zero;
};
constexpr ByteRow kByteRows[] = {
    {"argument", [](const ProgramMemory& p) -> Bytes { return p.argument; }, false},
    {"output", [](const ProgramMemory& p) -> Bytes { return p.output; }, false},
    {"alias", [](const ProgramMemory& p) -> Bytes { return p.alias; }, false},
    {"temp", [](const ProgramMemory& p) -> Bytes { return p.temp; }, false},
    {"generated code", [](const ProgramMemory& p) -> Bytes { return p.generated_code; }, false},
    {"host argument", [](const ProgramMemory& p) -> Bytes { return p.host_argument; }, true},
    {"host output", [](const ProgramMemory& p) -> Bytes { return p.host_output; }, true},
    {"host alias", [](const ProgramMemory& p) -> Bytes { return p.host_alias; }, true},
    {"host temp", [](const ProgramMemory& p) -> Bytes { return p.host_temp; }, false},
    {"resident", [](const ProgramMemory& p) -> Bytes { return p.resident; }, false},
    {"+state", [](const ProgramMemory& p) -> Bytes { return p.state; }, false},
};

}  // namespace

std::string format_summary_table(const Summary& summary) {
  const std::size_t n = summary.logs.size();
  std::vector<Row> rows;
  auto add = [&](std::string label, auto cell, auto delta) {
    Row row{std::move(label), {}, {}};
    for (std::size_t i = 0; i < n; ++i) row.cells.push_back(cell(i));
    for (std::size_t i = 1; i < n; ++i) row.deltas.push_back(delta(i));
    rows.push_back(std::move(row));
  };
  auto no_delta = [](std::size_t) { return std::string(); };
  add(
      "kind", [&](std::size_t i) { return std::string(memlog_kind_name(summary.logs[i].kind)); },
      no_delta);
  add(
      "HBM per device GiB",
      [&](std::size_t i) {
        const auto& hbm = summary.verdicts[i].hbm;
        return hbm ? fmt::format("{:.2f} ({})", hbm->gib, hbm->source) : std::string("-");
      },
      no_delta);
  for (const std::string& name : program_names(summary)) {
    rows.push_back({name, std::vector<std::string>(n), {}});
    rows.back().deltas.assign(n > 0 ? n - 1 : 0, "");
    auto program = [&](std::size_t i) { return find_program(summary.logs[i], name, nullptr); };
    auto bytes_row = [&](const std::string& label, auto getter, bool skip_if_zero) {
      bool present = false, nonzero = false;
      for (std::size_t i = 0; i < n; ++i) {
        if (const ProgramMemory* p = program(i); p && getter(*p)) {
          present = true;
          nonzero = nonzero || *getter(*p) != 0;
        }
      }
      if (!present || (skip_if_zero && !nonzero)) return;
      auto value = [&](std::size_t i) -> std::optional<long long> {
        const ProgramMemory* p = program(i);
        return p ? getter(*p) : std::nullopt;
      };
      add(
          "  " + label, [&](std::size_t i) { return gib_cell(value(i)); },
          [&](std::size_t i) { return delta_gib(value(0), value(i)); });
    };
    for (const ByteRow& byte_row : kByteRows) {
      bytes_row(byte_row.label, byte_row.get, byte_row.hide_if_zero);
    }
    bool any_state = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (const ProgramMemory* p = program(i); p && p->state) any_state = true;
    }
    if (any_state) {
      bytes_row(
          "need", [](const ProgramMemory& p) -> Bytes { return p.need(); }, false);
    }
    auto verdict_of = [&](std::size_t i) -> const ProgramVerdict* {
      std::size_t index = 0;
      return find_program(summary.logs[i], name, &index) ? &summary.verdicts[i].programs[index]
                                                         : nullptr;
    };
    add(
        "  headroom",
        [&](std::size_t i) {
          const ProgramVerdict* v = verdict_of(i);
          return v && v->headroom_gib ? fmt::format("{:.2f}", *v->headroom_gib) : std::string("-");
        },
        [&](std::size_t i) {
          const ProgramVerdict* a = verdict_of(0);
          const ProgramVerdict* b = verdict_of(i);
          if (!a || !b || !a->headroom_gib || !b->headroom_gib) return std::string();
          return fmt::format("{:+.2f}", *b->headroom_gib - *a->headroom_gib);
        });
    add(
        "  fits",
        [&](std::size_t i) {
          const ProgramVerdict* v = verdict_of(i);
          if (!v || !v->fits) return std::string("-");
          std::string cell = *v->fits ? "yes" : "NO";
          return v->decides ? cell : cell + " (estimate; the measured usage decides)";
        },
        no_delta);
    auto cost_row = [&](const std::string& label, std::optional<double> CostAnalysis::*field) {
      auto value = [&](std::size_t i) -> std::optional<double> {
        const ProgramMemory* p = program(i);
        if (!p || !p->cost) return std::nullopt;
        return (*p->cost).*field;
      };
      bool present = false;
      for (std::size_t i = 0; i < n; ++i) present = present || value(i).has_value();
      if (!present) return;
      add(
          "  " + label, [&](std::size_t i) { return number_cell(value(i)); },
          [&](std::size_t i) { return delta_number(value(0), value(i)); });
    };
    cost_row("flops", &CostAnalysis::flops);
    cost_row("bytes accessed", &CostAnalysis::bytes_accessed);
    cost_row("transcendentals", &CostAnalysis::transcendentals);
    bool any_count = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (const ProgramMemory* p = program(i); p && p->source == ProgramSource::kTpuProgramUsage)
        any_count = true;
    }
    if (any_count) {
      add(
          "  programs (largest shown)",
          [&](std::size_t i) {
            const ProgramMemory* p = program(i);
            return p ? std::to_string(p->count) : std::string("-");
          },
          no_delta);
    }
  }
  bool any_peak = std::any_of(summary.logs.begin(), summary.logs.end(),
                              [](const MemLog& log) { return log.device_peak.has_value(); });
  if (any_peak) {
    add(
        "MaxText device peak GiB",
        [&](std::size_t i) { return gib_cell(summary.logs[i].device_peak); },
        [&](std::size_t i) {
          return delta_gib(summary.logs[0].device_peak, summary.logs[i].device_peak);
        });
  }
  add(
      "out of memory", [&](std::size_t i) { return oom_summary(summary.logs[i]); }, no_delta);
  add(
      "verdict", [&](std::size_t i) { return verdict_text(summary.verdicts[i], summary.logs[i]); },
      no_delta);

  // The header names each log and each delta; every column is left-aligned.
  std::vector<std::string> header{"log"};
  for (const MemLog& log : summary.logs) header.push_back(display_name(log.source));
  for (std::size_t i = 1; i < n; ++i)
    header.push_back("delta " + display_name(summary.logs[i].source));
  std::vector<bool> left(header.size(), true);
  TextTable table(std::move(header), std::move(left));
  for (Row& row : rows) {
    std::vector<std::string> cells{std::move(row.label)};
    cells.insert(cells.end(), row.cells.begin(), row.cells.end());
    cells.insert(cells.end(), row.deltas.begin(), row.deltas.end());
    table.add(std::move(cells));
  }
  std::string out = table.str();
  for (std::size_t i = 0; i < n; ++i) {
    if (summary.verdicts[i].disagreement)
      out += fmt::format("{}: {}\n", display_name(summary.logs[i].source),
                         disagreement_note(summary.logs[i], summary.verdicts[i]));
  }
  for (const MemLog& log : summary.logs) {
    for (const std::string& note : log.notes())
      out += fmt::format("{}: {}\n", display_name(log.source), note);
  }
  return out;
}

std::string format_summary_json(const Summary& summary) {
  json::Writer j;
  j.begin_object();
  j.field("schema", "rtb.aot-summarize/1");
  write_summary_fields(j, summary);
  j.end_object();
  return std::move(j).str();
}

void write_summary_fields(json::Writer& j, const Summary& summary) {
  Outcome outcome = summary.outcome();
  j.field("exit_code", exit_code(outcome));
  j.key("error");
  summary.error ? j.value(std::string_view(summary.error->what())) : j.null();
  j.key("fits");
  outcome == Outcome::kError ? j.null() : j.value(outcome == Outcome::kPass);
  j.key("logs").begin_array();
  for (std::size_t i = 0; i < summary.logs.size(); ++i) {
    const MemLog& log = summary.logs[i];
    const LogVerdict& verdict = summary.verdicts[i];
    j.begin_object();
    j.field("path", display_name(log.source));
    j.field("kind", memlog_kind_id(log.kind));
    j.field("hbm_gib_per_device",
            verdict.hbm ? std::optional<double>(verdict.hbm->gib) : std::nullopt);
    j.field("hbm_source",
            verdict.hbm ? std::optional<std::string>(verdict.hbm->source) : std::nullopt);
    j.field("compile_topology", log.compile_topology);
    j.field("fits", verdict.fits);
    j.key("estimate_disagreement");
    if (verdict.disagreement) {
      const EstimateDisagreement& d = *verdict.disagreement;
      const ProgramMemory& estimate = log.programs[d.estimate];
      const ProgramMemory& measured = log.programs[d.measured];
      j.begin_object(kOneLine);
      j.field("decided_by", "measured");
      j.field("estimate_program", estimate.name).field("estimate_line", estimate.line);
      j.field("estimated_need_bytes", bytes(estimate.need()));
      j.field("estimate_fits", !d.measured_fits);
      j.wrap().field("measured_program", measured.name).field("measured_line", measured.line);
      j.field("measured_need_bytes", bytes(measured.need()));
      j.field("measured_fits", d.measured_fits);
      j.field("note", disagreement_note(log, verdict));
      j.end_object();
    } else {
      j.null();
    }
    j.key("device_peak_gib").raw(json_gib(log.device_peak));
    j.key("programs").begin_array();
    for (std::size_t k = 0; k < log.programs.size(); ++k) {
      const ProgramMemory& p = log.programs[k];
      const ProgramVerdict& pv = verdict.programs[k];
      j.begin_object(kOneLine);
      j.field("name", p.name).field("line", p.line).field("source", program_source_id(p.source));
      j.wrap().key("bytes").begin_object(kOneLine);
      j.field("argument", bytes(p.argument)).field("output", bytes(p.output));
      j.field("alias", bytes(p.alias)).field("temp", bytes(p.temp));
      j.field("generated_code", bytes(p.generated_code));
      j.field("host_argument", bytes(p.host_argument)).field("host_output", bytes(p.host_output));
      j.field("host_alias", bytes(p.host_alias)).field("host_temp", bytes(p.host_temp));
      j.field("host_generated_code", bytes(p.host_generated_code));
      j.field("resident", bytes(p.resident)).field("state", bytes(p.state));
      j.field("host_state", bytes(p.host_state)).field("need", bytes(p.need()));
      j.end_object();
      j.wrap().key("resident_gib").raw(json_gib(p.resident));
      j.key("need_gib").raw(json_gib(p.need()));
      j.key("headroom_gib").raw(json_fixed(pv.headroom_gib));
      j.field("fits", pv.fits).field("decides", pv.decides);
      j.wrap().key("cost");
      if (p.cost) {
        j.begin_object(kOneLine);
        j.field("flops", p.cost->flops).field("bytes_accessed", p.cost->bytes_accessed);
        j.field("transcendentals", p.cost->transcendentals);
        j.field("optimal_seconds", p.cost->optimal_seconds);
        j.end_object();
      } else {
        j.null();
      }
      if (p.source == ProgramSource::kTpuProgramUsage) {
        j.wrap().field("count", p.count).field("capacity_bytes", bytes(p.capacity));
      }
      j.end_object();
    }
    j.end_array();
    j.key("oom").begin_array();
    for (const OomReport& oom : log.ooms) {
      j.begin_object(kOneLine);
      j.field("line", oom.line).field("kind", oom_kind_id(oom.kind));
      j.key("program");
      oom.program.empty() ? j.null() : j.value(oom.program);
      j.key("memory_space");
      oom.memory_space.empty() ? j.null() : j.value(oom.memory_space);
      j.field("required_bytes", bytes(oom.required));
      j.field("available_bytes", bytes(oom.available)).field("free_bytes", bytes(oom.free));
      j.field("reserved_bytes", bytes(oom.reserved));
      j.field("reservable_bytes", bytes(oom.reservable));
      j.field("text", oom.text);
      j.end_object();
    }
    j.end_array();
    j.field("oom_lines", log.oom_lines);
    auto string_list = [&](std::string_view name, const std::vector<std::string>& items) {
      j.key(name).begin_array(kOneLine);
      for (const std::string& item : items) j.value(item);
      j.end_array();
    };
    string_list("notes", log.notes());
    string_list("problems", log.problems());
    write_json(j, "diagnostics", log.diagnostics);
    j.end_object();
  }
  j.end_array();
  // Deltas of each further log against the first, per program both have.
  j.key("deltas").begin_array();
  for (std::size_t i = 1; i < summary.logs.size(); ++i) {
    j.begin_object(kOneLine);
    j.field("log", display_name(summary.logs[i].source));
    j.field("against", display_name(summary.logs[0].source));
    j.key("programs").begin_array(json::Writer::Layout::kIndented);
    for (const ProgramMemory& b : summary.logs[i].programs) {
      std::size_t ia = 0, ib = 0;
      const ProgramMemory* a = find_program(summary.logs[0], b.name, &ia);
      find_program(summary.logs[i], b.name, &ib);
      if (!a) continue;
      auto diff = [](std::optional<long long> x, std::optional<long long> y) {
        return x && y ? bytes(*y - *x) : std::nullopt;
      };
      auto cost_diff = [&](std::optional<double> CostAnalysis::*field) -> std::optional<double> {
        if (!a->cost || !b.cost) return std::nullopt;
        auto x = (*a->cost).*field;
        auto y = (*b.cost).*field;
        if (!x || !y) return std::nullopt;
        return *y - *x;
      };
      const auto& ha = summary.verdicts[0].programs[ia].headroom_gib;
      const auto& hb = summary.verdicts[i].programs[ib].headroom_gib;
      j.begin_object(kOneLine);
      j.field("name", b.name);
      j.key("bytes").begin_object(kOneLine);
      j.field("argument", diff(a->argument, b.argument)).field("output", diff(a->output, b.output));
      j.field("alias", diff(a->alias, b.alias)).field("temp", diff(a->temp, b.temp));
      j.field("resident", bytes(b.resident - a->resident));
      j.field("need", bytes(b.need() - a->need()));
      j.end_object();
      j.key("headroom_gib")
          .raw(json_fixed(ha && hb ? std::optional<double>(*hb - *ha) : std::nullopt));
      j.field("flops", cost_diff(&CostAnalysis::flops));
      j.field("bytes_accessed", cost_diff(&CostAnalysis::bytes_accessed));
      j.field("transcendentals", cost_diff(&CostAnalysis::transcendentals));
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array();
}

}  // namespace rtb::logs
