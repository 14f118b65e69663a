#include "rtb/logs/report_json.h"

#include <gtest/gtest.h>

#include <string>

#include "logs/report_test_logs.h"
#include "rtb/base/literal.h"

namespace rtb::logs::report {
namespace {

TEST(ReportJson, RunsAndComparisons) {
  Report report = two_runs().report;

  Literal json = parse_json(format_json(report));
  EXPECT_EQ(json.find("schema")->text, "rtb.bench-report/1");
  const Literal& runs = *json.find("runs");
  ASSERT_EQ(runs.items.size(), 2u);
  const Literal& step = *runs.items[1].find("step_s");
  EXPECT_EQ(runs.items[1].find("name")->text, "var");
  EXPECT_DOUBLE_EQ(step.find("mean")->number, 9.1);
  EXPECT_EQ(step.find("n")->number, 2);
  EXPECT_TRUE(step.find("ci_low")->is_number());
  EXPECT_TRUE(step.find("ci_high")->is_number());
  EXPECT_EQ(runs.items[1].find("microbatch_s")->find("median")->number, 2);
  EXPECT_EQ(runs.items[1].find("microbatch_s")->find("n")->number, 4);
  const Literal& comparison = json.find("comparisons")->items.at(0);
  EXPECT_EQ(comparison.find("run")->text, "var");
  EXPECT_NEAR(comparison.find("ratio")->number, 9.1 / 10.1, 1e-12);
  EXPECT_EQ(comparison.find("verdict")->text, "faster");
  EXPECT_TRUE(comparison.find("ci_low")->is_number());
  EXPECT_EQ(comparison.find("microbatch")->find("verdict")->text, "no_change");
  EXPECT_TRUE(json.find("noise_floor")->is_null());
  EXPECT_TRUE(json.find("numerics")->is_null());
  EXPECT_EQ(json.find("exit_code")->number, 0);
}

}  // namespace
}  // namespace rtb::logs::report
