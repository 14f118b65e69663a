// Tests of profile-report's output of one capture (profile/report.h): text, JSON and the SVG
// timeline, on a small built capture.
#include "rtb/profile/report.h"

#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "xspace_builder.h"

namespace rtb::profile {
namespace {

Capture capture_of(const std::string& bytes) {
  std::vector<std::unique_ptr<XSpaceFile>> files;
  files.push_back(std::make_unique<XSpaceFile>(bytes, "mem.xplane.pb"));
  return Capture(std::move(files));
}

std::string two_steps() {
  test::SpaceBuilder space;
  auto& device = space.plane("/device:TPU:0", 1);
  device.event_name(1, "fusion.1").event_name(2, "all-gather-done.2").event_name(3, "jit_step(7)");
  device.line("XLA Ops", 0)
      .event(1, 0, 2'000'000'000, {})
      .event(2, 2'000'000'000, 1'000'000'000, {})
      .event(1, 4'000'000'000, 2'000'000'000, {});
  device.line("XLA Modules", 0)
      .event(3, 0, 3'500'000'000, {})
      .event(3, 4'000'000'000, 2'000'000'000, {});
  return space.bytes();
}

TEST(Report, TextNamesWhatEachFigureMeasures) {
  std::string bytes = two_steps();
  Capture capture = capture_of(bytes);
  std::string text = format_text(summarize(capture), {});
  EXPECT_THAT(text, HasSubstr("steps: 2 from executions of jit_step"));
  EXPECT_THAT(text, HasSubstr("busy (time any op ran"));
  // Step 0: 0..4 ms (to the next execution), busy 3 ms, idle 1 ms, 2 ms fusion, 1 ms collective.
  EXPECT_THAT(text,
              ContainsRegex("0 +4\\.000 +3\\.000 +1\\.000 +0\\.000 +2\\.000 +1\\.000 +0\\.000"));
  EXPECT_THAT(text, ContainsRegex("2\\.000 +[0-9.]+% +1\\.0 +fusion +fusion\\.1"));
  EXPECT_EQ(ms(1'234'567'890), "1.235");
}

TEST(Report, JsonHasTheSchemaAndEveryStep) {
  std::string bytes = two_steps();
  Capture capture = capture_of(bytes);
  std::string json = format_json(summarize(capture), {1});
  EXPECT_THAT(json, HasSubstr("\"schema\": \"rtb.profile-report/2\""));
  EXPECT_THAT(json, HasSubstr("\"step_module\": \"jit_step\""));
  EXPECT_THAT(json, HasSubstr("\"length_ps\": 4000000000"));
  EXPECT_THAT(json, HasSubstr("\"ops_total\": 2"));
  EXPECT_THAT(json, Not(HasSubstr("all-gather-done.2")));  // --top 1
}

TEST(Report, SvgDrawsTheChosenStep) {
  std::string bytes = two_steps();
  Capture capture = capture_of(bytes);
  Summary summary = summarize(capture);
  std::string longest = render_timeline_svg(capture, summary, std::nullopt);
  EXPECT_THAT(longest, HasSubstr("/device:TPU:0 step 0: 4.000 ms long, 3.000 ms busy"));
  EXPECT_THAT(longest, HasSubstr("all-gather-done.2 (1.000 ms)"));
  std::string second = render_timeline_svg(capture, summary, 1);
  EXPECT_THAT(second, HasSubstr("step 1: 2.000 ms long"));
  EXPECT_THAT(test::what_of([&] { render_timeline_svg(capture, summary, 2); }),
              HasSubstr("--svg-step 2: the device has 2 steps"));
}

}  // namespace
}  // namespace rtb::profile
