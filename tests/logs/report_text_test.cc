#include "rtb/logs/report_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "logs/report_test_logs.h"
#include "test_util.h"

namespace rtb::logs::report {
namespace {

TEST(ReportText, RunsComparisonsAndTimeline) {
  Report report = two_runs().report;

  std::string text = format_text(report);
  EXPECT_THAT(text,
              HasSubstr("var against ctl: 10.100 -> 9.100 s per optimizer step, mean of "
                        "steps 2-3 (-9.90%, faster), and 2.000 -> 2.000 s per regular micro-batch "
                        "(+0.00%, no change)"));
  EXPECT_THAT(text, HasSubstr("ctl (control)"));
  EXPECT_THAT(text, HasSubstr("trainer timeline"));
}

}  // namespace
}  // namespace rtb::logs::report

namespace rtb::logs::report {
namespace {

TEST(ReportText, SetupOnlyWhenALogHasIt) {
  EXPECT_THAT(format_text(two_runs().report), testing::Not(HasSubstr("set-up")));

  Inputs inputs;
  inputs.runs = {setup_log("ctl", false), setup_log("short", true, 9, "checkpoint", 2)};
  std::string text = format_text(build_report(inputs, {}));
  EXPECT_THAT(text, HasSubstr("set-up (a verdict names any difference from the control's):\n"));
  EXPECT_THAT(text, HasSubstr("boundary-free s/step (estimate)"));
  EXPECT_THAT(text, HasSubstr("4 x 64 x 6 (final 2 rows)"));
  EXPECT_THAT(text, HasSubstr("ctl: update path fused: w\n"));
  EXPECT_THAT(text, HasSubstr("short: each step's final micro-batch is short (final_rows 2 < rows "
                              "4): left out of the regular micro-batch median"));
  EXPECT_THAT(text, HasSubstr("set-up differs: staging off vs on (3 steps staged), weights random "
                              "vs checkpoint, shape 4 x 64 x 6 vs 4 x 64 x 6 (final 2 rows)\n"));
}

}  // namespace
}  // namespace rtb::logs::report
