#include "rtb/logs/report_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "rtb/base/error.h"
#include "rtb/base/stats.h"
#include "rtb/logs/report_format.h"
#include "rtb/logs/text_table.h"

namespace rtb::logs::report {
namespace {
std::string run_label(const RunAnalysis& run) {
  return run.partial ? run.name + " (partial)" : run.name;
}
}  // namespace

// ---- Text --------------------------------------------------------------------------------------

namespace {

const RunAnalysis& find_run(const Report& report, const std::string& name) {
  for (const RunAnalysis& run : report.runs) {
    if (run.name == name) return run;
  }
  fail("no run named {}", name);
}

std::string steps_phrase(const Options& options) {
  return options.steps ? "steps " + options.steps->str()
                       : "every step but the first (which compiles)";
}

std::string ci_title(const Options& options) {
  return fmt::format("{:g}% CI", options.bootstrap.confidence * 100);
}

std::string ci_text(const std::optional<Interval>& ci) {
  if (!ci) return "";
  return fmt::format("[{}, {}]", seconds(ci->low), seconds(ci->high));
}

std::string ratio_ci_text(const Interval& ci) {
  return fmt::format("[{:.4f}, {:.4f}]", ci.low, ci.high);
}

std::string timeline_cell(const std::vector<double>& values, std::size_t unknown, bool median) {
  if (values.empty()) return unknown > 0 ? "unknown" : "-";
  std::string text = seconds(median ? stats::median(values) : stats::mean(values));
  if (unknown > 0) text += fmt::format(" ({} unknown)", unknown);
  return text;
}

// "none: dropless by configuration: ...", "1,234 dropped (...)", "unknown: ...".
std::string dropping_text(const TokenDroppingStatus& status) {
  switch (status.verdict) {
    case DropVerdict::kNone:
      return "none: " + status.why;
    case DropVerdict::kDropped:
      return fmt::format("{} dropped: {}",
                         status.dropped_tokens ? grouped(*status.dropped_tokens) : "some",
                         status.why);
    case DropVerdict::kReplayed:
      return fmt::format("none dropped, {} replayed{} (each a whole extra forward/backward): {}",
                         status.replays ? grouped(static_cast<double>(*status.replays)) : "some",
                         status.replay_scope.empty() ? "" : " in " + status.replay_scope,
                         status.why);
    case DropVerdict::kNotMoe:
      return "none (not MoE): " + status.why;
    case DropVerdict::kUnknown:
    case DropVerdict::kNotLogged:
      break;
  }
  return "unknown: " + status.why;
}

// What a log-timestamp interval is, for the header.
constexpr const char* kLogTimestampFigure =
    "log-timestamp intervals, from one step's first log line to the next step's (host side: "
    "everything between steps, not a device time)";

// "the microsecond", "the second", "1e-4 s": what a timestamp with `digits` fraction digits
// resolves.
std::string resolution_words(int digits) {
  switch (digits) {
    case 0:
      return "the second";
    case 3:
      return "the millisecond";
    case 6:
      return "the microsecond";
    case 9:
      return "the nanosecond";
    default:
      return fmt::format("1e-{} s", digits);
  }
}

// "dpo: s/step from glog timestamps (to the microsecond): step 1, the first logged, has no
// interval (...); 3 repeated lines (...) counted once; steps 7-8 have no timestamped line: ...".
std::string log_timestamps_note(const RunAnalysis& run) {
  const steplog::LogTimestamps& stamps = *run.log_timestamps;
  std::string out = fmt::format(
      "{}: s/step from {} timestamps (to {}): step {}, the first logged, has no interval (what its "
      "line follows, the compile included, is not timed)",
      run.name, stamps.clock == "glog" ? "glog" : "dated", resolution_words(stamps.digits),
      stamps.first_step);
  if (stamps.repeated_lines > 0) {
    out += fmt::format("; {} repeated line{} (other processes or loggers) counted once",
                       grouped(static_cast<double>(stamps.repeated_lines)),
                       stamps.repeated_lines == 1 ? "" : "s");
  }
  if (!stamps.spread_steps.empty()) {
    out +=
        fmt::format("; step{} {} {} no timestamped line: an even share of {} gap's interval each",
                    stamps.spread_steps.size() == 1 ? "" : "s", compress(stamps.spread_steps),
                    stamps.spread_steps.size() == 1 ? "has" : "have",
                    stamps.spread_steps.size() == 1 ? "its" : "their");
  }
  return out + "\n";
}

std::string outlier_list(const Outliers& outliers) {
  std::vector<std::string> items;
  for (const OutlierStep& step : outliers.steps) {
    items.push_back(fmt::format("{} ({} s)", step.step, seconds(step.seconds)));
  }
  return fmt::format("{}", fmt::join(items, ", "));
}

// The notes on MaxText's figures, outlier steps and dropped tokens under the run table.
void format_run_notes(const Report& report, std::string& out) {
  bool any_maxtext = false;
  for (const RunAnalysis& run : report.runs) {
    if (run.kind != steplog::LogKind::kMaxText) continue;
    any_maxtext = true;
    auto tflops = run.tflops_per_device ? fmt::format("{:.1f}", *run.tflops_per_device)
                                        : std::string("not logged");
    auto tokens = run.tokens_per_s_per_device ? grouped(*run.tokens_per_s_per_device)
                                              : std::string("not logged");
    out += fmt::format(
        "{}: TFLOP/s/device {}, tokens/s/device {} (MaxText's per-step rates x "
        "seconds, summed, / seconds summed over the steps used: total work over "
        "total time)\n",
        run.name, tflops, tokens);
  }
  if (any_maxtext) {
    out +=
        "maxtext s/step: MaxText's `seconds`, the host's interval between step completions; with "
        "asynchronous dispatch single steps read far off (0.03 s beside 3.3 s), the mean over "
        "many steps is the pace\n";
  }
  for (const RunAnalysis& run : report.runs) {
    if (run.log_timestamps && run.step_timing == StepTiming::kLogTimestamps) {
      out += log_timestamps_note(run);
    }
  }
  for (const RunAnalysis& run : report.runs) {
    const Outliers& outliers = run.outliers;
    if (outliers.steps.empty()) continue;
    out += fmt::format(
        "{}: outlier step{} {} above {:g}x the median step ({} s) of the selected steps "
        "(checkpoint saves, evaluations, recompiles, the profiler): {}\n",
        run.name, outliers.steps.size() == 1 ? "" : "s", outlier_list(outliers), outliers.factor,
        seconds(outliers.median_s.value_or(0.0)),
        outliers.left_out ? "left out of the figures (--include-outliers keeps them)"
                          : "in the figures (--include-outliers)");
  }
  bool any_dropping = report.options.require_no_drops;
  for (const RunAnalysis& run : report.runs) {
    any_dropping |= run.token_dropping.verdict != DropVerdict::kNotLogged;
  }
  if (any_dropping) {
    out += "dropped tokens (MoE capacity):\n";
    for (const RunAnalysis& run : report.runs) {
      out += fmt::format("  {}: {}\n", run.name, dropping_text(run.token_dropping));
    }
  }
}

std::string optional_seconds(const std::optional<double>& value) {
  return value ? seconds(*value) : std::string("-");
}

// The set-up of each run (issue 25's fields), when any run logs one: older logs print as before.
void format_setups(const Report& report, std::string& out) {
  bool any = false;
  for (const RunAnalysis& run : report.runs) any |= run.setup.logged;
  if (!any) return;
  out += "\nset-up (a verdict names any difference from the control's):\n";
  std::vector<std::string> header = {"run"};
  for (const char* key : kSetupKeys) header.push_back(setup_label(key));
  header.insert(header.end(), {"train s/step", "boundary-free s/step (estimate)", "fence s"});
  TextTable table(header, {true, true, true, true, true, true, true, true, false, false, false});
  for (const RunAnalysis& run : report.runs) {
    std::vector<std::string> row = {run.name};
    for (const char* key : kSetupKeys) {
      const SetupItem* entry = run.setup.find(key);
      row.push_back(entry != nullptr && entry->shown ? *entry->shown : "not logged");
    }
    row.push_back(optional_seconds(run.setup.train_step_s));
    row.push_back(optional_seconds(run.setup.boundary_free_step_s));
    row.push_back(optional_seconds(run.setup.fence_s));
    table.add(std::move(row));
  }
  out += table.str();
  out +=
      "train s/step: the step minus its log-prob pass; boundary-free s/step: an ESTIMATE, each "
      "step with its first micro-batch replaced by its median regular micro-batch (what the step "
      "would take without the step-boundary bubble); fence s: the step-end wait measured once "
      "on an idle device\n";
  for (const RunAnalysis& run : report.runs) {
    if (!run.summary) continue;
    const steplog::BenchSummary& summary = *run.summary;
    if (summary.update_path && !summary.update_path->why.empty()) {
      out += fmt::format("{}: update path {}: {}\n", run.name, summary.update_path->ran,
                         summary.update_path->why);
    }
    if (summary.weights && !summary.weights->why.empty()) {
      out += fmt::format("{}: weights {}: {}\n", run.name, summary.weights->source,
                         summary.weights->why);
    }
    if (summary.microbatch_timing_why) {
      out += fmt::format("{}: micro-batch timing: {}\n", run.name, *summary.microbatch_timing_why);
    }
    if (summary.profiler) {
      out += fmt::format("{}: profiler by {}: {}\n", run.name, summary.profiler->by,
                         summary.profiler->why);
    }
  }
}

void format_numerics(const NumericsReport& numerics, std::string& out) {
  const NumericsResult& result = numerics.result;
  // A blank line separates it from the runs' tables, when there are any before it.
  if (!out.empty()) out += "\n";
  out += fmt::format("numerics: {} against the references {} and {} (steps {})\n", numerics.variant,
                     numerics.reference_a, numerics.reference_b, compress(result.steps));
  TextTable table({"gate", "metric", "kind", "variant", "references' own", "limit", "limit from",
                   "worst step", "result"},
                  {true, true, true, false, false, false, true, false, true});
  std::size_t failed = 0, enabled = 0;
  std::vector<std::string> not_evaluated;
  for (const GateResult& gate : result.gates) {
    bool finite = gate.kind == GateKind::kFinite;
    auto value = [&](const std::optional<double>& v) -> std::string {
      if (!v) return "-";
      if (finite) return fmt::format("{:.0f} steps", *v);
      return scientific(*v);
    };
    std::string limit = finite ? fmt::format("{:.0f} steps", gate.limit) : scientific(gate.limit);
    std::string metric = gate.metric.empty() ? "-" : gate.metric;
    if (finite && !gate.metric.empty()) {
      metric =
          fmt::format("{} metrics", std::count(gate.metric.begin(), gate.metric.end(), ',') + 1);
    }
    if (gate.status == GateResult::Status::kNotEvaluated) {
      not_evaluated.push_back(gate.name);
    } else if (gate.status != GateResult::Status::kOff) {
      ++enabled;
    }
    if (gate.status == GateResult::Status::kFail || gate.status == GateResult::Status::kMissing) {
      ++failed;
    }
    std::string status = gate_status_name(gate.status);
    table.add({gate.name, metric, gate_kind_name(gate.kind), value(gate.deviation),
               finite ? "-" : value(gate.reference_noise), limit, gate.limit_from,
               gate.worst_step ? std::to_string(*gate.worst_step) : "-", status});
  }
  out += table.str();
  for (const GateResult& gate : result.gates) {
    if (!gate.detail.empty()) out += fmt::format("  {}: {}\n", gate.name, gate.detail);
  }
  std::string unevaluated = not_evaluated.empty()
                                ? ""
                                : fmt::format(" ({} not evaluated: {})", not_evaluated.size(),
                                              fmt::join(not_evaluated, ", "));
  if (failed == 0) {
    out += fmt::format("all {} gates pass{}\n", enabled, unevaluated);
  } else {
    std::string names;
    for (const GateResult& gate : result.gates) {
      if (gate.status == GateResult::Status::kFail || gate.status == GateResult::Status::kMissing) {
        names += (names.empty() ? "" : ", ") + gate.name;
      }
    }
    out += fmt::format("{} of {} gates fail: {}{}\n", failed, enabled, names, unevaluated);
  }
}

}  // namespace

std::string format_text(const Report& report) {
  std::string out;
  const Options& options = report.options;
  if (!report.runs.empty()) {
    // Which runs' s/step are log-timestamp intervals: the header says what the figure is.
    std::vector<std::string> stamped;
    for (const RunAnalysis& run : report.runs) {
      if (run.step_timing == StepTiming::kLogTimestamps) stamped.push_back(run.name);
    }
    bool all_stamped = stamped.size() == report.runs.size();
    // The micro-batch column is described only where some run has micro-batch times.
    bool any_microbatches =
        std::any_of(report.runs.begin(), report.runs.end(),
                    [](const RunAnalysis& run) { return run.microbatch_median.has_value(); });
    std::string microbatch_legend =
        any_microbatches ? fmt::format("micro-batch: median of micro-batches {} of those steps; ",
                                       options.microbatches.str())
                         : "";
    out += fmt::format("s/step: {}mean over {}; {}{:g}% bootstrap CIs ({} resamples, seed {})\n",
                       all_stamped ? std::string(kLogTimestampFigure) + "; " : "",
                       steps_phrase(options), microbatch_legend, options.bootstrap.confidence * 100,
                       options.bootstrap.resamples, options.bootstrap.seed);
    if (!stamped.empty() && !all_stamped) {
      out += fmt::format("s/step of {}: {}; compared only with other log-timestamp runs\n",
                         fmt::join(stamped, ", "), kLogTimestampFigure);
    }
    out += "\n";
    out +=
        "tok/s/chip: rows x tokens_per_row x micro-batches (padding included, the seed's figure) "
        "/ s/step / chips; real: the steps' real tokens / s/step / chips\n\n";
    TextTable runs(
        {"run", "log", "steps", "s/step", ci_title(options), "micro-batch s", ci_title(options),
         "n", "mb timing", "tok/s/chip", "real tok/s/chip", "first step s"},
        {true, true, true, false, false, false, false, false, true});
    auto throughput = [](const std::optional<double>& value) {
      return value ? grouped(*value) : std::string("-");
    };
    for (std::size_t i = 0; i < report.runs.size(); ++i) {
      const RunAnalysis& run = report.runs[i];
      std::string label = run_label(run) + (i == 0 && report.runs.size() > 1 ? " (control)" : "");
      std::string step = run.step_mean ? fmt::format("{} ± {}", seconds(*run.step_mean),
                                                     spread(run.step_sd, *run.step_mean))
                                       : "unknown";
      std::string mb = run.microbatch_median ? seconds(*run.microbatch_median) : "unknown";
      std::string first = "-";
      if (run.first_step) {
        first = seconds(run.first_step->seconds);
        if (run.first_step->step) first += fmt::format(" (step {})", *run.first_step->step);
      }
      std::string steps = compress(run.steps_used);
      if (!run.outliers.steps.empty() && !run.outliers.left_out) {
        std::vector<std::int64_t> outlier_steps;
        for (const OutlierStep& outlier : run.outliers.steps) outlier_steps.push_back(outlier.step);
        steps += fmt::format(" (outliers {})", compress(outlier_steps));
      }
      runs.add({label, steplog::log_kind_name(run.kind), steps, step, ci_text(run.step_ci), mb,
                ci_text(run.microbatch_ci),
                run.microbatch_s.empty() ? "0" : std::to_string(run.microbatch_s.size()),
                run.microbatch_timing ? microbatch_timing_name(*run.microbatch_timing) : "-",
                throughput(run.tokens_per_s_per_chip), throughput(run.real_tokens_per_s_per_chip),
                first});
    }
    out += runs.str();

    // Notes, one line each: the timing modes present, profiled steps, unknown throughput.
    std::set<MicrobatchTiming> modes;
    for (const RunAnalysis& run : report.runs) {
      if (run.microbatch_timing) modes.insert(*run.microbatch_timing);
    }
    std::vector<std::string> legend;
    for (MicrobatchTiming mode : modes) {
      legend.push_back(
          fmt::format("{} = {}", microbatch_timing_name(mode), microbatch_timing_meaning(mode)));
    }
    out +=
        "first step s: the first logged step, which includes the compile (not in the default "
        "means)\n";
    if (!legend.empty()) out += "mb timing: " + fmt::format("{}", fmt::join(legend, "; ")) + "\n";
    for (const RunAnalysis& run : report.runs) {
      if (run.profiled_left_out.empty()) continue;
      out += fmt::format(
          "{}: profiled step{} {} left out of the figures (--include-profiled "
          "keeps them)\n",
          run.name, run.profiled_left_out.size() == 1 ? "" : "s", compress(run.profiled_left_out));
    }
    std::map<std::string, std::vector<std::string>> unknown_throughput;  // reason -> runs
    for (const RunAnalysis& run : report.runs) {
      if (!run.tokens_per_s_per_chip_unknown.empty()) {
        unknown_throughput[run.tokens_per_s_per_chip_unknown].push_back(run.name);
      }
    }
    for (const auto& [reason, names] : unknown_throughput) {
      out += fmt::format("tok/s/chip unknown for {}: {}\n", fmt::join(names, ", "), reason);
    }
    for (const RunAnalysis& run : report.runs) {
      if (!run.microbatch_final_left_out) continue;
      out += fmt::format(
          "{}: each step's final micro-batch is short (final_rows {} < rows {}): left out of the "
          "regular micro-batch median, as the driver's (--microbatches keeps it)\n",
          run.name, run.summary->final_rows.value_or(0), run.summary->rows.value_or(0));
    }
    format_run_notes(report, out);
    format_setups(report, out);
  }

  if (!report.comparisons.empty()) {
    out += fmt::format("\nagainst the control {}:\n", report.runs.front().name);
    bool setups = false;
    for (const RunComparison& c : report.comparisons) setups |= c.setup.evaluated;
    std::vector<std::string> header = {"run",     "s/step",        "ratio", ci_title(options),
                                       "verdict", "micro-batch s", "ratio", ci_title(options),
                                       "verdict"};
    std::vector<bool> left = {true, false, false, false, true, false, false, false, true};
    if (setups) {
      header.push_back("set-up");
      left.push_back(true);
    }
    TextTable table(header, left);
    for (const RunComparison& c : report.comparisons) {
      std::vector<std::string> row = {c.run};
      for (const auto* metric : {&c.step, &c.microbatch}) {
        if (metric == &c.step && !c.step_not_compared.empty()) {
          row.insert(row.end(), {"not compared (step timings differ)", "-", "-", "-"});
        } else if (*metric) {
          const Comparison& s = (*metric)->stats;
          row.push_back(fmt::format("{} -> {} ({})", seconds(s.control), seconds(s.variant),
                                    percent(s.ratio)));
          row.push_back(fmt::format("{:.4f}", s.ratio));
          row.push_back(ratio_ci_text(s.ratio_ci));
          row.push_back(verdict_label((*metric)->verdict));
        } else if (metric == &c.microbatch && !c.microbatch_not_compared.empty()) {
          row.insert(row.end(), {"not compared (timing modes differ)", "-", "-", "-"});
        } else {
          row.insert(row.end(), {"unknown", "-", "-", "-"});
        }
      }
      if (setups) row.push_back(c.setup.evaluated ? c.setup.text() : "not logged");
      table.add(std::move(row));
    }
    out += table.str();
    out += "\n";
    for (const RunComparison& c : report.comparisons) {
      std::vector<std::string> parts;
      if (c.step) {
        std::string control_steps = compress(report.runs.front().steps_used);
        std::string run_steps = compress(find_run(report, c.run).steps_used);
        parts.push_back(fmt::format(
            "{} -> {} s per optimizer step, mean of steps {} ({}, {})",
            seconds(c.step->stats.control), seconds(c.step->stats.variant),
            control_steps == run_steps ? control_steps : control_steps + " / " + run_steps,
            percent(c.step->stats.ratio), verdict_label(c.step->verdict)));
      } else if (!c.step_not_compared.empty()) {
        parts.push_back("step times " + c.step_not_compared);
      }
      if (c.microbatch) {
        parts.push_back(
            fmt::format("{} -> {} s per regular micro-batch ({}, {})",
                        seconds(c.microbatch->stats.control), seconds(c.microbatch->stats.variant),
                        percent(c.microbatch->stats.ratio), verdict_label(c.microbatch->verdict)));
      } else if (!c.microbatch_not_compared.empty()) {
        parts.push_back("micro-batch times " + c.microbatch_not_compared);
      }
      std::string setup = c.setup.evaluated ? "; set-up " + c.setup.text() : "";
      if (parts.empty()) {
        out += fmt::format("{} against {}: nothing to compare{}\n", c.run, c.control, setup);
      } else {
        out += fmt::format("{} against {}: {}{}\n", c.run, c.control,
                           parts.size() == 1 ? parts[0] : parts[0] + ", and " + parts[1], setup);
      }
    }
  }

  if (report.noise_floor) {
    const NoiseFloor& floor = report.noise_floor.value();
    out += fmt::format(
        "A/A noise floor ({} vs {}): {} per step, {} per micro-batch; smaller significant "
        "differences are reported as noise{}\n",
        floor.control_a, floor.control_b,
        floor.step_rel ? fmt::format("{:.3f}%", *floor.step_rel * 100) : "unknown",
        floor.microbatch_rel ? fmt::format("{:.3f}%", *floor.microbatch_rel * 100) : "unknown",
        floor.setup.evaluated ? "; set-up " + floor.setup.text() : "");
  }

  bool any_timeline = false;
  for (const RunAnalysis& run : report.runs) any_timeline |= run.timeline.steps > 0;
  if (any_timeline) {
    out += fmt::format("\ntrainer timeline (TRAINER_STEP_TIMING over the same steps):\n");
    TextTable table(
        {"run", "device s/micro-batch", "idle s/step", "update s", "sync wait s", "ready times"});
    for (const RunAnalysis& run : report.runs) {
      const TimelineSummary& t = run.timeline;
      if (t.steps == 0) {
        table.add({run.name, "no TRAINER_STEP_TIMING", "", "", "", ""});
        continue;
      }
      std::string sync = t.sync_wait_s.empty() && t.sync_unknown == 0
                             ? "n/a (no sync)"
                             : timeline_cell(t.sync_wait_s, t.sync_unknown, false);
      std::string ready = fmt::format("{}/{}", t.ready_known, t.microbatches);
      if (t.ready_known == 0 && t.microbatches > 0) ready += " (not published)";
      table.add({run.name, timeline_cell(t.device_s, t.device_unknown, true),
                 timeline_cell(t.idle_s, t.idle_unknown, false),
                 timeline_cell(t.update_s, t.update_unknown, false), sync, ready});
    }
    out += table.str();
  }

  bool any_partial = false;
  for (const RunAnalysis& run : report.runs) {
    if (!run.partial) continue;
    if (!any_partial) out += "\n";
    any_partial = true;
    out += fmt::format("{} is partial: {}; its figures use the {} step{} it logged\n", run.name,
                       run.partial_reason, run.steps_logged.size(),
                       run.steps_logged.size() == 1 ? "" : "s");
  }

  if (report.numerics) format_numerics(*report.numerics, out);

  if (!report.slower_than_allowed.empty()) {
    out += "\n";
    for (const std::string& line : report.slower_than_allowed) out += "FAIL: " + line + "\n";
  }
  if (!report.drops_not_ruled_out.empty()) {
    out += "\n";
    for (const std::string& line : report.drops_not_ruled_out) out += "FAIL: " + line + "\n";
  }
  if (!report.setups_differ.empty()) {
    out += "\n";
    for (const std::string& line : report.setups_differ) out += "FAIL: " + line + "\n";
  }
  return out;
}

}  // namespace rtb::logs::report
