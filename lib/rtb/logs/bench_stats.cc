#include "rtb/logs/bench_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "rtb/base/enum_names.h"
#include "rtb/base/error.h"
#include "rtb/base/mix.h"
#include "rtb/base/stats.h"

namespace rtb::logs {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The statistic of a resample given as indices into `values` (scratch avoids an allocation per
// resample).
double resampled(Statistic statistic, std::span<const double> values, Random& random,
                 std::vector<double>& scratch) {
  scratch.resize(values.size());
  for (double& slot : scratch) slot = values[random.below(values.size())];
  if (statistic == Statistic::kMean) {
    double sum = 0;
    for (double value : scratch) sum += value;
    return sum / static_cast<double>(scratch.size());
  }
  return stats::median(scratch);
}

Interval percentile_interval(std::vector<double> draws, double confidence) {
  double tail = (1.0 - confidence) / 2.0;
  return {stats::quantile(draws, tail), stats::quantile(draws, 1.0 - tail)};
}

// |a - b| in the gate's terms, relative to `scale` (the references' mean) for kRelative.
double gate_distance(GateKind kind, double a, double b, double scale) {
  double distance = std::fabs(a - b);
  if (kind != GateKind::kRelative) return distance;
  if (scale == 0.0) return distance == 0.0 ? 0.0 : kInfinity;
  return distance / std::fabs(scale);
}

}  // namespace

double sample_stddev(std::span<const double> values) {
  if (values.size() < 2) return 0.0;
  double mean = stats::mean(values);
  double sum = 0;
  for (double value : values) sum += (value - mean) * (value - mean);
  return std::sqrt(sum / static_cast<double>(values.size() - 1));
}

const char* statistic_name(Statistic statistic) {
  return statistic == Statistic::kMean ? "mean" : "median";
}

double compute(Statistic statistic, std::span<const double> values) {
  if (values.empty()) fail("the {} of no values", statistic_name(statistic));
  if (statistic == Statistic::kMean) return stats::mean(values);
  return stats::median(std::vector<double>(values.begin(), values.end()));
}

std::uint64_t Random::next() { return mix64(state_ += kGoldenGamma); }

std::size_t Random::below(std::size_t n) {
  if (n == 0) fail("Random::below(0)");
  // Rejection: drop the top values that would make some residues more likely.
  const std::uint64_t bound = static_cast<std::uint64_t>(n);
  const std::uint64_t limit =
      std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % bound;
  std::uint64_t draw;
  do {
    draw = next();
  } while (draw >= limit);
  return static_cast<std::size_t>(draw % bound);
}

void BootstrapOptions::validate() const {
  if (resamples < 100) fail("--bootstrap {}: use at least 100 resamples", resamples);
  if (resamples > 10000000) fail("--bootstrap {}: at most 10000000 resamples", resamples);
  if (!(confidence > 0.0 && confidence < 1.0)) {
    fail("--confidence {}: must be between 0 and 1 (e.g. 0.95)", confidence);
  }
}

Interval bootstrap_interval(std::span<const double> values, Statistic statistic,
                            const BootstrapOptions& options) {
  options.validate();
  if (values.empty()) fail("bootstrap of no values");
  if (values.size() == 1) return {values[0], values[0]};
  Random random(options.seed);
  std::vector<double> scratch, draws;
  draws.reserve(options.resamples);
  for (std::size_t i = 0; i < options.resamples; ++i) {
    draws.push_back(resampled(statistic, values, random, scratch));
  }
  return percentile_interval(std::move(draws), options.confidence);
}

Comparison bootstrap_compare(std::span<const double> control, std::span<const double> variant,
                             Statistic statistic, const BootstrapOptions& options) {
  options.validate();
  if (control.empty() || variant.empty()) fail("comparison with no values on a side");
  Comparison out;
  out.statistic = statistic;
  out.control = compute(statistic, control);
  out.variant = compute(statistic, variant);
  if (!(out.control > 0.0))
    fail("the control's {} is {}: no ratio", statistic_name(statistic), out.control);
  out.diff = out.variant - out.control;
  out.ratio = out.variant / out.control;
  out.n_control = control.size();
  out.n_variant = variant.size();
  Random random(options.seed);
  std::vector<double> scratch, diffs, ratios;
  diffs.reserve(options.resamples);
  ratios.reserve(options.resamples);
  for (std::size_t i = 0; i < options.resamples; ++i) {
    double c = resampled(statistic, control, random, scratch);
    double v = resampled(statistic, variant, random, scratch);
    diffs.push_back(v - c);
    ratios.push_back(c > 0.0 ? v / c : kInfinity);
  }
  out.diff_ci = percentile_interval(std::move(diffs), options.confidence);
  out.ratio_ci = percentile_interval(std::move(ratios), options.confidence);
  return out;
}

namespace {

// A verdict's JSON name and its text label, together so that they cannot drift apart.
struct VerdictNames {
  const char* name;
  const char* label;
};

VerdictNames verdict_names(Verdict verdict) {
  switch (verdict) {
    case Verdict::kFaster:
      return {"faster", "faster"};
    case Verdict::kSlower:
      return {"slower", "slower"};
    case Verdict::kNoChange:
      return {"no_change", "no change"};
    case Verdict::kNoise:
      return {"noise", "noise"};
    case Verdict::kInsufficient:
      break;
  }
  return {"insufficient", "too few samples"};
}

}  // namespace

const char* verdict_name(Verdict verdict) { return verdict_names(verdict).name; }

const char* verdict_label(Verdict verdict) { return verdict_names(verdict).label; }

Verdict classify(const Comparison& comparison, std::optional<double> noise_floor,
                 std::size_t min_samples) {
  if (comparison.n_control < min_samples || comparison.n_variant < min_samples) {
    return Verdict::kInsufficient;
  }
  Verdict verdict = Verdict::kNoChange;
  if (comparison.ratio_ci.high < 1.0) verdict = Verdict::kFaster;
  if (comparison.ratio_ci.low > 1.0) verdict = Verdict::kSlower;
  if (verdict != Verdict::kNoChange && noise_floor &&
      std::fabs(comparison.ratio - 1.0) <= *noise_floor) {
    return Verdict::kNoise;
  }
  return verdict;
}

const char* gate_kind_name(GateKind kind) {
  return enum_name<GateKind::kFinite>(kind, {"relative", "absolute", "finite"});
}

const char* gate_status_name(GateResult::Status status) {
  return enum_name<GateResult::Status::kNotEvaluated>(
      status, {"pass", "fail", "missing", "off", "not-evaluated"});
}

std::vector<GateSpec> default_gates() {
  return {
      {"loss",
       {"loss"},
       GateKind::kRelative,
       1e-4,
       true,
       "the GRPO loss is a function of the per-token log-probs; a log-prob shift of 1e-4 moves "
       "it by about 1e-4 relative, while reduction-order noise stays near 1e-7"},
      {"logprob",
       {"log_ratio/abs_mean"},
       GateKind::kAbsolute,
       1e-4,
       true,
       "mean |log pi - log pi_old| with the bench's fixed old log-probs is the forward log-prob "
       "metric; accepted changes moved it by 3e-7 to 7e-6, a rejected one by 9.7e-4"},
      {"entropy",
       {"entropy"},
       GateKind::kRelative,
       1e-4,
       true,
       "the policy entropy comes from the same logits through another reduction; "
       "rounding moves it by about 1e-7 relative"},
      // gradient_norm: MaxText's engine (at e591f30c only with skip_step_on_spikes, at b8bf66d6
      // on every update); grad_norm: Tunix's trainers and the orchestrator's actor/grad_norm
      // (docs/bench-report.md "Numerics gates" cites both).
      {"grad_norm",
       {"gradient_norm", "grad_norm"},
       GateKind::kRelative,
       2e-3,
       true,
       "the fp32 gradient norm before clipping sums every parameter's gradient; accepted "
       "changes moved it by up to 2.8e-4 relative, a rejected one by 8e-3; 2e-3 is the seed's "
       "pass limit",
       "seed",
       true},
      {"is_ratio",
       {"is_ratio/mean"},
       GateKind::kRelative,
       1e-4,
       true,
       "the importance ratio exp(log pi - log pi_old) multiplies the advantages in the loss; a "
       "signed log-prob bias shows here even when the absolute log-prob metric averages it out"},
      {"finite",
       {},
       GateKind::kFinite,
       0.0,
       true,
       "a NaN or infinity passes no comparison: every gated metric of the variant must be "
       "present and finite at every compared step"},
  };
}

std::optional<double> find_metric(const std::map<std::string, double>& metrics,
                                  const std::string& key) {
  if (auto exact = metrics.find(key); exact != metrics.end()) return exact->second;
  std::optional<double> found;
  std::string suffix = "/" + key;
  for (const auto& [name, value] : metrics) {
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      if (found) return std::nullopt;  // ambiguous
      found = value;
    }
  }
  return found;
}

NumericsResult evaluate_numerics(const MetricSteps& reference_a, const MetricSteps& reference_b,
                                 const MetricSteps& variant, const std::vector<GateSpec>& gates,
                                 const UnreportedMetrics& unreported) {
  NumericsResult out;
  for (const auto& [step, metrics] : reference_a) {
    if (metrics.empty()) continue;
    auto b = reference_b.find(step);
    auto v = variant.find(step);
    if (b != reference_b.end() && !b->second.empty() && v != variant.end()) {
      out.steps.push_back(step);
    }
  }
  if (out.steps.empty()) fail("the references and the variant share no step with metrics");

  std::vector<std::string> gated_metrics;
  for (const GateSpec& gate : gates) {
    if (gate.kind == GateKind::kFinite) continue;
    GateResult result;
    result.name = gate.name;
    result.kind = gate.kind;
    result.limit = gate.limit;
    result.limit_from = gate.limit_from;
    // The first candidate key both references log at some compared step.
    for (const std::string& key : gate.keys) {
      for (std::int64_t step : out.steps) {
        if (find_metric(reference_a.at(step), key) && find_metric(reference_b.at(step), key)) {
          result.metric = key;
          break;
        }
      }
      if (!result.metric.empty()) break;
    }
    if (!gate.enabled) {
      result.status = GateResult::Status::kOff;
      out.gates.push_back(result);
      continue;
    }
    if (result.metric.empty()) {
      std::string keys;
      for (const std::string& key : gate.keys) keys += (keys.empty() ? "" : ", ") + key;
      bool logged_anywhere = false;
      for (const MetricSteps* run : {&reference_a, &reference_b, &variant}) {
        for (const auto& [step, metrics] : *run) {
          for (const std::string& key : gate.keys)
            logged_anywhere |= find_metric(metrics, key).has_value();
        }
      }
      // Evidence, not absence: an old log or a typo'd key logs nothing either.
      bool every_run_says_so = std::all_of(unreported.begin(), unreported.end(),
                                           [](const auto& why) { return why.has_value(); });
      if (gate.may_be_unlogged && !logged_anywhere && every_run_says_so) {
        result.status = GateResult::Status::kNotEvaluated;
        result.detail = fmt::format("no run logs {}: not evaluated, not a failure", keys);
        out.gates.push_back(result);
        continue;
      }
      result.status = GateResult::Status::kMissing;
      result.detail = fmt::format("the references log none of: {}", keys);
      out.gates.push_back(result);
      continue;
    }
    gated_metrics.push_back(result.metric);
    std::vector<std::int64_t> not_finite;
    double worst = -1.0, noise = 0.0;
    for (std::int64_t step : out.steps) {
      std::optional<double> a = find_metric(reference_a.at(step), result.metric);
      std::optional<double> b = find_metric(reference_b.at(step), result.metric);
      if (!a || !b || !std::isfinite(*a) || !std::isfinite(*b)) continue;  // no reference here
      double mean = (*a + *b) / 2.0;
      noise = std::max(noise, gate_distance(gate.kind, *a, *b, mean));
      std::optional<double> value = find_metric(variant.at(step), result.metric);
      double deviation = kInfinity;
      if (value && std::isfinite(*value)) {
        deviation = gate_distance(gate.kind, *value, mean, mean);
      } else {
        not_finite.push_back(step);
      }
      ++result.steps;
      if (deviation > worst) {
        worst = deviation;
        result.worst_step = step;
      }
    }
    if (result.steps == 0) {
      result.status = GateResult::Status::kMissing;
      result.detail =
          fmt::format("no compared step has finite reference values of {}", result.metric);
      out.gates.push_back(result);
      continue;
    }
    result.deviation = worst;
    result.reference_noise = noise;
    result.status = worst <= gate.limit ? GateResult::Status::kPass : GateResult::Status::kFail;
    if (!not_finite.empty()) {
      result.detail = fmt::format("the variant's {} is missing or not finite at step {}",
                                  result.metric, not_finite.front());
    } else if (noise > gate.limit) {
      result.detail = fmt::format(
          "the references differ by more than the limit: the gate cannot tell the variant from "
          "noise");
    }
    out.gates.push_back(result);
  }

  for (const GateSpec& gate : gates) {
    if (gate.kind != GateKind::kFinite) continue;
    GateResult result;
    result.name = gate.name;
    result.kind = gate.kind;
    result.limit = gate.limit;
    result.limit_from = gate.limit_from;
    if (!gate.enabled) {
      result.status = GateResult::Status::kOff;
      out.gates.push_back(result);
      continue;
    }
    std::set<std::string> names(gated_metrics.begin(), gated_metrics.end());
    for (const std::string& key : gate.keys) names.insert(key);  // --metric finite=KEY adds keys
    if (names.empty()) {
      result.status = GateResult::Status::kMissing;
      result.detail = "no gated metric to check";
      out.gates.push_back(result);
      continue;
    }
    for (const std::string& name : names)
      result.metric += (result.metric.empty() ? "" : ",") + name;
    std::size_t bad_steps = 0;
    for (std::int64_t step : out.steps) {
      for (const std::string& name : names) {
        std::optional<double> value = find_metric(variant.at(step), name);
        if (!value || !std::isfinite(*value)) {
          if (bad_steps == 0) {
            result.worst_step = step;
            result.detail = fmt::format("the variant's {} is {} at step {}", name,
                                        value ? fmt::format("{}", *value) : "missing", step);
          }
          ++bad_steps;
          break;
        }
      }
    }
    result.steps = out.steps.size();
    result.deviation = static_cast<double>(bad_steps);
    result.status = static_cast<double>(bad_steps) <= gate.limit ? GateResult::Status::kPass
                                                                 : GateResult::Status::kFail;
    out.gates.push_back(result);
  }

  // Report the gates in the order given.
  std::vector<GateResult> ordered;
  for (const GateSpec& gate : gates) {
    for (GateResult& result : out.gates) {
      if (result.name == gate.name) ordered.push_back(std::move(result));
    }
  }
  out.gates = std::move(ordered);
  out.pass = true;
  for (const GateResult& result : out.gates) {
    if (result.status == GateResult::Status::kFail ||
        result.status == GateResult::Status::kMissing) {
      out.pass = false;
    }
  }
  return out;
}

}  // namespace rtb::logs
