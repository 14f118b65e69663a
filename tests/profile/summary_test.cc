// Tests of profile-report's summary (profile/summary.h): categories, op lines, the three step
// sources, busy / idle / self times, and the real capture.
#include "rtb/profile/summary.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
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

// Steps from module runs are found in the walk that sums the figures; the figures must be those
// of two walks (runs first), which the one walk gives up for when a boundary is in doubt. Random
// GPU-like planes with small times (ties, zero durations, nested events, events without a
// module, runs of other modules overlapping on another stream) hit those cases.
TEST(Summary, ModuleRunsInOneWalkGiveTheFiguresOfTwoWalks) {
  std::mt19937 random(31);
  auto below = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  int one_walk = 0;
  const int kCases = 400;
  for (int c = 0; c < kCases; ++c) {
    test::SpaceBuilder space;
    auto& device = space.plane("/device:GPU:0", 1);
    const char* modules[] = {"jit_a", "jit_b", "jit_c"};
    device.stat_name(20, "hlo_module").stat_name(21, "hlo_op");
    // Module names as refs too (XProf's way), jit_a under two ids.
    device.stat_name(40, "jit_a").stat_name(41, "jit_b").stat_name(42, "jit_c");
    device.stat_name(43, "jit_a");
    auto module_stat = [&](int module) {
      if (below(2) == 0) return test::StatValue::string(modules[module]);
      return test::StatValue::ref(module == 0 && below(2) == 0 ? 43 : 40 + module);
    };
    for (int id = 1; id <= 4; ++id) device.event_name(id, "op" + std::to_string(id));
    for (int l = 0; l < 1 + below(3); ++l) {
      auto& line = device.line("Stream #" + std::to_string(l), 0);
      std::int64_t t = below(5);
      for (int e = 0; e < 3 + below(12); ++e) {
        std::int64_t duration = below(4) == 0 ? 0 : 1 + below(20);
        // Modules in blocks of time, so that runs form; some events have none.
        int module = static_cast<int>(t / 40) % 3;
        if (below(6) == 0) module = below(3);
        int id = 1 + below(4);
        if (below(5) == 0) {
          line.event(id, t, duration, {{21, test::StatValue::string("x")}});
        } else {
          line.event(id, t, duration, {{20, module_stat(module)}});
        }
        if (duration > 2 && below(3) == 0) {  // a nested event
          line.event(1 + below(4), t + 1, duration / 2, {{20, module_stat(module)}});
        }
        t += duration + below(4);
      }
    }
    std::string bytes = space.bytes();
    std::vector<std::unique_ptr<XSpaceFile>> files;
    files.push_back(std::make_unique<XSpaceFile>(bytes, "mem.xplane.pb"));
    Capture capture(std::move(files));
    SummaryOptions two_walks;
    two_walks.module_runs_in_one_walk = false;
    const Device want = summarize(capture, two_walks).devices.at(0);
    const Device got = summarize(capture).devices.at(0);
    SCOPED_TRACE(::testing::Message() << "case " << c);
    EXPECT_EQ(want.event_walks, 2);
    one_walk += got.event_walks == 1;
    EXPECT_EQ(got.step_module, want.step_module);
    EXPECT_EQ(got.events, want.events);
    EXPECT_EQ(got.outside_ps, want.outside_ps);
    ASSERT_EQ(got.steps.size(), want.steps.size());
    for (std::size_t i = 0; i < want.steps.size(); ++i) {
      EXPECT_EQ(got.steps[i].number, want.steps[i].number) << i;
      EXPECT_EQ(got.steps[i].start_ps, want.steps[i].start_ps) << i;
      EXPECT_EQ(got.steps[i].end_ps, want.steps[i].end_ps) << i;
      EXPECT_EQ(got.steps[i].busy_ps, want.steps[i].busy_ps) << i;
      EXPECT_EQ(got.steps[i].events, want.steps[i].events) << i;
      EXPECT_EQ(got.steps[i].category_ps, want.steps[i].category_ps) << i;
    }
    ASSERT_EQ(got.ops.size(), want.ops.size());
    for (std::size_t i = 0; i < want.ops.size(); ++i) {
      EXPECT_EQ(got.ops[i].name, want.ops[i].name) << i;
      EXPECT_EQ(got.ops[i].count, want.ops[i].count) << i;
      EXPECT_EQ(got.ops[i].self_ps, want.ops[i].self_ps) << i;
      EXPECT_EQ(got.ops[i].step_self_ps, want.ops[i].step_self_ps) << i;
    }
  }
  // Most cases take the one walk; the rest are the doubtful boundaries it gives up on.
  EXPECT_GT(one_walk, kCases / 2);
  EXPECT_LT(one_walk, kCases);
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
  // Its steps are found in the one walk over the op events.
  EXPECT_EQ(d.event_walks, 1);
}

// The real GPU capture has no hlo_category stat: categories come from its hlo_op stat (the HLO
// instruction a kernel ran), and from the name for the memcpy events that have none.
TEST(Summary, RealCaptureCategoriesComeFromItsHloOpStat) {
  Capture capture(testdata("profile/jax0.11.2_h200_bench_driver_profile_window.xplane.pb"));
  const Device d = summarize(capture).devices.at(0);
  std::map<std::string, std::pair<Category, CategorySource>> by_name;
  for (const OpTime& op : d.ops) by_name[op.name] = {op.category, op.category_source};
  using P = std::pair<Category, CategorySource>;
  EXPECT_EQ(by_name.at("gemm_fusion_dot_general_1"),
            P(Category::kMatmul, CategorySource::kHloOpStat));
  EXPECT_EQ(by_name.at("MemcpyD2D"), P(Category::kCopy, CategorySource::kHloOpStat));
  EXPECT_EQ(by_name.at("loop_add_fusion"), P(Category::kFusion, CategorySource::kHloOpStat));
  std::size_t from_hlo_op =
      d.category_sources[static_cast<std::size_t>(CategorySource::kHloOpStat)];
  EXPECT_GE(from_hlo_op, 3u);
  EXPECT_EQ(d.category_sources[static_cast<std::size_t>(CategorySource::kHloCategoryStat)], 0u);
  EXPECT_EQ(from_hlo_op + d.category_sources[static_cast<std::size_t>(CategorySource::kOpName)],
            d.ops.size());
}

// An hlo_category stat, on the event or on its metadata, decides over the name; an op without
// one falls back to its hlo_op stat, then its name.
TEST(Summary, CategoriesComeFromTheCapturesStatsFirst) {
  test::SpaceBuilder space;
  auto& device = space.plane("/device:TPU:0", 1);
  device.stat_name(30, "hlo_category").stat_name(31, "hlo_op");
  device.event_name(1, "c0", {{30, test::StatValue::string("convolution fusion")}});
  device.event_name(2, "ags0").event_name(3, "slice").event_name(4, "copy_like").event_name(5, "x");
  device.line("XLA Ops", 0)
      .event(1, 0, 10, {})
      .event(2, 10, 10, {{30, test::StatValue::string("all-gather")}})
      .event(3, 20, 10, {{30, test::StatValue::string("data formatting")}})
      .event(4, 30, 10, {{31, test::StatValue::string("dot.3")}})
      .event(5, 40, 10, {});
  device.event_name(9, "m(1)").line("XLA Modules", 0).event(9, 0, 50, {});
  const Device d = summary_of(space.bytes()).devices.at(0);
  std::map<std::string, std::pair<Category, CategorySource>> by_name;
  for (const OpTime& op : d.ops) by_name[op.name] = {op.category, op.category_source};
  using P = std::pair<Category, CategorySource>;
  EXPECT_EQ(by_name.at("c0"), P(Category::kMatmul, CategorySource::kHloCategoryStat));
  EXPECT_EQ(by_name.at("ags0"), P(Category::kCollective, CategorySource::kHloCategoryStat));
  EXPECT_EQ(by_name.at("slice"), P(Category::kCopy, CategorySource::kHloCategoryStat));
  EXPECT_EQ(by_name.at("copy_like"), P(Category::kMatmul, CategorySource::kHloOpStat));
  EXPECT_EQ(by_name.at("x"), P(Category::kFusion, CategorySource::kOpName));
  EXPECT_THAT(d.category_sources, ElementsAre(3u, 1u, 1u));
}

TEST(Summary, SyntheticTpuCaptureCategoriesComeFromItsHloCategoryStat) {
  Capture capture(testdata("profile/synthetic_overlap_tpu.xplane.pb"));
  Summary summary = summarize(capture);
  ASSERT_EQ(summary.devices.size(), 2u);
  for (const Device& d : summary.devices) {
    for (const OpTime& op : d.ops) {
      SCOPED_TRACE(op.name);
      if (op.name == "slice") {
        EXPECT_EQ(op.category_source, CategorySource::kOpName);
        continue;
      }
      EXPECT_EQ(op.category_source, CategorySource::kHloCategoryStat);
      // By name, c0 and c1 (convolutions) and the gathers' and permute's starts and dones
      // would be fusions.
      if (op.name == "c0" || op.name == "c1") {
        EXPECT_EQ(op.category, Category::kMatmul);
      }
      if (op.name.starts_with("ag") || op.name.starts_with("cp")) {
        EXPECT_EQ(op.category, Category::kCollective);
      }
    }
    EXPECT_GT(d.steps.at(0).category_ps[static_cast<std::size_t>(Category::kMatmul)], 0);
  }
}

}  // namespace
}  // namespace rtb::profile
