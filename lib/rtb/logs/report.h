// bench-report's analysis and writers: per-run step times, micro-batch times, throughput and the
// trainer timeline (TRAINER_STEP_TIMING), comparisons against a control with bootstrap intervals
// and verdicts, the A/A noise floor, the numerics gates, and the text / JSON / SVG outputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/diagnostic.h"
#include "rtb/base/outcome.h"
#include "rtb/logs/bench_stats.h"
#include "rtb/logs/run_setup.h"
#include "rtb/logs/steplog.h"

namespace rtb::logs::report {

// An inclusive range of step or micro-batch numbers; an open end is nullopt.
struct Range {
  std::optional<std::int64_t> first;
  std::optional<std::int64_t> last;
  bool contains(std::int64_t value) const {
    return (!first || value >= *first) && (!last || value <= *last);
  }
  std::string str() const;  // "1-4", "3-last", "5"
};
// "A-B", "A-", "A-last" or "A" (non-negative integers, A <= B). Throws rtb::Error naming `what`.
Range parse_range(std::string_view text, std::string_view what);

// How a run's micro-batch times were measured, over the steps its figures use.
enum class MicrobatchTiming {
  kDevice,      // to the device's completion of each call (also TRAINER_STEP_TIMING ready times)
  kDispatch,    // host dispatch intervals: lag the device by up to two calls (async engines)
  kMixed,       // the steps differ: comparable with nothing
  kUnlabelled,  // the log does not say (a driver older than the "microbatch_timing" field)
};
const char* microbatch_timing_name(MicrobatchTiming timing);  // "device", "unlabelled", ...
// What a mode means: "the log does not say (older driver)", ...
const char* microbatch_timing_meaning(MicrobatchTiming timing);

// How a run's step times were measured, over the steps its figures use. Step times timed by log
// timestamps are compared only with each other (issue 28): host time between two steps' log lines
// is not the driver's device-timed step.
enum class StepTiming {
  kDevice,         // BENCH_STEP seconds: first dispatch to the update's output ready on the device
  kOrchestrator,   // `Train step ... step_time`: the orchestrator's time of a whole RL step
  kMaxText,        // MaxText's `seconds`: the host's interval between step completions
  kLogTimestamps,  // from one step's first log line to the next step's (host side)
  kMixed,          // the steps differ
};
const char* step_timing_name(StepTiming timing);  // "device", "log-timestamps", ...

// Tokens per second per chip as the seed defines it, padding included:
// rows x tokens_per_row x micro_steps / mean seconds per step / chips.
double padded_tokens_per_s_per_chip(std::int64_t rows, std::int64_t tokens_per_row,
                                    std::int64_t micro_steps, double mean_step_s, double chips);

inline constexpr double kDefaultOutlierFactor = 3.0;

struct Options {
  std::optional<Range> steps;           // nullopt: every logged step but the first (it compiles)
  bool include_profiled = false;        // false: profiled steps stay out of means and medians
  Range microbatches{3, std::nullopt};  // 1-based within a step; the default skips the two
                                        // micro-batches after the step boundary
  bool microbatches_given = false;      // false: steps with fewer than 3 use all of theirs, and
                                        // a short final micro-batch (BENCH_SUMMARY final_rows
                                        // < rows) is left out, as the driver's median does
  BootstrapOptions bootstrap;
  std::optional<double> fail_if_slower_pct;
  // A selected step slower than outlier_factor x the median of the selected steps' times is an
  // outlier (a checkpoint save, a recompile, the profiler): always named, and left out of every
  // figure unless include_outliers (issue 28: kept, two such steps beside a 0.78 s median made
  // every A/B "no change").
  double outlier_factor = kDefaultOutlierFactor;
  bool include_outliers = false;
  bool require_no_drops = false;  // a run that dropped tokens, or cannot show none, fails
  // Two compared arms (each run and the control, the --control-pair) whose set-ups differ fail.
  bool require_same_setup = false;
  // Throws rtb::Error naming the bad option (--bootstrap, --confidence, --outlier-factor).
  void validate() const;
};

// The trainer-side timeline over the selected steps (TRAINER_STEP_TIMING).
struct TimelineSummary {
  std::size_t steps = 0;  // selected steps with a TRAINER_STEP_TIMING record
  std::size_t microbatches = 0;
  std::size_t ready_known = 0;
  std::vector<double> device_s;  // micro-batches in the micro-batch range with a known time
  std::size_t device_unknown = 0;
  std::vector<double> idle_s;  // per step
  std::size_t idle_unknown = 0;
  std::vector<double> update_s;
  std::size_t update_unknown = 0;
  std::vector<double> sync_wait_s;
  std::size_t sync_unknown = 0;
  std::size_t sync_not_applicable = 0;  // steps without a weight sync (prepare: null)
};

// A selected step far slower than the run's median step.
struct OutlierStep {
  std::int64_t step = 0;
  double seconds = 0.0;
};

struct Outliers {
  double factor = kDefaultOutlierFactor;
  std::optional<double> median_s;  // of the selected steps' times the rule compares against
  std::vector<OutlierStep> steps;  // sorted by step
  bool left_out = false;           // not in any figure (the default; --include-outliers keeps them)
};

// Whether a run's MoE layers dropped tokens.
enum class DropVerdict {
  kNone,       // counted zero in every step, or dropless by configuration
  kDropped,    // counted, more than zero
  kReplayed,   // none dropped, but micro-batches were replayed on the dropless kernel
  kUnknown,    // the log says it cannot tell (no count, a configuration that may drop)
  kNotMoe,     // the trainer has no experts
  kNotLogged,  // the log says nothing about dropped tokens (older driver, other trainers)
};
const char* drop_verdict_name(DropVerdict verdict);  // "none", "dropped", ..., "not-logged"

struct TokenDroppingStatus {
  DropVerdict verdict = DropVerdict::kNotLogged;
  std::optional<double> dropped_tokens;  // the count, when the trainer counted
  std::size_t counted_steps = 0;
  // Micro-batches replayed, over `replay_scope` (the steps used, as the set-up counts them; the
  // summary's counted steps only when no step logs its replays); nullopt when not counted.
  std::optional<std::int64_t> replays;
  std::string replay_scope;  // "the 3 steps used", ...; empty when not counted
  std::string source;        // "BENCH_SUMMARY", "BENCH_STEP" or "" (not logged)
  std::string why;           // the log's reason, or ours
  // True when the run shows that it dropped no token (none, replayed, or no MoE at all).
  bool shows_no_drops() const {
    return verdict == DropVerdict::kNone || verdict == DropVerdict::kReplayed ||
           verdict == DropVerdict::kNotMoe;
  }
};

struct RunAnalysis {
  std::string name;
  std::string source;
  steplog::LogKind kind = steplog::LogKind::kUnknown;
  bool partial = false;
  std::string partial_reason;
  std::vector<std::int64_t> steps_logged;  // every step with a time, a micro-batch or a timing
  std::vector<std::int64_t> steps_used;    // selected steps with a step time
  std::vector<double> step_s;              // their times
  std::optional<StepTiming> step_timing;   // how they were measured; nullopt: no step time
  // A Tunix trainer log timed by its lines' timestamps: how (StepTiming::kLogTimestamps).
  std::optional<steplog::LogTimestamps> log_timestamps;
  std::optional<double> step_mean;
  double step_sd = 0.0;  // sample standard deviation
  std::optional<Interval> step_ci;
  std::string microbatch_source;  // "BENCH_STEP", "TRAINER_STEP_TIMING" or "" (none)
  std::vector<double> microbatch_s;
  std::optional<double> microbatch_median;
  std::optional<Interval> microbatch_ci;
  // How microbatch_s was measured; nullopt when the run has no micro-batch time.
  std::optional<MicrobatchTiming> microbatch_timing;
  // The default range left out each step's short final micro-batch (final_rows < rows).
  bool microbatch_final_left_out = false;
  std::vector<MicrobatchTiming> microbatch_timings_seen;  // the steps' modes, when mixed
  // Padded (rows x tokens_per_row x micro-batches) and real tokens / s / chip.
  std::optional<double> tokens_per_s_per_chip;
  std::optional<double> real_tokens_per_s_per_chip;
  std::string tokens_per_s_per_chip_unknown;    // why tokens_per_s_per_chip is unknown (bench runs)
  std::vector<std::int64_t> profiled_left_out;  // selected steps left out as profiled
  Outliers outliers;
  // MaxText's per-device rates over the steps used, as total work over total time:
  // sum(rate x seconds) / sum(seconds); nullopt when a step used does not log the rate.
  std::optional<double> tflops_per_device;
  std::optional<double> tokens_per_s_per_device;
  TokenDroppingStatus token_dropping;
  // The first logged step's time (it includes the compile): from its step line, else from
  // BENCH_SUMMARY first_step_s (then the step number is unknown).
  struct FirstStep {
    std::optional<std::int64_t> step;
    double seconds = 0.0;
  };
  std::optional<FirstStep> first_step;
  TimelineSummary timeline;
  RunSetup setup;
  std::optional<steplog::BenchSummary> summary;
  // The log's warnings, then the analysis's (where: the log). --json `diagnostics`, and `warnings`
  // (their text) until rtb.bench-report/2.
  std::vector<Diagnostic> diagnostics;
};

struct MetricComparison {
  Comparison stats;
  Verdict verdict = Verdict::kInsufficient;
  std::optional<double> noise_floor;
};

struct RunComparison {
  std::string run;
  std::string control;
  std::optional<MetricComparison> step;
  // Why the step times were not compared (one run is timed by log timestamps, the other is
  // not); empty when they were compared or one side has none.
  std::string step_not_compared;
  std::optional<MetricComparison> microbatch;
  // Why the micro-batch times were not compared (the runs time them differently); empty when
  // they were compared or one side has none.
  std::string microbatch_not_compared;
  SetupDifference setup;  // named beside the verdict
};

struct NoiseFloor {
  std::string control_a;
  std::string control_b;
  std::optional<double> step_rel;        // |mean(A2) / mean(A1) - 1|
  std::optional<double> microbatch_rel;  // |median(A2) / median(A1) - 1|
  SetupDifference setup;
};

struct NumericsReport {
  std::string reference_a;
  std::string reference_b;
  std::string variant;
  NumericsResult result;
};

struct Report {
  Options options;
  std::vector<RunAnalysis> runs;  // runs[0] is the control
  std::vector<RunComparison> comparisons;
  std::optional<NoiseFloor> noise_floor;
  std::optional<NumericsReport> numerics;
  std::vector<std::string> slower_than_allowed;  // what tripped --fail-if-slower
  std::vector<std::string> drops_not_ruled_out;  // what tripped --require-no-drops
  std::vector<std::string> setups_differ;        // what tripped --require-same-setup
  // Every run's warnings, then the report's, in order, each once. --json `diagnostics`, and
  // `warnings` (their text) until rtb.bench-report/2.
  std::vector<Diagnostic> diagnostics;

  // kFail when a numerics gate failed, --fail-if-slower, --require-no-drops or
  // --require-same-setup tripped, else kPass.
  Outcome outcome() const;
};

// One run. Throws rtb::Error (naming the file) when it has no step timing at all, or only losses
// (a Tunix PEFT log without two timestamped training lines: no step times).
RunAnalysis analyze_run(const steplog::RunLog& log, const Options& options);

struct Inputs {
  std::vector<steplog::RunLog> runs;  // may be empty when only numerics are asked for
  std::optional<std::pair<steplog::RunLog, steplog::RunLog>> control_pair;
  std::vector<steplog::RunLog> numerics;  // empty, or REF1, REF2, VARIANT
  std::vector<GateSpec> gates = default_gates();
};

Report build_report(const Inputs& inputs, const Options& options);

}  // namespace rtb::logs::report
