// bench-report's same-pod A/B (render-bench --arm, bench/arms.h): one pod's log holds several
// runs, each a fresh driver process that starts with a BENCH_ARM line and whose end the pod's
// wrapper marks with a BENCH_RUN_END line:
//   BENCH_ARM {"name":N,"arm":A,"run":R,"knobs":{...}}
//   BENCH_RUN_END {"arm":A,"run":R,"exit_code":E}
// The lines between a BENCH_ARM and its run's end are one run's log, read by steplog's own parser,
// so steps are keyed by (arm, run, step) and every figure of a run means what it means for a log
// of one run. The unit of the A/B is a run's mean over its steady steps (analyze_run's step mean:
// the first step, which compiles, the profiled steps and outliers left out). Each arm is compared
// with the control (the first arm of the pod's first run) by pairs in run order: the arm's k-th
// run against the control's k-th run, its neighbour in an abba or interleave order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rtb/base/diagnostic.h"
#include "rtb/logs/bench_stats.h"
#include "rtb/logs/report.h"
#include "rtb/logs/steplog.h"

namespace rtb::logs::arms {

inline constexpr std::string_view kArmMarker = "BENCH_ARM {";
inline constexpr std::string_view kRunEndMarker = "BENCH_RUN_END {";
// Fewer pairs than this give no interval: "too few pairs".
inline constexpr std::size_t kMinPairs = 3;

// One run of the pod as its lines tell it.
struct RunLogOfArm {
  std::string arm;
  std::int64_t run = 0;          // BENCH_RUN: the run's place in the pod's run order, from 1
  steplog::RunLog log;           // the run's own lines (line numbers are the pod log's)
  bool announced = false;        // a BENCH_ARM line started it
  std::optional<int> exit_code;  // BENCH_RUN_END's; nullopt: the log has none
  std::size_t line = 0;          // its BENCH_ARM (else BENCH_RUN_END) line
};

struct PodLog {
  std::string source;
  std::vector<RunLogOfArm> runs;  // in the order the log has them
  std::vector<Diagnostic> diagnostics;
};

// Streams one pod's log. Lines before the first BENCH_ARM belong to no run (the wrapper's own).
class PodLogParser {
 public:
  explicit PodLogParser(std::string source) : source_(std::move(source)) {}
  void feed(std::string_view line, std::size_t number);
  PodLog finish();

 private:
  void close_run();
  std::string source_;
  PodLog pod_;
  std::optional<steplog::RunLogParser> parser_;
  RunLogOfArm current_;
};

// Reads a pod's log file ("-": stdin) with bounded memory per run; the same over text (tests).
// Throws rtb::Error when the log holds no BENCH_ARM or BENCH_RUN_END line (not a same-pod A/B).
PodLog parse_pod_log(const std::string& path);
PodLog parse_pod_log_text(std::string_view text, const std::string& source);

// One run as the A/B uses it.
struct ArmRun {
  std::string arm;
  std::int64_t run = 0;
  std::optional<double> mean_s;        // the run's mean over its steady steps
  std::size_t steps_used = 0;          // how many steady steps
  std::optional<double> first_step_s;  // its first step (it compiles), reported apart
  std::optional<report::StepTiming> step_timing;
  std::optional<int> exit_code;
  std::string failed;  // why the run counts as failed; empty when it did not
  std::optional<report::RunAnalysis> analysis;
};

// One pair: an arm's run against the control's run of the same rank.
struct Pair {
  std::int64_t rank = 0;  // k: the arm's k-th run against the control's k-th
  std::int64_t control_run = 0, arm_run = 0;
  std::optional<double> diff_s;   // arm mean - control mean; nullopt when the pair is dropped
  std::string dropped;            // why the pair is not used (a failed run, timing modes differ)
  report::SetupDifference setup;  // the two runs' set-ups, named beside the pair
};

struct ArmVerdict {
  std::string arm;
  std::vector<Pair> pairs;                   // in rank order, dropped ones included
  std::vector<std::string> unpaired;         // runs without a partner ("b run 7")
  std::vector<double> diffs;                 // of the pairs used, in rank order
  std::optional<double> mean_diff_s;         // mean of diffs
  std::optional<double> control_mean_s;      // mean of the used pairs' control runs
  std::optional<Interval> diff_ci;           // bootstrap interval of the mean diff (>= kMinPairs)
  Verdict verdict = Verdict::kInsufficient;  // kInsufficient: too few pairs
};

// The control's own spread across its runs (an A/A comparison inside the pod).
struct AaSpread {
  std::vector<double> means;  // the control runs' means, in run order
  double range_s = 0;         // max - min
  double rel = 0;             // range / mean of the means
};

struct PodReport {
  std::string source;
  std::string name;                      // the bench's name (BENCH_ARM name)
  std::vector<std::string> arms;         // in the order of their first runs; arms[0] is the control
  std::vector<ArmRun> runs;              // in run order
  std::vector<ArmVerdict> verdicts;      // one per arm but the control
  std::optional<AaSpread> aa;            // when the control ran at least twice
  std::vector<std::string> failed_runs;  // "b run 3: exit 1"
  std::vector<Diagnostic> diagnostics;
  BootstrapOptions bootstrap;  // what its intervals were drawn with (across_pods: the first pod's)
  Outcome outcome() const;     // kFail when a run failed, else kPass
};
// kFail when a run of any pod failed.
Outcome outcome_of(const std::vector<PodReport>& pods);

PodReport analyze_pod(const PodLog& pod, const report::Options& options);

// Across pods, the reference is the same arm in two pods (the seed's one cell at 82.671 and 82.670
// s/step in two pods): for each arm of the first pod, each pod's mean of its run means and the
// pod-to-pod difference (each pod against the first), with an interval computed as the pairs of a
// pod are: the arm's k-th run in the pod against its k-th run in the first pod, the mean of those
// diffs bootstrapped (the first pod's options) from kMinPairs used pairs. Where every run of the
// arm pairs, that mean is diff_s.
struct AcrossPods {
  std::string arm;
  std::vector<std::optional<double>> means_s;  // per pod, in the pods' order; nullopt: no run
  std::vector<std::optional<double>> diff_s;   // per pod: its mean - the first pod's
  std::vector<std::size_t> pairs_used;         // per pod: pairs used for its interval (first: 0)
  // Per pod: the interval of the mean pair diff; nullopt for the first pod and below kMinPairs.
  std::vector<std::optional<Interval>> diff_ci;
};
std::vector<AcrossPods> across_pods(const std::vector<PodReport>& pods);

// Text: what each figure measures, then per pod the runs per arm, each arm's pairs and verdict,
// then (several pods) the same arm across pods.
std::string format_arms_text(const std::vector<PodReport>& pods);
// --json, schema rtb.bench-report.arms/1: {"schema", "pods": [...], "across_pods": [...]}.
std::string format_arms_json(const std::vector<PodReport>& pods);

}  // namespace rtb::logs::arms
