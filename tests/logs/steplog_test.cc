#include "rtb/logs/steplog.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/text.h"
#include "test_util.h"

namespace rtb::logs::steplog {
namespace {

// ---- Value reader
// --------------------------------------------------------------------------------

// The parser itself is tested in tests/base/literal_test.cc; these are what steplog asks of it.

TEST(ParseValue, JsonAsPythonWritesIt) {
  Literal v = parse_value(R"({"a":1,"b":[NaN, Infinity, -Infinity]})", LiteralSyntax::kJson);
  EXPECT_EQ(v.find("a")->number, 1.0);
  EXPECT_TRUE(std::isnan(v.find("b")->items[0].number));
  EXPECT_EQ(v.find("b")->items[2].number, -INFINITY);
}

TEST(ParseValue, ErrorsSayWhatAndWhere) {
  auto message = [](std::string_view text, LiteralSyntax syntax = LiteralSyntax::kJson) {
    try {
      parse_value(text, syntax);
    } catch (const Error& e) {
      return e.message();
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(R"({"v":1,"mb":[{"i":0,)"),
            "column 21: the text ends inside an object (truncated?)");
  EXPECT_THAT(message(R"({'a':1})"), HasSubstr("an object key must be a string"));
  EXPECT_THAT(message("nan"), HasSubstr("unknown name 'nan'"));             // JSON has NaN, not nan
  EXPECT_THAT(message("np.float32(1.5)"), HasSubstr("unknown name 'np'"));  // no calls in JSON
  EXPECT_THAT(message("{'a': 1", LiteralSyntax::kPython), HasSubstr("inside a dict"));
  EXPECT_THAT(message(std::string(200, '[')), HasSubstr("nested deeper than 64 levels"));
  EXPECT_THAT(message(std::string(kMaxValueBytes + 1, ' ')),
              HasSubstr("bytes of JSON in one line (at most 1048576)"));
}

TEST(ParseValue, PythonReprLiterals) {
  Literal v = parse_value(
      "{'loss': 0.0125, 'grad_norm': np.float32(1.5), 'kl': Array(0.25, dtype=float32), "
      "'flag': True, 'off': False, 'none': None, 'bad': nan, 'big': inf, 'neg': -inf, "
      "'shape': (2, 3,), \"dq\": \"it's\", 'nested': {'a': {'b': 4}},}",
      LiteralSyntax::kPython);
  EXPECT_DOUBLE_EQ(v.find("loss")->number, 0.0125);
  EXPECT_DOUBLE_EQ(v.find("grad_norm")->number, 1.5);
  EXPECT_DOUBLE_EQ(v.find("kl")->number, 0.25);
  EXPECT_TRUE(v.find("flag")->boolean);
  EXPECT_TRUE(v.find("none")->is_null());
  EXPECT_TRUE(std::isnan(v.find("bad")->number));
  EXPECT_EQ(v.find("big")->number, INFINITY);
  EXPECT_EQ(v.find("neg")->number, -INFINITY);
  EXPECT_EQ(v.find("shape")->items.size(), 2u);
  EXPECT_EQ(v.find("nested")->find("a")->find("b")->number, 4.0);
}

TEST(NumericLeaves, FlattensWithSlashes) {
  Literal v = parse_value(
      R"({"loss":0.5,"log_ratio":{"abs_mean":0.01},"on":true,"name":"x","list":[1],"n":null})",
      LiteralSyntax::kJson);
  std::map<std::string, double> leaves = numeric_leaves(v);
  EXPECT_EQ(leaves.size(), 3u);
  EXPECT_EQ(leaves["loss"], 0.5);
  EXPECT_EQ(leaves["log_ratio/abs_mean"], 0.01);
  EXPECT_EQ(leaves["on"], 1.0);
}

// ---- Lines
// ---------------------------------------------------------------------------------------

// A TRAINER_STEP_TIMING line from absolute trainer-clock instants (seconds), snapshot at `now`,
// as the worker writes it: ago = now - t, rounded to 3 decimals; nullopt = null.
struct Event {
  double begin;
  double end;
  std::optional<double> ready;
};

std::string ago(double now, std::optional<double> t) {
  return t ? fmt::format("{:.3f}", now - *t) : "null";
}

std::string timing_line(int step, double now, const std::vector<Event>& mbs,
                        std::optional<Event> update,
                        std::optional<std::pair<double, double>> prepare) {
  std::string mb;
  for (std::size_t i = 0; i < mbs.size(); ++i) {
    mb += fmt::format(
        R"({}{{"i":{},"dispatch_begin_ago_s":{},"dispatch_end_ago_s":{},"ready_ago_s":{}}})",
        i == 0 ? "" : ",", i, ago(now, mbs[i].begin), ago(now, mbs[i].end), ago(now, mbs[i].ready));
  }
  std::string update_json =
      update
          ? fmt::format(R"({{"dispatch_begin_ago_s":{},"dispatch_end_ago_s":{},"ready_ago_s":{}}})",
                        ago(now, update->begin), ago(now, update->end), ago(now, update->ready))
          : "null";
  std::string prepare_json = prepare
                                 ? fmt::format(R"({{"recv_ago_s":{},"done_ago_s":{}}})",
                                               ago(now, prepare->first), ago(now, prepare->second))
                                 : "null";
  return fmt::format(R"(TRAINER_STEP_TIMING step={} policy_version={} rtt_s=0.004 timing={{"v":1,)"
                     R"("train_step":{},"mb":[{}],"update":{},"prepare":{}}})",
                     step, step, step, mb, update_json, prepare_json);
}

RunLog parse_lines(const std::vector<std::string>& lines, const std::string& source = "run.log") {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return parse_run_log_text(text, source);
}

TEST(RunLogParser, ReadsBenchLinesBehindAnyPrefix) {
  RunLog log = parse_lines({
      "[pod/ab-0/client] 2026-10-13T18:51:14.123456789Z [TrainerBench] ab-ctl: bench driver "
      "starting: 2 steps x 3 fwd_bwd calls",
      "I1013 18:51:15.000001 140 bench.py:1] BENCH_STEP "
      R"({"step":1,"seconds":30.5,"microbatch_s":[25,2.5,3],"tokens":300,)"
      R"("tokens_per_s_per_chip":2.5,"fused_update":false,"metrics":{"loss":0.5,)"
      R"("gradient_norm":2.0,"log_ratio":{"abs_mean":0.01}}})",
      "2026-10-13 18:51:16,123 - [TrainerNode] noise line with no marker",
      R"(BENCH_STEP {"step":2,"seconds":8.25,"microbatch_s":[2.75,2.5,3],"tokens":300})",
      R"(BENCH_SUMMARY {"name":"ab-ctl","steps":2,"micro_steps":3,"chips":4,)"
      R"("tokens_per_step":300,"mean_step_s":8.25,"median_microbatch_s":3,)"
      R"("tokens_per_s_per_chip":9.09})",
  });
  EXPECT_EQ(log.kind, LogKind::kBench);
  EXPECT_EQ(log.name, "ab-ctl");
  EXPECT_EQ(log.planned_steps, 2);
  EXPECT_EQ(log.planned_micro_steps, 3);
  ASSERT_EQ(log.steps.size(), 2u);
  EXPECT_EQ(log.steps[0].step, 1);
  EXPECT_EQ(log.steps[0].seconds, 30.5);
  EXPECT_EQ(log.steps[0].seconds_from, "BENCH_STEP");
  EXPECT_THAT(log.steps[0].microbatch_s, ElementsAre(25, 2.5, 3));
  EXPECT_EQ(log.steps[0].tokens, 300);
  EXPECT_EQ(log.steps[0].metrics.at("log_ratio/abs_mean"), 0.01);
  EXPECT_EQ(log.steps[0].line, 2u);
  EXPECT_EQ(log.steps[1].seconds, 8.25);
  ASSERT_TRUE(log.summary);
  EXPECT_EQ(log.summary->chips, 4);
  EXPECT_EQ(log.summary->median_microbatch_s, 3);
  EXPECT_FALSE(log.partial);
  EXPECT_TRUE(texts_of(log.diagnostics).empty());
  EXPECT_EQ(log.lines, 5u);
}

TEST(RunLogParser, ReadsTheTimingContractFromStepZero) {
  // The driver that labels its micro-batch times counts steps from 0 (step 0 compiles).
  RunLog log = parse_lines({
      "[pod/ab-0/client] BENCH_STEP "
      R"({"step":0,"seconds":120.5,"microbatch_s":[40,9.3,9.1],"microbatch_timing":"device",)"
      R"("microbatch_timing_source":"step_timing","tokens":900,"padded_tokens":1152,)"
      R"("tokens_per_s_per_chip":2.4,"real_tokens_per_s_per_chip":1.9,"update":"fused",)"
      R"("fused_update":true,"staged":false,"profiled":false,"train_step":1,"metrics":{}})",
      R"(BENCH_STEP {"step":1,"seconds":82.5,"microbatch_s":[9.3,9.2,9.1],)"
      R"("microbatch_timing":"dispatch","microbatch_timing_source":"dispatch","tokens":800,)"
      R"("padded_tokens":1152,"update":"deferred","staged":true,"profiled":true,"new_field":[1]})",
      R"(BENCH_STEP {"step":2,"seconds":82.7,"microbatch_s":[9.3],"microbatch_timing":"host"})",
      R"(BENCH_SUMMARY {"name":"v2","steps":3,"micro_steps":3,"rows":4,"tokens_per_row":96,)"
      R"("real_len":80,"chips":2,"tokens_per_step":850,"padded_tokens_per_step":1152,)"
      R"("step_s":[120.5,82.5,82.7],"first_step_s":120.5,"steady_steps":[1,2],)"
      R"("profiled_steps":[1],"mean_step_s":82.6,"median_microbatch_s":9.2,)"
      R"("microbatch_timing":"mixed","tokens_per_s_per_chip":6.97,)"
      R"("real_tokens_per_s_per_chip":5.1,"stage_boundary":{"requested":"auto",)"
      R"("resolved":"on","engaged":true,"staged_steps":[1,2],"latched_off":null}})",
  });
  ASSERT_EQ(log.steps.size(), 3u);
  const StepRecord& zero = log.steps[0];
  EXPECT_EQ(zero.step, 0);
  EXPECT_EQ(zero.seconds, 120.5);
  EXPECT_EQ(zero.microbatch_timing, "device");
  EXPECT_EQ(zero.microbatch_timing_source, "step_timing");
  EXPECT_EQ(zero.tokens, 900);
  EXPECT_EQ(zero.padded_tokens, 1152);
  EXPECT_EQ(zero.update, "fused");
  EXPECT_EQ(zero.staged, false);
  EXPECT_FALSE(zero.profiled);
  const StepRecord& one = log.steps[1];
  EXPECT_EQ(one.microbatch_timing, "dispatch");
  EXPECT_EQ(one.update, "deferred");
  EXPECT_EQ(one.staged, true);
  EXPECT_TRUE(one.profiled);
  // An unknown mode is not taken for a known one.
  EXPECT_EQ(log.steps[2].microbatch_timing, "");
  EXPECT_FALSE(log.steps[2].staged);
  ASSERT_EQ(texts_of(log.diagnostics).size(), 1u);
  EXPECT_THAT(texts_of(log.diagnostics)[0],
              HasSubstr("run.log:3: BENCH_STEP step=2: microbatch_timing \"host\" "
                        "is neither device nor dispatch"));
  ASSERT_TRUE(log.summary);
  const BenchSummary& summary = *log.summary;
  EXPECT_EQ(summary.rows, 4);
  EXPECT_EQ(summary.tokens_per_row, 96);
  EXPECT_EQ(summary.micro_steps, 3);
  EXPECT_EQ(summary.chips, 2);
  EXPECT_EQ(summary.first_step_s, 120.5);
  EXPECT_EQ(summary.microbatch_timing, "mixed");
  EXPECT_EQ(summary.real_tokens_per_s_per_chip, 5.1);
  EXPECT_THAT(summary.profiled_steps, ElementsAre(1));
  ASSERT_TRUE(summary.stage_boundary);
  EXPECT_EQ(summary.stage_boundary->requested, "auto");
  EXPECT_EQ(summary.stage_boundary->resolved, "on");
  EXPECT_EQ(summary.stage_boundary->engaged, true);
  EXPECT_THAT(summary.stage_boundary->staged_steps, ElementsAre(1, 2));
  EXPECT_FALSE(summary.stage_boundary->latched_off);
  EXPECT_FALSE(log.partial);

  // Older logs carry none of it.
  RunLog old = parse_lines({R"(BENCH_STEP {"step":1,"seconds":30,"microbatch_s":[1]})",
                            R"(BENCH_SUMMARY {"name":"old","steps":1,"chips":4})"});
  EXPECT_EQ(old.steps[0].microbatch_timing, "");
  EXPECT_FALSE(old.steps[0].padded_tokens);
  EXPECT_FALSE(old.summary->rows);
  EXPECT_FALSE(old.summary->stage_boundary);
  EXPECT_EQ(old.summary->microbatch_timing, "");

  // Wrong types are malformed lines, as for the older fields.
  RunLog bad = parse_lines({R"(BENCH_STEP {"step":1,"seconds":3,"profiled":"yes"})",
                            R"(BENCH_SUMMARY {"name":"b","stage_boundary":{"engaged":1}})",
                            R"(BENCH_SUMMARY {"name":"b","profiled_steps":[1.5]})"});
  EXPECT_TRUE(bad.steps.empty());
  ASSERT_GE(texts_of(bad.diagnostics).size(), 3u);
  EXPECT_THAT(texts_of(bad.diagnostics)[0], HasSubstr("(\"profiled\" is not true or false)"));
  EXPECT_THAT(texts_of(bad.diagnostics)[1], HasSubstr("(\"engaged\" is not true or false)"));
  EXPECT_THAT(texts_of(bad.diagnostics)[2], HasSubstr("(\"profiled_steps\" is not an integer)"));
}

TEST(RunLogParser, TimingLineFromKnownInstants) {
  // Generated from known instants: mb0 dispatched 0-0.4, ready 9.4; mb1 0.45-0.5, ready 18.4;
  // the orchestrator sends mb2 at 20.4 (2 s idle), ready 29.4; update 20.5-20.55, ready 30.3;
  // the previous weight sync holds prepare until 30.8, done 32.
  double now = 32.5;
  std::string line = timing_line(7, now, {{0, 0.4, 9.4}, {0.45, 0.5, 18.4}, {20.4, 20.46, 29.4}},
                                 Event{29.45, 29.5, 30.3}, std::make_pair(30.8, 32.0));
  RunLog log = parse_lines({"I1013 18:00:00.000000 1 rl_program.py:9] " + line});
  EXPECT_EQ(log.kind, LogKind::kTimingOnly);
  ASSERT_EQ(log.timings.size(), 1u);
  const StepTiming& timing = log.timings[0];
  EXPECT_EQ(timing.step, 7);
  EXPECT_EQ(timing.policy_version, 7);
  EXPECT_DOUBLE_EQ(timing.rtt_s, 0.004);
  EXPECT_EQ(timing.train_step, 7);
  ASSERT_EQ(timing.mb.size(), 3u);
  EXPECT_DOUBLE_EQ(*timing.mb[1].dispatch_begin_ago_s, 32.05);
  ASSERT_TRUE(timing.update && timing.prepare);

  StepTimeline t = step_timeline(timing);
  ASSERT_EQ(t.mb.size(), 3u);
  EXPECT_NEAR(*t.mb[0].device_s, 9.0, 1e-9);   // 9.4 - 0.4
  EXPECT_NEAR(*t.mb[1].device_s, 9.0, 1e-9);   // 18.4 - max(0.5, 9.4)
  EXPECT_NEAR(*t.mb[2].device_s, 8.94, 1e-9);  // 29.4 - max(20.46, 18.4)
  EXPECT_FALSE(t.mb[0].idle_before_s);
  EXPECT_NEAR(*t.mb[1].idle_before_s, 0.0, 1e-9);    // dispatched long before 9.4
  EXPECT_NEAR(*t.mb[2].idle_before_s, 2.0, 1e-9);    // 20.4 - 18.4
  EXPECT_NEAR(*t.update_idle_before_s, 0.05, 1e-9);  // 29.45 - 29.4
  EXPECT_NEAR(*t.idle_s, 2.05, 1e-9);
  EXPECT_NEAR(*t.update_s, 0.8, 1e-9);  // 30.3 - max(29.5, 29.4)
  EXPECT_TRUE(t.has_prepare);
  EXPECT_NEAR(*t.sync_wait_s, 0.5, 1e-9);  // 30.8 - 30.3
  EXPECT_EQ(t.ready_known, 3u);
  EXPECT_NEAR(*t.mb[2].at.dispatch_begin, 20.4, 1e-9);  // origin: the first dispatch
  EXPECT_NEAR(t.span_end, 32.0, 1e-9);
}

TEST(RunLogParser, MissingReadyIsUnknownNotZero) {
  RunLog log = parse_lines({timing_line(3, 40, {{0, 0.4, std::nullopt}, {0.5, 0.6, std::nullopt}},
                                        Event{0.7, 0.8, std::nullopt}, std::nullopt)});
  StepTimeline t = step_timeline(log.timings.at(0));
  EXPECT_EQ(t.ready_known, 0u);
  EXPECT_FALSE(t.mb[0].device_s);
  EXPECT_FALSE(t.mb[1].device_s);
  EXPECT_FALSE(t.mb[1].idle_before_s);
  EXPECT_FALSE(t.idle_s);
  EXPECT_FALSE(t.update_s);
  EXPECT_FALSE(t.has_prepare);
  EXPECT_FALSE(t.sync_wait_s);
  EXPECT_NEAR(*t.mb[1].at.dispatch_end, 0.6, 1e-9);

  // One ready missing in the middle: that micro-batch and the next are unknown, the first known.
  RunLog mixed =
      parse_lines({timing_line(4, 40, {{0, 0.4, 9.4}, {0.5, 0.6, std::nullopt}, {0.7, 0.8, 27}},
                               std::nullopt, std::nullopt)});
  StepTimeline m = step_timeline(mixed.timings.at(0));
  EXPECT_NEAR(*m.mb[0].device_s, 9.0, 1e-9);
  EXPECT_FALSE(m.mb[1].device_s);
  EXPECT_FALSE(m.mb[2].device_s);
  EXPECT_EQ(m.ready_known, 2u);
  EXPECT_FALSE(m.update);
}

TEST(RunLogParser, MalformedTimingIsSkippedWithAWarningNamingTheLine) {
  std::string good = timing_line(1, 10, {{0, 0.4, 9.4}}, std::nullopt, std::nullopt);
  std::string cut = timing_line(2, 10, {{0, 0.4, 9.4}}, std::nullopt, std::nullopt);
  cut.resize(cut.size() - 30);
  RunLog log = parse_lines({
      good,
      cut,
      R"(TRAINER_STEP_TIMING step=3 policy_version=3 rtt_s=0.004 timing={"v":2,"mb":[]})",
      R"(TRAINER_STEP_TIMING step=4 policy_version=4 rtt_s=0.004 timing={"v":1,"mb":{}})",
      R"(TRAINER_STEP_TIMING step=5 policy_version=x rtt_s=0.004 timing={})",
      R"(TRAINER_STEP_TIMING step=6 policy_version=6 rtt_s=0.004)",
      R"(TRAINER_STEP_TIMING step=7 policy_version=7 rtt_s=0.004 timing={"v":1,)"
      R"("mb":[{"ready_ago_s":"soon"}]})",
      "TRAINER_STEP_TIMING step=8 unavailable: StatusCode.DEADLINE_EXCEEDED",
      "TRAINER_STEP_TIMING: MaxTextTrainingEngine does not set `last_fwd_bwd_token`",
  });
  ASSERT_EQ(log.timings.size(), 1u);
  EXPECT_EQ(log.timings[0].step, 1);
  EXPECT_THAT(log.timing_unavailable, ElementsAre(8));
  ASSERT_GE(texts_of(log.diagnostics).size(), 6u);
  EXPECT_THAT(texts_of(log.diagnostics)[0],
              HasSubstr("run.log:2: TRAINER_STEP_TIMING step=2: malformed timing JSON ("));
  EXPECT_THAT(texts_of(log.diagnostics)[0], HasSubstr("truncated?"));
  EXPECT_THAT(texts_of(log.diagnostics)[1],
              HasSubstr("run.log:3: TRAINER_STEP_TIMING step=3: malformed timing "
                        "JSON (schema version 2"));
  EXPECT_THAT(texts_of(log.diagnostics)[2], HasSubstr("run.log:4:"));
  EXPECT_THAT(texts_of(log.diagnostics)[2], HasSubstr("\"mb\" is not a list"));
  EXPECT_THAT(texts_of(log.diagnostics)[3], HasSubstr("run.log:5: TRAINER_STEP_TIMING step=5: bad "
                                                      "policy_version"));
  EXPECT_THAT(texts_of(log.diagnostics)[4],
              HasSubstr("run.log:6: TRAINER_STEP_TIMING step=6: no timing="));
  EXPECT_THAT(texts_of(log.diagnostics)[5], HasSubstr("\"ready_ago_s\" is not a number"));
}

// Found by fuzz/steplog_fuzz: an integer field beyond int64 (1e23, 1e999 is infinite) was cast
// from double to int64, which is undefined behaviour; it is a malformed line instead.
TEST(RunLogParser, IntegerFieldsOutOfRangeAreMalformed) {
  RunLog log = parse_lines({
      R"(BENCH_STEP {"step":1,"seconds":1.0,"tokens":1})",
      R"(BENCH_STEP {"step":100000000000000000000000,"seconds":2.0,"tokens":1})",
      R"(BENCH_STEP {"step":-9.3e18,"seconds":2.0,"tokens":1})",
      R"(BENCH_SUMMARY {"name":"x","steps":1e30,"chips":4})",
  });
  ASSERT_EQ(log.steps.size(), 1u);
  EXPECT_EQ(log.steps[0].step, 1);
  ASSERT_GE(texts_of(log.diagnostics).size(), 3u);
  EXPECT_THAT(texts_of(log.diagnostics)[0], HasSubstr("run.log:2:"));
  EXPECT_THAT(texts_of(log.diagnostics)[0], HasSubstr("\"step\" is out of range"));
  EXPECT_THAT(texts_of(log.diagnostics)[1], HasSubstr("run.log:3:"));
  EXPECT_THAT(texts_of(log.diagnostics)[2], HasSubstr("run.log:4:"));
  EXPECT_THAT(texts_of(log.diagnostics)[2], HasSubstr("\"steps\" is out of range"));
}

TEST(RunLogParser, OrchestratorLines) {
  RunLog log = parse_lines({
      "I1013 18:00:00.1 1 rl_program.py:1] [StepMetrics step=2] trainer_metrics={'loss': 0.0125, "
      "'grad_norm': np.float32(1.5), 'entropy': 12.4, 'pg_clipfrac': nan, 'note': 'x'}",
      "I1013 18:00:00.2 1 rl_program.py:2] Train step 2 - loss: 0.0124999 - reward_mean: 0.4375 "
      "- advantage_mean: 0.0000 - grad_norm: 1.5 - perplexity: 1.0126 - step_time: 98.31s",
      "I1013 18:00:00.3 1 rl_program.py:2] Train step 3 - loss: nan - reward_mean: 0.5000 - "
      "advantage_mean: 0.0000 - grad_norm: inf - perplexity: nan - step_time: 97.25s\r",
      // Tunix's PeftTrainer line in an orchestrator log: its timestamp is no step time of this
      // run (the orchestrator logs step_time), so the line is not read.
      "I0706 16:50:26.253525 1 peft_trainer.py:474] Train step 4 training loss: 0.693147  - "
      "training perplexity: 2.000000",
      "[StepMetrics step=5] trainer_metrics={'loss': ",
  });
  EXPECT_EQ(log.kind, LogKind::kOrchestrator);
  ASSERT_EQ(log.steps.size(), 2u);
  const StepRecord& two = log.steps[0];
  EXPECT_EQ(two.seconds, 98.31);
  EXPECT_EQ(two.seconds_from, "Train step");
  EXPECT_EQ(two.metrics.at("loss"), 0.0125);  // StepMetrics' full value wins
  EXPECT_EQ(two.metrics.at("grad_norm"), 1.5);
  EXPECT_EQ(two.metrics.at("reward_mean"), 0.4375);  // filled from the console line
  EXPECT_TRUE(std::isnan(two.metrics.at("pg_clipfrac")));
  EXPECT_EQ(two.metrics.count("note"), 0u);
  const StepRecord& three = log.steps[1];
  EXPECT_EQ(three.seconds, 97.25);
  EXPECT_TRUE(std::isnan(three.metrics.at("loss")));
  EXPECT_EQ(three.metrics.at("grad_norm"), INFINITY);
  ASSERT_EQ(texts_of(log.diagnostics).size(), 1u);
  EXPECT_THAT(texts_of(log.diagnostics)[0],
              HasSubstr("run.log:5: [StepMetrics step=5]: unreadable"));
}

TEST(RunLogParser, DuplicatesAndMissingSteps) {
  RunLog log = parse_lines({
      R"(BENCH_STEP {"step":1,"seconds":30})",
      R"(BENCH_STEP {"step":2,"seconds":8})",
      R"(BENCH_STEP {"step":2,"seconds":9})",
      R"(BENCH_STEP {"step":5,"seconds":8.5})",
      R"(BENCH_STEP {"step":6,"seconds":-1})",
      R"(BENCH_STEP {"seconds":1})",
      R"(BENCH_STEP {"step":7,"seconds":1,"microbatch_s":["a"]})",
      R"(BENCH_SUMMARY {"name":"x","steps":5)",
      timing_line(1, 10, {{0, 0.4, 9.4}}, std::nullopt, std::nullopt),
  });
  ASSERT_EQ(log.steps.size(), 3u);
  EXPECT_EQ(log.steps[1].seconds, 9.0);
  std::vector<std::string> w = texts_of(log.diagnostics);
  ASSERT_EQ(w.size(), 7u) << fmt::format("{}", fmt::join(w, "\n"));
  EXPECT_THAT(w[0], HasSubstr("run.log:3: BENCH_STEP step=2 again (first at line 2)"));
  EXPECT_THAT(w[1], HasSubstr("run.log:5: malformed BENCH_STEP JSON (\"seconds\" is -1)"));
  EXPECT_THAT(w[2], HasSubstr("run.log:6: malformed BENCH_STEP JSON (no \"step\")"));
  EXPECT_THAT(w[3], HasSubstr("run.log:7: malformed BENCH_STEP JSON (\"microbatch_s\" holds"));
  EXPECT_THAT(w[4], HasSubstr("run.log:8: malformed BENCH_SUMMARY JSON"));
  EXPECT_EQ(w[5], "run.log: no step time for steps 3-4 (between steps 1 and 5)");
  EXPECT_EQ(w[6], "run.log: no TRAINER_STEP_TIMING for steps 2,5");
  // No summary, so the run is partial; nothing says how many steps were planned.
  EXPECT_TRUE(log.partial);
  EXPECT_EQ(log.partial_reason, "no BENCH_SUMMARY (the run did not finish)");
}

TEST(RunLogParser, OutOfRangeBenchStepsAreSkipped) {
  std::string many = R"(BENCH_STEP {"step":9,"seconds":1,"microbatch_s":[)";
  for (std::size_t i = 0; i <= kMaxMicrobatchesPerStep; ++i) many += i == 0 ? "0.1" : ",0.1";
  many += "]}";
  RunLog log = parse_lines({
      R"(BENCH_STEP {"step":1,"seconds":1e999})",
      R"(BENCH_STEP {"step":99999999999999999999999,"seconds":2.0})",
      R"(BENCH_STEP {"step":-3,"seconds":2.0})",
      R"(BENCH_STEP {"step":4,"seconds":2.0,"microbatch_s":[-1.0]})",
      R"(BENCH_STEP {"step":5,"seconds":2.0,"tokens":-1})",
      many,
      R"(BENCH_STEP {"step":6,"seconds":2.0,"microbatch_s":[1.0],"tokens":8})",
  });
  ASSERT_EQ(log.steps.size(), 1u);
  EXPECT_EQ(log.steps[0].step, 6);
  std::string all = fmt::format("{}", fmt::join(texts_of(log.diagnostics), "\n"));
  for (const char* expected : {
           // 1e999 reads as inf, as json.loads reads it; a step time must be finite.
           "run.log:1: malformed BENCH_STEP JSON (\"seconds\" is inf)",
           "run.log:2: malformed BENCH_STEP JSON (\"step\" is out of range)",
           "run.log:3: malformed BENCH_STEP JSON (\"step\" is -3)",
           "run.log:4: malformed BENCH_STEP JSON (\"microbatch_s\" holds -1)",
           "run.log:5: malformed BENCH_STEP JSON (\"tokens\" is -1)",
           "run.log:6: malformed BENCH_STEP JSON (4097 micro-batch times",
       }) {
    EXPECT_THAT(all, HasSubstr(expected));
  }
}

TEST(RunLogParser, OversizedJsonLinesAreSkippedBeforeParsing) {
  std::string huge = R"(BENCH_STEP {"step":1,"seconds":1,"microbatch_s":[)";
  while (huge.size() <= kMaxValueBytes + 100) huge += "0.1,";
  huge += "0.1]}";
  RunLog log = parse_lines({huge, R"(BENCH_STEP {"step":2,"seconds":2})"});
  ASSERT_EQ(log.steps.size(), 1u);
  EXPECT_EQ(log.steps[0].step, 2);
  ASSERT_FALSE(texts_of(log.diagnostics).empty());
  EXPECT_THAT(texts_of(log.diagnostics)[0],
              HasSubstr("bytes of JSON in one line (at most 1048576)"));
}

TEST(RunLogParser, LineWarningsAreCapped) {
  std::vector<std::string> lines(250,
                                 "TRAINER_STEP_TIMING step=1 policy_version=1 rtt_s=0 "
                                 "timing={");
  RunLog log = parse_lines(lines);
  ASSERT_EQ(texts_of(log.diagnostics).size(), 101u);
  EXPECT_THAT(texts_of(log.diagnostics)[99], HasSubstr("run.log:100: "));
  EXPECT_EQ(texts_of(log.diagnostics)[100], "run.log: 150 more line warnings not shown");
  // A line's warning is placed at its line, the count at the log.
  EXPECT_EQ(log.diagnostics[0].severity, Severity::kWarning);
  EXPECT_EQ(log.diagnostics[0].where, "run.log:1");
  EXPECT_THAT(log.diagnostics[0].message, StartsWith("TRAINER_STEP_TIMING step=1: malformed"));
  EXPECT_EQ(log.diagnostics[100],
            (Diagnostic{Severity::kWarning, "run.log", "150 more line warnings not shown"}));
}

TEST(RunLogParser, CrashedRunIsPartial) {
  RunLog log = parse_lines({
      "[TrainerBench] ab-crash: bench driver starting: 5 steps x 9 fwd_bwd calls",
      R"(BENCH_STEP {"step":1,"seconds":30})",
      R"(BENCH_STEP {"step":2,"seconds":8})",
      "Traceback (most recent call last):",
      "RuntimeError: device lost",
      "bench_driver: failed: device lost",
  });
  EXPECT_TRUE(log.partial);
  EXPECT_EQ(log.failure, "device lost");
  EXPECT_EQ(log.name, "ab-crash");
  EXPECT_EQ(log.partial_reason,
            "the driver failed: device lost; 2 of 5 planned steps logged; no BENCH_SUMMARY (the "
            "run did not finish)");
}

TEST(RunLogParser, NothingToRead) {
  RunLog log = parse_lines({"hello", "Train step is not a step line", "BENCH_STEP without json"});
  EXPECT_EQ(log.kind, LogKind::kUnknown);
  EXPECT_FALSE(log.has_step_lines());
  EXPECT_TRUE(texts_of(log.diagnostics).empty());
}

TEST(RunLogParser, FinishTwiceIsAnError) {
  RunLogParser parser("x");
  parser.finish();
  EXPECT_THROW(parser.finish(), Error);
}

TEST(RunLog, KindNames) {
  const std::pair<LogKind, std::string_view> kNames[] = {
      {LogKind::kUnknown, "unknown"},           {LogKind::kBench, "bench"},
      {LogKind::kOrchestrator, "orchestrator"}, {LogKind::kTimingOnly, "timing-only"},
      {LogKind::kMaxText, "maxtext"},           {LogKind::kTunixPeft, "tunix-peft"},
  };
  for (const auto& [kind, name] : kNames) EXPECT_EQ(log_kind_name(kind), name);
}

TEST(RunLogParser, MaxTextCompletedStepLines) {
  RunLog log = parse_lines({
      "Elastic utils: Elastic training enabled.",
      "I0813 17:19:31.548687 1 metric_logger.py:226] completed step: 0, seconds: 49.537, "
      "TFLOP/s/device: 5.103, Tokens/s/device: 330.743, total_weights: 131072, loss: 12.977, "
      "lm_loss: 12.977, perplexity: 432317.375",
      "(pid=12, ip=10.0.0.1) completed step: 1, seconds: 0.159, TFLOP/s/device: 43.430, loss: "
      "220.774",
      "completed step: 2, ...",
      "completed step: 1, seconds: 0.166, TFLOP/s/device: 41.524, loss: 217.296\r",
  });
  EXPECT_EQ(log.kind, LogKind::kMaxText);
  ASSERT_EQ(log.steps.size(), 2u);
  const StepRecord& zero = log.steps[0];
  EXPECT_EQ(zero.seconds, 49.537);
  EXPECT_EQ(zero.seconds_from, "completed step");
  EXPECT_EQ(zero.tflops_per_device, 5.103);
  EXPECT_EQ(zero.tokens_per_s_per_device, 330.743);
  EXPECT_EQ(zero.metrics.at("loss"), 12.977);
  EXPECT_EQ(zero.metrics.at("total_weights"), 131072);
  // The old format (no Tokens/s) and a step logged again after a restore: the later line wins.
  const StepRecord& one = log.steps[1];
  EXPECT_EQ(one.seconds, 0.166);
  EXPECT_EQ(one.tflops_per_device, 41.524);
  EXPECT_FALSE(one.tokens_per_s_per_device.has_value());
  ASSERT_EQ(texts_of(log.diagnostics).size(), 2u);
  EXPECT_THAT(texts_of(log.diagnostics)[0],
              HasSubstr("run.log:4: completed step 2 without a readable"));
  EXPECT_THAT(texts_of(log.diagnostics)[1],
              HasSubstr("run.log:5: completed step 1 again (first at line 3)"));
}

TEST(RunLogParser, MaxTextLinesInABenchLogAreNotItsSteps) {
  RunLog log = parse_lines({
      "[TrainerBench] ab: bench driver starting: 2 steps x 1 fwd_bwd calls",
      "completed step: 7, seconds: 1.0, TFLOP/s/device: 1.0, loss: 1.0",
      "completed step: 7, seconds: 1.0, TFLOP/s/device: 1.0, loss: 1.0",
  });
  EXPECT_EQ(log.kind, LogKind::kBench);
  EXPECT_TRUE(log.steps.empty());
  for (const std::string& warning : texts_of(log.diagnostics))
    EXPECT_THAT(warning, Not(HasSubstr("again")));
}

TEST(RunLogParser, TunixPeftLines) {
  // One timestamped training line (step 4) and one without a timestamp: no interval at all.
  RunLog log = parse_lines({
      "I0706 16:50:26.253525 1 peft_trainer.py:474] Train step 4 training loss: 0.693147  - "
      "training perplexity: 2.000000",
      "I0706 16:50:27.0 1 peft_trainer.py:480] Train step 4 eval loss: 0.7 - eval perplexity: 2.01",
      "Train step 5 training loss: 0.5  - training perplexity: 1.65",
  });
  EXPECT_EQ(log.kind, LogKind::kTunixPeft);
  ASSERT_EQ(log.steps.size(), 2u);
  EXPECT_FALSE(log.steps[0].seconds.has_value());  // Tunix logs no step time
  EXPECT_EQ(log.steps[0].metrics.at("training_loss"), 0.693147);
  EXPECT_EQ(log.steps[0].metrics.at("eval_perplexity"), 2.01);
  EXPECT_EQ(log.steps[1].metrics.at("training_perplexity"), 1.65);
}

// ---- Tunix trainer logs timed by their lines' timestamps (issue 28, item 3) -------------------

// Tunix's training line for `step` behind `prefix` (a glog or Python-logging prefix).
std::string peft_line(const std::string& prefix, int step, double loss = 0.5) {
  return fmt::format("{}Train step {} training loss: {:.6f}  - training perplexity: {:.6f}", prefix,
                     step, loss, std::exp(loss));
}

TEST(FindLogTimestamp, GlogDatesAndKubectlTimestamps) {
  std::optional<LogTimestamp> glog = find_log_timestamp("I0706 16:50:26.253525 140110 peft.py:1] ");
  ASSERT_TRUE(glog.has_value());
  EXPECT_FALSE(glog->has_year);
  EXPECT_EQ(glog->month, 7);
  EXPECT_EQ(glog->day, 6);
  EXPECT_DOUBLE_EQ(glog->second_of_day, 16 * 3600 + 50 * 60 + 26.253525);
  EXPECT_EQ(glog->digits, 6);
  std::optional<LogTimestamp> python = find_log_timestamp("2026-03-03 08:41:18 - INFO - [absl] ");
  ASSERT_TRUE(python.has_value());
  EXPECT_TRUE(python->has_year);
  EXPECT_EQ(python->year, 2026);
  EXPECT_EQ(python->digits, 0);
  EXPECT_EQ(find_log_timestamp("2026-03-03 08:41:18,250 - INFO - ")->digits, 3);
  // kubectl --timestamps before a glog prefix: the leftmost one is read.
  std::optional<LogTimestamp> kubectl =
      find_log_timestamp("[pod/x/main] 2026-10-13T18:51:14.123456789Z I1013 18:51:14.2 1 a.py:1] ");
  ASSERT_TRUE(kubectl.has_value());
  EXPECT_TRUE(kubectl->has_year);
  EXPECT_EQ(kubectl->digits, 9);
  EXPECT_NEAR(kubectl->second_of_day, 18 * 3600 + 51 * 60 + 14.123456789, 1e-9);
  // Not timestamps: a word that starts like glog, impossible fields, no prefix at all.
  EXPECT_FALSE(find_log_timestamp("INFO1013 18:51:14 ").has_value());
  EXPECT_FALSE(find_log_timestamp("I1313 18:51:14.1 ").has_value());
  EXPECT_FALSE(find_log_timestamp("I0230 18:51:14.1 ").has_value());
  EXPECT_FALSE(find_log_timestamp("2026-03-03 25:41:18 ").has_value());
  EXPECT_FALSE(find_log_timestamp("INFO:absl:").has_value());
  EXPECT_FALSE(find_log_timestamp("").has_value());
}

TEST(RunLogParser, TimestampedTunixLinesTimeTheStepsByTheirIntervals) {
  RunLog log = parse_lines({
      "I0706 16:49:45.164331 1 peft_trainer.py:787] Running evaluation on train step 0.",
      "I0706 16:50:00.566213 1 peft_trainer.py:825] Train step 0 eval loss: 0.693147 - eval "
      "perplexity: 2.000000",
      peft_line("I0706 16:50:25.683170 1 peft_trainer.py:474] ", 1),
      peft_line("I0706 16:50:26.253525 1 peft_trainer.py:474] ", 2),
      peft_line("I0706 16:50:26.508154 1 peft_trainer.py:474] ", 3),
      peft_line("I0706 16:50:26.755661 1 peft_trainer.py:474] ", 4),
  });
  EXPECT_EQ(log.kind, LogKind::kTunixPeft);
  ASSERT_EQ(log.steps.size(), 5u);  // step 0 holds its eval losses only
  EXPECT_FALSE(log.steps[0].seconds.has_value());
  EXPECT_EQ(log.steps[0].metrics.at("eval_loss"), 0.693147);
  // Step 1 is the first timestamped step: nothing before its line is timed (the compile).
  EXPECT_FALSE(log.steps[1].seconds.has_value());
  EXPECT_NEAR(*log.steps[2].seconds, 0.570355, 1e-9);
  EXPECT_NEAR(*log.steps[3].seconds, 0.254629, 1e-9);
  EXPECT_NEAR(*log.steps[4].seconds, 0.247507, 1e-9);
  EXPECT_EQ(log.steps[4].seconds_from, "log timestamps");
  EXPECT_EQ(log.steps[4].metrics.at("training_loss"), 0.5);
  ASSERT_TRUE(log.log_timestamps.has_value());
  EXPECT_EQ(log.log_timestamps->clock, "glog");
  EXPECT_EQ(log.log_timestamps->digits, 6);
  EXPECT_EQ(log.log_timestamps->first_step, 1);
  EXPECT_TRUE(log.log_timestamps->spread_steps.empty());
  EXPECT_EQ(log.log_timestamps->repeated_lines, 0u);
  EXPECT_TRUE(log.diagnostics.empty()) << texts_of(log.diagnostics).front();
}

TEST(RunLogParser, AMissingStepSpreadsItsIntervalOverTheStepsItSpans) {
  RunLog log = parse_lines({
      peft_line("2026-03-03 08:41:10 - INFO - [absl] ", 1),
      peft_line("2026-03-03 08:41:12 - INFO - [absl] ", 2),
      peft_line("2026-03-03 08:41:18 - INFO - [absl] ", 5),  // 3 and 4 not logged: 6 s for 3
      peft_line("2026-03-03 08:41:19 - INFO - [absl] ", 6),
  });
  ASSERT_EQ(log.steps.size(), 6u);
  EXPECT_EQ(log.steps[1].seconds, 2.0);
  for (std::size_t i : {2u, 3u, 4u}) {
    EXPECT_EQ(log.steps[i].seconds, 2.0) << i;
    EXPECT_EQ(log.steps[i].seconds_from, "log timestamps");
  }
  EXPECT_TRUE(log.steps[2].metrics.empty());  // not logged: a share of the interval only
  EXPECT_EQ(log.steps[5].seconds, 1.0);
  ASSERT_TRUE(log.log_timestamps.has_value());
  EXPECT_EQ(log.log_timestamps->clock, "date");
  EXPECT_EQ(log.log_timestamps->digits, 0);
  EXPECT_THAT(log.log_timestamps->spread_steps, ElementsAre(3, 4));
  ASSERT_EQ(texts_of(log.diagnostics).size(), 1u);
  EXPECT_EQ(texts_of(log.diagnostics)[0],
            "run.log: no timestamped `Train step N training loss` line for steps 3-4: each "
            "gap's interval is spread evenly over the steps it spans");
}

TEST(RunLogParser, LinesRepeatedByProcessesOrLoggersCountOnce) {
  RunLog log = parse_lines({
      peft_line("I0706 16:50:25.000000 1 peft_trainer.py:474] ", 1),
      peft_line("INFO:absl:", 1),  // the same record through Python's root logger: no timestamp
      peft_line("I0706 16:50:26.000000 1 peft_trainer.py:474] ", 2),
      peft_line("I0706 16:50:25.900000 2 peft_trainer.py:474] ", 2),  // another process, earlier
      peft_line("INFO:absl:", 2),
      peft_line("I0706 16:50:27.000000 2 peft_trainer.py:474] ", 3),
      peft_line("I0706 16:50:27.100000 1 peft_trainer.py:474] ", 3),
  });
  ASSERT_EQ(log.steps.size(), 3u);
  EXPECT_NEAR(*log.steps[1].seconds, 0.9, 1e-9);  // its first appearance, on process 2
  EXPECT_NEAR(*log.steps[2].seconds, 1.1, 1e-9);
  ASSERT_TRUE(log.log_timestamps.has_value());
  EXPECT_EQ(log.log_timestamps->repeated_lines, 4u);
  EXPECT_TRUE(log.diagnostics.empty()) << texts_of(log.diagnostics).front();
}

TEST(RunLogParser, GlogsMissingYearRollsOverAtNewYear) {
  RunLog log = parse_lines({
      peft_line("I1231 23:59:58.500000 1 t.py:1] ", 1),
      peft_line("I1231 23:59:59.500000 1 t.py:1] ", 2),
      peft_line("I0101 00:00:00.250000 1 t.py:1] ", 3),  // the next year: 0.75 s, not -365 days
      peft_line("I1231 23:59:59.900000 2 t.py:1] ", 3),  // a late line of the old year: earlier
      peft_line("I0101 00:00:01.250000 1 t.py:1] ", 4),
  });
  ASSERT_EQ(log.steps.size(), 4u);
  EXPECT_NEAR(*log.steps[1].seconds, 1.0, 1e-9);
  EXPECT_NEAR(*log.steps[2].seconds, 0.4, 1e-9);
  EXPECT_NEAR(*log.steps[3].seconds, 1.35, 1e-9);

  // No year: a February 29 line says that year is a leap year; without one, it is not.
  RunLog leap = parse_lines({
      peft_line("I0228 12:00:00.0 1 t.py:1] ", 1),
      peft_line("I0229 12:00:00.0 1 t.py:1] ", 2),
      peft_line("I0301 12:00:00.0 1 t.py:1] ", 3),
  });
  ASSERT_EQ(leap.steps.size(), 3u);
  EXPECT_EQ(leap.steps[1].seconds, 86400.0);
  EXPECT_EQ(leap.steps[2].seconds, 86400.0);
  RunLog common = parse_lines({
      peft_line("I0228 12:00:00.0 1 t.py:1] ", 1),
      peft_line("I0301 12:00:00.0 1 t.py:1] ", 2),
  });
  EXPECT_EQ(common.steps[1].seconds, 86400.0);
  // With a year the calendar says: 2024 was a leap year.
  RunLog dated = parse_lines({
      peft_line("2024-02-28T12:00:00Z ", 1),
      peft_line("2024-03-01T12:00:00Z ", 2),
  });
  EXPECT_EQ(dated.steps[1].seconds, 2 * 86400.0);
}

TEST(RunLogParser, AStepDatedBeforeThePreviousOneHasNoInterval) {
  RunLog log = parse_lines({
      peft_line("2026-03-03 08:41:10,000 - INFO - ", 1),
      peft_line("2026-03-03 08:41:12,500 - INFO - ", 2),
      peft_line("2026-03-03 08:41:11,000 - INFO - ", 3),
      peft_line("2026-03-03 08:41:14,000 - INFO - ", 4),
  });
  ASSERT_EQ(log.steps.size(), 4u);
  EXPECT_EQ(log.steps[1].seconds, 2.5);
  EXPECT_FALSE(log.steps[2].seconds.has_value());
  EXPECT_EQ(log.steps[3].seconds, 3.0);
  std::vector<std::string> w = texts_of(log.diagnostics);
  ASSERT_GE(w.size(), 1u);
  EXPECT_EQ(w[0],
            "run.log:3: step 3's first line is dated 1.5 s before step 2's: no interval for "
            "step 3");
}

TEST(RunLogParser, TimestampedTunixLinesMakeNoRunBesideOtherStepLines) {
  // MaxText's own lines of the same run (MaxText's DPO notebook logs both) are measured
  // durations: they make the run, and the timestamps are not read.
  RunLog log = parse_lines({
      peft_line("I0706 16:50:25.683170 1 peft_trainer.py:474] ", 1),
      "I0706 16:50:25.690000 1 metric_logger.py:214] completed step: 1, seconds: 24.930, "
      "TFLOP/s/device: 0.861, loss: 0.693",
      peft_line("I0706 16:50:26.253525 1 peft_trainer.py:474] ", 2),
      "I0706 16:50:26.257925 1 metric_logger.py:214] completed step: 2, seconds: 0.570, "
      "TFLOP/s/device: 37.633, loss: 0.693",
  });
  EXPECT_EQ(log.kind, LogKind::kMaxText);
  EXPECT_EQ(log.steps[1].seconds_from, "completed step");
  EXPECT_FALSE(log.log_timestamps.has_value());
}

TEST(RunLogParser, TokenDroppingOfTheBenchDriver) {
  RunLog log = parse_lines({
      R"(BENCH_STEP {"step":0,"seconds":9.5,"metrics":{"dropped_tokens":12},"dropped_tokens":12})",
      R"(BENCH_STEP {"step":1,"seconds":9.1,"dropped_tokens":0})",
      R"(BENCH_STEP {"step":2,"seconds":9.2})",
      R"(BENCH_SUMMARY {"name":"x","token_dropping":{"dropped_tokens":12.0,"counted_steps":2,)"
      R"("metric":["a/dropped_tokens","b/dropped_tokens"],"capacity_factor":1.25,)"
      R"("ragged_buffer_factor":null,"verdict":"dropped","why":"counted"}})",
  });
  ASSERT_EQ(log.steps.size(), 3u);
  EXPECT_EQ(log.steps[0].dropped_tokens, 12.0);
  EXPECT_EQ(log.steps[1].dropped_tokens, 0.0);
  EXPECT_FALSE(log.steps[2].dropped_tokens.has_value());
  ASSERT_TRUE(log.summary && log.summary->token_dropping);
  const TokenDropping& dropping = *log.summary->token_dropping;
  EXPECT_EQ(dropping.verdict, "dropped");
  EXPECT_EQ(dropping.why, "counted");
  EXPECT_EQ(dropping.dropped_tokens, 12.0);
  EXPECT_EQ(dropping.counted_steps, 2);
  EXPECT_EQ(dropping.metric, "a/dropped_tokens,b/dropped_tokens");
  EXPECT_EQ(dropping.capacity_factor, 1.25);
  EXPECT_FALSE(dropping.ragged_buffer_factor.has_value());

  // A negative count is refused like any other negative count; a token_dropping that is not an
  // object makes the summary malformed.
  RunLog bad = parse_lines({
      R"(BENCH_STEP {"step":0,"seconds":9.5,"dropped_tokens":-1})",
      R"(BENCH_SUMMARY {"name":"x","token_dropping":"none"})",
  });
  EXPECT_TRUE(bad.steps.empty());
  EXPECT_FALSE(bad.summary.has_value());
  ASSERT_EQ(texts_of(bad.diagnostics).size(), 2u);
  EXPECT_THAT(texts_of(bad.diagnostics)[0], HasSubstr("\"dropped_tokens\" is -1"));
  EXPECT_THAT(texts_of(bad.diagnostics)[1], HasSubstr("\"token_dropping\" is not an object"));
}

TEST(ParseRunLog, RealMaxTextLogs) {
  const std::string dir = std::string(RTB_TESTDATA_DIR) + "/maxtext_steplogs/";
  // 30 steps of a Gemma-4 run on TPU7x-8 behind absl prefixes, among ~900 other lines.
  RunLog before = parse_run_log(dir + "maxtext_gemma4_before_full.log");
  EXPECT_EQ(before.kind, LogKind::kMaxText);
  ASSERT_EQ(before.steps.size(), 30u);
  EXPECT_EQ(before.steps.front().step, 0);
  EXPECT_EQ(before.steps.back().step, 29);
  EXPECT_EQ(before.steps[1].seconds, 123.805);  // compile
  EXPECT_EQ(before.steps[8].seconds, 14.265);   // profiler collection
  EXPECT_EQ(before.steps[2].tokens_per_s_per_device, 568257.492);
  EXPECT_TRUE(texts_of(before.diagnostics).empty()) << texts_of(before.diagnostics).front();
  RunLog old_format = parse_run_log(dir + "maxtext_old_format.log");
  ASSERT_EQ(old_format.steps.size(), 2u);
  EXPECT_EQ(old_format.steps[0].step, 8);
  EXPECT_EQ(old_format.steps[0].tflops_per_device, 43.430);
  RunLog elided = parse_run_log(dir + "maxtext_elided_step.log");
  EXPECT_TRUE(elided.steps.empty());
  ASSERT_EQ(texts_of(elided.diagnostics).size(), 1u);
  EXPECT_THAT(texts_of(elided.diagnostics)[0],
              HasSubstr("completed step 101 without a readable `seconds`"));
  RunLog started = parse_run_log(dir + "maxtext_getting_started.log");
  EXPECT_EQ(started.kind, LogKind::kMaxText);
  EXPECT_GE(started.steps.size(), 3u);
  RunLog peft = parse_run_log(dir + "tunix_peft_written.log");
  EXPECT_EQ(peft.kind, LogKind::kTunixPeft);
  EXPECT_EQ(peft.steps.size(), 4u);
}

TEST(ParseRunLog, RealTunixTrainerLogTimedByItsTimestamps) {
  // The lines Tunix's peft_trainer.py logged in MaxText's DPO notebook (testdata/SOURCES.md):
  // 500 training steps behind glog prefixes, no step time in any of them.
  const std::string dir = std::string(RTB_TESTDATA_DIR) + "/";
  RunLog peft = parse_run_log(dir + "maxtext_steplogs/tunix_peft_dpo_qwen3-0.6b_tpu-v5p-8.log");
  EXPECT_EQ(peft.kind, LogKind::kTunixPeft);
  ASSERT_EQ(peft.steps.size(), 501u);  // steps 0 (an eval only) to 500
  ASSERT_TRUE(peft.log_timestamps.has_value());
  EXPECT_EQ(peft.log_timestamps->first_step, 1);
  EXPECT_EQ(peft.log_timestamps->repeated_lines, 0u);
  EXPECT_TRUE(peft.log_timestamps->spread_steps.empty());
  EXPECT_TRUE(peft.diagnostics.empty()) << texts_of(peft.diagnostics).front();
  // The same run's MaxText lines (the notebook's whole output) time each step as the host's
  // interval between step completions: the timestamps' intervals agree to 11 ms, step by step.
  RunLog maxtext = parse_run_log(dir + "configlog_maxtext_dpo_qwen3-0.6b_tpu-v5p-8_train.log");
  EXPECT_EQ(maxtext.kind, LogKind::kMaxText);
  ASSERT_EQ(maxtext.steps.size(), 500u);  // steps 1-500
  std::size_t compared = 0;
  double worst = 0.0;
  for (const StepRecord& record : peft.steps) {
    if (!record.seconds) continue;
    const StepRecord& same = maxtext.steps.at(static_cast<std::size_t>(record.step - 1));
    ASSERT_EQ(same.step, record.step);
    worst = std::max(worst, std::fabs(*record.seconds - *same.seconds));
    ++compared;
  }
  EXPECT_EQ(compared, 499u);  // steps 2-500
  EXPECT_LT(worst, 0.011);
  EXPECT_NEAR(*peft.steps[500].seconds, 15.680425, 1e-6);  // step 500 ran the evaluation
}

TEST(ParseRunLog, StreamsAFileFromTestdata) {
  RunLog log = parse_run_log(std::string(RTB_TESTDATA_DIR) + "/bench_logs/bench_ctl.log");
  EXPECT_EQ(log.name, "ab-ctl");
  EXPECT_EQ(log.kind, LogKind::kBench);
  EXPECT_EQ(log.steps.size(), 5u);
  EXPECT_EQ(log.timings.size(), 5u);
  EXPECT_EQ(log.timings[0].mb.size(), 9u);
  EXPECT_FALSE(log.partial);
  EXPECT_TRUE(texts_of(log.diagnostics).empty()) << texts_of(log.diagnostics).front();
  // The noise lines of a real MaxText log (including "Train step N training loss" and
  // "completed step: N, seconds: X") were not read as steps.
  for (const StepRecord& record : log.steps) EXPECT_EQ(record.seconds_from, "BENCH_STEP");
  EXPECT_THROW(parse_run_log("/nonexistent/bench.log"), Error);
}

TEST(RunLogCache, ParsesAPathOnceAndStdinOnlyOnce) {
  std::string path = std::string(RTB_TESTDATA_DIR) + "/bench_logs/bench_ctl.log";
  RunLogCache cache;
  RunLog first = cache.get(path);
  RunLog again = cache.get(path);
  EXPECT_EQ(again.name, "ab-ctl");
  EXPECT_EQ(again.steps.size(), first.steps.size());
  EXPECT_THROW(cache.get("/nonexistent/bench.log"), Error);
  // "-" reads stdin: here the same log, then a second "-" is refused without reading.
  ASSERT_NE(std::freopen(path.c_str(), "r", stdin), nullptr);
  EXPECT_EQ(cache.get("-").steps.size(), 5u);
  try {
    cache.get("-");
    ADD_FAILURE() << "a second - was read";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("- (stdin) can be given only once"));
  }
}

}  // namespace
}  // namespace rtb::logs::steplog

namespace rtb::logs::steplog {
namespace {

// Issue 25's fields, written from the field contract (docs/bench-report.md "Set-up").
TEST(RunLogParser, SetupFieldsOfTheContract) {
  RunLog log = parse_lines({
      R"(BENCH_STEP {"step":1,"seconds":10.5,"train_step_s":9.5,"boundary_free_step_s":9.75,)"
      R"("profiled":false,"replays":2})",
      R"(BENCH_STEP {"step":2,"seconds":10.0,"train_step_s":10.0,"boundary_free_step_s":null,)"
      R"("replays":null})",
      R"(BENCH_SUMMARY {"name":"s","rows":4,"final_rows":2,)"
      R"("stage_boundary":{"requested":"on","engaged":true,"staged_steps":3},)"
      R"("boundary_free_step_s":9.75,"fence_s":0.002,)"
      R"("update_path":{"ran":"fused","why":"asked through **kwargs"},)"
      R"("token_dropping":{"verdict":"replayed","replays":2,"replay_counted_steps":2,)"
      R"("retry_when_tokens_dropped":true,"dropped_tokens":0},)"
      R"("grad_norm":{"reported":false,"metric":null,"steps":0,"skip_step_on_spikes":false,)"
      R"("why":"skip_step_on_spikes is off"},)"
      R"("weights":{"source":"checkpoint","path":"gs://b/ckpt","why":"--maxtext_ckpt_path"},)"
      R"("profiler":{"by":"driver","why":"PROFILE_WINDOW"},"microbatch_timing_why":"one late",)"
      R"("choices":{"logps_pass":{"value":true,"source":"auto"},)"
      R"("logps_chunk_size":{"value":1024,"source":"run_trainer_node"},)"
      R"("routing":{"value":[1,2],"source":"x"}}})",
  });
  ASSERT_EQ(log.steps.size(), 2u);
  EXPECT_EQ(log.steps[0].train_step_s, 9.5);
  EXPECT_EQ(log.steps[0].boundary_free_step_s, 9.75);
  EXPECT_EQ(log.steps[0].replays, 2);
  EXPECT_FALSE(log.steps[1].boundary_free_step_s);
  EXPECT_FALSE(log.steps[1].replays);
  ASSERT_TRUE(log.summary);
  const BenchSummary& s = *log.summary;
  EXPECT_EQ(s.final_rows, 2);
  EXPECT_EQ(s.stage_boundary->staged_step_count, 3);
  EXPECT_TRUE(s.stage_boundary->staged_steps.empty());
  EXPECT_EQ(s.boundary_free_step_s, 9.75);
  EXPECT_EQ(s.fence_s, 0.002);
  EXPECT_EQ(s.update_path->ran, "fused");
  EXPECT_EQ(s.token_dropping->verdict, "replayed");
  EXPECT_EQ(s.token_dropping->replays, 2);
  EXPECT_EQ(s.token_dropping->replay_counted_steps, 2);
  EXPECT_EQ(s.token_dropping->retry_when_tokens_dropped, true);
  EXPECT_FALSE(s.grad_norm->reported);
  EXPECT_EQ(s.grad_norm->skip_step_on_spikes, false);
  EXPECT_EQ(s.grad_norm->why, "skip_step_on_spikes is off");
  EXPECT_EQ(s.weights->source, "checkpoint");
  EXPECT_EQ(s.weights->path, "gs://b/ckpt");
  EXPECT_EQ(s.profiler->by, "driver");
  EXPECT_EQ(s.microbatch_timing_why, "one late");
  EXPECT_EQ(s.choices.at("logps_pass").value, "true");
  EXPECT_EQ(s.choices.at("logps_chunk_size").value, "1024");
  EXPECT_EQ(s.choices.count("routing"), 0u);  // a list value is not a set-up item
  EXPECT_TRUE(texts_of(log.diagnostics).empty());

  // The older list form of staged_steps is counted.
  RunLog listed = parse_lines({R"(BENCH_STEP {"step":1,"seconds":1})",
                               R"(BENCH_SUMMARY {"stage_boundary":{"staged_steps":[1,2]}})"});
  EXPECT_EQ(listed.summary->stage_boundary->staged_step_count, 2);
}

TEST(RunLogParser, SetupFieldOfTheWrongTypeIsAnError) {
  auto error_of = [](const std::string& line) {
    try {
      parse_lines({R"(BENCH_STEP {"step":1,"seconds":1})", line});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(error_of(R"(BENCH_SUMMARY {"weights":{"source":"random-ish"}})"),
              HasSubstr("run.log:2: BENCH_SUMMARY: \"source\" is \"random-ish\" (expected one of "
                        "random, checkpoint)"));
  EXPECT_THAT(error_of(R"(BENCH_SUMMARY {"fence_s":"fast"})"),
              HasSubstr("BENCH_SUMMARY: \"fence_s\" is not a number"));
  EXPECT_THAT(error_of(R"(BENCH_SUMMARY {"update_path":"fused"})"),
              HasSubstr("\"update_path\" is not an object"));
  EXPECT_THAT(error_of(R"(BENCH_SUMMARY {"grad_norm":{"reported":"no"}})"),
              HasSubstr("\"reported\" is not true or false"));
  EXPECT_THAT(error_of(R"(BENCH_SUMMARY {"token_dropping":{"replays":1.5}})"),
              HasSubstr("\"replays\" is not an integer"));
  EXPECT_THAT(error_of(R"(BENCH_SUMMARY {"stage_boundary":{"staged_steps":-1}})"),
              HasSubstr("\"staged_steps\" is -1"));
  EXPECT_THAT(error_of(R"(BENCH_SUMMARY {"choices":{"logps_pass":true}})"),
              HasSubstr("run.log:2: BENCH_SUMMARY: \"choices\" entry \"logps_pass\" is not a "
                        "{value, source} object"));
  EXPECT_THAT(error_of(R"(BENCH_SUMMARY {"choices":{"logps_pass":{"value":true}}})"),
              HasSubstr("\"choices\" entry \"logps_pass\" is not a {value, source} object"));
  EXPECT_THAT(error_of(R"(BENCH_SUMMARY {"choices":{"logps_pass":{"value":1,"source":2}}})"),
              HasSubstr("\"source\" is not a string"));
  EXPECT_THAT(error_of(R"(BENCH_STEP {"step":2,"seconds":1,"replays":"two"})"),
              HasSubstr("run.log:2: BENCH_STEP: \"replays\" is not a number"));
  EXPECT_THAT(error_of(R"(BENCH_STEP {"step":2,"seconds":1,"train_step_s":-1})"),
              HasSubstr("\"train_step_s\" is -1"));
}

// Every line the parser reads is named where a user or a fuzzer looks for it: the fuzz
// dictionary (so the fuzzer builds such lines), and docs/bench-report.md.
TEST(LineFormats, TheFuzzDictionaryAndTheDocsNameEveryMarker) {
  std::string dictionary = read_file(RTB_TESTDATA_DIR "/../fuzz/dicts/steplog.dict");
  std::string docs = read_file(RTB_TESTDATA_DIR "/../docs/bench-report.md");
  for (const LineFormat& format : kLineFormats) {
    std::string marker(trim(format.marker));
    if (marker.ends_with('{')) marker = std::string(trim(marker.substr(0, marker.size() - 1)));
    EXPECT_NE(dictionary.find("\"" + marker), std::string::npos) << marker;
    EXPECT_NE(docs.find(marker), std::string::npos) << marker;
  }
  std::string list = line_format_list();
  for (const LineFormat& format : kLineFormats)
    EXPECT_NE(list.find(format.shown), std::string::npos) << format.shown;
}

TEST(LineFormats, EachMarkerReachesItsParser) {
  // A MaxText step line with a prefix and nothing else: the run has its step.
  RunLogParser parser("m.log");
  parser.feed(
      "I1204 12:00:00.1 train.py:1] completed step: 3, seconds: 2.5, TFLOP/s/device: 1, "
      "loss: 1.0",
      1);
  RunLog log = parser.finish();
  ASSERT_EQ(log.steps.size(), 1u);
  EXPECT_EQ(log.steps.front().seconds_from, "completed step");
}

}  // namespace
}  // namespace rtb::logs::steplog
