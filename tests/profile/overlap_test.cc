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
  Overlap overlap = synthetic(1e6);  // 1 us
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
  std::string text = format_overlap_text(overlap);
  EXPECT_THAT(text, HasSubstr("planned hidden, measured exposed: 1 of 3 pairs"));
  EXPECT_THAT(text, ContainsRegex("hidden / exposed \\(!\\) +0\\.200 +200\\.000 +1 +all-gather"));
}

TEST(Overlap, TheThresholdDecidesWhatIsMeasuredExposed) {
  // Under 0.5 us every done is exposed: the permute agrees, the second gather does not.
  Overlap overlap = synthetic(0.4e6);
  EXPECT_EQ(overlap.pairs[0].agreement, Agreement::kPlannedHiddenMeasuredExposed);
  EXPECT_EQ(overlap.pairs[1].agreement, Agreement::kPlannedHiddenMeasuredExposed);
  EXPECT_EQ(overlap.pairs[2].agreement, Agreement::kAgree);
}

TEST(Overlap, ADoneWithoutEventsIsNotInTheCapture) {
  Capture capture(testdata("profile/jax0.11.2_h200_bench_driver_profile_window.xplane.pb"));
  hlo::Analysis analysis = hlo::analyze_file(
      testdata("hlo/latency_hiding_scheduler__ResourceLimitWithinAnnotationGroup.hlo.txt"));
  Overlap overlap = measure_overlap(summarize(capture), analysis, 1e6);
  for (const PairMeasure& pair : overlap.pairs) {
    EXPECT_EQ(pair.agreement, Agreement::kNotInCapture);
  }
  EXPECT_THAT(test::what_of([&] { measure_overlap(Summary{}, analysis, 1e6); }),
              HasSubstr("no device plane"));
}

}  // namespace
}  // namespace rtb::profile
