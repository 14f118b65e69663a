#include "rtb/logs/report_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "logs/report_test_logs.h"

namespace rtb::logs::report {
namespace {

using ::testing::HasSubstr;

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
