#include "rtb/logs/report_json.h"

#include <gtest/gtest.h>

#include <string>

#include "logs/report_test_logs.h"
#include "rtb/logs/steplog.h"

namespace rtb::logs::report {
namespace {

TEST(ReportJson, RunsAndComparisons) {
  Inputs inputs;
  Report report = two_runs(inputs);

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
}

}  // namespace
}  // namespace rtb::logs::report
