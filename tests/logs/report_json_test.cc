#include "rtb/logs/report_json.h"

#include <gtest/gtest.h>

#include <set>
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

TEST(ReportJson, WarningsAreListedAsTextAndAsDiagnostics) {
  Report report = two_runs().report;
  report.runs[1].diagnostics = {{Severity::kWarning, "var.log:4", "step 3 again"}};
  report.diagnostics = {{Severity::kWarning, "var.log:4", "step 3 again"},
                        {Severity::kWarning, "", "var against ctl: set-up differs"}};
  Literal json = parse_json(format_json(report));
  const Literal& run = json.find("runs")->items[1];
  ASSERT_EQ(run.find("warnings")->items.size(), 1u);
  EXPECT_EQ(run.find("warnings")->items[0].text, "var.log:4: step 3 again");
  EXPECT_EQ(run.find("diagnostics")->items.at(0).find("where")->text, "var.log:4");
  EXPECT_TRUE(json.find("runs")->items[0].find("diagnostics")->items.empty());
  const Literal& all = *json.find("diagnostics");
  ASSERT_EQ(all.items.size(), 2u);
  EXPECT_EQ(all.items[1].find("severity")->text, "warning");
  EXPECT_TRUE(all.items[1].find("where")->is_null());
  EXPECT_EQ(all.items[1].find("message")->text, "var against ctl: set-up differs");
  EXPECT_EQ(json.find("warnings")->items.at(1).text, "var against ctl: set-up differs");
}

}  // namespace
}  // namespace rtb::logs::report

namespace rtb::logs::report {
namespace {

TEST(ReportJson, SetupSummaryFieldsAndLimitSources) {
  Report old = two_runs().report;
  Literal old_json = parse_json(format_json(old));
  EXPECT_TRUE(old_json.find("runs")->items[0].find("setup")->is_null());
  EXPECT_TRUE(old_json.find("comparisons")->items[0].find("setup")->is_null());

  Inputs inputs;
  inputs.runs = {setup_log("ctl", false), setup_log("staged", true, 9.2)};
  Options options;
  options.require_same_setup = true;
  Literal json = parse_json(format_json(build_report(inputs, options)));
  const Literal& run = json.find("runs")->items[1];
  EXPECT_EQ(run.find("setup")->find("staging")->text, "on (3 steps staged)");
  EXPECT_EQ(run.find("setup")->find("boundary_free_step_s_estimate")->number, 8.2);
  EXPECT_EQ(run.find("setup")->find("train_step_s")->number, 9.2);
  EXPECT_EQ(run.find("summary")->find("weights")->find("source")->text, "random");
  EXPECT_EQ(run.find("summary")->find("stage_boundary")->find("staged_step_count")->number, 3);
  EXPECT_EQ(run.find("token_dropping")->find("replays")->number, 0);
  const Literal& setup = *json.find("comparisons")->items[0].find("setup");
  EXPECT_FALSE(setup.find("same")->boolean);
  EXPECT_EQ(setup.find("differs")->items.at(0).text, "staging off vs on (3 steps staged)");
  EXPECT_TRUE(json.find("require_same_setup")->find("tripped")->boolean);
  EXPECT_EQ(json.find("exit_code")->number, 1);
}

}  // namespace
}  // namespace rtb::logs::report

namespace rtb::logs::report {
namespace {

// Every object of the JSON has each key once (a reader keeps one of two equal keys silently).
void expect_unique_keys(const Literal& value) {
  if (value.is_dict()) {
    std::set<std::string> keys;
    for (const auto& [key, member] : value.entries) {
      EXPECT_TRUE(keys.insert(key.text).second) << "key " << key.text << " twice";
      expect_unique_keys(member);
    }
  } else if (value.is_sequence()) {
    for (const Literal& item : value.items) expect_unique_keys(item);
  }
}

TEST(ReportJson, EveryKeyOnce) {
  Inputs inputs;
  inputs.runs = {setup_log("ctl", false),
                 setup_log("replayed", true, 9, "random", 4, "replayed", 1)};
  expect_unique_keys(parse_json(format_json(build_report(inputs, {}))));
}

}  // namespace
}  // namespace rtb::logs::report
