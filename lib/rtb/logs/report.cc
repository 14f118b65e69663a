#include "rtb/logs/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include "rtb/base/error.h"
#include "rtb/base/stats.h"
#include "rtb/logs/report_format.h"

namespace rtb::logs::report {
namespace {

using steplog::RunLog;

std::string stem(const std::string& source) {
  std::string name = source;
  std::size_t slash = name.find_last_of('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  std::size_t dot = name.find_last_of('.');
  if (dot != std::string::npos && dot > 0) name = name.substr(0, dot);
  return name.empty() ? source : name;
}

// ---- Analysis ----------------------------------------------------------------------------------

// The words for each timing mode: its name (JSON and the table), how a run times its
// micro-batches, and what the mode means.
struct TimingWords {
  MicrobatchTiming timing;
  const char* name;
  const char* phrase;
  const char* meaning;
};
constexpr TimingWords kTimingWords[] = {
    {MicrobatchTiming::kDevice, "device", "at device completion",
     "each time runs to the device's completion of its call"},
    {MicrobatchTiming::kDispatch, "dispatch", "by dispatch intervals",
     "host dispatch intervals (lag the device by up to two calls)"},
    {MicrobatchTiming::kMixed, "mixed", "in mixed modes",
     "the steps differ (compared with nothing)"},
    {MicrobatchTiming::kUnlabelled, "unlabelled", "without a label (older driver)",
     "the log does not say (older driver)"},
};

const TimingWords& timing_words(MicrobatchTiming timing) {
  for (const TimingWords& words : kTimingWords) {
    if (words.timing == timing) return words;
  }
  return kTimingWords[std::size(kTimingWords) - 1];
}

std::vector<std::int64_t> logged_steps(const RunLog& log) {
  std::set<std::int64_t> steps;
  for (const steplog::StepRecord& record : log.steps) {
    if (record.seconds || !record.microbatch_s.empty()) steps.insert(record.step);
  }
  for (const steplog::StepTiming& timing : log.timings) steps.insert(timing.step);
  // A log-timestamp run's first timestamped step has a line but no interval: it is the first
  // logged step, which the default leaves out.
  if (log.log_timestamps) steps.insert(log.log_timestamps->first_step);
  return {steps.begin(), steps.end()};
}

// The words for each step timing: its name (JSON), how a run times its steps, and what it is.
struct StepTimingWords {
  StepTiming timing;
  const char* seconds_from;  // steplog::StepRecord::seconds_from
  const char* name;
  const char* phrase;
};
constexpr StepTimingWords kStepTimingWords[] = {
    {StepTiming::kDevice, "BENCH_STEP", "device", "on the device (BENCH_STEP seconds)"},
    {StepTiming::kOrchestrator, "Train step", "orchestrator", "by the orchestrator's step_time"},
    {StepTiming::kMaxText, "completed step", "maxtext",
     "by MaxText's host intervals between step completions"},
    {StepTiming::kLogTimestamps, "log timestamps", "log-timestamps",
     "by log-timestamp intervals (host side)"},
    {StepTiming::kMixed, "", "mixed", "from mixed sources"},
};

const StepTimingWords& step_timing_words(StepTiming timing) {
  for (const StepTimingWords& words : kStepTimingWords) {
    if (words.timing == timing) return words;
  }
  return kStepTimingWords[std::size(kStepTimingWords) - 1];
}

// How the steps used were timed; nullopt when none has a time.
std::optional<StepTiming> step_timing_of(const RunLog& log, const std::vector<std::int64_t>& used) {
  std::set<std::int64_t> wanted(used.begin(), used.end());
  std::optional<StepTiming> found;
  for (const steplog::StepRecord& record : log.steps) {
    if (!wanted.count(record.step) || !record.seconds) continue;
    StepTiming timing = StepTiming::kMixed;
    for (const StepTimingWords& words : kStepTimingWords) {
      if (record.seconds_from == words.seconds_from) timing = words.timing;
    }
    if (found && *found != timing) return StepTiming::kMixed;
    found = timing;
  }
  return found;
}

// Why two runs' step times must not be compared, or "" when they may be: log-timestamp intervals
// (host time between two steps' log lines) compare only with each other.
std::string step_refusal(const RunAnalysis& control, const RunAnalysis& run) {
  if (!control.step_timing || !run.step_timing) return "";
  if (*control.step_timing == *run.step_timing) return "";
  if (*control.step_timing != StepTiming::kLogTimestamps &&
      *run.step_timing != StepTiming::kLogTimestamps) {
    return "";
  }
  return fmt::format("not compared: {} times steps {}, {} {}", control.name,
                     step_timing_words(*control.step_timing).phrase, run.name,
                     step_timing_words(*run.step_timing).phrase);
}

// Micro-batch positions (0-based) of a step with `count` micro-batches that the range selects.
// `short_final`: the step's last micro-batch holds fewer rows than the others (BENCH_SUMMARY
// final_rows < rows); the default range leaves it out, as the driver's regular median does.
std::vector<std::size_t> microbatch_positions(std::size_t count, const Options& options,
                                              bool short_final = false) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < count; ++i) {
    if (short_final && !options.microbatches_given && i + 1 == count) continue;
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
std::string timing_phrase(MicrobatchTiming timing) { return timing_words(timing).phrase; }

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

// ---- Outliers, MaxText rates, dropped tokens ---------------------------------------------------

// The selected steps slower than factor x their median (a checkpoint save, a recompile, the
// profiler). Only slow ones: a fast step is real time too (asynchronous dispatch gives a short
// interval after a long one; together they are the pace).
Outliers find_outliers(const RunLog& log, const std::set<std::int64_t>& selected, double factor) {
  Outliers out;
  out.factor = factor;
  std::vector<OutlierStep> timed;
  for (const steplog::StepRecord& record : log.steps) {
    if (selected.count(record.step) && record.seconds) {
      timed.push_back({record.step, *record.seconds});
    }
  }
  if (timed.empty()) return out;
  std::vector<double> times;
  for (const OutlierStep& step : timed) times.push_back(step.seconds);
  out.median_s = stats::median(times);
  // Fewer than three steps have no median worth judging the others by.
  if (timed.size() < 3) return out;
  for (const OutlierStep& step : timed) {
    if (step.seconds > factor * *out.median_s) out.steps.push_back(step);
  }
  return out;
}

// sum(rate x seconds) / sum(seconds) over the steps used: the work done over the time taken, so
// a 0.03 s interval after asynchronous dispatch weighs 0.03 s, not as much as a whole step.
std::optional<double> work_over_time(const RunLog& log, const std::vector<std::int64_t>& used,
                                     std::optional<double> steplog::StepRecord::*rate) {
  std::set<std::int64_t> wanted(used.begin(), used.end());
  double work = 0.0, time = 0.0;
  std::size_t counted = 0;
  for (const steplog::StepRecord& record : log.steps) {
    if (!wanted.count(record.step) || !record.seconds) continue;
    if (!(record.*rate)) return std::nullopt;
    work += *(record.*rate) * *record.seconds;
    time += *record.seconds;
    ++counted;
  }
  if (counted == 0 || !(time > 0)) return std::nullopt;
  return work / time;
}

struct DropWords {
  DropVerdict verdict;
  const char* name;
};
constexpr DropWords kDropWords[] = {
    {DropVerdict::kNone, "none"},         {DropVerdict::kDropped, "dropped"},
    {DropVerdict::kReplayed, "replayed"}, {DropVerdict::kUnknown, "unknown"},
    {DropVerdict::kNotMoe, "not-moe"},    {DropVerdict::kNotLogged, "not-logged"},
};

TokenDroppingStatus token_dropping_status(const RunLog& log) {
  TokenDroppingStatus out;
  if (log.summary && log.summary->token_dropping) {
    const steplog::TokenDropping& logged = *log.summary->token_dropping;
    out.source = "BENCH_SUMMARY";
    out.dropped_tokens = logged.dropped_tokens;
    out.counted_steps =
        static_cast<std::size_t>(std::max<std::int64_t>(0, logged.counted_steps.value_or(0)));
    out.why = logged.why;
    out.replays = logged.replays;
    out.verdict = DropVerdict::kUnknown;
    bool known = false;
    for (const DropWords& words : kDropWords) {
      if (logged.verdict == words.name && words.verdict != DropVerdict::kNotLogged) {
        out.verdict = words.verdict;
        known = true;
      }
    }
    if (!known) {
      out.why = fmt::format("verdict \"{}\" is not one this reader knows{}", logged.verdict,
                            logged.why.empty() ? "" : ": " + logged.why);
    }
    return out;
  }
  std::size_t timed = 0;
  double total = 0.0;
  for (const steplog::StepRecord& record : log.steps) {
    if (record.seconds) ++timed;
    if (record.dropped_tokens) {
      ++out.counted_steps;
      total += *record.dropped_tokens;
    }
  }
  if (out.counted_steps == 0) {
    out.why =
        "the log does not say (no BENCH_SUMMARY token_dropping, no BENCH_STEP dropped_tokens)";
    return out;
  }
  out.source = "BENCH_STEP";
  out.dropped_tokens = total;
  if (total > 0) {
    out.verdict = DropVerdict::kDropped;
    out.why = fmt::format("counted by the trainer in {} step{}", out.counted_steps,
                          out.counted_steps == 1 ? "" : "s");
  } else if (out.counted_steps >= timed) {
    out.verdict = DropVerdict::kNone;
    out.why = "counted zero by the trainer in every step";
  } else {
    out.verdict = DropVerdict::kUnknown;
    out.why = fmt::format("counted zero in {} of {} steps only", out.counted_steps, timed);
  }
  return out;
}

// "ab-var dropped 1,234 tokens (why)" or "ab-var cannot show it dropped none: why".
std::string drop_problem(const RunAnalysis& run) {
  const TokenDroppingStatus& status = run.token_dropping;
  if (status.verdict == DropVerdict::kDropped) {
    return fmt::format("{} dropped {} tokens ({})", run.name,
                       status.dropped_tokens ? grouped(*status.dropped_tokens) : "some",
                       status.why);
  }
  return fmt::format("{} cannot show it dropped no tokens: {}", run.name, status.why);
}

// A set-up difference between two compared arms: a warning, and under --require-same-setup a
// failure; an arm that does not log its set-up cannot be compared (exit 2 under that option).
void note_setup_difference(Report& report, const Options& options, const std::string& run,
                           const std::string& control, const SetupDifference& difference) {
  if (options.require_same_setup && (!difference.evaluated || !difference.unknown.empty())) {
    fail("--require-same-setup: {} against {}: {}", run, control,
         difference.evaluated
             ? "set-up unknown: " + fmt::format("{}", fmt::join(difference.unknown, ", "))
             : std::string("neither log has the set-up fields (drivers older than issue 25)"));
  }
  if (difference.differs.empty()) return;
  std::string what = fmt::format("{} against {}: set-up {}", run, control, difference.text());
  report.diagnostics.push_back({Severity::kWarning, "",
                                what + " (an A/B of that on purpose is fine; otherwise the verdict "
                                       "measures more than the change)"});
  if (options.require_same_setup) report.setups_differ.push_back(what + " (--require-same-setup)");
}

// Numerics gates compare the gradients of one set of weights: refused across arms whose
// BENCH_SUMMARY weights differ (random initialization against a checkpoint, two checkpoints).
void refuse_numerics_across_weights(const std::vector<RunLog>& logs,
                                    const std::vector<std::string>& labels) {
  std::optional<std::size_t> first;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    if (!logs[i].summary || !logs[i].summary->weights) continue;
    const steplog::Weights& w = *logs[i].summary->weights;
    if (!first) {
      first = i;
      continue;
    }
    const steplog::Weights& v = *logs[*first].summary->weights;
    if (w.source != v.source || w.path != v.path) {
      auto describe = [](const steplog::Weights& x) {
        return x.path ? fmt::format("{} {}", x.source, *x.path) : x.source;
      };
      fail(
          "--numerics: {} ran with {} weights and {} with {}: gradients of different weights "
          "are not comparable",
          labels[*first], describe(v), labels[i], describe(w));
    }
  }
}

// Per numerics run, its BENCH_SUMMARY's word that it reports no gradient norm (`reported:
// false`), with its `why`; nullopt for a run that says nothing (an old log) or reports one.
UnreportedMetrics unreported_grad_norm(const std::vector<RunLog>& logs) {
  UnreportedMetrics out;
  for (std::size_t i = 0; i < logs.size() && i < out.size(); ++i) {
    const auto& summary = logs[i].summary;
    if (summary && summary->grad_norm && !summary->grad_norm->reported) {
      out[i] = summary->grad_norm->why;
    }
  }
  return out;
}

// A gate not evaluated (no run logs its metric): the runs' BENCH_SUMMARY grad_norm says why.
void explain_unevaluated_gates(const std::vector<RunLog>& logs, NumericsResult& result) {
  for (GateResult& gate : result.gates) {
    if (gate.status != GateResult::Status::kNotEvaluated || gate.name != "grad_norm") continue;
    for (const RunLog& log : logs) {
      if (log.summary && log.summary->grad_norm && !log.summary->grad_norm->reported &&
          !log.summary->grad_norm->why.empty()) {
        gate.detail += fmt::format(" ({}: {})", log.name.empty() ? stem(log.source) : log.name,
                                   log.summary->grad_norm->why);
        break;
      }
    }
  }
}

}  // namespace

// A warning about one run's log as a whole (where: the log).
void warn_about(RunAnalysis& run, const RunLog& log, std::string message) {
  run.diagnostics.push_back({Severity::kWarning, where_of(log.source), std::move(message)});
}

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

const char* microbatch_timing_name(MicrobatchTiming timing) { return timing_words(timing).name; }

const char* step_timing_name(StepTiming timing) { return step_timing_words(timing).name; }

const char* drop_verdict_name(DropVerdict verdict) {
  for (const DropWords& words : kDropWords) {
    if (words.verdict == verdict) return words.name;
  }
  return "not-logged";
}

const char* microbatch_timing_meaning(MicrobatchTiming timing) {
  return timing_words(timing).meaning;
}

double padded_tokens_per_s_per_chip(std::int64_t rows, std::int64_t tokens_per_row,
                                    std::int64_t micro_steps, double mean_step_s, double chips) {
  return static_cast<double>(rows) * static_cast<double>(tokens_per_row) *
         static_cast<double>(micro_steps) / mean_step_s / chips;
}

Outcome Report::outcome() const {
  return outcome_of((numerics && !numerics->result.pass) || !slower_than_allowed.empty() ||
                    !drops_not_ruled_out.empty() || !setups_differ.empty());
}

RunAnalysis analyze_run(const RunLog& log, const Options& options) {
  if (!log.has_step_lines()) {
    fail_at(log.source, 0,
            "no step timing lines (BENCH_STEP, TRAINER_STEP_TIMING, `Train step N - ...` or "
            "MaxText's `completed step: N`) in {} lines",
            log.lines);
  }
  bool timed = std::any_of(log.steps.begin(), log.steps.end(),
                           [](const steplog::StepRecord& record) { return record.seconds; });
  if (log.kind == steplog::LogKind::kTunixPeft && !timed) {
    fail_at(log.source, 0,
            "a Tunix PEFT log: losses of {} step{} but no step times ({}): nothing to time; its "
            "losses can be gated with --numerics REF1 REF2 VARIANT",
            log.steps.size(), log.steps.size() == 1 ? "" : "s",
            log.log_timestamps
                ? "fewer than two of its `Train step N training loss:` lines carry a log "
                  "timestamp, or their timestamps give no interval"
                : "its `Train step N training loss:` lines carry no duration and no log "
                  "timestamp");
  }
  RunAnalysis run;
  run.name = log.name.empty() ? stem(log.source) : log.name;
  run.source = log.source;
  run.kind = log.kind;
  run.partial = log.partial;
  run.partial_reason = log.partial_reason;
  run.summary = log.summary;
  run.diagnostics = log.diagnostics;
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
    warn_about(run, log,
               fmt::format("no logged step in --steps {} (logged: {})", options.steps->str(),
                           compress(run.steps_logged)));
  }
  if (options.steps && options.steps->first && options.steps->last) {
    std::vector<std::int64_t> absent;
    for (std::int64_t s = *options.steps->first; s <= *options.steps->last && absent.size() < 100;
         ++s) {
      if (!selected.count(s)) absent.push_back(s);
    }
    if (!absent.empty() && !selected.empty()) {
      warn_about(run, log,
                 fmt::format("--steps {}: step{} {} not logged", options.steps->str(),
                             absent.size() == 1 ? "" : "s", compress(absent)));
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
      warn_about(run, log,
                 fmt::format("every selected step is profiled (step{} {}): no figures for this "
                             "run; --include-profiled uses them",
                             run.profiled_left_out.size() == 1 ? "" : "s",
                             compress(run.profiled_left_out)));
    }
  }

  // Outliers: always named; left out of every figure (micro-batches too) unless asked for.
  run.outliers = find_outliers(log, selected, options.outlier_factor);
  if (!options.include_outliers && !run.outliers.steps.empty()) {
    run.outliers.left_out = true;
    for (const OutlierStep& step : run.outliers.steps) selected.erase(step.step);
  }
  run.token_dropping = token_dropping_status(log);

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
  run.step_timing = step_timing_of(log, run.steps_used);
  run.log_timestamps = log.log_timestamps;
  if (!run.step_s.empty()) {
    run.step_mean = stats::mean(run.step_s);
    run.step_sd = sample_stddev(run.step_s);
    run.step_ci = bootstrap_interval(run.step_s, Statistic::kMean, options.bootstrap);
  }
  if (run.kind == steplog::LogKind::kMaxText) {
    run.tflops_per_device =
        work_over_time(log, run.steps_used, &steplog::StepRecord::tflops_per_device);
    run.tokens_per_s_per_device =
        work_over_time(log, run.steps_used, &steplog::StepRecord::tokens_per_s_per_device);
  }

  // Micro-batches: the driver's times when the log has them, else device times.
  const bool short_final = log.summary && log.summary->final_rows && log.summary->rows &&
                           *log.summary->final_rows < *log.summary->rows;
  std::set<MicrobatchTiming> modes;
  for (const steplog::StepRecord& record : log.steps) {
    if (!selected.count(record.step) || record.microbatch_s.empty()) continue;
    run.microbatch_source = "BENCH_STEP";
    std::vector<std::size_t> positions =
        microbatch_positions(record.microbatch_s.size(), options, short_final);
    // With fewer than four, nothing regular is left and the step counts whole (see above).
    if (short_final && !options.microbatches_given && record.microbatch_s.size() >= 4) {
      run.microbatch_final_left_out = true;
    }
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
    for (std::size_t i : microbatch_positions(line.mb.size(), options, short_final)) {
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
    warn_about(run, log,
               "TRAINER_STEP_TIMING has no `ready` times (the trainer publishes no readiness "
               "tokens): device times are unknown");
  }

  // Throughput (bench runs), per chip over the mean step time: the padded tokens of a step (the
  // seed's figure: BENCH_SUMMARY rows x tokens_per_row x micro_steps, else the steps'
  // padded_tokens) and the mean of the steps' real tokens.
  if (run.kind == steplog::LogKind::kBench && run.step_mean && *run.step_mean > 0) {
    std::optional<double> chips = bench_chips(log);
    if (chips && tokens.size() == run.step_s.size()) {
      run.real_tokens_per_s_per_chip = stats::mean(tokens) / *run.step_mean / *chips;
    }
    const std::optional<steplog::BenchSummary>& summary = log.summary;
    if (!chips) {
      run.tokens_per_s_per_chip_unknown = "no chip count (BENCH_SUMMARY chips)";
    } else if (summary && summary->rows && summary->tokens_per_row && summary->micro_steps) {
      run.tokens_per_s_per_chip = padded_tokens_per_s_per_chip(
          *summary->rows, *summary->tokens_per_row, *summary->micro_steps, *run.step_mean, *chips);
    } else if (padded_tokens.size() == run.step_s.size()) {
      run.tokens_per_s_per_chip = stats::mean(padded_tokens) / *run.step_mean / *chips;
    } else {
      run.tokens_per_s_per_chip_unknown =
          summary ? "its BENCH_SUMMARY has no rows and tokens_per_row (an older driver)"
                  : "no BENCH_SUMMARY and no padded_tokens in its steps";
    }
  }

  run.setup =
      run_setup(log, std::set<std::int64_t>(run.steps_used.begin(), run.steps_used.end()),
                run.microbatch_timing ? microbatch_timing_name(*run.microbatch_timing) : "");
  // One scope for the replays: the set-up's (the steps used).
  if (run.token_dropping.source == "BENCH_SUMMARY" && run.setup.replays) {
    run.token_dropping.replays = run.setup.replays;
    run.token_dropping.replay_scope = run.setup.replay_scope;
  }
  if (run.token_dropping.verdict == DropVerdict::kReplayed) {
    const TokenDroppingStatus& dropping = run.token_dropping;
    warn_about(
        run, log,
        fmt::format(
            "no token dropped, but {} micro-batch{} replayed on the dropless kernel{} (each a "
            "whole extra forward/backward): its step times include them",
            dropping.replays ? std::to_string(*dropping.replays) : "some",
            dropping.replays && *dropping.replays == 1 ? " was" : "es were",
            dropping.replay_scope.empty() ? "" : " in " + dropping.replay_scope));
  }
  return run;
}

void Options::validate() const {
  bootstrap.validate();
  if (!(outlier_factor > 1.0) || !std::isfinite(outlier_factor)) {
    fail("--outlier-factor {}: must be a number > 1", outlier_factor);
  }
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
    std::string pair_step_refusal = step_refusal(a, b);
    if (!pair_step_refusal.empty()) {
      report.diagnostics.push_back(
          {Severity::kWarning, "",
           fmt::format("--control-pair: no step noise floor: {}", pair_step_refusal)});
    } else if (a.step_mean && b.step_mean && *a.step_mean > 0) {
      floor.step_rel = std::fabs(*b.step_mean / *a.step_mean - 1.0);
    }
    std::string pair_refusal = refusal(a, b);
    if (!pair_refusal.empty()) {
      report.diagnostics.push_back(
          {Severity::kWarning, "",
           fmt::format("--control-pair: no micro-batch noise floor: {}", pair_refusal)});
    } else if (a.microbatch_median && b.microbatch_median && *a.microbatch_median > 0) {
      floor.microbatch_rel = std::fabs(*b.microbatch_median / *a.microbatch_median - 1.0);
    }
    for (const RunAnalysis* pair_run : {&a, &b}) {
      report.diagnostics.insert(report.diagnostics.end(), pair_run->diagnostics.begin(),
                                pair_run->diagnostics.end());
      if (pair_run->partial) {
        report.diagnostics.push_back(
            {Severity::kWarning, where_of(pair_run->source),
             fmt::format("control-pair run is partial: {}", pair_run->partial_reason)});
      }
    }
    floor.setup = compare_setups(a.name, a.setup, floor.control_b, b.setup);
    note_setup_difference(report, options, "--control-pair " + floor.control_b, floor.control_a,
                          floor.setup);
    report.noise_floor = floor;
  }
  if (options.require_same_setup && report.runs.size() < 2 && !inputs.control_pair) {
    fail("--require-same-setup needs two runs or --control-pair: there is no pair to compare");
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
    comparison.step_not_compared = step_refusal(control, run);
    if (comparison.step_not_compared.empty()) {
      comparison.step = compare(control.step_s, run.step_s, Statistic::kMean, step_floor, options);
    }
    comparison.microbatch_not_compared = refusal(control, run);
    if (comparison.microbatch_not_compared.empty()) {
      comparison.microbatch =
          compare(control.microbatch_s, run.microbatch_s, Statistic::kMedian, mb_floor, options);
    }
    comparison.setup = compare_setups(control.name, control.setup, run.name, run.setup);
    note_setup_difference(report, options, run.name, control.name, comparison.setup);
    if (comparison.microbatch && control.microbatch_source != run.microbatch_source) {
      report.diagnostics.push_back(
          {Severity::kWarning, "",
           fmt::format(
               "{}: its micro-batch times come from {}, the control's from {}: not like for like",
               run.name, run.microbatch_source, control.microbatch_source)});
    }
    for (const RunAnalysis* arm : {&control, &run}) {
      bool says = arm->token_dropping.verdict != DropVerdict::kNotLogged;
      bool other_says =
          (arm == &control ? run : control).token_dropping.verdict != DropVerdict::kNotLogged;
      // Arms whose logs both say nothing (older drivers, MaxText's own logs) are not warned
      // about here: the run table says "not logged" for each.
      if (arm->token_dropping.shows_no_drops() || (!says && !other_says)) continue;
      report.diagnostics.push_back(
          {Severity::kWarning, "",
           fmt::format("{} against {}: {}: the arms may not have done the same MoE work", run.name,
                       control.name, drop_problem(*arm))});
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

  if (options.require_no_drops) {
    for (const RunAnalysis& run : report.runs) {
      if (!run.token_dropping.shows_no_drops()) {
        report.drops_not_ruled_out.push_back(drop_problem(run) + " (--require-no-drops)");
      }
    }
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
      report.diagnostics.insert(report.diagnostics.end(), log.diagnostics.begin(),
                                log.diagnostics.end());
      if (log.partial) {
        report.diagnostics.push_back(
            {Severity::kWarning, where_of(log.source),
             fmt::format("numerics run is partial: {}", log.partial_reason)});
      }
      steps.push_back(std::move(per_step));
      labels.push_back(log.name.empty() ? stem(log.source) : log.name);
    }
    refuse_numerics_across_weights(inputs.numerics, labels);
    numerics.reference_a = labels[0];
    numerics.reference_b = labels[1];
    numerics.variant = labels[2];
    try {
      numerics.result = evaluate_numerics(steps[0], steps[1], steps[2], inputs.gates,
                                          unreported_grad_norm(inputs.numerics));
    } catch (const Error& e) {
      fail("--numerics {} {} {}: {}", inputs.numerics[0].source, inputs.numerics[1].source,
           inputs.numerics[2].source, e.message());
    }
    explain_unevaluated_gates(inputs.numerics, numerics.result);
    report.numerics = std::move(numerics);
  }

  std::vector<Diagnostic> diagnostics;
  for (const RunAnalysis& run : report.runs) {
    diagnostics.insert(diagnostics.end(), run.diagnostics.begin(), run.diagnostics.end());
  }
  diagnostics.insert(diagnostics.end(), report.diagnostics.begin(), report.diagnostics.end());
  // A file given twice (as a run and in --control-pair, say) warns once.
  std::set<std::string> seen;
  report.diagnostics.clear();
  for (Diagnostic& diagnostic : diagnostics) {
    if (seen.insert(text_of(diagnostic)).second)
      report.diagnostics.push_back(std::move(diagnostic));
  }
  return report;
}

}  // namespace rtb::logs::report
