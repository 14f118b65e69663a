#include "rtb/logs/report_svg.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "logs/report_test_logs.h"
#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb::logs::report {
namespace {

TEST(ReportSvg, OneStepPerRun) {
  auto [inputs, report] = two_runs();

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
}  // namespace rtb::logs::report
