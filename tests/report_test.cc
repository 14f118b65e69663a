#include "rtb/report.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "rtb/error.h"
#include "rtb/steplog.h"

namespace rtb::report {
namespace {

using steplog::RunLog;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A bench driver log from known times: step s (1-based) takes step_s[s-1] seconds, and its
// micro-batches mb[s-1]. Every step carries `tokens` tokens; the summary says `chips` chips.
RunLog bench_log(const std::string& name, const std::vector<double>& step_s,
                 const std::vector<std::vector<double>>& mb, double tokens = 1000,
                 std::optional<int> chips = 2, bool with_timing = false) {
  std::string text = fmt::format(
      "[TrainerBench] {}: bench driver starting: {} steps x {} "
      "fwd_bwd calls\n",
      name, step_s.size(), mb.empty() ? 0 : mb[0].size());
  for (std::size_t s = 0; s < step_s.size(); ++s) {
    double per_chip = tokens / step_s[s] / chips.value_or(2);
    text += fmt::format(R"(BENCH_STEP {{"step":{},"seconds":{},"microbatch_s":[{}],"tokens":{},)"
                        R"("tokens_per_s_per_chip":{}}})"
                        "\n",
                        s + 1, step_s[s], fmt::join(mb[s], ","), tokens, per_chip);
    if (with_timing) {
      // Back-to-back micro-batches of the given times, dispatched 0.01 s apart from t=0,
      // snapshot at the end of an update of 0.5 s.
      double t = 0, ready = 0;
      std::vector<std::string> entries;
      std::vector<std::array<double, 3>> events;
      for (std::size_t i = 0; i < mb[s].size(); ++i) {
        double begin = 0.01 * static_cast<double>(i), end = begin + 0.005;
        ready = std::max(end, ready) + mb[s][i];
        events.push_back({begin, end, ready});
        t = ready;
      }
      double update_ready = t + 0.5, now = update_ready;
      for (std::size_t i = 0; i < events.size(); ++i) {
        entries.push_back(
            fmt::format(R"({{"i":{},"dispatch_begin_ago_s":{:.3f},"dispatch_end_ago_s":{:.3f},)"
                        R"("ready_ago_s":{:.3f}}})",
                        i, now - events[i][0], now - events[i][1], now - events[i][2]));
      }
      text +=
          fmt::format(R"(TRAINER_STEP_TIMING step={} policy_version={} rtt_s=0.002 timing={{"v":1,)"
                      R"("train_step":{},"mb":[{}],"update":{{"dispatch_begin_ago_s":{:.3f},)"
                      R"("dispatch_end_ago_s":{:.3f},"ready_ago_s":0.0}},"prepare":null}})"
                      "\n",
                      s + 1, s + 1, s + 1, fmt::join(entries, ","), now - 0.1, now - 0.09);
    }
  }
  if (chips) {
    text += fmt::format(R"(BENCH_SUMMARY {{"name":"{}","steps":{},"chips":{}}})"
                        "\n",
                        name, step_s.size(), *chips);
  }
  return steplog::parse_run_log_text(text, name + ".log");
}

std::vector<std::vector<double>> microbatches(std::size_t steps, std::vector<double> row) {
  return std::vector<std::vector<double>>(steps, row);
}

TEST(Range, Parse) {
  Range r = parse_range("1-4", "--steps");
  EXPECT_EQ(r.first, 1);
  EXPECT_EQ(r.last, 4);
  EXPECT_TRUE(r.contains(4));
  EXPECT_FALSE(r.contains(5));
  EXPECT_EQ(r.str(), "1-4");
  Range open = parse_range("3-", "--microbatches");
  EXPECT_FALSE(open.last);
  EXPECT_TRUE(open.contains(1000));
  EXPECT_EQ(open.str(), "3-last");
  EXPECT_EQ(parse_range("3-last", "x").str(), "3-last");
  EXPECT_EQ(parse_range("5", "x").str(), "5");
  for (const char* bad : {"", "a", "4-2", "-3", "1-x", "1.5", "1--2"}) {
    EXPECT_THROW(parse_range(bad, "--steps"), Error) << bad;
  }
  try {
    parse_range("4-2", "--steps");
  } catch (const Error& e) {
    EXPECT_EQ(e.message(), "--steps 4-2: the range ends before it starts");
  }
}

TEST(AnalyzeRun, KnownFiguresWithTheDefaults) {
  // Step 1 compiles; steps 2-4 take 10, 11, 12 s; micro-batches 3..4 of each are regular.
  RunLog log = bench_log("ctl", {40, 10, 11, 12}, microbatches(4, {3, 2, 2.5, 2.4}), 1000, 2, true);
  RunAnalysis run = analyze_run(log, {});
  EXPECT_EQ(run.name, "ctl");
  EXPECT_THAT(run.steps_logged, ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(run.steps_used, ElementsAre(2, 3, 4));
  EXPECT_DOUBLE_EQ(*run.step_mean, 11.0);
  EXPECT_DOUBLE_EQ(run.step_sd, 1.0);
  EXPECT_LE(run.step_ci->low, 11.0);
  EXPECT_GE(run.step_ci->high, 11.0);
  EXPECT_GE(run.step_ci->low, 10.0);
  EXPECT_LE(run.step_ci->high, 12.0);
  EXPECT_EQ(run.microbatch_source, "BENCH_STEP");
  EXPECT_THAT(run.microbatch_s, ElementsAre(2.5, 2.4, 2.5, 2.4, 2.5, 2.4));
  EXPECT_DOUBLE_EQ(*run.microbatch_median, 2.45);
  EXPECT_NEAR(*run.tokens_per_s_per_chip, 1000.0 / 11.0 / 2.0, 1e-9);
  EXPECT_EQ(run.timeline.steps, 3u);
  EXPECT_EQ(run.timeline.microbatches, 12u);
  ASSERT_EQ(run.timeline.device_s.size(), 6u);
  EXPECT_NEAR(run.timeline.device_s[0], 2.5, 1.5e-3);
  EXPECT_NEAR(run.timeline.device_s[1], 2.4, 1.5e-3);
  EXPECT_EQ(run.timeline.sync_not_applicable, 3u);
  EXPECT_FALSE(run.partial);
}

TEST(AnalyzeRun, StepAndMicroBatchRanges) {
  RunLog log = bench_log("ctl", {40, 10, 11, 12}, microbatches(4, {3, 2, 2.5, 2.4}));
  Options options;
  options.steps = parse_range("1-2", "--steps");
  options.microbatches = parse_range("1-1", "--microbatches");
  options.microbatches_given = true;
  RunAnalysis run = analyze_run(log, options);
  EXPECT_THAT(run.steps_used, ElementsAre(1, 2));
  EXPECT_DOUBLE_EQ(*run.step_mean, 25.0);
  EXPECT_THAT(run.microbatch_s, ElementsAre(3, 3));

  // Steps of two micro-batches: the default range 3..last falls back to all of them; an explicit
  // range does not.
  RunLog short_steps = bench_log("short", {9, 5, 5}, microbatches(3, {2, 3}));
  EXPECT_THAT(analyze_run(short_steps, {}).microbatch_s, ElementsAre(2, 3, 2, 3));
  Options explicit_range;
  explicit_range.microbatches = parse_range("3-", "--microbatches");
  explicit_range.microbatches_given = true;
  RunAnalysis none = analyze_run(short_steps, explicit_range);
  EXPECT_TRUE(none.microbatch_s.empty());
  EXPECT_FALSE(none.microbatch_median);

  // A range that misses the log: warned, nothing used.
  Options far;
  far.steps = parse_range("10-12", "--steps");
  RunAnalysis empty = analyze_run(log, far);
  EXPECT_TRUE(empty.step_s.empty());
  EXPECT_FALSE(empty.step_mean);
  EXPECT_THAT(empty.warnings.back(), HasSubstr("no logged step in --steps 10-12 (logged: 1-4)"));
  Options partly;
  partly.steps = parse_range("3-6", "--steps");
  EXPECT_THAT(analyze_run(log, partly).warnings.back(),
              HasSubstr("--steps 3-6: steps 5-6 not logged"));

  // One step only: it is used (there is nothing else).
  RunLog one = bench_log("one", {7}, microbatches(1, {2, 2, 3}));
  EXPECT_THAT(analyze_run(one, {}).steps_used, ElementsAre(1));
}

TEST(AnalyzeRun, ChipsFromTheStepLinesWithoutASummary) {
  RunLog log = bench_log("nosummary", {40, 10, 12}, microbatches(3, {1, 1, 1}), 6000, std::nullopt);
  RunAnalysis run = analyze_run(log, {});
  EXPECT_TRUE(run.partial);
  EXPECT_NEAR(*run.tokens_per_s_per_chip, 6000.0 / 11.0 / 2.0, 1e-9);
}

TEST(AnalyzeRun, NoStepLinesIsAnError) {
  RunLog log = steplog::parse_run_log_text("just\nnoise\n", "empty.log");
  try {
    analyze_run(log, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "empty.log");
    EXPECT_THAT(e.message(), HasSubstr("no step timing lines"));
  }
}

TEST(BuildReport, ComparisonsNoiseFloorAndFailIfSlower) {
  auto mb = microbatches(5, {3, 3, 2, 2, 2});
  Inputs inputs;
  inputs.runs.push_back(bench_log("ctl", {40, 10.0, 10.1, 9.9, 10.0}, mb));
  inputs.runs.push_back(bench_log("fast", {40, 9.0, 9.1, 8.9, 9.0}, mb));
  inputs.runs.push_back(bench_log("slow", {40, 10.4, 10.5, 10.3, 10.4}, mb));
  inputs.runs.push_back(bench_log("ctl", {40, 10.0, 10.1, 9.9, 10.0}, mb));  // a name twice
  Options options;
  options.fail_if_slower_pct = 3.0;
  Report report = build_report(inputs, options);
  ASSERT_EQ(report.comparisons.size(), 3u);
  const RunComparison& fast = report.comparisons[0];
  EXPECT_EQ(fast.run, "fast");
  EXPECT_EQ(fast.control, "ctl");
  EXPECT_NEAR(fast.step->stats.ratio, 0.9, 1e-12);
  EXPECT_NEAR(fast.step->stats.diff, -1.0, 1e-12);
  EXPECT_EQ(fast.step->verdict, bench::Verdict::kFaster);
  // The micro-batches are the same: no change.
  EXPECT_EQ(fast.microbatch->stats.ratio, 1.0);
  EXPECT_EQ(fast.microbatch->verdict, bench::Verdict::kNoChange);
  EXPECT_EQ(report.comparisons[1].step->verdict, bench::Verdict::kSlower);
  EXPECT_EQ(report.comparisons[2].run, "ctl (ctl.log)");
  // slow is 4% slower, beyond --fail-if-slower 3.
  ASSERT_EQ(report.slower_than_allowed.size(), 1u);
  EXPECT_THAT(report.slower_than_allowed[0], HasSubstr("slow: s/step +4.00% slower than ctl"));
  EXPECT_EQ(report.exit_code(), 1);

  // With an A/A pair 5% apart, both differences are noise and nothing trips.
  inputs.control_pair.emplace(bench_log("a1", {40, 10, 10.1, 9.9, 10}, mb),
                              bench_log("a2", {40, 10.5, 10.6, 10.4, 10.5}, mb));
  Report noisy = build_report(inputs, options);
  EXPECT_NEAR(*noisy.noise_floor->step_rel, 0.05, 1e-12);
  EXPECT_EQ(*noisy.noise_floor->microbatch_rel, 0.0);
  EXPECT_EQ(noisy.comparisons[0].step->verdict, bench::Verdict::kFaster);  // 10% > 5%
  EXPECT_EQ(noisy.comparisons[1].step->verdict, bench::Verdict::kNoise);   // 4% < 5%
  EXPECT_TRUE(noisy.slower_than_allowed.empty());
  EXPECT_EQ(noisy.exit_code(), 0);
}

TEST(BuildReport, Numerics) {
  auto with_metrics = [](const std::string& name, double grad) {
    std::string text;
    for (int step = 1; step <= 3; ++step) {
      text += fmt::format(
          R"(BENCH_STEP {{"step":{},"seconds":5,"metrics":{{"loss":0.5,"gradient_norm":{},)"
          R"("entropy":12,"log_ratio":{{"abs_mean":0.002}},"is_ratio":{{"mean":1.0}}}}}})"
          "\n",
          step, grad);
    }
    return steplog::parse_run_log_text(text, name);
  };
  Inputs inputs;
  inputs.numerics = {with_metrics("r1", 2.0), with_metrics("r2", 2.0), with_metrics("v", 2.002)};
  Report report = build_report(inputs, {});
  ASSERT_TRUE(report.numerics);
  EXPECT_TRUE(report.numerics->result.pass);  // 1e-3 relative, under 2e-3
  EXPECT_EQ(report.numerics->variant, "v");
  inputs.numerics[2] = with_metrics("v", 2.01);
  EXPECT_FALSE(build_report(inputs, {}).numerics->result.pass);
  EXPECT_EQ(build_report(inputs, {}).exit_code(), 1);
  inputs.numerics[1] =
      steplog::parse_run_log_text(R"(BENCH_STEP {"step":1,"seconds":5})", "bare.log");
  try {
    build_report(inputs, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "bare.log");
    EXPECT_THAT(e.message(), HasSubstr("no per-step metrics"));
  }
}

TEST(Writers, TextJsonAndSvg) {
  auto mb = microbatches(3, {3, 3, 2, 2});
  Inputs inputs;
  inputs.runs.push_back(bench_log("ctl", {40, 10.0, 10.2}, mb, 1000, 2, true));
  inputs.runs.push_back(bench_log("var", {40, 9.0, 9.2}, mb, 1000, 2, true));
  Report report = build_report(inputs, {});

  std::string text = format_text(report);
  EXPECT_THAT(text,
              HasSubstr("var against ctl: 10.100 -> 9.100 s per optimizer step, mean of "
                        "steps 2-3 (-9.90%, faster), and 2.000 -> 2.000 s per regular micro-batch "
                        "(+0.00%, no change)"));
  EXPECT_THAT(text, HasSubstr("ctl (control)"));
  EXPECT_THAT(text, HasSubstr("trainer timeline"));

  steplog::Value json = steplog::parse_value(format_json(report), steplog::Syntax::kJson);
  EXPECT_EQ(json.find("schema")->string, "rtb.bench-report/1");
  const steplog::Value& runs = *json.find("runs");
  ASSERT_EQ(runs.array.size(), 2u);
  const steplog::Value& step = *runs.array[1].find("step_s");
  EXPECT_EQ(runs.array[1].find("name")->string, "var");
  EXPECT_DOUBLE_EQ(step.find("mean")->number, 9.1);
  EXPECT_EQ(step.find("n")->number, 2);
  EXPECT_TRUE(step.find("ci_low")->is_number());
  EXPECT_TRUE(step.find("ci_high")->is_number());
  EXPECT_EQ(runs.array[1].find("microbatch_s")->find("median")->number, 2);
  EXPECT_EQ(runs.array[1].find("microbatch_s")->find("n")->number, 4);
  const steplog::Value& comparison = json.find("comparisons")->array.at(0);
  EXPECT_EQ(comparison.find("run")->string, "var");
  EXPECT_NEAR(comparison.find("ratio")->number, 9.1 / 10.1, 1e-12);
  EXPECT_EQ(comparison.find("verdict")->string, "faster");
  EXPECT_TRUE(comparison.find("ci_low")->is_number());
  EXPECT_EQ(comparison.find("microbatch")->find("verdict")->string, "no_change");
  EXPECT_TRUE(json.find("noise_floor")->is_null());
  EXPECT_TRUE(json.find("numerics")->is_null());
  EXPECT_EQ(json.find("exit_code")->number, 0);

  std::string svg = timeline_svg(inputs.runs, report, std::nullopt);
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("micro-batch 3: 2.000 s on the device"));
  EXPECT_THAT(svg, HasSubstr(">step 3<"));
  std::string missing = timeline_svg(inputs.runs, report, 9);
  EXPECT_THAT(missing, HasSubstr("no TRAINER_STEP_TIMING for step 9"));
  inputs.runs.pop_back();
  EXPECT_THROW(timeline_svg(inputs.runs, report, std::nullopt), Error);
}

}  // namespace
}  // namespace rtb::report
