#include "rtb/logs/report.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "logs/report_test_logs.h"
#include "rtb/base/error.h"
#include "rtb/logs/gates.h"
#include "rtb/logs/report_json.h"
#include "rtb/logs/report_text.h"
#include "rtb/logs/steplog.h"
#include "test_util.h"

namespace rtb::logs::report {
namespace {

using steplog::RunLog;

// A step of the current bench driver's log (steps count from 0; step 0 compiles).
struct Step {
  double seconds;
  std::vector<double> mb = {9.3, 9.2, 9.08, 9.09, 9.07};
  std::string timing = "device";  // "" writes no microbatch_timing (older drivers)
  bool profiled = false;
  double tokens = 35'106'048;  // 64 rows of 60,948 real tokens, 9 micro-batches
};

// The seed's shape: 64 rows x 65,536 tokens per row x 9 micro-batches on 128 chips.
RunLog current_log(const std::string& name, const std::vector<Step>& steps,
                   bool with_summary = true) {
  std::string text;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    const Step& step = steps[s];
    std::string timing =
        step.timing.empty() ? "" : fmt::format(R"("microbatch_timing":"{}",)", step.timing);
    text += fmt::format(
        R"(I1013 18:51:14.1 140 bench.py:1] BENCH_STEP {{"step":{},"seconds":{},)"
        R"("microbatch_s":[{}],{}"tokens":{},"padded_tokens":37748736,"update":"fused",)"
        R"("profiled":{},"staged":false,"metrics":{{}}}})"
        "\n",
        s, step.seconds, fmt::join(step.mb, ","), timing, step.tokens, step.profiled);
  }
  if (with_summary) {
    text += fmt::format(
        R"(BENCH_SUMMARY {{"name":"{}","steps":{},"micro_steps":9,"rows":64,)"
        R"("tokens_per_row":65536,"chips":128,"first_step_s":{},"microbatch_timing":"device"}})"
        "\n",
        name, steps.size(), steps.front().seconds);
  }
  return steplog::parse_run_log_text(text, name + ".log");
}

// Steps 1-4 with the given mean (the four times are mean -1.5, +0.5, +1.5, -0.5 ms).
std::vector<Step> steady_steps(double mean, const std::string& timing = "device") {
  std::vector<Step> steps = {{130.0}};
  for (double offset : {-0.0015, 0.0005, 0.0015, -0.0005}) steps.push_back({mean + offset});
  for (Step& step : steps) step.timing = timing;
  return steps;
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
  // Real tokens per chip; the padded figure needs the summary's rows and tokens_per_row.
  EXPECT_NEAR(*run.real_tokens_per_s_per_chip, 1000.0 / 11.0 / 2.0, 1e-9);
  EXPECT_FALSE(run.tokens_per_s_per_chip);
  EXPECT_THAT(run.tokens_per_s_per_chip_unknown, HasSubstr("no rows and tokens_per_row"));
  EXPECT_EQ(run.microbatch_timing, MicrobatchTiming::kUnlabelled);
  ASSERT_TRUE(run.first_step);
  EXPECT_EQ(run.first_step->step, 1);
  EXPECT_EQ(run.first_step->seconds, 40);
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
  EXPECT_THAT(texts_of(empty.diagnostics).back(),
              HasSubstr("no logged step in --steps 10-12 (logged: 1-4)"));
  Options partly;
  partly.steps = parse_range("3-6", "--steps");
  EXPECT_THAT(texts_of(analyze_run(log, partly).diagnostics).back(),
              HasSubstr("--steps 3-6: steps 5-6 not logged"));

  // One step only: it is used (there is nothing else).
  RunLog one = bench_log("one", {7}, microbatches(1, {2, 2, 3}));
  EXPECT_THAT(analyze_run(one, {}).steps_used, ElementsAre(1));
}

TEST(AnalyzeRun, ChipsFromTheStepLinesWithoutASummary) {
  RunLog log = bench_log("nosummary", {40, 10, 12}, microbatches(3, {1, 1, 1}), 6000, std::nullopt);
  RunAnalysis run = analyze_run(log, {});
  EXPECT_TRUE(run.partial);
  EXPECT_NEAR(*run.real_tokens_per_s_per_chip, 6000.0 / 11.0 / 2.0, 1e-9);
  EXPECT_FALSE(run.tokens_per_s_per_chip);
}

TEST(TokensPerSecondPerChip, TheSeedsThreeFigures) {
  // rows 64 x tokens_per_row 65536 x micro_steps 9 / s per step / 128 chips, padding included.
  EXPECT_EQ(std::lround(padded_tokens_per_s_per_chip(64, 65536, 9, 82.671, 128)), 3567);
  EXPECT_EQ(std::lround(padded_tokens_per_s_per_chip(64, 65536, 9, 106.30, 128)), 2774);
  EXPECT_EQ(std::lround(padded_tokens_per_s_per_chip(64, 65536, 9, 89.77, 128)), 3285);

  // The same from logs: BENCH_SUMMARY rows, tokens_per_row, micro_steps and chips, over the mean
  // of steps 1-4 (step 0 compiles).
  for (auto [mean, expected] : {std::pair{82.671, 3567L}, {106.30, 2774L}, {89.77, 3285L}}) {
    RunAnalysis run = analyze_run(current_log("seed", steady_steps(mean)), {});
    EXPECT_THAT(run.steps_used, ElementsAre(1, 2, 3, 4));
    EXPECT_NEAR(*run.step_mean, mean, 1e-9);
    EXPECT_EQ(std::lround(*run.tokens_per_s_per_chip), expected) << mean;
    EXPECT_NEAR(*run.real_tokens_per_s_per_chip, 35'106'048 / mean / 128, 1e-9);
    EXPECT_TRUE(run.tokens_per_s_per_chip_unknown.empty());
  }
  Inputs inputs;
  inputs.runs.push_back(current_log("seed", steady_steps(82.671)));
  std::string text = format_text(build_report(inputs, {}));
  EXPECT_THAT(text, HasSubstr("tok/s/chip: rows x tokens_per_row x micro-batches (padding "
                              "included, the seed's figure) / s/step / chips; real: the steps' "
                              "real tokens / s/step / chips"));
  EXPECT_THAT(text, HasSubstr("  3,567            3,318  130.000 (step 0)"));

  // Without a summary, the steps' padded_tokens give the same figure.
  RunAnalysis partial = analyze_run(current_log("nosummary", steady_steps(82.671), false), {});
  EXPECT_FALSE(partial.tokens_per_s_per_chip);  // and no chip count either
  EXPECT_FALSE(partial.real_tokens_per_s_per_chip);
  EXPECT_EQ(partial.tokens_per_s_per_chip_unknown, "no chip count (BENCH_SUMMARY chips)");
}

TEST(AnalyzeRun, FirstStepIsShownApartFromTheMeans) {
  RunAnalysis run = analyze_run(current_log("ctl", steady_steps(82.671)), {});
  ASSERT_TRUE(run.first_step);
  EXPECT_EQ(run.first_step->step, 0);
  EXPECT_EQ(run.first_step->seconds, 130.0);
  EXPECT_THAT(run.steps_used, ElementsAre(1, 2, 3, 4));
  // --steps 1-4 is the seed's "mean of steps 1-4" of a 5-step run.
  Options seed;
  seed.steps = parse_range("1-4", "--steps");
  EXPECT_NEAR(*analyze_run(current_log("ctl", steady_steps(82.671)), seed).step_mean, 82.671, 1e-9);
}

TEST(AnalyzeRun, ProfiledStepsAreLeftOutUnlessAskedFor) {
  std::vector<Step> steps = steady_steps(82.671);
  steps[2].seconds = 106.30;
  steps[2].mb = {12, 12, 12, 12, 12};
  steps[2].profiled = true;
  RunLog log = current_log("prof", steps);
  RunAnalysis run = analyze_run(log, {});
  EXPECT_THAT(run.steps_used, ElementsAre(1, 3, 4));
  EXPECT_THAT(run.profiled_left_out, ElementsAre(2));
  EXPECT_NEAR(*run.step_mean, (82.6695 + 82.6725 + 82.6705) / 3, 1e-9);
  EXPECT_EQ(run.microbatch_s.size(), 9u);
  EXPECT_TRUE(texts_of(run.diagnostics).empty());
  Inputs inputs;
  inputs.runs.push_back(log);
  EXPECT_THAT(format_text(build_report(inputs, {})),
              HasSubstr("prof: profiled step 2 left out of the figures (--include-profiled keeps "
                        "them)\n"));

  Options include;
  include.include_profiled = true;
  RunAnalysis all = analyze_run(log, include);
  EXPECT_THAT(all.steps_used, ElementsAre(1, 2, 3, 4));
  EXPECT_TRUE(all.profiled_left_out.empty());
  EXPECT_NEAR(*all.step_mean, (82.6695 + 106.30 + 82.6725 + 82.6705) / 4, 1e-9);
  EXPECT_EQ(all.microbatch_s.size(), 12u);

  // Nothing left: no figure (not a silent fallback to the profiled steps), and a warning.
  for (Step& step : steps) step.profiled = true;
  RunAnalysis none = analyze_run(current_log("allprof", steps), {});
  EXPECT_TRUE(none.steps_used.empty());
  EXPECT_FALSE(none.step_mean);
  EXPECT_FALSE(none.microbatch_median);
  EXPECT_FALSE(none.tokens_per_s_per_chip);
  ASSERT_EQ(none.diagnostics.size(), 1u);
  EXPECT_EQ(none.diagnostics[0],
            (Diagnostic{Severity::kWarning, "allprof.log",
                        "every selected step is profiled (steps 1-4): no figures for this run; "
                        "--include-profiled uses them"}));
}

TEST(BuildReport, MicroBatchTimesOfDifferentModesAreNotCompared) {
  Inputs inputs;
  inputs.runs.push_back(current_log("ctl", steady_steps(82.671, "device")));
  inputs.runs.push_back(current_log("var", steady_steps(89.77, "dispatch")));
  inputs.runs.push_back(current_log("same", steady_steps(82.0, "device")));
  std::vector<Step> mixed = steady_steps(82.671, "device");
  mixed[3].timing = "dispatch";
  inputs.runs.push_back(current_log("mix", mixed));
  inputs.runs.push_back(current_log("old", steady_steps(82.671, "")));
  Options options;
  options.fail_if_slower_pct = 1.0;
  Report report = build_report(inputs, options);
  ASSERT_EQ(report.runs.size(), 5u);
  EXPECT_EQ(report.runs[0].microbatch_timing, MicrobatchTiming::kDevice);
  EXPECT_EQ(report.runs[1].microbatch_timing, MicrobatchTiming::kDispatch);
  EXPECT_EQ(report.runs[3].microbatch_timing, MicrobatchTiming::kMixed);
  EXPECT_EQ(report.runs[4].microbatch_timing, MicrobatchTiming::kUnlabelled);

  const RunComparison& var = report.comparisons[0];
  EXPECT_FALSE(var.microbatch);
  EXPECT_EQ(var.microbatch_not_compared,
            "not compared: ctl times micro-batches at device completion, var by dispatch "
            "intervals");
  ASSERT_TRUE(var.step);  // step times still compare
  EXPECT_EQ(var.step->verdict, logs::Verdict::kSlower);
  const RunComparison& same = report.comparisons[1];
  EXPECT_TRUE(same.microbatch);
  EXPECT_TRUE(same.microbatch_not_compared.empty());
  EXPECT_FALSE(report.comparisons[2].microbatch);
  EXPECT_EQ(report.comparisons[2].microbatch_not_compared,
            "not compared: mix mixes micro-batch timing modes across its steps (device, "
            "dispatch)");
  EXPECT_EQ(report.comparisons[3].microbatch_not_compared,
            "not compared: ctl times micro-batches at device completion, old without a label "
            "(older driver)");
  // --fail-if-slower looks at what was compared: var's step time only.
  ASSERT_EQ(report.slower_than_allowed.size(), 1u);
  EXPECT_THAT(report.slower_than_allowed[0], HasSubstr("var: s/step +8.59% slower than ctl"));

  std::string text = format_text(report);
  EXPECT_THAT(text, HasSubstr("var against ctl: 82.671 -> 89.770 s per optimizer step, mean of "
                              "steps 1-4 (+8.59%, slower), and micro-batch times not compared: "
                              "ctl times micro-batches at device completion, var by dispatch "
                              "intervals\n"));
  EXPECT_THAT(text, HasSubstr("not compared (timing modes differ)"));
  EXPECT_THAT(text, HasSubstr("mb timing: device = each time runs to the device's completion"));

  Literal json = parse_json(format_json(report));
  const Literal& first = json.find("comparisons")->items.at(0);
  EXPECT_TRUE(first.find("microbatch")->is_null());
  EXPECT_EQ(first.find("microbatch_not_compared")->text, var.microbatch_not_compared);
  EXPECT_EQ(first.find("verdict")->text, "slower");
  const Literal& second = json.find("comparisons")->items.at(1);
  EXPECT_TRUE(second.find("microbatch")->is_dict());
  EXPECT_TRUE(second.find("microbatch_not_compared")->is_null());
  const Literal& run = json.find("runs")->items.at(1);
  EXPECT_EQ(run.find("microbatch_timing")->text, "dispatch");
  EXPECT_EQ(run.find("first_step")->find("step")->number, 0);
  EXPECT_EQ(std::lround(run.find("tokens_per_s_per_chip")->number), 3285);
  EXPECT_TRUE(run.find("real_tokens_per_s_per_chip")->is_number());
  EXPECT_TRUE(run.find("tokens_per_s_per_chip_unknown")->is_null());
  EXPECT_EQ(run.find("summary")->find("rows")->number, 64);

  // An A/A pair in two modes gives no micro-batch noise floor.
  inputs.control_pair.emplace(current_log("a1", steady_steps(82.671, "device")),
                              current_log("a2", steady_steps(82.68, "dispatch")));
  Report paired = build_report(inputs, {});
  EXPECT_TRUE(paired.noise_floor->step_rel);
  EXPECT_FALSE(paired.noise_floor->microbatch_rel);
  EXPECT_THAT(fmt::format("{}", fmt::join(texts_of(paired.diagnostics), "\n")),
              HasSubstr("--control-pair: no micro-batch noise floor: not compared: a1 times "
                        "micro-batches at device completion, a2 by dispatch intervals"));
}

Inputs runs_of(std::vector<RunLog> logs) {
  Inputs inputs;
  inputs.runs = std::move(logs);
  return inputs;
}

// MaxText's `completed step` lines with the given seconds; every step does the same work, so
// TFLOP/s x seconds is the same (100) for each.
RunLog maxtext_log(const std::string& name, const std::vector<double>& seconds) {
  std::string text;
  for (std::size_t s = 0; s < seconds.size(); ++s) {
    text += fmt::format(
        "I0813 17:18:00.1 7 metric_logger.py:1] completed step: {}, seconds: {}, "
        "TFLOP/s/device: {}, Tokens/s/device: {}, total_weights: 8192, loss: 9.5\n",
        s, seconds[s], 100.0 / seconds[s], 8192.0 / seconds[s]);
  }
  return steplog::parse_run_log_text(text, name + ".log");
}

TEST(AnalyzeRun, MaxTextRatesAreTotalWorkOverTotalTime) {
  // Step 0 compiles; steps 1-4: an asynchronous-dispatch pair (0.1 s after 1.9 s) and two 1 s.
  RunAnalysis run = analyze_run(maxtext_log("mt", {50.0, 1.9, 0.1, 1.0, 1.0}), {});
  EXPECT_EQ(run.kind, steplog::LogKind::kMaxText);
  EXPECT_THAT(run.steps_used, ElementsAre(1, 2, 3, 4));
  EXPECT_DOUBLE_EQ(*run.step_mean, 1.0);
  // 4 steps x 100 TFLOP in 4 s; the mean of the per-step rates would be (52.6+1000+100+100)/4.
  EXPECT_NEAR(*run.tflops_per_device, 100.0, 1e-9);
  EXPECT_NEAR(*run.tokens_per_s_per_device, 8192.0, 1e-6);
  EXPECT_FALSE(run.tokens_per_s_per_chip.has_value());  // a bench figure, not MaxText's
  EXPECT_TRUE(run.outliers.steps.empty());              // 1.9 s is under 3x the median (1 s)
}

TEST(AnalyzeRun, TunixPeftLogHasNoStepTimes) {
  RunLog log = steplog::parse_run_log_text(
      "Train step 1 training loss: 2.7  - training perplexity: 15.3\n"
      "Train step 2 training loss: 2.5  - training perplexity: 12.3\n",
      "peft.log");
  Error e = test::error_of([&] { analyze_run(log, {}); });
  EXPECT_EQ(e.file(), "peft.log");
  EXPECT_THAT(e.message(), HasSubstr("a Tunix PEFT log: losses of 2 steps but no step times"));
  EXPECT_THAT(e.message(), HasSubstr("no log timestamp"));
  EXPECT_THAT(e.message(), HasSubstr("--numerics"));
  // One timestamped line is no interval either.
  RunLog one = steplog::parse_run_log_text(
      "I0706 16:50:25.1 1 peft_trainer.py:474] Train step 1 training loss: 2.7  - training "
      "perplexity: 15.3\nTrain step 2 training loss: 2.5  - training perplexity: 12.3\n",
      "one.log");
  EXPECT_THAT(test::error_of([&] { analyze_run(one, {}); }).message(),
              HasSubstr("fewer than two of its `Train step N training loss:` lines carry a log "
                        "timestamp"));
}

// Tunix's training lines for steps 1..N, step s logged at `at[s-1]` seconds after 16:50:00.
RunLog timestamped_log(const std::string& name, const std::vector<double>& at) {
  std::string text;
  for (std::size_t s = 0; s < at.size(); ++s) {
    text += fmt::format(
        "I0706 16:50:{:09.6f} 1 peft_trainer.py:474] Train step {} training loss: 0.69  - "
        "training perplexity: 2.0\n",
        at[s], s + 1);
  }
  return steplog::parse_run_log_text(text, name + ".log");
}

TEST(AnalyzeRun, LogTimestampIntervalsAreTheStepTimes) {
  // Step 1's line follows the compile (untimed); then 0.5 s steps, and an evaluation at step 8.
  RunAnalysis run = analyze_run(
      timestamped_log("dpo", {25.0, 25.5, 26.0, 26.5, 27.0, 27.5, 28.0, 43.0, 43.5}), {});
  EXPECT_EQ(run.kind, steplog::LogKind::kTunixPeft);
  EXPECT_EQ(run.step_timing, StepTiming::kLogTimestamps);
  EXPECT_THAT(run.steps_logged, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9));
  // The default leaves out the first logged step (it has no interval) and, as for every log,
  // the outlier: step 8's 15 s against a 0.5 s median.
  EXPECT_THAT(run.steps_used, ElementsAre(2, 3, 4, 5, 6, 7, 9));
  ASSERT_EQ(run.outliers.steps.size(), 1u);
  EXPECT_EQ(run.outliers.steps[0].step, 8);
  EXPECT_DOUBLE_EQ(*run.step_mean, 0.5);
  EXPECT_FALSE(run.first_step.has_value());  // step 1 has no interval
  ASSERT_TRUE(run.log_timestamps.has_value());
  EXPECT_EQ(run.log_timestamps->first_step, 1);

  std::string text =
      format_text(build_report(runs_of({timestamped_log("dpo", {25, 25.5, 26})}), {}));
  EXPECT_THAT(text, HasSubstr("s/step: log-timestamp intervals, from one step's first log line to "
                              "the next step's (host side: everything between steps, not a device "
                              "time); mean over every step but the first"));
  EXPECT_THAT(text, HasSubstr("dpo: s/step from glog timestamps (to the microsecond): step 1, the "
                              "first logged, has no interval (what its line follows, the compile "
                              "included, is not timed)"));
  // No run has micro-batches, so the legend does not describe a micro-batch figure.
  EXPECT_THAT(text, Not(HasSubstr("micro-batch: median of micro-batches")));
}

TEST(BuildReport, LogTimestampStepTimesAreComparedOnlyWithEachOther) {
  Inputs inputs;
  inputs.runs.push_back(current_log("ctl", steady_steps(82.671, "device")));
  inputs.runs.push_back(timestamped_log("peft", {25.0, 25.5, 26.0, 26.5, 27.0}));
  inputs.runs.push_back(maxtext_log("mt", {50.0, 0.5, 0.5, 0.5, 0.5}));
  Options options;
  options.fail_if_slower_pct = 1.0;
  Report report = build_report(inputs, options);
  EXPECT_EQ(report.runs[0].step_timing, StepTiming::kDevice);
  EXPECT_EQ(report.runs[2].step_timing, StepTiming::kMaxText);
  const RunComparison& peft = report.comparisons[0];
  EXPECT_FALSE(peft.step);
  EXPECT_EQ(peft.step_not_compared,
            "not compared: ctl times steps on the device (BENCH_STEP seconds), peft by "
            "log-timestamp intervals (host side)");
  // The driver's device-timed steps and MaxText's host intervals compare as before.
  EXPECT_TRUE(report.comparisons[1].step);
  EXPECT_TRUE(report.comparisons[1].step_not_compared.empty());
  EXPECT_TRUE(report.slower_than_allowed.empty() ||
              report.slower_than_allowed[0].find("peft") == std::string::npos);

  std::string text = format_text(report);
  EXPECT_THAT(text, HasSubstr("not compared (step timings differ)"));
  EXPECT_THAT(text, HasSubstr("peft against ctl: step times not compared: ctl times steps on the "
                              "device (BENCH_STEP seconds), peft by log-timestamp intervals "
                              "(host side)"));
  EXPECT_THAT(text, HasSubstr("s/step of peft: log-timestamp intervals, from one step's first log "
                              "line to the next step's (host side: everything between steps, not "
                              "a device time); compared only with other log-timestamp runs"));

  Literal json = parse_json(format_json(report));
  const Literal& refused = json.find("comparisons")->items.at(0);
  EXPECT_EQ(refused.find("verdict")->text, "not_compared");
  EXPECT_TRUE(refused.find("ratio")->is_null());
  EXPECT_EQ(refused.find("step_not_compared")->text, peft.step_not_compared);
  EXPECT_TRUE(json.find("comparisons")->items.at(1).find("step_not_compared")->is_null());
  const Literal& run = json.find("runs")->items.at(1);
  EXPECT_EQ(run.find("format")->text, "tunix-peft");
  EXPECT_EQ(run.find("step_timing")->text, "log-timestamps");
  const Literal& stamps = *run.find("log_timestamps");
  EXPECT_EQ(stamps.find("clock")->text, "glog");
  EXPECT_EQ(stamps.find("resolution_s")->number, 1e-6);
  EXPECT_EQ(stamps.find("first_step")->number, 1);
  EXPECT_TRUE(stamps.find("spread_steps")->items.empty());
  EXPECT_EQ(stamps.find("repeated_lines")->number, 0);
  EXPECT_EQ(json.find("runs")->items.at(0).find("step_timing")->text, "device");
  EXPECT_TRUE(json.find("runs")->items.at(0).find("log_timestamps")->is_null());

  // Two log-timestamp runs compare, with the same machinery.
  Report two = build_report(runs_of({timestamped_log("a", {25.0, 25.5, 26.0, 26.5, 27.0}),
                                     timestamped_log("b", {25.0, 25.6, 26.2, 26.8, 27.4})}),
                            {});
  ASSERT_TRUE(two.comparisons[0].step);
  EXPECT_EQ(two.comparisons[0].step->verdict, logs::Verdict::kSlower);

  // An A/A pair of a device-timed run and a log-timestamp run gives no step noise floor.
  inputs.control_pair.emplace(current_log("a1", steady_steps(82.671, "device")),
                              timestamped_log("a2", {25.0, 25.5, 26.0, 26.5, 27.0}));
  Report paired = build_report(inputs, {});
  EXPECT_FALSE(paired.noise_floor->step_rel);
  EXPECT_THAT(fmt::format("{}", fmt::join(texts_of(paired.diagnostics), "\n")),
              HasSubstr("--control-pair: no step noise floor: not compared: a1 times steps on the "
                        "device (BENCH_STEP seconds), a2 by log-timestamp intervals (host side)"));
}

TEST(AnalyzeRun, OutliersAreLeftOutByDefaultAndKeptOnlyWhenAsked) {
  std::vector<double> seconds = {50.0, 120.0, 0.6, 3.3, 0.6, 0.6, 1.7, 0.6, 14.0, 0.6};
  // By default (issue 28, item 5) the marked outliers are named and left out of every figure.
  RunAnalysis left_out = analyze_run(maxtext_log("mt", seconds), {});
  EXPECT_DOUBLE_EQ(*left_out.outliers.median_s, 0.6);
  ASSERT_EQ(left_out.outliers.steps.size(), 3u);  // 1.7 s is under 3 x 0.6 s
  EXPECT_EQ(left_out.outliers.steps[0].step, 1);
  EXPECT_EQ(left_out.outliers.steps[1].step, 3);
  EXPECT_EQ(left_out.outliers.steps[2].step, 8);
  EXPECT_DOUBLE_EQ(left_out.outliers.steps[2].seconds, 14.0);
  EXPECT_TRUE(left_out.outliers.left_out);
  EXPECT_THAT(left_out.steps_used, ElementsAre(2, 4, 5, 6, 7, 9));
  EXPECT_NEAR(*left_out.step_mean, (0.6 * 5 + 1.7) / 6, 1e-12);
  // 6 steps of 100 TFLOP each in 4.7 s.
  std::string text = format_text(build_report(runs_of({maxtext_log("mt", seconds)}), {}));
  EXPECT_THAT(text, HasSubstr("mt: outlier steps 1 (120.000 s), 3 (3.300 s), 8 (14.000 s) above "
                              "3x the median step (0.6 s) of the selected steps"));
  EXPECT_THAT(text, HasSubstr("left out of the figures (--include-outliers keeps them)"));
  EXPECT_THAT(text, HasSubstr("TFLOP/s/device 127.7, tokens/s/device 10,458"));
  EXPECT_THAT(text, HasSubstr("host's interval between step completions"));
  EXPECT_THAT(text, Not(HasSubstr("(outliers ")));  // not in the steps cell: they are not used

  // --include-outliers: marked, and kept in every figure.
  Options options;
  options.include_outliers = true;
  RunAnalysis kept = analyze_run(maxtext_log("mt", seconds), options);
  EXPECT_THAT(kept.steps_used, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8, 9));
  ASSERT_EQ(kept.outliers.steps.size(), 3u);
  EXPECT_FALSE(kept.outliers.left_out);
  text = format_text(build_report(runs_of({maxtext_log("mt", seconds)}), options));
  EXPECT_THAT(text, HasSubstr("1-9 (outliers 1,3,8)"));
  EXPECT_THAT(text, HasSubstr("in the figures (--include-outliers)"));

  options.include_outliers = false;
  options.outlier_factor = 25;  // only step 1 (120 s > 15 s; 14 s is not)
  RunAnalysis wide = analyze_run(maxtext_log("mt", seconds), options);
  ASSERT_EQ(wide.outliers.steps.size(), 1u);
  EXPECT_EQ(wide.outliers.steps[0].step, 1);
  EXPECT_THAT(wide.steps_used, ElementsAre(2, 3, 4, 5, 6, 7, 8, 9));
}

// A bench log whose summary says how its MoE layers dropped tokens (`dropping` is the JSON of
// BENCH_SUMMARY token_dropping, or empty for none).
RunLog dropping_log(const std::string& name, const std::string& dropping,
                    const std::string& step_extra = "") {
  std::string text;
  for (int s = 0; s < 4; ++s) {
    text += fmt::format(R"(BENCH_STEP {{"step":{},"seconds":{}{}}})"
                        "\n",
                        s, 9.0 + 0.01 * s, step_extra);
  }
  text += fmt::format(R"(BENCH_SUMMARY {{"name":"{}"{}}})"
                      "\n",
                      name, dropping.empty() ? "" : R"(,"token_dropping":)" + dropping);
  return steplog::parse_run_log_text(text, name + ".log");
}

TEST(BuildReport, DroppedTokensAreShownWarnedAndRequired) {
  RunLog none = dropping_log(
      "dropless", R"({"verdict":"none","why":"dropless by configuration: capacity_factor -1"})");
  RunLog dropped = dropping_log(
      "drops", R"({"verdict":"dropped","dropped_tokens":1500,"counted_steps":4,"why":"counted"})");
  RunLog unknown =
      dropping_log("maydrop", R"({"verdict":"unknown","why":"capacity_factor 1.25 may drop"})");
  RunLog silent = dropping_log("silent", "");
  RunLog counted = dropping_log("counted", "", R"(,"dropped_tokens":0)");

  Report clean = build_report(runs_of({none, counted}), {});
  EXPECT_EQ(clean.runs[0].token_dropping.verdict, DropVerdict::kNone);
  EXPECT_EQ(clean.runs[1].token_dropping.verdict, DropVerdict::kNone);
  EXPECT_EQ(clean.runs[1].token_dropping.source, "BENCH_STEP");
  EXPECT_TRUE(texts_of(clean.diagnostics).empty());

  Options options;
  options.require_no_drops = true;
  Report report = build_report(runs_of({none, dropped, unknown, silent}), options);
  EXPECT_EQ(report.runs[1].token_dropping.dropped_tokens, 1500.0);
  EXPECT_EQ(report.runs[3].token_dropping.verdict, DropVerdict::kNotLogged);
  std::string warnings = fmt::format("{}", fmt::join(texts_of(report.diagnostics), "\n"));
  EXPECT_THAT(warnings, HasSubstr("drops against dropless: drops dropped 1,500 tokens (counted)"));
  EXPECT_THAT(warnings, HasSubstr("maydrop against dropless: maydrop cannot show it dropped no "
                                  "tokens: capacity_factor 1.25 may drop"));
  EXPECT_THAT(warnings, HasSubstr("silent against dropless: silent cannot show"));
  EXPECT_THAT(report.drops_not_ruled_out, ::testing::SizeIs(3));
  EXPECT_EQ(report.outcome(), Outcome::kFail);
  std::string text = format_text(report);
  EXPECT_THAT(text, HasSubstr("  dropless: none: dropless by configuration: capacity_factor -1\n"));
  EXPECT_THAT(text, HasSubstr("  drops: 1,500 dropped: counted\n"));
  EXPECT_THAT(text, HasSubstr("  silent: unknown: the log does not say"));
  EXPECT_THAT(text, HasSubstr("FAIL: maydrop cannot show it dropped no tokens"));
  std::string json = format_json(report);
  EXPECT_THAT(json, HasSubstr(R"("verdict": "dropped")"));
  EXPECT_THAT(json, HasSubstr(R"("tripped": true)"));

  // Two logs that say nothing about dropping are not warned about (older drivers); the option
  // still refuses them.
  Report old = build_report(runs_of({silent, silent}), {});
  EXPECT_TRUE(texts_of(old.diagnostics).empty());
  EXPECT_EQ(old.outcome(), Outcome::kPass);
  EXPECT_EQ(build_report(runs_of({silent}), options).outcome(), Outcome::kFail);
}

TEST(AnalyzeRun, NoStepLinesIsAnError) {
  RunLog log = steplog::parse_run_log_text("just\nnoise\n", "empty.log");
  Error e = test::error_of([&] { analyze_run(log, {}); });
  EXPECT_EQ(e.file(), "empty.log");
  EXPECT_THAT(e.message(), HasSubstr("no step timing lines"));
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
  EXPECT_EQ(fast.step->verdict, logs::Verdict::kFaster);
  // The micro-batches are the same: no change.
  EXPECT_EQ(fast.microbatch->stats.ratio, 1.0);
  EXPECT_EQ(fast.microbatch->verdict, logs::Verdict::kNoChange);
  EXPECT_EQ(report.comparisons[1].step->verdict, logs::Verdict::kSlower);
  EXPECT_EQ(report.comparisons[2].run, "ctl (ctl.log)");
  // slow is 4% slower, beyond --fail-if-slower 3.
  ASSERT_EQ(report.slower_than_allowed.size(), 1u);
  EXPECT_THAT(report.slower_than_allowed[0], HasSubstr("slow: s/step +4.00% slower than ctl"));
  EXPECT_EQ(report.outcome(), Outcome::kFail);

  // With an A/A pair 5% apart, both differences are noise and nothing trips.
  inputs.control_pair.emplace(bench_log("a1", {40, 10, 10.1, 9.9, 10}, mb),
                              bench_log("a2", {40, 10.5, 10.6, 10.4, 10.5}, mb));
  Report noisy = build_report(inputs, options);
  EXPECT_NEAR(*noisy.noise_floor->step_rel, 0.05, 1e-12);
  EXPECT_EQ(*noisy.noise_floor->microbatch_rel, 0.0);
  EXPECT_EQ(noisy.comparisons[0].step->verdict, logs::Verdict::kFaster);  // 10% > 5%
  EXPECT_EQ(noisy.comparisons[1].step->verdict, logs::Verdict::kNoise);   // 4% < 5%
  EXPECT_TRUE(noisy.slower_than_allowed.empty());
  EXPECT_EQ(noisy.outcome(), Outcome::kPass);
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
  EXPECT_EQ(build_report(inputs, {}).outcome(), Outcome::kFail);
  inputs.numerics[1] =
      steplog::parse_run_log_text(R"(BENCH_STEP {"step":1,"seconds":5})", "bare.log");
  Error e = test::error_of([&] { build_report(inputs, {}); });
  EXPECT_EQ(e.file(), "bare.log");
  EXPECT_THAT(e.message(), HasSubstr("no per-step metrics"));
}

TEST(Options, ValidateNamesTheBadOption) {
  Options options;
  EXPECT_NO_THROW(options.validate());
  options.outlier_factor = 1.0;
  EXPECT_THAT(test::error_of([&] { options.validate(); }).what(),
              HasSubstr("--outlier-factor 1: must be a number > 1"));
  options.outlier_factor = INFINITY;
  EXPECT_THROW(options.validate(), Error);
  options = Options{};
  options.bootstrap.confidence = 1.5;
  EXPECT_THAT(test::error_of([&] { options.validate(); }).what(), HasSubstr("--confidence 1.5"));
}

// ---- Issue 25: set-up, replays, weights, unlogged gradient norms -------------------------------

TEST(BuildReport, SetupDifferenceIsNamedBesideTheVerdict) {
  Inputs inputs;
  inputs.runs = {setup_log("ctl", false), setup_log("staged", true, 9.2), setup_log("same", false)};
  Report report = build_report(inputs, {});
  ASSERT_EQ(report.comparisons.size(), 2u);
  EXPECT_EQ(report.comparisons[0].setup.text(), "differs: staging off vs on (3 steps staged)");
  EXPECT_EQ(report.comparisons[1].setup.text(), "same");
  EXPECT_THAT(
      texts_of(report.diagnostics),
      testing::Contains(HasSubstr("staged against ctl: set-up differs: staging off vs on")));
  EXPECT_EQ(report.outcome(), Outcome::kPass);  // an A/B of staging is legitimate
  std::string text = format_text(report);
  EXPECT_THAT(text, HasSubstr("set-up differs: staging off vs on (3 steps staged)\n"));
  EXPECT_THAT(text, HasSubstr("boundary-free s/step (estimate)"));
  EXPECT_THAT(text, HasSubstr("same against ctl: "));
  EXPECT_THAT(text, HasSubstr("; set-up same\n"));

  Options strict;
  strict.require_same_setup = true;
  Report failed = build_report(inputs, strict);
  EXPECT_EQ(failed.outcome(), Outcome::kFail);
  ASSERT_EQ(failed.setups_differ.size(), 1u);
  EXPECT_THAT(format_text(failed),
              HasSubstr("FAIL: staged against ctl: set-up differs: staging off vs on"));
  inputs.runs.pop_back();
  inputs.runs.pop_back();
  EXPECT_THAT(test::error_of([&] { build_report(inputs, strict); }).what(),
              HasSubstr("--require-same-setup needs two runs or --control-pair"));
  inputs.runs.push_back(steplog::parse_run_log_text(R"(BENCH_STEP {"step":1,"seconds":5})"
                                                    "\n",
                                                    "old.log"));
  EXPECT_THAT(test::error_of([&] { build_report(inputs, strict); }).what(),
              HasSubstr("set-up unknown: staging (old does not log it)"));
}

TEST(BuildReport, ReplayedRunsDroppedNoTokenButSayTheyReplayed) {
  Inputs inputs;
  inputs.runs = {setup_log("ctl", false),
                 setup_log("replay", false, 10, "random", 4, "replayed", 2)};
  Options options;
  options.require_no_drops = true;
  Report report = build_report(inputs, options);
  EXPECT_EQ(report.runs[1].token_dropping.verdict, DropVerdict::kReplayed);
  // One scope, the steps used (1-3; the summary's 8 include the compile step 0), said in the text.
  EXPECT_EQ(report.runs[1].token_dropping.replays, 6);
  EXPECT_TRUE(report.drops_not_ruled_out.empty());  // replayed, none dropped: passes
  EXPECT_THAT(texts_of(report.diagnostics),
              testing::Contains(HasSubstr("replay.log: no token dropped, but 6 micro-batches were "
                                          "replayed on the dropless kernel in the 3 steps used")));
  EXPECT_EQ(report.comparisons[0].setup.text(), "differs: replays none in 3 steps vs 6 in 3 steps");
  EXPECT_THAT(format_text(report), HasSubstr("none dropped, 6 replayed in the 3 steps used"));
}

TEST(BuildReport, StagingAndReplaysCountTheStepsUsed) {
  Inputs inputs;
  inputs.runs = {setup_log("staged", true, 10, "random", 4, "replayed", 1)};
  Options options;
  options.steps = parse_range("2-3", "--steps");
  Report report = build_report(inputs, options);
  const RunSetup& setup = report.runs[0].setup;
  EXPECT_EQ(setup.find("staging")->shown, "on (2 steps staged)");  // the summary says 3
  EXPECT_EQ(setup.find("replays")->shown, "2 in 2 steps");
  EXPECT_EQ(report.runs[0].token_dropping.replays, 2);  // the summary says 4
  EXPECT_THAT(format_text(report), HasSubstr("none dropped, 2 replayed in the 2 steps used"));
}

TEST(AnalyzeRun, DefaultMicrobatchRangeLeavesOutAShortFinalMicrobatch) {
  // Micro-batches 2, 1.5, 1, 1, 1, 0.25: 3-last pools the short 0.25 s one, the driver does not.
  RunAnalysis full = analyze_run(setup_log("full", false, 10, "random", 4), {});
  EXPECT_FALSE(full.microbatch_final_left_out);
  EXPECT_EQ(full.microbatch_s.size(), 12u);
  RunAnalysis short_final = analyze_run(setup_log("short", false, 10, "random", 2), {});
  EXPECT_TRUE(short_final.microbatch_final_left_out);
  EXPECT_EQ(short_final.microbatch_s.size(), 9u);
  EXPECT_EQ(short_final.microbatch_median, 1.0);
  Options given;
  given.microbatches = parse_range("3-6", "--microbatches");
  given.microbatches_given = true;
  EXPECT_EQ(analyze_run(setup_log("short", false, 10, "random", 2), given).microbatch_s.size(),
            12u);
}

// Every gated metric but the gradient norm.
constexpr const char* kMetricsWithoutGradNorm =
    R"({"loss":0.5,"entropy":1,"log_ratio":{"abs_mean":0.1},"is_ratio":{"mean":1}})";

TEST(BuildReport, NumericsAcrossDifferentWeightsAreRefused) {
  const std::string metrics = kMetricsWithoutGradNorm;
  Inputs inputs;
  inputs.numerics = {setup_log("r1", false, 10, "random", 4, "none", 0, metrics),
                     setup_log("r2", false, 10, "random", 4, "none", 0, metrics),
                     setup_log("v", false, 10, "checkpoint", 4, "none", 0, metrics)};
  EXPECT_THAT(test::error_of([&] { build_report(inputs, {}); }).what(),
              HasSubstr("--numerics: r1 ran with random weights and v with checkpoint"));

  // Same weights, no gradient norm anywhere: the grad_norm gate is not evaluated, with the
  // summary's reason, and the others pass.
  inputs.numerics[2] = setup_log("v", false, 10, "random", 4, "none", 0, metrics);
  Report report = build_report(inputs, {});
  ASSERT_TRUE(report.numerics);
  EXPECT_TRUE(report.numerics->result.pass);
  const GateResult& grad = report.numerics->result.gates[3];
  EXPECT_EQ(grad.name, "grad_norm");
  EXPECT_EQ(grad.status, GateResult::Status::kNotEvaluated);
  EXPECT_EQ(grad.limit_from, "seed");
  EXPECT_THAT(grad.detail, HasSubstr("(r1: skip_step_on_spikes is off)"));
  EXPECT_EQ(report.numerics->result.gates[0].limit_from, "ours");
  std::string text = format_text(report);
  EXPECT_THAT(text, HasSubstr("limit from"));
  EXPECT_THAT(text, HasSubstr("all 5 gates pass (1 not evaluated: grad_norm)"));
}

TEST(BuildReport, UnloggedGradNormWithoutTheRunsWordFails) {
  const std::string metrics = kMetricsWithoutGradNorm;
  Inputs inputs;
  inputs.numerics = {setup_log("r1", false, 10, "random", 4, "none", 0, metrics),
                     setup_log("r2", false, 10, "random", 4, "none", 0, metrics),
                     setup_log("v", false, 10, "random", 4, "none", 0, metrics)};
  // An old log: no BENCH_SUMMARY grad_norm, so nothing says the metric is legitimately absent.
  inputs.numerics[1].summary->grad_norm.reset();
  Report old = build_report(inputs, {});
  EXPECT_FALSE(old.numerics->result.pass);
  EXPECT_EQ(old.numerics->result.gates[3].status, GateResult::Status::kMissing);
  // A summary that says it reports one (and yet logs none) is no excuse either.
  inputs.numerics[1] = setup_log("r2", false, 10, "random", 4, "none", 0, metrics);
  inputs.numerics[1].summary->grad_norm->reported = true;
  EXPECT_EQ(build_report(inputs, {}).numerics->result.gates[3].status,
            GateResult::Status::kMissing);
  // A --metric for the gate: its key must be logged (a typo fails).
  inputs.numerics[1] = setup_log("r2", false, 10, "random", 4, "none", 0, metrics);
  apply_gate_metric(inputs.gates, "grad_norm=grad_nrom");
  Report typo = build_report(inputs, {});
  EXPECT_FALSE(typo.numerics->result.pass);
  EXPECT_EQ(typo.numerics->result.gates[3].status, GateResult::Status::kMissing);
  EXPECT_THAT(typo.numerics->result.gates[3].detail, HasSubstr("grad_nrom"));
}

}  // namespace
}  // namespace rtb::logs::report
