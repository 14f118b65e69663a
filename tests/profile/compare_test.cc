// Tests of profile-report's A/B (profile/compare.h): the spread, what counts as moved, the
// order of the changes and the outcome.
#include "rtb/profile/compare.h"

#include <string>

#include "test_util.h"

namespace rtb::profile {
namespace {

// A device of steps whose matmul self time (and length) are `matmul_ps`, with one op.
Summary summary_of(const std::vector<std::int64_t>& matmul_ps, const std::string& op = "dot.1") {
  Summary summary;
  Device device;
  device.plane = "/device:TPU:0";
  OpTime time;
  time.name = op;
  time.category = Category::kMatmul;
  for (std::int64_t ps : matmul_ps) {
    Step step;
    step.end_ps = ps;
    step.busy_ps = ps;
    step.category_ps[static_cast<std::size_t>(Category::kMatmul)] = ps;
    device.steps.push_back(step);
    time.step_self_ps.push_back(ps);
    time.self_ps += ps;
    ++time.count;
  }
  device.ops.push_back(time);
  summary.devices.push_back(device);
  return summary;
}

const Change& change_named(const Comparison& comparison, const std::string& name) {
  for (const Change& change : comparison.devices.at(0).changes) {
    if (change.name == name) return change;
  }
  ADD_FAILURE() << "no change named " << name;
  return comparison.devices.at(0).changes.at(0);
}

TEST(Compare, WithinTheSpreadNothingMoved) {
  Comparison same = compare(summary_of({100, 110, 90}), summary_of({105, 95, 100}), 1.0);
  EXPECT_EQ(same.outcome(), Outcome::kPass);
  const Change& matmul = change_named(same, "matmul");
  EXPECT_DOUBLE_EQ(matmul.mean_a_ps, 100);
  EXPECT_GT(matmul.spread_ps, 0);
  EXPECT_FALSE(matmul.moved);
}

TEST(Compare, BeyondTheSpreadMovedAndComesFirst) {
  Comparison moved = compare(summary_of({100, 110, 90}), summary_of({200, 210, 190}), 1.0);
  EXPECT_EQ(moved.outcome(), Outcome::kFail);
  const auto& changes = moved.devices.at(0).changes;
  EXPECT_DOUBLE_EQ(std::abs(changes.at(0).delta_ps()), 100);
  EXPECT_TRUE(change_named(moved, "dot.1").moved);
  EXPECT_FALSE(change_named(moved, "idle").moved);
  std::string text = format_compare_text(moved, 10);
  EXPECT_THAT(text, HasSubstr("something moved beyond its spread"));
  EXPECT_THAT(format_compare_json(moved, 10), HasSubstr("\"exit_code\": 1"));
}

TEST(Compare, SmallChangesOfOneStepAndMissingOps) {
  // One step a side: no spread, so the percentage decides.
  EXPECT_EQ(compare(summary_of({1000}), summary_of({1005}), 1.0).outcome(), Outcome::kPass);
  EXPECT_EQ(compare(summary_of({1000}), summary_of({1005}), 0.1).outcome(), Outcome::kFail);
  // An op only in B took 0 in A's steps.
  Comparison renamed = compare(summary_of({1000}), summary_of({1000}, "dot.2"), 1.0);
  EXPECT_DOUBLE_EQ(change_named(renamed, "dot.2").mean_a_ps, 0);
  EXPECT_TRUE(change_named(renamed, "dot.1").moved);
  Summary other = summary_of({1000});
  other.devices[0].plane = "/device:TPU:1";
  Comparison unmatched = compare(summary_of({1000}), other, 1.0);
  EXPECT_THAT(unmatched.only_a, ElementsAre("/device:TPU:0"));
  EXPECT_EQ(unmatched.outcome(), Outcome::kFail);
}

}  // namespace
}  // namespace rtb::profile
