// The tools' bodies run in-process: `<tool>_main` (tools/common/mains.h) parses its argv, runs,
// and returns the exit code, as often as it is called.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/mains.h"
#include "rtb/base/io.h"
#include "test_util.h"

namespace rtb::tool {
namespace {

// Runs `tool_main` on `args` (argv[0] included) as the process would.
int run(int (*tool_main)(int, char**), std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  return tool_main(static_cast<int>(args.size()), argv.data());
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "rtb_" + name; }

TEST(ToolMains, RenderBenchRendersTheDemoInProcess) {
  std::string bench = temp_path("demo_bench.yaml");
  // Twice: a second run in the same process sets up its logging and options afresh.
  for (const char* name : {"abtest-bench", "abtest-bench-2"}) {
    ASSERT_EQ(run(render_bench_main, {"render-bench", "--demo", "--name", name, "-o", bench}), 0);
    std::string yaml = read_file(bench);
    EXPECT_THAT(yaml, HasSubstr("kind: JobSet"));
    EXPECT_THAT(yaml, HasSubstr(std::string("name: ") + name + "\n"));
  }
  EXPECT_EQ(run(render_bench_main, {"render-bench", "--demo"}), 2) << "--name is required";
  EXPECT_EQ(run(render_bench_main, {"render-bench", "--no-such-option"}), 2);
}

TEST(ToolMains, AotSummarizeExitsWithItsOutcome) {
  std::string out = temp_path("summary.txt");
  std::string a = test::testdata("memlog_engine_compile_a.log");
  std::string b = test::testdata("memlog_engine_compile_b.log");
  EXPECT_EQ(run(aot_summarize_main, {"aot-summarize", a, "-o", out}), 0) << "every kernel fits";
  EXPECT_THAT(read_file(out), HasSubstr("fwd_bwd"));
  EXPECT_EQ(run(aot_summarize_main, {"aot-summarize", a, b, "-o", out}), 1) << "B does not fit";
  std::string empty = test::testdata("memlog_bad_empty.log");
  EXPECT_EQ(run(aot_summarize_main, {"aot-summarize", empty, "--json", "-o", out}), 2);
  EXPECT_THAT(read_file(out), HasSubstr("\"exit_code\": 2,"));
}

TEST(ToolMains, RenderBenchRefusesABadRoutingScaleBeforeWriting) {
  std::string bench = temp_path("bad_scale_bench.yaml");
  std::remove(bench.c_str());
  ::testing::internal::CaptureStderr();
  int code = run(render_bench_main, {"render-bench", "--demo", "--name", "abtest-bench",
                                     "--routing-scale", "-1", "-o", bench});
  std::string stderr_text = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 2);
  // The driver settings table's rule, in the driver's words, named by the option.
  EXPECT_EQ(stderr_text, "render-bench: --routing-scale -1: must be >= 0\n");
  EXPECT_FALSE(std::ifstream(bench).good()) << "no bench is written";
}

}  // namespace
}  // namespace rtb::tool
