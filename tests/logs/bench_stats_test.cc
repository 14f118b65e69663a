#include "rtb/logs/bench_stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb::logs {
namespace {

TEST(Samples, SampleStddevAndStatistics) {
  std::vector<double> values = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_NEAR(sample_stddev(values), std::sqrt(32.0 / 7.0), 1e-12);
  std::vector<double> one = {3.0};
  EXPECT_EQ(sample_stddev(one), 0.0);
  EXPECT_EQ(compute(Statistic::kMean, values), 5.0);
  EXPECT_EQ(compute(Statistic::kMedian, values), 4.5);
  EXPECT_THROW(compute(Statistic::kMedian, {}), Error);
}

TEST(RandomStream, DeterministicAndUniform) {
  Random a(42), b(42), c(43);
  std::vector<std::uint64_t> first, second;
  for (int i = 0; i < 5; ++i) {
    first.push_back(a.next());
    second.push_back(b.next());
  }
  EXPECT_EQ(first, second);
  EXPECT_NE(first[0], c.next());
  // SplitMix64's published first output for seed 0.
  EXPECT_EQ(Random(0).next(), 0xe220a8397b1dcdafULL);

  Random r(7);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) ++counts[r.below(6)];
  for (int count : counts) EXPECT_NEAR(count, 10000, 400);
  EXPECT_EQ(r.below(1), 0u);
  EXPECT_THROW(r.below(0), Error);
}

TEST(Bootstrap, IntervalOfTheMean) {
  std::vector<double> values = {1, 2, 3, 4, 5};
  BootstrapOptions options;
  Interval ci = bootstrap_interval(values, Statistic::kMean, options);
  // The bootstrap distribution of the mean has sd sqrt(2/5) = 0.632: about 3 +- 1.24.
  EXPECT_NEAR(ci.low, 1.8, 0.15);
  EXPECT_NEAR(ci.high, 4.2, 0.15);
  // Deterministic for a seed, different for another (on values whose resampled means do not
  // fall on a lattice).
  std::vector<double> uneven = {1.1, 2.3, 2.9, 4.7, 5.3, 3.14, 0.5};
  Interval first = bootstrap_interval(uneven, Statistic::kMean, options);
  Interval again = bootstrap_interval(uneven, Statistic::kMean, options);
  EXPECT_EQ(first.low, again.low);
  EXPECT_EQ(first.high, again.high);
  options.seed = 2;
  Interval other = bootstrap_interval(uneven, Statistic::kMean, options);
  EXPECT_TRUE(other.low != first.low || other.high != first.high);
  // A wider confidence gives a wider interval.
  options.confidence = 0.99;
  Interval wide = bootstrap_interval(uneven, Statistic::kMean, options);
  EXPECT_LE(wide.low, other.low);
  EXPECT_GE(wide.high, other.high);
}

TEST(Bootstrap, EdgeCases) {
  BootstrapOptions options;
  std::vector<double> single = {9.5};
  Interval one = bootstrap_interval(single, Statistic::kMedian, options);
  EXPECT_EQ(one.low, 9.5);
  EXPECT_EQ(one.high, 9.5);
  std::vector<double> same(10, 3.0);
  Interval flat = bootstrap_interval(same, Statistic::kMedian, options);
  EXPECT_EQ(flat.low, 3.0);
  EXPECT_EQ(flat.high, 3.0);
  EXPECT_THROW(bootstrap_interval({}, Statistic::kMean, options), Error);
  options.resamples = 10;
  EXPECT_THROW(bootstrap_interval(same, Statistic::kMean, options), Error);
  options.resamples = 1000;
  options.confidence = 1.0;
  Error e = test::error_of([&] { options.validate(); });
  EXPECT_THAT(e.message(), HasSubstr("--confidence 1"));
}

TEST(Compare, RatioDiffAndIntervals) {
  std::vector<double> control = {10.0, 10.2, 9.9, 10.1, 10.0, 9.8};
  std::vector<double> variant;
  for (double value : control) variant.push_back(value * 0.9);
  Comparison c = bootstrap_compare(control, variant, Statistic::kMean, {});
  EXPECT_DOUBLE_EQ(c.control, 10.0);
  EXPECT_NEAR(c.variant, 9.0, 1e-12);
  EXPECT_NEAR(c.diff, -1.0, 1e-12);
  EXPECT_NEAR(c.ratio, 0.9, 1e-12);
  EXPECT_LT(c.ratio_ci.high, 1.0);
  EXPECT_LE(c.ratio_ci.low, c.ratio);
  EXPECT_GE(c.ratio_ci.high, c.ratio);
  EXPECT_LT(c.diff_ci.high, 0.0);
  EXPECT_EQ(c.n_control, 6u);
  EXPECT_EQ(classify(c, std::nullopt), Verdict::kFaster);
  // A 10% difference is above a 2% noise floor, not below a 20% one.
  EXPECT_EQ(classify(c, 0.02), Verdict::kFaster);
  EXPECT_EQ(classify(c, 0.2), Verdict::kNoise);

  Comparison reverse = bootstrap_compare(variant, control, Statistic::kMedian, {});
  EXPECT_GT(reverse.ratio_ci.low, 1.0);
  EXPECT_EQ(classify(reverse, std::nullopt), Verdict::kSlower);

  Comparison same = bootstrap_compare(control, control, Statistic::kMean, {});
  EXPECT_EQ(same.ratio, 1.0);
  EXPECT_LE(same.ratio_ci.low, 1.0);
  EXPECT_GE(same.ratio_ci.high, 1.0);
  EXPECT_EQ(classify(same, std::nullopt), Verdict::kNoChange);

  std::vector<double> ten = {10.0}, nine = {9.0}, zero = {0.0};
  Comparison single = bootstrap_compare(ten, nine, Statistic::kMean, {});
  EXPECT_EQ(classify(single, std::nullopt), Verdict::kInsufficient);

  // The same inputs and seed give the same interval.
  Comparison again = bootstrap_compare(control, variant, Statistic::kMean, {});
  EXPECT_EQ(again.ratio_ci.low, c.ratio_ci.low);
  EXPECT_EQ(again.diff_ci.high, c.diff_ci.high);

  EXPECT_THROW(bootstrap_compare({}, variant, Statistic::kMean, {}), Error);
  EXPECT_THROW(bootstrap_compare(zero, variant, Statistic::kMean, {}), Error);
}

TEST(Compare, Names) {
  EXPECT_STREQ(verdict_name(Verdict::kNoChange), "no_change");
  EXPECT_STREQ(verdict_label(Verdict::kNoChange), "no change");
  EXPECT_STREQ(verdict_name(Verdict::kInsufficient), "insufficient");
  EXPECT_STREQ(gate_status_name(GateResult::Status::kMissing), "missing");
  EXPECT_STREQ(gate_kind_name(GateKind::kAbsolute), "absolute");
}

// ---- Numerics gates ----------------------------------------------------------------------------

MetricSteps steps_of(double loss, double grad, double logprob, double entropy, double ratio,
                     int count = 3) {
  MetricSteps out;
  for (int step = 1; step <= count; ++step) {
    out[step] = {{"loss", loss * step},
                 {"trainer/grad_norm", grad},
                 {"log_ratio/abs_mean", logprob},
                 {"entropy", entropy},
                 {"is_ratio/mean", ratio}};
  }
  return out;
}

const GateResult& gate(const NumericsResult& result, const std::string& name) {
  for (const GateResult& g : result.gates) {
    if (g.name == name) return g;
  }
  throw Error("no gate " + name);
}

TEST(Numerics, DefaultsAreTheSixGates) {
  std::vector<GateSpec> gates = default_gates();
  ASSERT_EQ(gates.size(), 6u);
  EXPECT_EQ(gates[3].name, "grad_norm");
  EXPECT_EQ(gates[3].limit, 2e-3);
  EXPECT_THAT(gates[3].keys, ElementsAre("gradient_norm", "grad_norm"));
  EXPECT_EQ(gates[5].kind, GateKind::kFinite);
  for (const GateSpec& spec : gates) EXPECT_FALSE(spec.reason.empty()) << spec.name;
}

TEST(Numerics, KnownDeviations) {
  MetricSteps a = steps_of(0.02, 1.0, 0.002, 12.0, 1.0);
  MetricSteps b = steps_of(0.02, 1.0 + 2e-5, 0.002 + 4e-7, 12.0, 1.0);
  MetricSteps v =
      steps_of(0.02 * (1 + 3e-7), 1.0 + 1e-5 + 1.6e-4, 0.002 + 2e-7 + 3e-6, 12.0, 1.0 - 1e-6);
  NumericsResult result = evaluate_numerics(a, b, v, default_gates());
  EXPECT_TRUE(result.pass);
  EXPECT_THAT(result.steps, ElementsAre(1, 2, 3));
  const GateResult& grad = gate(result, "grad_norm");
  EXPECT_EQ(grad.metric, "grad_norm");  // matched as a suffix of trainer/grad_norm
  EXPECT_NEAR(*grad.deviation, 1.6e-4 / (1 + 1e-5), 1e-12);
  EXPECT_NEAR(*grad.reference_noise, 2e-5 / (1 + 1e-5), 1e-12);
  EXPECT_EQ(grad.steps, 3u);
  const GateResult& logprob = gate(result, "logprob");
  EXPECT_NEAR(*logprob.deviation, 3e-6, 1e-12);  // absolute
  EXPECT_NEAR(*logprob.reference_noise, 4e-7, 1e-12);
  EXPECT_NEAR(*gate(result, "loss").deviation, 3e-7, 1e-12);
  EXPECT_EQ(*gate(result, "entropy").deviation, 0.0);
  EXPECT_NEAR(*gate(result, "is_ratio").deviation, 1e-6, 1e-12);
  const GateResult& finite = gate(result, "finite");
  EXPECT_EQ(finite.status, GateResult::Status::kPass);
  EXPECT_EQ(*finite.deviation, 0.0);
  EXPECT_EQ(finite.metric, "entropy,grad_norm,is_ratio/mean,log_ratio/abs_mean,loss");
}

TEST(Numerics, FailuresMissingAndOff) {
  MetricSteps a = steps_of(0.02, 1.0, 0.002, 12.0, 1.0);
  MetricSteps b = a;
  MetricSteps v = steps_of(0.02, 1.01, 0.002, 12.0, 1.0);
  v[2]["loss"] = NAN;
  v[3].erase("entropy");
  for (auto& [step, metrics] : a) metrics.erase("is_ratio/mean");
  std::vector<GateSpec> gates = default_gates();
  gates[2].limit = 1e-9;
  NumericsResult result = evaluate_numerics(a, b, v, gates);
  EXPECT_FALSE(result.pass);
  EXPECT_EQ(gate(result, "grad_norm").status, GateResult::Status::kFail);
  EXPECT_NEAR(*gate(result, "grad_norm").deviation, 0.01, 1e-12);
  const GateResult& loss = gate(result, "loss");
  EXPECT_EQ(loss.status, GateResult::Status::kFail);
  EXPECT_EQ(*loss.deviation, INFINITY);
  EXPECT_EQ(loss.worst_step, 2);
  EXPECT_THAT(loss.detail, HasSubstr("loss is missing or not finite at step 2"));
  const GateResult& ratio = gate(result, "is_ratio");
  EXPECT_EQ(ratio.status, GateResult::Status::kMissing);
  EXPECT_THAT(ratio.detail, HasSubstr("the references log none of: is_ratio/mean"));
  const GateResult& finite = gate(result, "finite");
  EXPECT_EQ(finite.status, GateResult::Status::kFail);
  EXPECT_EQ(*finite.deviation, 2.0);  // steps 2 (loss nan) and 3 (entropy missing)
  EXPECT_EQ(finite.worst_step, 2);

  // Turned off, a gate neither passes nor fails.
  gates[3].enabled = false;  // grad_norm
  gates[0].enabled = false;  // loss
  gates[2].enabled = false;  // entropy
  gates[4].enabled = false;  // is_ratio
  gates[5].enabled = false;  // finite
  NumericsResult off = evaluate_numerics(a, b, v, gates);
  EXPECT_TRUE(off.pass);
  EXPECT_EQ(gate(off, "grad_norm").status, GateResult::Status::kOff);
  EXPECT_EQ(gate(off, "logprob").status, GateResult::Status::kPass);
}

TEST(Numerics, UnloggedGradNormNeedsEachRunsWord) {
  MetricSteps a = steps_of(0.02, 1.0, 0.002, 12.0, 1.0);
  for (auto& [step, metrics] : a) metrics.erase("trainer/grad_norm");
  const std::string why = "skip_step_on_spikes is off";
  // Every run says it reports no gradient norm: not evaluated, not a failure.
  NumericsResult said = evaluate_numerics(a, a, a, default_gates(), {why, why, why});
  EXPECT_TRUE(said.pass);
  EXPECT_EQ(gate(said, "grad_norm").status, GateResult::Status::kNotEvaluated);
  EXPECT_THAT(gate(said, "grad_norm").detail, HasSubstr("not evaluated, not a failure"));
  // An old log (no word at all) or one run without that word: the metric is missing, a failure.
  for (const UnreportedMetrics& unreported :
       {UnreportedMetrics{}, UnreportedMetrics{why, std::nullopt, why}}) {
    NumericsResult silent = evaluate_numerics(a, a, a, default_gates(), unreported);
    EXPECT_FALSE(silent.pass);
    EXPECT_EQ(gate(silent, "grad_norm").status, GateResult::Status::kMissing);
  }
  // A gate whose keys came from --metric must find them, whatever the runs say.
  std::vector<GateSpec> gates = default_gates();
  gates[3].keys = {"grad_nrom"};
  gates[3].may_be_unlogged = false;
  MetricSteps logged = steps_of(0.02, 1.0, 0.002, 12.0, 1.0);
  EXPECT_EQ(
      gate(evaluate_numerics(logged, logged, logged, gates, {why, why, why}), "grad_norm").status,
      GateResult::Status::kMissing);
}

TEST(Numerics, NoisyReferencesAreFlagged) {
  MetricSteps a = steps_of(0.02, 1.0, 0.002, 12.0, 1.0);
  MetricSteps b = steps_of(0.02, 1.01, 0.002, 12.0, 1.0);
  NumericsResult result = evaluate_numerics(a, b, a, default_gates());
  const GateResult& grad = gate(result, "grad_norm");
  EXPECT_EQ(grad.status, GateResult::Status::kFail);  // the variant is 0.5% off their mean
  EXPECT_THAT(grad.detail, HasSubstr("the references differ by more than the limit"));
}

TEST(Numerics, StepsMustOverlap) {
  MetricSteps a = steps_of(0.02, 1.0, 0.002, 12.0, 1.0, 2);
  MetricSteps v;
  v[9] = a[1];
  EXPECT_THROW(evaluate_numerics(a, a, v, default_gates()), Error);
}

TEST(Numerics, FindMetric) {
  std::map<std::string, double> metrics = {
      {"loss", 1}, {"trainer/grad_norm", 2}, {"a/entropy", 3}, {"b/entropy", 4}, {"kl_loss", 5}};
  EXPECT_EQ(find_metric(metrics, "loss"), 1.0);
  EXPECT_EQ(find_metric(metrics, "grad_norm"), 2.0);
  EXPECT_FALSE(find_metric(metrics, "entropy"));  // ambiguous
  EXPECT_FALSE(find_metric(metrics, "kl"));
  EXPECT_FALSE(find_metric(metrics, "_loss"));
}

}  // namespace
}  // namespace rtb::logs
