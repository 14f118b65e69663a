// Statistics of bench runs: seeded bootstrap confidence intervals, A/B verdicts against a control
// with an optional A/A noise floor, and the numerics gates of a variant against two references.
//
// Everything here is deterministic: the bootstrap draws from its own SplitMix64 stream (not a
// std:: distribution, whose output differs between standard libraries), so the same samples and
// seed give the same interval on every machine.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rtb::logs {

// ---- Samples
// -------------------------------------------------------------------------------------

// Sample standard deviation (divide by n - 1), the spread of a few timed steps; 0 for n < 2.
double sample_stddev(std::span<const double> values);

enum class Statistic { kMean, kMedian };
const char* statistic_name(Statistic statistic);  // "mean", "median"
// The statistic of `values` (median: rtb::stats::median); throws rtb::Error for no values.
double compute(Statistic statistic, std::span<const double> values);

// A deterministic stream of 64-bit numbers (SplitMix64).
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  // Uniform in [0, n) without modulo bias; n must be > 0.
  std::size_t below(std::size_t n);

 private:
  std::uint64_t state_;
};

struct BootstrapOptions {
  std::size_t resamples = 10000;  // >= 100
  double confidence = 0.95;       // in (0, 1)
  std::uint64_t seed = 1;
  void validate() const;  // throws rtb::Error naming the bad option
};

struct Interval {
  double low = 0.0;
  double high = 0.0;
};

// Percentile bootstrap interval of `statistic` over `values` (resampled with replacement).
// One value gives the degenerate interval [v, v]; no values throws rtb::Error.
Interval bootstrap_interval(std::span<const double> values, Statistic statistic,
                            const BootstrapOptions& options);

// A variant against a control: the statistic of each, their difference (variant - control) and
// ratio (variant / control), each with a percentile bootstrap interval from resampling both
// samples independently.
struct Comparison {
  Statistic statistic = Statistic::kMean;
  double control = 0.0;
  double variant = 0.0;
  double diff = 0.0;
  Interval diff_ci;
  double ratio = 0.0;
  Interval ratio_ci;
  std::size_t n_control = 0;
  std::size_t n_variant = 0;
};
// Throws rtb::Error when a sample is empty or the control's statistic is not positive.
Comparison bootstrap_compare(std::span<const double> control, std::span<const double> variant,
                             Statistic statistic, const BootstrapOptions& options);

// ---- Verdicts
// ------------------------------------------------------------------------------------

enum class Verdict {
  kFaster,        // the ratio's interval lies below 1 (times: smaller is faster)
  kSlower,        // the ratio's interval lies above 1
  kNoChange,      // the interval contains 1
  kNoise,         // significant, but |ratio - 1| is within the A/A noise floor
  kInsufficient,  // fewer than min_samples values on a side: no interval worth the name
};
const char* verdict_name(Verdict verdict);   // JSON: "faster", "slower", "no_change", ...
const char* verdict_label(Verdict verdict);  // text: "faster", "slower", "no change", ...

// `noise_floor` is a relative difference (e.g. 0.002 for 0.2%): |A2/A1 - 1| of two control runs.
Verdict classify(const Comparison& comparison, std::optional<double> noise_floor,
                 std::size_t min_samples = 2);

// ---- Numerics gates ----------------------------------------------------------------------------

enum class GateKind {
  kRelative,  // |variant - m| / |m|, m = the references' mean; the references' |r1 - r2| / |m|
  kAbsolute,  // |variant - m|; the references' |r1 - r2|
  kFinite,    // steps where a gated metric of the variant is missing or not finite
};
const char* gate_kind_name(GateKind kind);  // "relative", "absolute", "finite"

struct GateSpec {
  std::string name;               // "loss", "logprob", "entropy", "grad_norm", "is_ratio", "finite"
  std::vector<std::string> keys;  // candidate metric names; the first the references log is used
  GateKind kind = GateKind::kRelative;
  double limit = 0.0;  // pass when the deviation <= limit (finite: a count)
  bool enabled = true;
  std::string reason;  // why this gate and this default (for --help and the README)
  // Where the limit comes from: "seed" (the seed's pass limit, grad norm 2e-3), "ours" (this
  // tool's choice, see `reason`) or "--limit" (given on the command line).
  std::string limit_from = "ours";
  // When no run logs any of `keys` (MaxText without a gradient norm) and every run says so itself
  // (UnreportedMetrics), the gate is not evaluated instead of failing as missing. --metric clears
  // it: a key given on the command line must be logged.
  bool may_be_unlogged = false;
};

// The six gates and their defaults (see the README section of bench-report for the reasons).
std::vector<GateSpec> default_gates();

// Per step (step number -> metric name -> value) of one run.
using MetricSteps = std::map<std::int64_t, std::map<std::string, double>>;

// The value of `key` in `metrics`: the exact name, else the one name that ends in "/<key>" (logs
// may prefix it, e.g. "trainer/grad_norm"). nullopt when absent or ambiguous.
std::optional<double> find_metric(const std::map<std::string, double>& metrics,
                                  const std::string& key);

struct GateResult {
  // kNotEvaluated: no run logs the gate's metric and the gate allows that (may_be_unlogged); not
  // a failure.
  enum class Status { kPass, kFail, kMissing, kOff, kNotEvaluated };
  std::string name;
  std::string metric;  // the key used; empty when none was found
  GateKind kind = GateKind::kRelative;
  double limit = 0.0;
  std::string limit_from;  // GateSpec::limit_from
  Status status = Status::kMissing;
  std::optional<double> deviation;  // the variant's worst step (max over steps)
  std::optional<std::int64_t> worst_step;
  std::optional<double> reference_noise;  // the references' own difference (max over steps)
  std::size_t steps = 0;                  // steps compared
  std::string detail;                     // why it failed or is missing
};
// "pass", "fail", "missing", "off", "not-evaluated"
const char* gate_status_name(GateResult::Status status);

struct NumericsResult {
  std::vector<std::int64_t> steps;  // steps all three runs logged metrics for
  std::vector<GateResult> gates;
  bool pass = false;  // every enabled gate passed (a missing metric fails its gate)
};

// Per run (reference a, reference b, variant): the run's own word that it reports no value of a
// may_be_unlogged gate's metric (BENCH_SUMMARY grad_norm `reported: false`), its `why`; nullopt
// when the run says nothing (an old log) or says it reports one.
using UnreportedMetrics = std::array<std::optional<std::string>, 3>;

// Compares `variant` with `reference_a` and `reference_b` on the steps all three have. A
// may_be_unlogged gate no run logs is not evaluated only when every run's `unreported` says so;
// otherwise it is missing (a failure). Throws rtb::Error when they share no step.
NumericsResult evaluate_numerics(const MetricSteps& reference_a, const MetricSteps& reference_b,
                                 const MetricSteps& variant, const std::vector<GateSpec>& gates,
                                 const UnreportedMetrics& unreported = {});

}  // namespace rtb::logs
