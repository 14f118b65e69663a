#include "rtb/logs/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <type_traits>

#include "rtb/base/error.h"
#include "rtb/base/json.h"
#include "rtb/base/stats.h"
#include "rtb/base/svg.h"

namespace rtb::logs::report {
namespace {

using steplog::RunLog;

// ---- Small helpers -----------------------------------------------------------------------------

std::string compress(const std::vector<std::int64_t>& values) {
  if (values.empty()) return "none";
  std::string out;
  for (std::size_t i = 0; i < values.size();) {
    std::size_t j = i;
    while (j + 1 < values.size() && values[j + 1] == values[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(values[i]) : fmt::format("{}-{}", values[i], values[j]);
    i = j + 1;
  }
  return out;
}

std::string stem(const std::string& source) {
  std::string name = source;
  std::size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  std::size_t dot = name.find_last_of('.');
  if (dot != std::string::npos && dot > 0) name = name.substr(0, dot);
  return name.empty() ? source : name;
}

// Seconds for people: 3 decimals from 1 s up (as the seed writes them), 4 significant digits
// below (so test-sized times stay readable).
std::string seconds(double value) {
  if (!std::isfinite(value)) return "?";
  if (value == 0.0) return "0";
  if (std::fabs(value) >= 1.0) return fmt::format("{:.3f}", value);
  return fmt::format("{:.4g}", value);
}

// A spread in the precision of the value it qualifies ("83.253 ± 0.112").
std::string spread(double value, double reference) {
  if (!std::isfinite(value)) return "?";
  if (std::fabs(reference) >= 1.0) return fmt::format("{:.3f}", value);
  return seconds(value);
}

// Small numbers as the seed writes them: 1.6e-4, 2.0e-3 (0 stays 0).
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

// Integers with thousands separators, as the seed writes throughput: 3,567.
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

double mean_of(const std::vector<double>& values) { return stats::mean(values); }

// Aligned text columns; column 0 is left-aligned, the others right-aligned unless marked.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<bool> left = {})
      : left_(std::move(left)) {
    rows_.push_back(std::move(header));
  }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string str() const {
    std::vector<std::size_t> width;
    for (const auto& row : rows_) {
      if (width.size() < row.size()) width.resize(row.size(), 0);
      for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line;
      for (std::size_t i = 0; i < row.size(); ++i) {
        bool left = i == 0 || (i < left_.size() && left_[i]);
        std::size_t pad = width[i] - row[i].size();
        if (i > 0) line += "  ";
        if (left) {
          line += row[i];
          if (i + 1 < row.size()) line += std::string(pad, ' ');
        } else {
          line += std::string(pad, ' ') + row[i];
        }
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> left_;
};

using Json = json::Writer;

// ---- Analysis ----------------------------------------------------------------------------------

std::vector<std::int64_t> logged_steps(const RunLog& log) {
  std::set<std::int64_t> steps;
  for (const steplog::StepRecord& record : log.steps) {
    if (record.seconds || !record.microbatch_s.empty()) steps.insert(record.step);
  }
  for (const steplog::StepTiming& timing : log.timings) steps.insert(timing.step);
  return {steps.begin(), steps.end()};
}

// Micro-batch positions (0-based) of a step with `count` micro-batches that the range selects.
std::vector<std::size_t> microbatch_positions(std::size_t count, const Options& options) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < count; ++i) {
    if (options.microbatches.contains(static_cast<std::int64_t>(i) + 1)) out.push_back(i);
  }
  // The default range 3..last leaves out the two micro-batches after the step boundary; a step
  // with fewer than three has no regular one, so all of it counts (as the driver does).
  if (out.empty() && !options.microbatches_given) {
    for (std::size_t i = 0; i < count; ++i) out.push_back(i);
  }
  return out;
}

// Chips of a bench run: BENCH_SUMMARY's, else tokens / (seconds * tokens_per_s_per_chip).
std::optional<double> bench_chips(const RunLog& log) {
  if (log.summary && log.summary->chips && *log.summary->chips > 0) {
    return static_cast<double>(*log.summary->chips);
  }
  for (const steplog::StepRecord& record : log.steps) {
    if (record.tokens && record.seconds && record.tokens_per_s_per_chip && *record.seconds > 0 &&
        *record.tokens_per_s_per_chip > 0) {
      double chips = *record.tokens / *record.seconds / *record.tokens_per_s_per_chip;
      if (std::isfinite(chips) && chips >= 0.5) return std::round(chips);
    }
  }
  return std::nullopt;
}

std::optional<MetricComparison> compare(const std::vector<double>& control,
                                        const std::vector<double>& variant, Statistic statistic,
                                        std::optional<double> noise_floor, const Options& options) {
  if (control.empty() || variant.empty()) return std::nullopt;
  if (!(compute(statistic, control) > 0.0)) return std::nullopt;
  MetricComparison out;
  out.stats = bootstrap_compare(control, variant, statistic, options.bootstrap);
  out.noise_floor = noise_floor;
  out.verdict = classify(out.stats, noise_floor);
  return out;
}

MetricSteps metric_steps(const RunLog& log, const Options& options) {
  MetricSteps out;
  for (const steplog::StepRecord& record : log.steps) {
    if (record.metrics.empty()) continue;
    if (options.steps && !options.steps->contains(record.step)) continue;
    out[record.step] = record.metrics;
  }
  return out;
}

MicrobatchTiming step_timing_mode(const steplog::StepRecord& record) {
  if (record.microbatch_timing == "device") return MicrobatchTiming::kDevice;
  if (record.microbatch_timing == "dispatch") return MicrobatchTiming::kDispatch;
  return MicrobatchTiming::kUnlabelled;
}

// How a run times its micro-batches, for people ("ctl times micro-batches at device completion").
std::string timing_phrase(MicrobatchTiming timing) {
  switch (timing) {
    case MicrobatchTiming::kDevice:
      return "at device completion";
    case MicrobatchTiming::kDispatch:
      return "by dispatch intervals";
    case MicrobatchTiming::kMixed:
      return "in mixed modes";
    case MicrobatchTiming::kUnlabelled:
      break;
  }
  return "without a label (older driver)";
}

std::string modes_text(const std::vector<MicrobatchTiming>& modes) {
  std::string out;
  for (MicrobatchTiming mode : modes) {
    out += (out.empty() ? "" : ", ") + std::string(microbatch_timing_name(mode));
  }
  return out;
}

// Why two runs' micro-batch times must not be compared, or "" when they may be.
std::string refusal(const RunAnalysis& control, const RunAnalysis& run) {
  if (!control.microbatch_timing || !run.microbatch_timing) return "";
  for (const RunAnalysis* side : {&control, &run}) {
    if (side->microbatch_timing == MicrobatchTiming::kMixed) {
      return fmt::format("not compared: {} mixes micro-batch timing modes across its steps ({})",
                         side->name, modes_text(side->microbatch_timings_seen));
    }
  }
  if (control.microbatch_timing == run.microbatch_timing) return "";
  return fmt::format("not compared: {} times micro-batches {}, {} {}", control.name,
                     timing_phrase(*control.microbatch_timing), run.name,
                     timing_phrase(*run.microbatch_timing));
}

std::string run_label(const RunAnalysis& run) {
  return run.partial ? run.name + " (partial)" : run.name;
}

}  // namespace

// ---- Range -------------------------------------------------------------------------------------

std::string Range::str() const {
  std::string a = first ? std::to_string(*first) : "first";
  std::string b = last ? std::to_string(*last) : "last";
  if (first && last && *first == *last) return a;
  return a + "-" + b;
}

Range parse_range(std::string_view text, std::string_view what) {
  auto number = [&](std::string_view part) -> std::int64_t {
    std::int64_t value = -1;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), value);
    if (ec != std::errc() || end != part.data() + part.size() || value < 0) {
      fail("{} {}: expected A-B, A-, A-last or A (non-negative integers)", what, text);
    }
    return value;
  };
  Range range;
  std::size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    range.first = range.last = number(text);
    return range;
  }
  range.first = number(text.substr(0, dash));
  std::string_view rest = text.substr(dash + 1);
  if (!rest.empty() && rest != "last") range.last = number(rest);
  if (range.last && *range.last < *range.first) {
    fail("{} {}: the range ends before it starts", what, text);
  }
  return range;
}

// ---- Report ------------------------------------------------------------------------------------

const char* microbatch_timing_name(MicrobatchTiming timing) {
  switch (timing) {
    case MicrobatchTiming::kDevice:
      return "device";
    case MicrobatchTiming::kDispatch:
      return "dispatch";
    case MicrobatchTiming::kMixed:
      return "mixed";
    case MicrobatchTiming::kUnlabelled:
      break;
  }
  return "unlabelled";
}

double padded_tokens_per_s_per_chip(std::int64_t rows, std::int64_t tokens_per_row,
                                    std::int64_t micro_steps, double mean_step_s, double chips) {
  return static_cast<double>(rows) * static_cast<double>(tokens_per_row) *
         static_cast<double>(micro_steps) / mean_step_s / chips;
}

Outcome Report::outcome() const {
  return outcome_of((numerics && !numerics->result.pass) || !slower_than_allowed.empty());
}

RunAnalysis analyze_run(const RunLog& log, const Options& options) {
  if (!log.has_step_lines()) {
    fail_at(log.source, 0,
            "no step timing lines (BENCH_STEP, TRAINER_STEP_TIMING or `Train step N - ...`) "
            "in {} lines",
            log.lines);
  }
  RunAnalysis run;
  run.name = log.name.empty() ? stem(log.source) : log.name;
  run.source = log.source;
  run.kind = log.kind;
  run.partial = log.partial;
  run.partial_reason = log.partial_reason;
  run.summary = log.summary;
  run.warnings = log.warnings;
  run.steps_logged = logged_steps(log);

  // The steps: the range given, else every logged step but the first (which compiles).
  std::set<std::int64_t> selected;
  for (std::int64_t step : run.steps_logged) {
    if (options.steps ? options.steps->contains(step) : step != run.steps_logged.front()) {
      selected.insert(step);
    }
  }
  if (!options.steps && run.steps_logged.size() == 1) selected.insert(run.steps_logged.front());
  if (options.steps && selected.empty()) {
    run.warnings.push_back(fmt::format("{}: no logged step in --steps {} (logged: {})", log.source,
                                       options.steps->str(), compress(run.steps_logged)));
  }
  if (options.steps && options.steps->first && options.steps->last) {
    std::vector<std::int64_t> absent;
    for (std::int64_t s = *options.steps->first; s <= *options.steps->last && absent.size() < 100;
         ++s) {
      if (!selected.count(s)) absent.push_back(s);
    }
    if (!absent.empty() && !selected.empty()) {
      run.warnings.push_back(fmt::format("{}: --steps {}: step{} {} not logged", log.source,
                                         options.steps->str(), absent.size() == 1 ? "" : "s",
                                         compress(absent)));
    }
  }

  // Profiled steps run slower under the profiler: out of every figure unless asked for.
  if (!options.include_profiled) {
    std::set<std::int64_t> profiled;
    for (const steplog::StepRecord& record : log.steps) {
      if (record.profiled) profiled.insert(record.step);
    }
    if (log.summary)
      profiled.insert(log.summary->profiled_steps.begin(), log.summary->profiled_steps.end());
    for (std::int64_t step : profiled) {
      if (selected.erase(step) > 0) run.profiled_left_out.push_back(step);
    }
    if (selected.empty() && !run.profiled_left_out.empty()) {
      run.warnings.push_back(
          fmt::format("{}: every selected step is profiled (step{} {}): no figures for this run; "
                      "--include-profiled uses them",
                      log.source, run.profiled_left_out.size() == 1 ? "" : "s",
                      compress(run.profiled_left_out)));
    }
  }

  // The first logged step: shown apart (it compiles), never in the default means.
  if (!run.steps_logged.empty()) {
    for (const steplog::StepRecord& record : log.steps) {
      if (record.step == run.steps_logged.front() && record.seconds) {
        run.first_step = RunAnalysis::FirstStep{record.step, *record.seconds};
      }
    }
  }
  if (!run.first_step && log.summary && log.summary->first_step_s) {
    run.first_step = RunAnalysis::FirstStep{std::nullopt, *log.summary->first_step_s};
  }

  // Seconds per optimizer step.
  std::vector<double> tokens, padded_tokens;
  for (const steplog::StepRecord& record : log.steps) {
    if (!selected.count(record.step) || !record.seconds) continue;
    run.steps_used.push_back(record.step);
    run.step_s.push_back(*record.seconds);
    if (record.tokens) tokens.push_back(*record.tokens);
    if (record.padded_tokens) padded_tokens.push_back(*record.padded_tokens);
  }
  if (!run.step_s.empty()) {
    run.step_mean = mean_of(run.step_s);
    run.step_sd = sample_stddev(run.step_s);
    run.step_ci = bootstrap_interval(run.step_s, Statistic::kMean, options.bootstrap);
  }

  // Micro-batches: the driver's times when the log has them, else device times.
  std::set<MicrobatchTiming> modes;
  for (const steplog::StepRecord& record : log.steps) {
    if (!selected.count(record.step) || record.microbatch_s.empty()) continue;
    run.microbatch_source = "BENCH_STEP";
    std::vector<std::size_t> positions = microbatch_positions(record.microbatch_s.size(), options);
    if (!positions.empty()) modes.insert(step_timing_mode(record));
    for (std::size_t i : positions) run.microbatch_s.push_back(record.microbatch_s[i]);
  }

  // The trainer timeline.
  TimelineSummary& timeline = run.timeline;
  for (const steplog::StepTiming& timing : log.timings) {
    if (!selected.count(timing.step)) continue;
    steplog::StepTimeline line = steplog::step_timeline(timing);
    ++timeline.steps;
    timeline.microbatches += line.mb.size();
    timeline.ready_known += line.ready_known;
    for (std::size_t i : microbatch_positions(line.mb.size(), options)) {
      if (line.mb[i].device_s) {
        timeline.device_s.push_back(*line.mb[i].device_s);
      } else {
        ++timeline.device_unknown;
      }
    }
    if (line.idle_s) {
      timeline.idle_s.push_back(*line.idle_s);
    } else if (!line.mb.empty()) {
      ++timeline.idle_unknown;
    }
    if (line.update) {
      if (line.update_s) {
        timeline.update_s.push_back(*line.update_s);
      } else {
        ++timeline.update_unknown;
      }
    }
    if (!line.has_prepare) {
      ++timeline.sync_not_applicable;
    } else if (line.sync_wait_s) {
      timeline.sync_wait_s.push_back(*line.sync_wait_s);
    } else {
      ++timeline.sync_unknown;
    }
  }
  if (run.microbatch_source.empty() && !timeline.device_s.empty()) {
    run.microbatch_source = "TRAINER_STEP_TIMING";
    run.microbatch_s = timeline.device_s;
    modes.insert(MicrobatchTiming::kDevice);  // ready times: the device's completion
  }
  if (!run.microbatch_s.empty()) {
    run.microbatch_timings_seen.assign(modes.begin(), modes.end());
    run.microbatch_timing = modes.size() == 1 ? *modes.begin() : MicrobatchTiming::kMixed;
  }
  if (!run.microbatch_s.empty()) {
    run.microbatch_median = stats::median(run.microbatch_s);
    run.microbatch_ci = bootstrap_interval(run.microbatch_s, Statistic::kMedian, options.bootstrap);
  }
  if (timeline.steps > 0 && timeline.ready_known == 0 && timeline.microbatches > 0) {
    run.warnings.push_back(fmt::format(
        "{}: TRAINER_STEP_TIMING has no `ready` times (the trainer publishes no readiness "
        "tokens): device times are unknown",
        log.source));
  }

  // Throughput (bench runs), per chip over the mean step time: the padded tokens of a step (the
  // seed's figure: BENCH_SUMMARY rows x tokens_per_row x micro_steps, else the steps'
  // padded_tokens) and the mean of the steps' real tokens.
  if (run.kind == steplog::LogKind::kBench && run.step_mean && *run.step_mean > 0) {
    std::optional<double> chips = bench_chips(log);
    if (chips && tokens.size() == run.step_s.size()) {
      run.real_tokens_per_s_per_chip = mean_of(tokens) / *run.step_mean / *chips;
    }
    const std::optional<steplog::BenchSummary>& summary = log.summary;
    if (!chips) {
      run.tokens_per_s_per_chip_unknown = "no chip count (BENCH_SUMMARY chips)";
    } else if (summary && summary->rows && summary->tokens_per_row && summary->micro_steps) {
      run.tokens_per_s_per_chip = padded_tokens_per_s_per_chip(
          *summary->rows, *summary->tokens_per_row, *summary->micro_steps, *run.step_mean, *chips);
    } else if (padded_tokens.size() == run.step_s.size()) {
      run.tokens_per_s_per_chip = mean_of(padded_tokens) / *run.step_mean / *chips;
    } else {
      run.tokens_per_s_per_chip_unknown =
          summary ? "its BENCH_SUMMARY has no rows and tokens_per_row (an older driver)"
                  : "no BENCH_SUMMARY and no padded_tokens in its steps";
    }
  }
  return run;
}

Report build_report(const Inputs& inputs, const Options& options) {
  options.bootstrap.validate();
  Report report;
  report.options = options;
  std::map<std::string, int> names;
  for (const RunLog& log : inputs.runs) {
    RunAnalysis run = analyze_run(log, options);
    if (names[run.name]++ > 0) run.name = fmt::format("{} ({})", run.name, run.source);
    report.runs.push_back(std::move(run));
  }

  if (inputs.control_pair) {
    RunAnalysis a = analyze_run(inputs.control_pair->first, options);
    RunAnalysis b = analyze_run(inputs.control_pair->second, options);
    NoiseFloor floor;
    floor.control_a = a.name;
    floor.control_b = b.name == a.name ? b.source : b.name;
    if (a.step_mean && b.step_mean && *a.step_mean > 0) {
      floor.step_rel = std::fabs(*b.step_mean / *a.step_mean - 1.0);
    }
    std::string pair_refusal = refusal(a, b);
    if (!pair_refusal.empty()) {
      report.warnings.push_back(
          fmt::format("--control-pair: no micro-batch noise floor: {}", pair_refusal));
    } else if (a.microbatch_median && b.microbatch_median && *a.microbatch_median > 0) {
      floor.microbatch_rel = std::fabs(*b.microbatch_median / *a.microbatch_median - 1.0);
    }
    for (const RunAnalysis* pair_run : {&a, &b}) {
      report.warnings.insert(report.warnings.end(), pair_run->warnings.begin(),
                             pair_run->warnings.end());
      if (pair_run->partial) {
        report.warnings.push_back(fmt::format("{}: control-pair run is partial: {}",
                                              pair_run->source, pair_run->partial_reason));
      }
    }
    report.noise_floor = floor;
  }

  for (std::size_t i = 1; i < report.runs.size(); ++i) {
    const RunAnalysis& control = report.runs.front();
    const RunAnalysis& run = report.runs[i];
    RunComparison comparison;
    comparison.run = run.name;
    comparison.control = control.name;
    std::optional<double> step_floor, mb_floor;
    if (report.noise_floor) {
      step_floor = report.noise_floor->step_rel;
      mb_floor = report.noise_floor->microbatch_rel;
    }
    comparison.step = compare(control.step_s, run.step_s, Statistic::kMean, step_floor, options);
    comparison.microbatch_not_compared = refusal(control, run);
    if (comparison.microbatch_not_compared.empty()) {
      comparison.microbatch =
          compare(control.microbatch_s, run.microbatch_s, Statistic::kMedian, mb_floor, options);
    }
    if (comparison.microbatch && control.microbatch_source != run.microbatch_source) {
      report.warnings.push_back(fmt::format(
          "{}: its micro-batch times come from {}, the control's from {}: not like for like",
          run.name, run.microbatch_source, control.microbatch_source));
    }
    if (options.fail_if_slower_pct) {
      double limit = *options.fail_if_slower_pct / 100.0;
      auto check = [&](const std::optional<MetricComparison>& metric, const char* what) {
        if (metric && metric->verdict == Verdict::kSlower && metric->stats.ratio - 1.0 > limit) {
          report.slower_than_allowed.push_back(
              fmt::format("{}: {} {} slower than {} (--fail-if-slower {})", run.name, what,
                          percent(metric->stats.ratio), control.name, *options.fail_if_slower_pct));
        }
      };
      check(comparison.step, "s/step");
      check(comparison.microbatch, "micro-batch");
    }
    report.comparisons.push_back(std::move(comparison));
  }

  if (!inputs.numerics.empty()) {
    if (inputs.numerics.size() != 3) fail("--numerics takes REF1 REF2 VARIANT");
    NumericsReport numerics;
    std::vector<MetricSteps> steps;
    std::vector<std::string> labels;
    for (const RunLog& log : inputs.numerics) {
      MetricSteps per_step = metric_steps(log, options);
      if (per_step.empty()) {
        fail_at(log.source, 0,
                "no per-step metrics (BENCH_STEP \"metrics\", `Train step N - loss: ...` or "
                "[StepMetrics step=N]){}",
                options.steps ? fmt::format(" in --steps {}", options.steps->str()) : "");
      }
      report.warnings.insert(report.warnings.end(), log.warnings.begin(), log.warnings.end());
      if (log.partial) {
        report.warnings.push_back(
            fmt::format("{}: numerics run is partial: {}", log.source, log.partial_reason));
      }
      steps.push_back(std::move(per_step));
      labels.push_back(log.name.empty() ? stem(log.source) : log.name);
    }
    numerics.reference_a = labels[0];
    numerics.reference_b = labels[1];
    numerics.variant = labels[2];
    try {
      numerics.result = evaluate_numerics(steps[0], steps[1], steps[2], inputs.gates);
    } catch (const Error& e) {
      fail("--numerics {} {} {}: {}", inputs.numerics[0].source, inputs.numerics[1].source,
           inputs.numerics[2].source, e.message());
    }
    report.numerics = std::move(numerics);
  }

  std::vector<std::string> warnings;
  for (const RunAnalysis& run : report.runs) {
    warnings.insert(warnings.end(), run.warnings.begin(), run.warnings.end());
  }
  warnings.insert(warnings.end(), report.warnings.begin(), report.warnings.end());
  // A file given twice (as a run and in --control-pair, say) warns once.
  std::set<std::string> seen;
  report.warnings.clear();
  for (std::string& warning : warnings) {
    if (seen.insert(warning).second) report.warnings.push_back(std::move(warning));
  }
  return report;
}

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
  std::string text = seconds(median ? stats::median(values) : mean_of(values));
  if (unknown > 0) text += fmt::format(" ({} unknown)", unknown);
  return text;
}

void format_numerics(const NumericsReport& numerics, std::string& out) {
  const NumericsResult& result = numerics.result;
  out +=
      fmt::format("\nnumerics: {} against the references {} and {} (steps {})\n", numerics.variant,
                  numerics.reference_a, numerics.reference_b, compress(result.steps));
  Table table(
      {"gate", "metric", "kind", "variant", "references' own", "limit", "worst step", "result"},
      {true, true, true, false, false, false, false, true});
  std::size_t failed = 0, enabled = 0;
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
    if (gate.status != GateResult::Status::kOff) ++enabled;
    if (gate.status == GateResult::Status::kFail || gate.status == GateResult::Status::kMissing) {
      ++failed;
    }
    std::string status = gate_status_name(gate.status);
    table.add({gate.name, metric, gate_kind_name(gate.kind), value(gate.deviation),
               finite ? "-" : value(gate.reference_noise), limit,
               gate.worst_step ? std::to_string(*gate.worst_step) : "-", status});
  }
  out += table.str();
  for (const GateResult& gate : result.gates) {
    if (!gate.detail.empty()) out += fmt::format("  {}: {}\n", gate.name, gate.detail);
  }
  if (failed == 0) {
    out += fmt::format("all {} gates pass\n", enabled);
  } else {
    std::string names;
    for (const GateResult& gate : result.gates) {
      if (gate.status == GateResult::Status::kFail || gate.status == GateResult::Status::kMissing) {
        names += (names.empty() ? "" : ", ") + gate.name;
      }
    }
    out += fmt::format("{} of {} gates fail: {}\n", failed, enabled, names);
  }
}

}  // namespace

std::string format_text(const Report& report) {
  std::string out;
  const Options& options = report.options;
  if (!report.runs.empty()) {
    out += fmt::format(
        "s/step: mean over {}; micro-batch: median of micro-batches {} of those steps; "
        "{:g}% bootstrap CIs ({} resamples, seed {})\n\n",
        steps_phrase(options), options.microbatches.str(), options.bootstrap.confidence * 100,
        options.bootstrap.resamples, options.bootstrap.seed);
    out +=
        "tok/s/chip: rows x tokens_per_row x micro-batches (padding included, the seed's figure) "
        "/ s/step / chips; real: the steps' real tokens / s/step / chips\n\n";
    Table runs(
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
      runs.add({label, steplog::log_kind_name(run.kind), compress(run.steps_used), step,
                ci_text(run.step_ci), mb, ci_text(run.microbatch_ci),
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
      switch (mode) {
        case MicrobatchTiming::kDevice:
          legend.push_back("device = each time runs to the device's completion of its call");
          break;
        case MicrobatchTiming::kDispatch:
          legend.push_back(
              "dispatch = host dispatch intervals (lag the device by up to two calls)");
          break;
        case MicrobatchTiming::kMixed:
          legend.push_back("mixed = the steps differ (compared with nothing)");
          break;
        case MicrobatchTiming::kUnlabelled:
          legend.push_back("unlabelled = the log does not say (older driver)");
          break;
      }
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
  }

  if (!report.comparisons.empty()) {
    out += fmt::format("\nagainst the control {}:\n", report.runs.front().name);
    Table table({"run", "s/step", "ratio", ci_title(options), "verdict", "micro-batch s", "ratio",
                 ci_title(options), "verdict"},
                {true, false, false, false, true, false, false, false, true});
    for (const RunComparison& c : report.comparisons) {
      std::vector<std::string> row = {c.run};
      for (const auto* metric : {&c.step, &c.microbatch}) {
        if (*metric) {
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
      }
      if (c.microbatch) {
        parts.push_back(
            fmt::format("{} -> {} s per regular micro-batch ({}, {})",
                        seconds(c.microbatch->stats.control), seconds(c.microbatch->stats.variant),
                        percent(c.microbatch->stats.ratio), verdict_label(c.microbatch->verdict)));
      } else if (!c.microbatch_not_compared.empty()) {
        parts.push_back("micro-batch times " + c.microbatch_not_compared);
      }
      if (parts.empty()) {
        out += fmt::format("{} against {}: nothing to compare\n", c.run, c.control);
      } else {
        out += fmt::format("{} against {}: {}\n", c.run, c.control,
                           parts.size() == 1 ? parts[0] : parts[0] + ", and " + parts[1]);
      }
    }
  }

  if (report.noise_floor) {
    const NoiseFloor& floor = report.noise_floor.value();
    out += fmt::format(
        "A/A noise floor ({} vs {}): {} per step, {} per micro-batch; smaller significant "
        "differences are reported as noise\n",
        floor.control_a, floor.control_b,
        floor.step_rel ? fmt::format("{:.3f}%", *floor.step_rel * 100) : "unknown",
        floor.microbatch_rel ? fmt::format("{:.3f}%", *floor.microbatch_rel * 100) : "unknown");
  }

  bool any_timeline = false;
  for (const RunAnalysis& run : report.runs) any_timeline |= run.timeline.steps > 0;
  if (any_timeline) {
    out += fmt::format("\ntrainer timeline (TRAINER_STEP_TIMING over the same steps):\n");
    Table table(
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
  return out;
}

// ---- JSON --------------------------------------------------------------------------------------

namespace {

void interval_fields(Json& j, const std::optional<Interval>& ci) {
  j.field("ci_low", ci ? std::optional<double>(ci->low) : std::nullopt);
  j.field("ci_high", ci ? std::optional<double>(ci->high) : std::nullopt);
}

void comparison_fields(Json& j, const std::optional<MetricComparison>& metric) {
  if (!metric) {
    j.key("control").null().key("value").null().key("ratio").null();
    j.key("ci_low").null().key("ci_high").null();
    j.key("diff_s").null().key("diff_ci_low").null().key("diff_ci_high").null();
    j.field("verdict", verdict_name(Verdict::kInsufficient));
    j.key("noise_floor").null();
    return;
  }
  const Comparison& s = metric->stats;
  j.field("control", s.control).field("value", s.variant).field("ratio", s.ratio);
  j.field("ci_low", s.ratio_ci.low).field("ci_high", s.ratio_ci.high);
  j.field("diff_s", s.diff).field("diff_ci_low", s.diff_ci.low);
  j.field("diff_ci_high", s.diff_ci.high);
  j.field("verdict", verdict_name(metric->verdict));
  j.field("noise_floor", metric->noise_floor);
}

void summary_stat(Json& j, std::string_view name, const std::vector<double>& values,
                  std::size_t unknown, bool median) {
  j.key(name).begin_object();
  if (values.empty()) {
    j.key(median ? "median" : "mean").null();
  } else {
    j.field(median ? "median" : "mean", median ? stats::median(values) : mean_of(values));
  }
  j.field("n", values.size()).field("unknown", unknown);
  j.end_object();
}

}  // namespace

std::string format_json(const Report& report) {
  const Options& options = report.options;
  Json j;
  j.begin_object();
  j.field("schema", "rtb.bench-report/1");
  j.key("options").begin_object();
  if (options.steps) {
    j.field("steps", options.steps->str());
  } else {
    j.field("steps", "all-but-first");
  }
  j.field("microbatches", options.microbatches.str());
  j.field("resamples", options.bootstrap.resamples);
  j.field("confidence", options.bootstrap.confidence);
  j.field("seed", static_cast<std::int64_t>(options.bootstrap.seed));
  j.field("fail_if_slower_pct", options.fail_if_slower_pct);
  j.field("include_profiled", options.include_profiled);
  j.end_object();

  j.key("runs").begin_array();
  for (const RunAnalysis& run : report.runs) {
    j.begin_object();
    j.field("name", run.name).field("source", run.source);
    j.field("format", steplog::log_kind_name(run.kind));
    j.field("partial", run.partial);
    j.key("partial_reason");
    run.partial ? j.value(run.partial_reason) : j.null();
    j.list("steps_logged", run.steps_logged);
    j.list("steps_used", run.steps_used);
    j.key("step_s").begin_object();
    j.field("mean", run.step_mean)
        .field("sd", run.step_mean ? std::optional<double>(run.step_sd) : std::nullopt);
    j.field("n", run.step_s.size());
    interval_fields(j, run.step_ci);
    j.list("values", run.step_s);
    j.end_object();
    j.key("microbatch_s").begin_object();
    j.field("median", run.microbatch_median).field("n", run.microbatch_s.size());
    interval_fields(j, run.microbatch_ci);
    j.key("source");
    run.microbatch_source.empty() ? j.null() : j.value(run.microbatch_source);
    j.end_object();
    j.key("microbatch_timing");
    run.microbatch_timing ? j.value(microbatch_timing_name(*run.microbatch_timing)) : j.null();
    j.list("profiled_steps_left_out", run.profiled_left_out);
    j.key("first_step");
    if (run.first_step) {
      j.begin_object();
      j.field("step", run.first_step->step).field("seconds", run.first_step->seconds);
      j.end_object();
    } else {
      j.null();
    }
    j.field("tokens_per_s_per_chip", run.tokens_per_s_per_chip);
    j.field("real_tokens_per_s_per_chip", run.real_tokens_per_s_per_chip);
    j.key("tokens_per_s_per_chip_unknown");
    run.tokens_per_s_per_chip_unknown.empty() ? j.null()
                                              : j.value(run.tokens_per_s_per_chip_unknown);
    const TimelineSummary& t = run.timeline;
    j.key("timeline").begin_object();
    j.field("steps", t.steps).field("microbatches", t.microbatches);
    j.field("ready_known", t.ready_known);
    summary_stat(j, "device_s", t.device_s, t.device_unknown, true);
    summary_stat(j, "idle_s_per_step", t.idle_s, t.idle_unknown, false);
    summary_stat(j, "update_s", t.update_s, t.update_unknown, false);
    j.key("sync_wait_s").begin_object();
    if (t.sync_wait_s.empty()) {
      j.key("mean").null();
    } else {
      j.field("mean", mean_of(t.sync_wait_s));
    }
    j.field("n", t.sync_wait_s.size()).field("unknown", t.sync_unknown);
    j.field("not_applicable", t.sync_not_applicable);
    j.end_object();
    j.end_object();
    j.key("summary");
    if (run.summary) {
      j.begin_object();
      j.field("mean_step_s", run.summary->mean_step_s);
      j.field("median_microbatch_s", run.summary->median_microbatch_s);
      j.field("tokens_per_s_per_chip", run.summary->tokens_per_s_per_chip);
      j.field("real_tokens_per_s_per_chip", run.summary->real_tokens_per_s_per_chip);
      j.field("chips", run.summary->chips);
      j.field("rows", run.summary->rows);
      j.field("tokens_per_row", run.summary->tokens_per_row);
      j.field("micro_steps", run.summary->micro_steps);
      j.field("first_step_s", run.summary->first_step_s);
      j.key("microbatch_timing");
      run.summary->microbatch_timing.empty() ? j.null() : j.value(run.summary->microbatch_timing);
      j.key("stage_boundary");
      if (const auto& stage = run.summary->stage_boundary) {
        auto text = [&](std::string_view key, const std::optional<std::string>& value) {
          j.key(key);
          value ? j.value(*value) : j.null();
        };
        j.begin_object();
        text("requested", stage->requested);
        text("resolved", stage->resolved);
        j.key("engaged");
        stage->engaged ? j.value(*stage->engaged) : j.null();
        j.list("staged_steps", stage->staged_steps);
        text("latched_off", stage->latched_off);
        j.end_object();
      } else {
        j.null();
      }
      j.end_object();
    } else {
      j.null();
    }
    j.list("warnings", run.warnings);
    j.end_object();
  }
  j.end_array();

  j.key("comparisons").begin_array();
  for (const RunComparison& c : report.comparisons) {
    j.begin_object();
    j.field("run", c.run).field("against", c.control);
    j.field("metric", "step_s");
    comparison_fields(j, c.step);
    j.key("microbatch");
    if (c.microbatch_not_compared.empty()) {
      j.begin_object();
      comparison_fields(j, c.microbatch);
      j.end_object();
      j.key("microbatch_not_compared").null();
    } else {
      j.null();
      j.field("microbatch_not_compared", c.microbatch_not_compared);
    }
    j.end_object();
  }
  j.end_array();

  j.key("noise_floor");
  if (report.noise_floor) {
    j.begin_object();
    j.field("control_a", report.noise_floor->control_a);
    j.field("control_b", report.noise_floor->control_b);
    j.field("step_rel", report.noise_floor->step_rel);
    j.field("microbatch_rel", report.noise_floor->microbatch_rel);
    j.end_object();
  } else {
    j.null();
  }

  j.key("numerics");
  if (report.numerics) {
    const NumericsReport& n = *report.numerics;
    j.begin_object();
    j.field("reference_a", n.reference_a).field("reference_b", n.reference_b);
    j.field("variant", n.variant);
    j.list("steps", n.result.steps);
    j.key("gates").begin_array();
    for (const GateResult& gate : n.result.gates) {
      j.begin_object();
      j.field("name", gate.name);
      j.key("metric");
      gate.metric.empty() ? j.null() : j.value(gate.metric);
      j.field("kind", gate_kind_name(gate.kind));
      j.field("limit", gate.limit);
      j.field("value", gate.deviation);
      j.field("references", gate.reference_noise);
      j.field("worst_step", gate.worst_step);
      j.field("steps", gate.steps);
      j.field("status", gate_status_name(gate.status));
      j.key("detail");
      gate.detail.empty() ? j.null() : j.value(gate.detail);
      j.end_object();
    }
    j.end_array();
    j.field("pass", n.result.pass);
    j.end_object();
  } else {
    j.null();
  }

  j.key("fail_if_slower");
  if (options.fail_if_slower_pct) {
    j.begin_object();
    j.field("pct", *options.fail_if_slower_pct);
    j.field("tripped", !report.slower_than_allowed.empty());
    j.list("messages", report.slower_than_allowed);
    j.end_object();
  } else {
    j.null();
  }
  j.list("warnings", report.warnings);
  j.field("exit_code", exit_code(report.outcome()));
  j.end_object();
  return j.str();
}

// ---- SVG ---------------------------------------------------------------------------------------

namespace {

double nice_tick(double span) {
  if (!(span > 0)) return 1.0;
  double raw = span / 6.0;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= factor * magnitude) return factor * magnitude;
  }
  return 10.0 * magnitude;
}

// The record to draw: `step` when given; else the last one among the steps the figures use, else
// the last one after the first (compiling) step, else the last one.
const steplog::StepTiming* pick_timing(const RunLog& log, const RunAnalysis& run,
                                       std::optional<std::int64_t> step) {
  if (step) {
    for (const steplog::StepTiming& timing : log.timings) {
      if (timing.step == *step) return &timing;
    }
    return nullptr;
  }
  auto last_where = [&](auto&& keep) -> const steplog::StepTiming* {
    for (auto it = log.timings.rbegin(); it != log.timings.rend(); ++it) {
      if (keep(*it)) return &*it;
    }
    return nullptr;
  };
  const steplog::StepTiming* chosen = last_where([&](const steplog::StepTiming& timing) {
    return std::find(run.steps_used.begin(), run.steps_used.end(), timing.step) !=
           run.steps_used.end();
  });
  if (chosen == nullptr && !run.steps_logged.empty()) {
    chosen = last_where(
        [&](const steplog::StepTiming& timing) { return timing.step > run.steps_logged.front(); });
  }
  if (chosen == nullptr && !log.timings.empty()) chosen = &log.timings.back();
  return chosen;
}

}  // namespace

std::string timeline_svg(const std::vector<RunLog>& logs, const Report& report,
                         std::optional<std::int64_t> step) {
  if (logs.size() != report.runs.size()) fail("timeline_svg: runs and logs differ in number");
  struct Lane {
    std::string name;
    std::optional<steplog::StepTimeline> line;
    std::string note;
  };
  std::vector<Lane> lanes;
  double span = 0;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    Lane lane;
    lane.name = report.runs[i].name;
    const steplog::StepTiming* timing = pick_timing(logs[i], report.runs[i], step);
    if (timing == nullptr) {
      lane.note = step ? fmt::format("no TRAINER_STEP_TIMING for step {}", *step)
                       : "no TRAINER_STEP_TIMING lines";
    } else {
      lane.line = steplog::step_timeline(*timing);
      span = std::max(span, lane.line->span_end);
      if (lane.line->ready_known == 0 && !lane.line->mb.empty()) {
        lane.note = "ready times not published: device time unknown";
      }
    }
    lanes.push_back(std::move(lane));
  }
  if (span <= 0) span = 1.0;

  const double left = 220, right = 30, top = 58, lane_height = 58, plot_width = 760;
  const double height = top + lane_height * static_cast<double>(lanes.size()) + 70;
  svg::Document doc(left + plot_width + right, height);
  doc.set_title("bench-report: micro-batch timeline");
  doc.set_background("#ffffff");
  auto x = [&](double t) { return left + plot_width * std::clamp(t / span, 0.0, 1.0); };
  auto width = [&](double a, double b) { return std::max(0.5, x(b) - x(a)); };

  doc.text(10, 20,
           step ? fmt::format("Trainer timeline of step {} (TRAINER_STEP_TIMING)", *step)
                : std::string("Trainer timeline of each run's last selected step "
                              "(TRAINER_STEP_TIMING)"),
           svg::Font::sized(14).with_bold());
  // Legend.
  struct Key {
    const char* label;
    const char* colour;
  };
  const Key keys[] = {{"dispatch (host)", "#9d9d9d"},
                      {"device time", "#4c78a8"},
                      {"idle", "#e45756"},
                      {"update", "#8e6bb8"},
                      {"weight-sync wait", "#f2a541"},
                      {"weight sync (prepare)", "#c9a227"},
                      {"ready unknown", "#e8e8e8"}};
  double legend_x = 10;
  for (const Key& key : keys) {
    doc.rect(legend_x, 30, 12, 10, svg::Paint::filled(key.colour).with_stroke("#666", 0.5));
    doc.text(legend_x + 16, 39, key.label, svg::Font::sized(11));
    legend_x += 30 + 6.5 * static_cast<double>(std::string_view(key.label).size());
  }

  for (std::size_t i = 0; i < lanes.size(); ++i) {
    const Lane& lane = lanes[i];
    double y = top + lane_height * static_cast<double>(i);
    doc.line(10, y + lane_height - 4, left + plot_width, y + lane_height - 4,
             svg::Paint::stroked("#dddddd"));
    doc.text(10, y + 22, lane.name, svg::Font::sized(12).with_bold());
    if (lane.line) {
      doc.text(10, y + 38, fmt::format("step {}", lane.line->step), svg::Font::sized(11));
    }
    if (!lane.note.empty()) {
      doc.text(left, y + 52, lane.note, svg::Font::sized(10).with_fill("#a33"));
    }
    if (!lane.line) continue;
    const steplog::StepTimeline& line = *lane.line;
    const double dispatch_y = y + 6, dispatch_h = 7, device_y = y + 16, device_h = 20;
    std::optional<double> previous_ready;
    for (std::size_t m = 0; m < line.mb.size(); ++m) {
      const steplog::MicroBatchSpan& mb = line.mb[m];
      if (mb.at.dispatch_begin && mb.at.dispatch_end) {
        doc.rect(x(*mb.at.dispatch_begin), dispatch_y,
                 width(*mb.at.dispatch_begin, *mb.at.dispatch_end), dispatch_h,
                 svg::Paint::filled("#9d9d9d"),
                 fmt::format("micro-batch {} dispatch: {} s", mb.index + 1,
                             seconds(*mb.at.dispatch_end - *mb.at.dispatch_begin)));
      }
      if (mb.idle_before_s && *mb.idle_before_s > 0 && previous_ready) {
        doc.rect(x(*previous_ready), device_y, width(*previous_ready, *mb.at.dispatch_begin),
                 device_h, svg::Paint::filled("#e45756"),
                 fmt::format("idle before micro-batch {}: {} s", mb.index + 1,
                             seconds(*mb.idle_before_s)));
      }
      if (mb.device_s && mb.at.ready) {
        double start = *mb.at.ready - *mb.device_s;
        doc.rect(
            x(start), device_y, width(start, *mb.at.ready), device_h,
            svg::Paint::filled(m % 2 == 0 ? "#4c78a8" : "#72a0cf").with_stroke("#ffffff", 0.5),
            fmt::format("micro-batch {}: {} s on the device", mb.index + 1, seconds(*mb.device_s)));
      } else if (mb.at.dispatch_end) {
        // Unknown device time: shade from this dispatch to the next event.
        double end = m + 1 < line.mb.size() && line.mb[m + 1].at.dispatch_begin
                         ? *line.mb[m + 1].at.dispatch_begin
                     : line.update && line.update->dispatch_begin ? *line.update->dispatch_begin
                                                                  : *mb.at.dispatch_end;
        doc.rect(x(*mb.at.dispatch_end), device_y, width(*mb.at.dispatch_end, end), device_h,
                 svg::Paint::filled("#e8e8e8").with_stroke("#bbbbbb", 0.5),
                 fmt::format("micro-batch {}: ready time not published", mb.index + 1));
      }
      previous_ready = mb.at.ready;
    }
    if (line.update) {
      const steplog::TimelineEvent& u = *line.update;
      if (u.dispatch_begin && u.dispatch_end) {
        doc.rect(x(*u.dispatch_begin), dispatch_y, width(*u.dispatch_begin, *u.dispatch_end),
                 dispatch_h, svg::Paint::filled("#9d9d9d"), "update dispatch");
      }
      if (line.update_idle_before_s && *line.update_idle_before_s > 0 && previous_ready &&
          u.dispatch_begin) {
        doc.rect(x(*previous_ready), device_y, width(*previous_ready, *u.dispatch_begin), device_h,
                 svg::Paint::filled("#e45756"),
                 fmt::format("idle before the update: {} s", seconds(*line.update_idle_before_s)));
      }
      if (u.ready && line.update_s) {
        double start = *u.ready - *line.update_s;
        doc.rect(x(start), device_y, width(start, *u.ready), device_h,
                 svg::Paint::filled("#8e6bb8"),
                 fmt::format("update: {} s on the device", seconds(*line.update_s)));
      }
    }
    if (line.prepare && line.prepare->dispatch_begin) {
      double recv = *line.prepare->dispatch_begin;
      if (line.sync_wait_s && *line.sync_wait_s > 0 && line.update && line.update->ready) {
        doc.rect(
            x(*line.update->ready), device_y + device_h + 3, width(*line.update->ready, recv), 6,
            svg::Paint::filled("#f2a541"),
            fmt::format("wait for the previous weight sync: {} s", seconds(*line.sync_wait_s)));
      }
      if (line.prepare->ready) {
        doc.rect(x(recv), device_y + device_h + 3, width(recv, *line.prepare->ready), 6,
                 svg::Paint::filled("#c9a227"), "prepare_weight_sync");
      }
    }
  }

  // Time axis.
  double axis_y = top + lane_height * static_cast<double>(lanes.size()) + 6;
  doc.line(left, axis_y, left + plot_width, axis_y, svg::Paint::stroked("#444444"));
  double tick = nice_tick(span);
  for (double t = 0; t <= span * 1.0001; t += tick) {
    doc.line(x(t), axis_y, x(t), axis_y + 5, svg::Paint::stroked("#444444"));
    doc.text(x(t), axis_y + 18, fmt::format("{:g}", t),
             svg::Font::sized(10).with_anchor(svg::Anchor::kMiddle));
  }
  doc.text(left + plot_width / 2, axis_y + 36,
           "seconds after the step's first dispatch (trainer clock)",
           svg::Font::sized(11).with_anchor(svg::Anchor::kMiddle));
  return doc.str();
}

}  // namespace rtb::logs::report
