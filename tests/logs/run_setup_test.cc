#include "rtb/logs/run_setup.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "rtb/logs/steplog.h"
#include "test_util.h"

namespace rtb::logs::report {
namespace {

// A log of the issue 25 driver, written from the field contract: three steps (0 compiles).
steplog::RunLog contract_log(bool staged, const std::string& weights = "random",
                             int replays_per_step = 0, const std::string& extra = "") {
  std::string text;
  for (int step = 0; step < 3; ++step) {
    text += fmt::format(
        R"(BENCH_STEP {{"step":{},"seconds":10,"microbatch_s":[2,1,1,1],"update":"fused",)"
        R"("staged":{},"profiled":false,"replays":{},"train_step_s":9.5,)"
        R"("boundary_free_step_s":{}}})"
        "\n",
        step, staged && step > 0, replays_per_step, step == 0 ? "null" : "9");
  }
  text += fmt::format(
      R"(BENCH_SUMMARY {{"name":"x","rows":4,"tokens_per_row":64,"micro_steps":4,"final_rows":4,)"
      R"("stage_boundary":{{"engaged":{},"staged_steps":{}}},"fence_s":0.001,)"
      R"("update_path":{{"ran":"fused","why":"w"}},)"
      R"("weights":{{"source":"{}","path":{},"why":"w"}},)"
      R"("choices":{{"logps_pass":{{"value":false,"source":"auto"}}}}{}}})"
      "\n",
      staged, staged ? 2 : 0, weights, weights == "random" ? "null" : "\"gs://c\"", extra);
  return steplog::parse_run_log_text(text, "x.log");
}

const std::set<std::int64_t> kUsed = {1, 2};

TEST(RunSetup, ItemsFromTheContractFields) {
  RunSetup setup = run_setup(contract_log(true, "checkpoint", 1), kUsed, "device");
  EXPECT_TRUE(setup.logged);
  EXPECT_EQ(setup.find("staging")->shown, "on (2 steps staged)");
  EXPECT_EQ(setup.find("replays")->shown, "2 in 2 steps");
  EXPECT_EQ(setup.find("weights")->shown, "checkpoint (gs://c)");
  EXPECT_EQ(setup.find("update")->shown, "fused");
  EXPECT_EQ(setup.find("logps")->shown, "off");
  EXPECT_EQ(setup.find("mb_timing")->shown, "device");
  EXPECT_EQ(setup.find("shape")->shown, "4 x 64 x 4");
  EXPECT_EQ(setup.train_step_s, 9.5);
  EXPECT_EQ(setup.boundary_free_step_s, 9.0);  // step 0's null is not among the steps used
  EXPECT_EQ(setup.fence_s, 0.001);
  EXPECT_EQ(setup.replays, 2);
  EXPECT_EQ(setup.replay_counted_steps, 2);

  RunSetup off = run_setup(contract_log(false), kUsed, "device");
  EXPECT_EQ(off.find("staging")->shown, "off");
  EXPECT_EQ(off.find("replays")->shown, "none in 2 steps");
  EXPECT_EQ(off.find("weights")->shown, "random");
}

TEST(RunSetup, OlderLogsLogNone) {
  steplog::RunLog old = steplog::parse_run_log_text(
      "BENCH_STEP {\"step\":1,\"seconds\":3,\"update\":\"fused\",\"staged\":false}\n"
      "BENCH_SUMMARY {\"name\":\"o\",\"rows\":4,\"tokens_per_row\":8,\"micro_steps\":2}\n",
      "o.log");
  RunSetup setup = run_setup(old, {1}, "");
  EXPECT_FALSE(setup.logged);
  EXPECT_FALSE(compare_setups("a", setup, "b", setup).evaluated);
  EXPECT_EQ(compare_setups("a", setup, "b", setup).text(), "");
}

TEST(CompareSetups, NamesEachDifference) {
  RunSetup control = run_setup(contract_log(false), kUsed, "device");
  RunSetup run = run_setup(contract_log(true, "checkpoint", 3), kUsed, "dispatch");
  SetupDifference same = compare_setups("ctl", control, "ctl2", control);
  EXPECT_TRUE(same.evaluated);
  EXPECT_EQ(same.text(), "same");
  SetupDifference difference = compare_setups("ctl", control, "var", run);
  EXPECT_THAT(difference.differs, ElementsAre("staging off vs on (2 steps staged)",
                                              "replays none in 2 steps vs 6 in 2 steps",
                                              "weights random vs checkpoint (gs://c)",
                                              "micro-batch timing device vs dispatch"));
  EXPECT_EQ(difference.text().substr(0, 28), "differs: staging off vs on (");

  // Replays compare per counted step: the same rate over other steps is no difference.
  RunSetup fewer = run_setup(contract_log(true, "checkpoint", 3), {2}, "dispatch");
  EXPECT_TRUE(compare_setups("a", run, "b", fewer).differs.empty());

  // An item one arm does not log is unknown, not a difference.
  steplog::RunLog no_weights = contract_log(false);
  no_weights.summary->weights.reset();
  SetupDifference unknown =
      compare_setups("ctl", control, "nw", run_setup(no_weights, kUsed, "device"));
  EXPECT_TRUE(unknown.differs.empty());
  EXPECT_THAT(unknown.unknown, ElementsAre("weights (nw does not log it)"));
  EXPECT_EQ(unknown.text(), "unknown: weights (nw does not log it)");
  SetupDifference both = compare_setups("nw", run_setup(no_weights, kUsed, "device"), "var", run);
  EXPECT_EQ(both.text().substr(0, 26), "differs: staging off vs on");
  EXPECT_NE(both.text().find("; unknown: weights (nw does not log it)"), std::string::npos);
}

}  // namespace
}  // namespace rtb::logs::report
