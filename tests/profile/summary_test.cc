// Tests of profile-report's summary (profile/summary.h): categories, op lines, the three step
// sources, busy / idle / self times, and the real capture.
#include "rtb/profile/summary.h"

#include <memory>
#include <string>
#include <vector>

#include "test_util.h"
#include "xspace_builder.h"

namespace rtb::profile {
namespace {

using test::testdata;
using ::testing::Contains;

Summary summary_of(const std::string& bytes) {
  std::vector<std::unique_ptr<XSpaceFile>> files;
  files.push_back(std::make_unique<XSpaceFile>(bytes, "mem.xplane.pb"));
  Capture capture(std::move(files));
  return summarize(capture);
}

TEST(Category, ByName) {
  test::expect_cases<Category, const char*>(
      category_of, {{"all-reduce-start.3", Category::kCollective},
                    {"all_gather_done", Category::kCollective},
                    {"ncclDevKernel_AllReduce_Sum_f32_RING_LL", Category::kCollective},
                    {"reduce-scatter.1", Category::kCollective},
                    {"copy.7", Category::kCopy},
                    {"copy-start.2", Category::kCopy},
                    {"MemcpyH2D", Category::kCopy},
                    {"outfeed", Category::kCopy},
                    {"gemm_fusion_dot_general_1", Category::kMatmul},
                    {"convolution.4", Category::kMatmul},
                    {"loop_add_fusion", Category::kFusion},
                    {"fusion.12", Category::kFusion}});
  EXPECT_STREQ(category_name(Category::kCopy), "copy");
}

// A TPU-like plane: steps from the host's step annotations; nested ops on one line; two steps.
TEST(Summary, StepAnnotationsBusyIdleAndSelfTime) {
  test::SpaceBuilder space;
  auto& host = space.plane("/host:CPU", 1);
  host.event_name(1, "train");
  host.stat_name(9, "step_num");
  host.line("python", 0)
      .event(1, 0, 1'000, {{9, test::StatValue::int64(5)}})
      .event(1, 1'000, 1'000, {{9, test::StatValue::int64(6)}});
  auto& device = space.plane("/device:TPU:0", 2);
  device.event_name(1, "fusion.1").event_name(2, "convolution.2").event_name(3, "all-reduce.3");
  device.line("XLA Ops", 0)
      .event(1, 100, 400, {})  // step 5: 100..500, with a convolution nested 200..300
      .event(2, 200, 100, {})
      .event(3, 1'200, 300, {})   // step 6
      .event(1, 2'500, 100, {});  // after every step
  device.line("XLA Modules", 0).event(1, 0, 3'000, {});
  Summary summary = summary_of(space.bytes());
  ASSERT_EQ(summary.devices.size(), 1u);
  const Device& d = summary.devices[0];
  EXPECT_EQ(d.step_source, StepSource::kStepAnnotations);
  EXPECT_THAT(d.op_lines, ElementsAre("XLA Ops"));
  ASSERT_EQ(d.steps.size(), 2u);
  EXPECT_EQ(d.steps[0].number, 5);
  EXPECT_EQ(d.steps[0].length_ps(), 1'000);
  EXPECT_EQ(d.steps[0].busy_ps, 400);
  EXPECT_EQ(d.steps[0].idle_ps(), 600);
  EXPECT_EQ(d.steps[0].category_ps[static_cast<std::size_t>(Category::kFusion)], 300);
  EXPECT_EQ(d.steps[0].category_ps[static_cast<std::size_t>(Category::kMatmul)], 100);
  EXPECT_EQ(d.steps[1].category_ps[static_cast<std::size_t>(Category::kCollective)], 300);
  EXPECT_EQ(d.outside_ps, 100);
  ASSERT_EQ(d.ops.size(), 3u);
  EXPECT_EQ(d.ops[0].name, "all-reduce.3");
  EXPECT_EQ(d.ops[1].name, "fusion.1");
  EXPECT_THAT(d.ops[1].step_self_ps, ElementsAre(300, 0));
}

// A GPU-like plane without annotations: steps are executions of the module with the most
// device time (runs of the hlo_module stat); two streams running at once are busy once.
TEST(Summary, ModuleExecutionsAndStreamsRunningAtOnce) {
  test::SpaceBuilder space;
  auto& device = space.plane("/device:GPU:0", 1);
  device.event_name(1, "gemm_1").event_name(2, "MemcpyD2D").event_name(3, "small");
  device.stat_name(4, "hlo_module");
  auto big = [] { return test::StatValue::string("jit_big"); };
  auto& compute = device.line("Stream #1(Compute)", 0);
  compute.event(1, 0, 100, {{4, big()}})
      .event(3, 150, 10, {{4, test::StatValue::string("jit_small")}})
      .event(1, 200, 100, {{4, big()}});
  device.line("Stream #2(MemcpyD2D)", 0).event(2, 50, 100, {{4, big()}});
  Summary summary = summary_of(space.bytes());
  const Device& d = summary.devices.at(0);
  EXPECT_EQ(d.step_source, StepSource::kModuleExecutions);
  EXPECT_EQ(d.step_module, "jit_big");
  ASSERT_EQ(d.steps.size(), 2u);
  // Execution 0 runs 0..150 (its two events on two streams), the step to the next one's start.
  EXPECT_EQ(d.steps[0].start_ps, 0);
  EXPECT_EQ(d.steps[0].end_ps, 200);
  EXPECT_EQ(d.steps[0].busy_ps, 160);  // 0..150 and 150..160
  EXPECT_EQ(d.steps[1].end_ps, 300);
  EXPECT_EQ(d.events, 4);
}

TEST(Summary, OpsTimesStepsAreBounded) {
  test::SpaceBuilder space;
  auto& device = space.plane("/device:TPU:0", 1);
  device.event_name(1, "a").event_name(2, "b").event_name(3, "c").event_name(9, "m(1)");
  device.line("XLA Ops", 0).event(1, 0, 1, {}).event(2, 10, 1, {}).event(3, 20, 1, {});
  device.line("XLA Modules", 0).event(9, 0, 5, {}).event(9, 10, 5, {}).event(9, 20, 5, {});
  std::vector<std::unique_ptr<XSpaceFile>> files;
  std::string bytes = space.bytes();
  files.push_back(std::make_unique<XSpaceFile>(bytes, "mem.xplane.pb"));
  Capture capture(std::move(files));
  EXPECT_EQ(summarize(capture, {9}).devices[0].ops.size(), 3u);  // 3 ops x 3 steps
  EXPECT_THAT(test::what_of([&] { summarize(capture, {8}); }),
              HasSubstr("3 steps and more than 2 ops: over the 8 figures per op and step kept"));
}

TEST(Summary, ALineGoingBackInTimeIsAnError) {
  test::SpaceBuilder space;
  space.plane("/device:TPU:0", 1).line("XLA Ops", 0).event(1, 500, 1, {}).event(1, 100, 1, {});
  EXPECT_THAT(test::what_of([&] { summary_of(space.bytes()); }),
              HasSubstr("line 'XLA Ops': the event at byte"));
}

TEST(Summary, RealCapture) {
  Capture capture(testdata("profile/jax0.11.2_h200_bench_driver_profile_window.xplane.pb"));
  Summary summary = summarize(capture);
  ASSERT_EQ(summary.devices.size(), 1u);
  const Device& d = summary.devices[0];
  EXPECT_EQ(d.plane, "/device:GPU:0");
  EXPECT_EQ(d.step_source, StepSource::kModuleExecutions);
  EXPECT_EQ(d.step_module, "jit_work");
  EXPECT_EQ(d.events, 3845);
  ASSERT_FALSE(d.steps.empty());
  ASSERT_FALSE(d.ops.empty());
  EXPECT_EQ(d.ops[0].name, "gemm_fusion_dot_general_1");
  for (const Step& step : d.steps) {
    EXPECT_GE(step.idle_ps(), 0);
    EXPECT_LE(step.busy_ps, step.length_ps());
  }
  // Named by the hlo_op stat (for --hlo): the HLO instructions, not the CUDA kernels.
  Summary by_hlo_op = summarize(capture, {.hlo_op_names = true});
  std::vector<std::string> names;
  for (const OpTime& op : by_hlo_op.devices.at(0).ops) names.push_back(op.name);
  EXPECT_THAT(names, Contains("copy.7"));
  EXPECT_THAT(names, Not(Contains("gemm_fusion_dot_general_1")));
  EXPECT_EQ(by_hlo_op.devices[0].steps.size(), d.steps.size());
}

}  // namespace
}  // namespace rtb::profile
