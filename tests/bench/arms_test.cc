#include "rtb/bench/arms.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/render_options_util.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/process.h"
#include "rtb/base/text.h"
#include "rtb/bench/diff_render.h"
#include "rtb/bench/render_steps.h"
#include "rtb/k8s/jobset.h"
#include "rtb/k8s/shell.h"
#include "rtb/k8s/yaml.h"

namespace rtb::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The order as "arm/run" labels, with arm names a, b, c, ...
std::vector<std::string> labels(const std::vector<ArmRun>& runs) {
  std::vector<std::string> out;
  for (const ArmRun& r : runs)
    out.push_back(std::string(1, static_cast<char>('a' + r.arm)) + std::to_string(r.repeat));
  return out;
}

TEST(ArmsTest, AbbaRunsTheListThenItsReverse) {
  EXPECT_THAT(labels(run_order(2, ArmOrder::kAbba, 2)), ElementsAre("a1", "b1", "b2", "a2"));
  EXPECT_THAT(labels(run_order(2, ArmOrder::kAbba, 4)),
              ElementsAre("a1", "b1", "b2", "a2", "a3", "b3", "b4", "a4"));
  EXPECT_THAT(labels(run_order(3, ArmOrder::kAbba, 2)),
              ElementsAre("a1", "b1", "c1", "c2", "b2", "a2"));
}

TEST(ArmsTest, InterleaveRepeatsTheListAndBlocksRunEachArmTogether) {
  EXPECT_THAT(labels(run_order(2, ArmOrder::kInterleave, 2)), ElementsAre("a1", "b1", "a2", "b2"));
  EXPECT_THAT(labels(run_order(2, ArmOrder::kBlocks, 3)),
              ElementsAre("a1", "a2", "a3", "b1", "b2", "b3"));
  EXPECT_THROW(run_order(2, ArmOrder::kAbba, 0), Error);
}

TEST(ArmsTest, ParsesTheOrderModeAndRepeats) {
  EXPECT_EQ(parse_arm_order("interleave"), ArmOrder::kInterleave);
  EXPECT_EQ(parse_arm_mode("jobsets"), ArmMode::kJobSets);
  EXPECT_EQ(parse_arm_repeats("3"), 3);
  EXPECT_THROW(parse_arm_order("abab"), Error);
  EXPECT_THROW(parse_arm_repeats("0"), Error);
  EXPECT_THROW(parse_arm_repeats("2x"), Error);
}

TEST(ArmsTest, ArmValuesSplitAtTheFirstColonOnly) {
  std::vector<ArmSpec> arms = parse_arm_values({"base", "vmem:--trainer-slice=tpu7x:4x4x4",
                                                "b:--maxtext-flag=sa_block_q=2048", "b:--steps=3"});
  ASSERT_EQ(arms.size(), 3u);
  EXPECT_EQ(arms[0].name, "base");
  EXPECT_TRUE(arms[0].knobs.empty());
  EXPECT_THAT(arms[1].knobs, ElementsAre("--trainer-slice=tpu7x:4x4x4"));
  EXPECT_THAT(arms[2].knobs, ElementsAre("--maxtext-flag=sa_block_q=2048", "--steps=3"));
  ArmKnob knob = split_arm_knob("--maxtext-flag=sa_block_q=2048");
  EXPECT_EQ(knob.option, "--maxtext-flag");
  EXPECT_EQ(knob.text, "sa_block_q=2048");
  EXPECT_EQ(split_arm_knob("--allow-fallbacks").text, "");
  EXPECT_THROW(parse_arm_values({"Base"}), Error);
  EXPECT_THROW(parse_arm_values({"a_b"}), Error);
  EXPECT_THROW(parse_arm_values({"b:steps=3"}), Error);
}

RenderOptions base_options() { return testing_util::test_render_options(); }

std::string refusal(const ArmPlan& plan) {
  try {
    arm_options(plan, base_options());
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

TEST(ArmsTest, KnobsOfThePodAndMeshKeysAreRefusedForAnArm) {
  ArmPlan plan;
  plan.arms = parse_arm_values({"a", "b:--libtpu-flag=--xla_tpu_scoped_vmem_limit_kib=65536"});
  EXPECT_THAT(refusal(plan), HasSubstr("pathways-proxy"));
  EXPECT_THAT(refusal(plan), HasSubstr("--arm-mode jobsets"));
  plan.arms = parse_arm_values({"a", "b:--trainer-slice=tpu7x:4x4x4"});
  EXPECT_THAT(refusal(plan), HasSubstr("the slice the pod runs on"));
  plan.arms = parse_arm_values({"a", "b:--maxtext-flag=ici_fsdp_parallelism=4"});
  EXPECT_THAT(refusal(plan), HasSubstr("the mesh key ici_fsdp_parallelism"));
  plan.arms = parse_arm_values({"a", "b:--trainer-arg=--maxtext_dcn_data_parallelism=2"});
  EXPECT_THAT(refusal(plan), HasSubstr("the mesh key dcn_data_parallelism"));
  // One JobSet per arm holds them.
  plan.mode = ArmMode::kJobSets;
  EXPECT_EQ(refusal(plan), "");
}

TEST(ArmsTest, AnArmKnobIsParsedAsTheTopLevelOption) {
  ArmPlan plan;
  plan.arms = parse_arm_values({"a", "b:--steps=0"});
  EXPECT_THAT(refusal(plan), HasSubstr("--arm b: --steps 0: must be >= 1"));
  plan.arms = parse_arm_values({"a", "b:--no-such-knob=1"});
  EXPECT_THAT(refusal(plan), HasSubstr("not a render-bench knob"));
  plan.arms = parse_arm_values({"a"});
  EXPECT_THAT(refusal(plan), HasSubstr("at least two arms"));
  plan.arms =
      parse_arm_values({"a", "b:--steps=3", "b:--maxtext-flag=x=1", "b:--maxtext-flag=y=2"});
  std::vector<RenderOptions> options = arm_options(plan, base_options());
  EXPECT_EQ(options[0].driver.steps, 5);
  EXPECT_EQ(options[1].driver.steps, 3);
  EXPECT_THAT(options[1].maxtext_flags, ElementsAre("x=1", "y=2"));
}

// The value of `name` in the first startup block of a bench's client script.
std::string startup_value(const YAML::Node& bench, const std::string& name) {
  k8s::Document doc(bench, 1);
  k8s::ClientCommand client = k8s::JobSetView(doc).client("bench");
  for (const k8s::shell::Assignment& a : client.startup.env) {
    if (a.name == name) return a.value;
  }
  return "";
}

class ArmsFixtureTest : public ::testing::TestWithParam<const char*> {};

// On each real DRY_RUN fixture: one JobSet runs every run; each arm's program is the one a bench
// of that arm alone runs, passes render-bench's self-check (inside render_arms) and
// diff-renders --expect-bench, and carries its arm's settings.
TEST_P(ArmsFixtureTest, OnePodRunsEveryArmAndEachProgramPassesTheBenchChecks) {
  std::string file = GetParam();
  k8s::DryRun dryrun = k8s::parse_dryrun(read_file(std::string(RTB_TESTDATA_DIR "/") + file), file);
  ArmPlan plan;
  plan.arms = parse_arm_values(
      {"base", "blk:--maxtext-flag=sa_block_q=2048", "blk:--steps=3", "blk:--seed=7"});
  ArmsRender rendered = render_arms(dryrun, plan, base_options());
  ASSERT_EQ(rendered.jobsets.size(), 1u);
  ASSERT_EQ(rendered.order.size(), 4u);
  k8s::DryRun bench = k8s::parse_dryrun(rendered.yaml, "bench.yaml");
  const k8s::Document& doc = bench.documents.at(0);
  std::vector<ArmProgram> programs = arm_programs(doc, bench.source);
  ASSERT_EQ(programs.size(), 2u);
  EXPECT_EQ(programs[0].arm, "base");
  EXPECT_EQ(programs[1].arm, "blk");
  EXPECT_EQ(startup_value(programs[0].bench, "STEPS"), "5");
  EXPECT_EQ(startup_value(programs[1].bench, "STEPS"), "3");
  EXPECT_EQ(startup_value(programs[1].bench, "SEED"), "7");
  EXPECT_EQ(startup_value(programs[1].bench, "BENCH_ARM"), "blk");
  EXPECT_THAT(startup_value(programs[1].bench, "MAXTEXT_EXTRA_FLAGS"),
              HasSubstr("sa_block_q=2048"));
  EXPECT_THAT(startup_value(programs[0].bench, "MAXTEXT_EXTRA_FLAGS"),
              ::testing::Not(HasSubstr("sa_block_q=2048")));
  std::vector<ExpectBenchResult> checks = check_expect_bench_arms(dryrun, bench, k8s::RoleMains{});
  ASSERT_EQ(checks.size(), 2u);
  for (const ExpectBenchResult& check : checks) {
    EXPECT_EQ(check.unexpected(), 0u) << check.arm;
    EXPECT_EQ(check.bench_name, "abtest-bench");
  }
  // The script holds each arm's block once and makes the runs in abba order.
  std::string script = k8s::JobSetView(doc).client("bench").script;
  EXPECT_THAT(script, HasSubstr("bench_run bench_arm_0 base 1\nbench_run bench_arm_1 blk 2\n"
                                "bench_run bench_arm_1 blk 3\nbench_run bench_arm_0 base 4\n"));
  EXPECT_THAT(script, HasSubstr("BENCH_RUN_END"));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ArmsFixtureTest,
                         ::testing::Values("launch_dryrun.txt", "launch_dryrun_v5p.txt",
                                           "launch_dryrun_weights_profiler.txt"));

TEST(ArmsTest, AKnobThatChangesWhatThePodSharesIsRefusedWithThePath) {
  k8s::DryRun dryrun = k8s::parse_dryrun(
      read_file(RTB_TESTDATA_DIR "/launch_dryrun_weights_profiler.txt"), "dryrun.txt");
  ArmPlan plan;
  plan.arms = parse_arm_values({"a", "b:--weights=checkpoint"});
  try {
    render_arms(dryrun, plan, base_options());
    FAIL() << "not refused";
  } catch (const Error& e) {
    EXPECT_THAT(e.message(), HasSubstr("--arm b:--weights=checkpoint"));
    EXPECT_THAT(e.message(), HasSubstr("--arm-mode jobsets"));
  }
}

TEST(ArmsTest, JobSetsModeRendersOneJobSetPerArm) {
  k8s::DryRun dryrun =
      k8s::parse_dryrun(read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt"), "launch_dryrun.txt");
  ArmPlan plan;
  plan.mode = ArmMode::kJobSets;
  plan.arms = parse_arm_values({"a", "b:--trainer-slice=tpu7x:4x4x4"});
  ArmsRender rendered = render_arms(dryrun, plan, base_options());
  ASSERT_EQ(rendered.jobsets.size(), 2u);
  EXPECT_EQ(k8s::yaml::scalar_at(rendered.jobsets[0]["metadata"], "name"), "abtest-bench-a");
  EXPECT_EQ(k8s::yaml::scalar_at(rendered.jobsets[1]["metadata"], "name"), "abtest-bench-b");
  EXPECT_EQ(startup_value(rendered.jobsets[1], "BENCH_ARM"), "b");
  EXPECT_EQ(k8s::parse_dryrun(rendered.yaml, "x").documents.size(), 2u);
}

TEST(ArmsTest, ExplainListsArmsKnobsAndRunOrder) {
  ArmPlan plan;
  plan.arms = parse_arm_values({"a", "b:--steps=3"});
  std::string text = explain_arms(plan);
  EXPECT_THAT(text, HasSubstr("a (control): no knobs of its own"));
  EXPECT_THAT(text, HasSubstr("b: --steps=3"));
  EXPECT_THAT(text, HasSubstr("1:a 2:b 3:b 4:a"));
}

// The wrapper itself, run by bash with stand-in runs (the driver file in a temporary directory,
// the poll shortened): every run starts, a failed one is reported and the next goes on, and the
// exit status says that one failed.
TEST(ArmsTest, TheArmsWrapperRunsEveryRunAndExitsOneWhenAnyFailed) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("rtb_arms_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  std::string log = (dir / "log.txt").string();
  // Arm b's first run (run 2) fails: its stand-in exits 3 when BENCH_RUN is 2.
  auto arm = [&](const std::string& name) {
    return render_steps::ArmsScriptArm{
        name, fmt::format("  BENCH_ARM={} \\\n  sh -c 'echo \"driver $BENCH_ARM $BENCH_RUN\"; "
                          "[ \"$BENCH_ARM/$BENCH_RUN\" != b/2 ]  || exit 3'",
                          name)};
  };
  render_steps::ScriptCommand command = render_steps::arms_script(
      {arm("a"), arm("b")}, {{0, 1}, {1, 2}, {1, 3}, {0, 4}}, "test", "print('x')\n", "", "test");
  EXPECT_TRUE(command.arguments.empty()) << "a small driver goes in the script";
  std::string script = command.script;
  std::string driver = (dir / "bench_driver.py").string();
  for (std::size_t at; (at = script.find("/tmp/bench_driver.py")) != std::string::npos;)
    script.replace(at, std::string_view("/tmp/bench_driver.py").size(), driver);
  for (std::size_t at; (at = script.find("sleep 5")) != std::string::npos;)
    script.replace(at, std::string_view("sleep 5").size(), "sleep 0.01");
  int status = run_process({"bash", "-c", "exec >" + log + " 2>&1\n" + script});
  std::string out = read_file(log);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(status, 1) << out;
  EXPECT_THAT(out, HasSubstr("driver a 1\nBENCH_RUN_END {\"arm\":\"a\",\"run\":1,\"exit_code\":0}\n"
                             "driver b 2\n"));
  EXPECT_THAT(out, HasSubstr("BENCH_RUN_END {\"arm\":\"b\",\"run\":2,\"exit_code\":3}"));
  EXPECT_THAT(out, HasSubstr("driver b 3\n"));
  EXPECT_THAT(out, HasSubstr("BENCH_RUN_END {\"arm\":\"a\",\"run\":4,\"exit_code\":0}"));
  EXPECT_THAT(out, HasSubstr("EXIT_CODE=1 (failed runs: b/2)"));
}

}  // namespace
}  // namespace rtb::bench
