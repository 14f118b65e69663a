// Tests of the measured against scheduled overlap (profile/overlap.h): the synthetic capture of a
// real scheduled module (testdata/profile/make_synthetic_overlap.py), whose times disagree with
// the schedule on purpose.
#include "rtb/profile/overlap.h"

#include <string>

#include "rtb/hlo/analysis.h"
#include "test_util.h"

namespace rtb::profile {
namespace {

using test::testdata;

Overlap synthetic(double min_wait_ps) {
  Capture capture(testdata("profile/synthetic_overlap_tpu.xplane.pb"));
  hlo::Analysis analysis = hlo::analyze_file(
      testdata("hlo/latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt"));
  return measure_overlap(summarize(capture), analysis, min_wait_ps);
}

TEST(Overlap, PlannedHiddenMeasuredExposedComesFirst) {
  Overlap all = synthetic(1e6);  // 1 us
  ASSERT_EQ(all.devices.size(), 2u);
  const DeviceOverlap& overlap = all.devices[0];
  EXPECT_EQ(overlap.plane, "/device:TPU:0");
  ASSERT_EQ(overlap.pairs.size(), 3u);
  const PairMeasure& first = overlap.pairs[0];
  EXPECT_EQ(first.pair.done, "agd0");
  EXPECT_EQ(first.pair.status, hlo::Status::kOverlapped);
  EXPECT_EQ(first.agreement, Agreement::kPlannedHiddenMeasuredExposed);
  EXPECT_THAT(first.step_wait_ps, ElementsAre(200'000'000, 210'000'000, 190'000'000));
  EXPECT_DOUBLE_EQ(first.mean_wait_ps, 200e6);
  EXPECT_EQ(overlap.pairs[1].pair.done, "cpd1");
  EXPECT_EQ(overlap.pairs[1].agreement, Agreement::kPlannedExposedMeasuredHidden);
  EXPECT_EQ(overlap.pairs[2].pair.done, "agd1");
  EXPECT_EQ(overlap.pairs[2].agreement, Agreement::kAgree);
  ASSERT_EQ(overlap.steps.size(), 3u);
  EXPECT_EQ(overlap.steps[1].planned_hidden_measured_exposed, 1);
  EXPECT_EQ(overlap.steps[1].their_wait_ps, 210'000'000);
  std::string text = format_overlap_text(all);
  EXPECT_THAT(text, HasSubstr("planned hidden, measured exposed: 1 of 3 pairs"));
  EXPECT_THAT(text, ContainsRegex("hidden / exposed \\(!\\) +0\\.200 +200\\.000 +1 +all-gather"));
}

// Every device is measured: on TPU:1 agd0's done took 0.5 us (hidden, as planned) and cpd1's
// 150 us (exposed, as planned), the opposite of TPU:0; the devices disagree on those two pairs.
TEST(Overlap, EveryDeviceIsMeasuredAndDisagreementsAreListed) {
  Overlap all = synthetic(1e6);
  ASSERT_EQ(all.devices.size(), 2u);
  const DeviceOverlap& second = all.devices[1];
  EXPECT_EQ(second.plane, "/device:TPU:1");
  ASSERT_EQ(second.pairs.size(), 3u);
  for (const PairMeasure& pair : second.pairs) {
    EXPECT_EQ(pair.agreement, Agreement::kAgree) << pair.pair.done;
    if (pair.pair.done == "cpd1") {
      EXPECT_TRUE(pair.measured_exposed);
      EXPECT_DOUBLE_EQ(pair.mean_wait_ps, 150e6);
    }
    if (pair.pair.done == "agd0") {
      EXPECT_FALSE(pair.measured_exposed);
    }
  }
  for (const OverlapStep& step : second.steps) EXPECT_EQ(step.planned_hidden_measured_exposed, 0);
  ASSERT_EQ(all.disagreements.size(), 2u);
  EXPECT_EQ(all.disagreements[0].pair.done, "agd0");
  EXPECT_EQ(all.disagreements[1].pair.done, "cpd1");
  const Disagreement& agd0 = all.disagreements[0];
  EXPECT_STREQ(measured_name(all.devices[0].pairs[agd0.measures[0]]), "exposed");
  EXPECT_STREQ(measured_name(all.devices[1].pairs[agd0.measures[1]]), "hidden");
  std::string text = format_overlap_text(all);
  EXPECT_THAT(text,
              ContainsRegex("on /device:TPU:1 \\([^)]*synthetic_overlap_tpu\\.xplane\\.pb\\)"));
  EXPECT_THAT(text, HasSubstr("devices disagree on 2 of 3 pairs"));
  EXPECT_THAT(text, ContainsRegex("hidden +/device:TPU:1 +0\\.500 us/execution"));
  // One device: nothing to disagree on.
  Summary summary = summarize(Capture(testdata("profile/synthetic_overlap_tpu.xplane.pb")));
  summary.devices.resize(1);
  Overlap one = measure_overlap(
      summary,
      hlo::analyze_file(
          testdata("hlo/latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt")),
      1e6);
  EXPECT_TRUE(one.disagreements.empty());
  EXPECT_THAT(format_overlap_text(one), Not(HasSubstr("disagree")));
}

TEST(Overlap, TheThresholdDecidesWhatIsMeasuredExposed) {
  // Under 0.5 us every done is exposed: the permute agrees, the second gather does not.
  const DeviceOverlap overlap = synthetic(0.4e6).devices.at(0);
  EXPECT_EQ(overlap.pairs[0].agreement, Agreement::kPlannedHiddenMeasuredExposed);
  EXPECT_EQ(overlap.pairs[1].agreement, Agreement::kPlannedHiddenMeasuredExposed);
  EXPECT_EQ(overlap.pairs[2].agreement, Agreement::kAgree);
}

TEST(Overlap, ADoneWithoutEventsIsNotInTheCapture) {
  Capture capture(testdata("profile/jax0.11.2_h200_bench_driver_profile_window.xplane.pb"));
  hlo::Analysis analysis = hlo::analyze_file(
      testdata("hlo/latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt"));
  Overlap overlap = measure_overlap(summarize(capture), analysis, 1e6);
  for (const PairMeasure& pair : overlap.devices.at(0).pairs) {
    EXPECT_EQ(pair.agreement, Agreement::kNotInCapture);
  }
  EXPECT_THAT(test::what_of([&] { measure_overlap(Summary{}, analysis, 1e6); }),
              HasSubstr("no device plane"));
}

}  // namespace
}  // namespace rtb::profile
