#include "rtb/logs/arms.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/error.h"

namespace rtb::logs::arms {
namespace {

using ::testing::HasSubstr;

struct FakeRun {
  std::string arm;
  double step_s;  // each steady step's seconds
  int exit_code = 0;
  int steps = 4;  // step 0 (the compile) and steps-1 steady ones
};

// A pod's log as the arms wrapper and the driver write it, run r (from 1) being runs[r - 1].
std::string pod_log(const std::vector<FakeRun>& runs) {
  std::string log = "Program Start: now\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const FakeRun& r = runs[i];
    std::size_t run = i + 1;
    log += fmt::format(
        "BENCH_ARM {{\"name\":\"ab\",\"arm\":\"{}\",\"run\":{},\"knobs\":{{\"steps\":{}}}}}\n",
        r.arm, run, r.steps);
    if (r.exit_code == 0) {
      for (int step = 0; step < r.steps; ++step) {
        double seconds = step == 0 ? 300.0 : r.step_s;
        log += fmt::format(
            "BENCH_STEP {{\"arm\":\"{}\",\"run\":{},\"step\":{},\"seconds\":{:.6f},"
            "\"microbatch_s\":[1.0,1.0,1.0],\"microbatch_timing\":\"device\"}}\n",
            r.arm, run, step, seconds);
      }
      log +=
          fmt::format("BENCH_SUMMARY {{\"name\":\"ab\",\"arm\":\"{}\",\"run\":{}}}\n", r.arm, run);
    } else {
      log += "bench_driver: failed: RuntimeError: device lost\n";
    }
    log += fmt::format("BENCH_RUN_END {{\"arm\":\"{}\",\"run\":{},\"exit_code\":{}}}\n", r.arm, run,
                       r.exit_code);
  }
  return log;
}

// Runs of a control "a" at 83 s/step and an arm "b" `effect` seconds away, in `order` (arm
// letters), on a slice that drifts by `drift` seconds per run.
std::vector<FakeRun> drifting(const std::string& order, double effect, double drift) {
  std::vector<FakeRun> runs;
  for (std::size_t i = 0; i < order.size(); ++i) {
    double base = 83.0 + drift * static_cast<double>(i);
    runs.push_back({std::string(1, order[i]), order[i] == 'a' ? base : base + effect});
  }
  return runs;
}

PodReport analyze(const std::string& text) {
  return analyze_pod(parse_pod_log_text(text, "pod.log"), report::Options{});
}

TEST(ArmsReportTest, StepsAreKeyedByArmRunAndStep) {
  PodLog pod = parse_pod_log_text(pod_log(drifting("abba", -0.5, 0)), "pod.log");
  ASSERT_EQ(pod.runs.size(), 4u);
  EXPECT_EQ(pod.runs[1].arm, "b");
  EXPECT_EQ(pod.runs[1].run, 2);
  EXPECT_EQ(pod.runs[1].exit_code, 0);
  // Every run has its own steps 0..3, as a log of one run.
  for (const RunLogOfArm& run : pod.runs) EXPECT_EQ(run.log.steps.size(), 4u);
  PodReport report = analyze(pod_log(drifting("abba", -0.5, 0)));
  EXPECT_EQ(report.arms, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(report.runs.size(), 4u);
  EXPECT_DOUBLE_EQ(*report.runs[0].mean_s, 83.0);  // the compile step is left out
  EXPECT_EQ(report.runs[0].steps_used, 3u);
  EXPECT_DOUBLE_EQ(*report.runs[0].first_step_s, 300.0);
  EXPECT_DOUBLE_EQ(*report.runs[1].mean_s, 82.5);
}

// The required test: a linear drift across runs, which abba cancels and blocks does not.
TEST(ArmsReportTest, AbbaCancelsALinearDriftThatBlocksDoNot) {
  const double effect = -1.0, drift = 0.3;
  PodReport abba = analyze(pod_log(drifting("abbaabba", effect, drift)));
  ASSERT_EQ(abba.verdicts.size(), 1u);
  const ArmVerdict& fair = abba.verdicts[0];
  ASSERT_EQ(fair.diffs.size(), 4u);
  // Each pair is the effect plus or minus one run's drift; their mean is the effect.
  EXPECT_NEAR(fair.diffs[0], effect + drift, 1e-9);
  EXPECT_NEAR(fair.diffs[1], effect - drift, 1e-9);
  EXPECT_NEAR(*fair.mean_diff_s, effect, 1e-9);
  EXPECT_EQ(fair.verdict, Verdict::kFaster);
  ASSERT_TRUE(fair.diff_ci);
  EXPECT_LE(fair.diff_ci->low, effect);
  EXPECT_GE(fair.diff_ci->high, effect);

  PodReport blocks = analyze(pod_log(drifting("aaaabbbb", effect, drift)));
  const ArmVerdict& biased = blocks.verdicts[0];
  // Every pair is four runs apart: the drift of four runs adds to the effect.
  EXPECT_NEAR(*biased.mean_diff_s, effect + 4 * drift, 1e-9);
  EXPECT_EQ(biased.verdict, Verdict::kSlower);  // the wrong way round
  EXPECT_THAT(format_arms_text({blocks}), HasSubstr("verdict: slower"));
  EXPECT_THAT(format_arms_text({abba}), HasSubstr("verdict: faster"));
}

TEST(ArmsReportTest, TooFewPairsGiveNoInterval) {
  PodReport report = analyze(pod_log(drifting("abba", -1.0, 0)));
  const ArmVerdict& v = report.verdicts[0];
  EXPECT_EQ(v.diffs.size(), 2u);
  EXPECT_FALSE(v.diff_ci);
  EXPECT_EQ(v.verdict, Verdict::kInsufficient);
  EXPECT_THAT(format_arms_text({report}), HasSubstr("too few pairs"));
}

TEST(ArmsReportTest, AFailedRunDropsItsPairNamedAndFailsTheReport) {
  std::vector<FakeRun> runs = drifting("abbaabba", -1.0, 0);
  runs[2].exit_code = 1;  // b's second run
  PodReport report = analyze(pod_log(runs));
  const ArmVerdict& v = report.verdicts[0];
  ASSERT_EQ(v.pairs.size(), 4u);
  EXPECT_FALSE(v.pairs[1].diff_s);
  EXPECT_THAT(v.pairs[1].dropped, HasSubstr("b run 3 failed (exit 1)"));
  EXPECT_EQ(v.diffs.size(), 3u);
  EXPECT_EQ(v.verdict, Verdict::kFaster);
  EXPECT_EQ(report.outcome(), Outcome::kFail);
  EXPECT_THAT(report.failed_runs[0], HasSubstr("b run 3: exit 1"));
}

TEST(ArmsReportTest, TheControlsOwnSpreadIsReportedWhenItRepeats) {
  // The control wanders by 0.4 s between its runs; its arm pairs differ by 0.1 s either way.
  std::vector<FakeRun> runs = {{"a", 83.0}, {"b", 82.9}, {"b", 83.3}, {"a", 83.4},
                               {"a", 83.0}, {"b", 83.1}, {"b", 83.5}, {"a", 83.4}};
  PodReport report = analyze(pod_log(runs));
  ASSERT_TRUE(report.aa);
  EXPECT_EQ(report.aa->means.size(), 4u);
  EXPECT_NEAR(report.aa->range_s, 0.4, 1e-9);
  EXPECT_EQ(report.verdicts[0].verdict, Verdict::kNoChange);
  EXPECT_THAT(format_arms_text({report}), HasSubstr("A/A (4 runs of a)"));
}

TEST(ArmsReportTest, ARunThatNeverStartedCountsAsFailed) {
  std::string log = pod_log(drifting("ab", -1.0, 0));
  log += "bench_driver: STEPS='0': must be >= 1\n";
  log += "BENCH_RUN_END {\"arm\":\"b\",\"run\":3,\"exit_code\":2}\n";
  PodReport report = analyze(log);
  ASSERT_EQ(report.runs.size(), 3u);
  EXPECT_THAT(report.runs[2].failed, HasSubstr("exit 2"));
}

TEST(ArmsReportTest, ALogWithoutArmsIsRefused) {
  EXPECT_THROW(parse_pod_log_text("BENCH_STEP {\"step\":0,\"seconds\":1}\n", "x.log"), Error);
}

TEST(ArmsReportTest, TheSameArmInTwoPodsIsTheReference) {
  // The second pod runs 0.25 s/step slower throughout; each arm's mean moves by that much.
  PodReport first = analyze(pod_log(drifting("abba", -1.0, 0)));
  std::vector<FakeRun> runs = drifting("abba", -1.0, 0);
  for (FakeRun& run : runs) run.step_s += 0.25;
  PodReport second = analyze_pod(parse_pod_log_text(pod_log(runs), "pod2.log"), report::Options{});
  std::vector<AcrossPods> across = across_pods({first, second});
  ASSERT_EQ(across.size(), 2u);
  EXPECT_EQ(across[0].arm, "a");
  EXPECT_DOUBLE_EQ(*across[0].means_s[0], 83.0);
  EXPECT_NEAR(*across[0].diff_s[1], 0.25, 1e-9);
  EXPECT_NEAR(*across[1].diff_s[1], 0.25, 1e-9);
  // Two runs of each arm in each pod: two pairs, under the pairs' minimum of three.
  EXPECT_EQ(across[0].pairs_used, (std::vector<std::size_t>{0, 2}));
  EXPECT_FALSE(across[0].diff_ci[0]);
  EXPECT_FALSE(across[0].diff_ci[1]);
  std::string text = format_arms_text({first, second});
  EXPECT_THAT(text, HasSubstr("across pods"));
  EXPECT_THAT(text, HasSubstr("  a: 83.000 s 83.250 s (+0.2500 s; too few pairs for an interval "
                              "(2 of at least 3))\n"));
  // What each figure measures is said once, before the pods.
  EXPECT_EQ(text.find("run mean:"), text.rfind("run mean:"));
  EXPECT_LT(text.find("run mean:"), text.find("same-pod A/B pod.log"));
  EXPECT_TRUE(across_pods({first}).empty());
}

// The reference across pods has the interval of a pod's pairs: the arm's k-th run in the second
// pod minus its k-th run in the first, bootstrapped. Checked by hand: with three pair diffs, a
// resample draws the smallest three times with probability 1/27 (3.7%), more than the 2.5% below
// a 95% interval, so the interval runs from the smallest diff to the largest.
TEST(ArmsReportTest, TheReferenceAcrossPodsHasTheIntervalOfThePairs) {
  PodReport first = analyze(pod_log(drifting("ababab", -1.0, 0)));  // a at 83, b at 82 s/step
  // The second pod: a's runs 0.25, 0.5 and 0.75 s/step slower than the first pod's; b's 0.5 each.
  std::vector<FakeRun> runs = {{"a", 83.25}, {"b", 82.5},  {"a", 83.5},
                               {"b", 82.5},  {"a", 83.75}, {"b", 82.5}};
  PodReport second = analyze_pod(parse_pod_log_text(pod_log(runs), "pod2.log"), report::Options{});
  std::vector<AcrossPods> across = across_pods({first, second});
  ASSERT_EQ(across.size(), 2u);
  const AcrossPods& a = across[0];
  EXPECT_EQ(a.pairs_used, (std::vector<std::size_t>{0, 3}));
  EXPECT_DOUBLE_EQ(*a.diff_s[1], 0.5);  // (0.25 + 0.5 + 0.75) / 3
  ASSERT_TRUE(a.diff_ci[1]);
  EXPECT_DOUBLE_EQ(a.diff_ci[1]->low, 0.25);
  EXPECT_DOUBLE_EQ(a.diff_ci[1]->high, 0.75);
  EXPECT_FALSE(a.diff_ci[0]);  // the first pod is the reference's zero
  // Equal diffs leave the bootstrap nothing to vary.
  ASSERT_TRUE(across[1].diff_ci[1]);
  EXPECT_DOUBLE_EQ(across[1].diff_ci[1]->low, 0.5);
  EXPECT_DOUBLE_EQ(across[1].diff_ci[1]->high, 0.5);
  std::string text = format_arms_text({first, second});
  EXPECT_THAT(text, HasSubstr("  a: 83.000 s 83.500 s (+0.5000 s, interval [+0.2500, +0.7500] "
                              "over 3 pairs)\n"));
  std::string json = format_arms_json({first, second});
  EXPECT_THAT(json, HasSubstr("\"pairs_used\": [0, 3]"));
  EXPECT_THAT(json, HasSubstr("\"diff_ci\": [null, {\"low\": 0.25, \"high\": 0.75}]"));

  // A failed run in the second pod drops its pair, as inside a pod: two pairs are too few.
  runs[2].exit_code = 1;
  PodReport failed = analyze_pod(parse_pod_log_text(pod_log(runs), "pod2.log"), report::Options{});
  std::vector<AcrossPods> dropped = across_pods({first, failed});
  EXPECT_EQ(dropped[0].pairs_used[1], 2u);
  EXPECT_FALSE(dropped[0].diff_ci[1]);
}

TEST(ArmsReportTest, JsonHasTheSchemaAndEachPair) {
  std::string json = format_arms_json({analyze(pod_log(drifting("abbaabba", -1.0, 0.1)))});
  EXPECT_THAT(json, HasSubstr("\"schema\": \"rtb.bench-report.arms/1\""));
  EXPECT_THAT(json, HasSubstr("\"verdict\": \"faster\""));
  EXPECT_THAT(json, HasSubstr("\"control_run\": 1"));
  EXPECT_THAT(json, HasSubstr("\"across_pods\": []"));
}

}  // namespace
}  // namespace rtb::logs::arms
