#include "rtb/bench/aot_input.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "rtb/base/io.h"
#include "rtb/bench/render.h"
#include "rtb/k8s/dryrun.h"
#include "test_util.h"

namespace rtb::bench {
namespace {

TEST(AotInput, NumbersAndBooleans) {
  EXPECT_EQ(parse_integer("42", "x"), 42);
  EXPECT_THAT(test::error_of([] { parse_integer("4x", "--k"); }).message(),
              HasSubstr("--k=4x: not an integer"));
  EXPECT_THAT(test::error_of([] { parse_integer("", "--k"); }).message(),
              HasSubstr("not an integer"));
  EXPECT_NO_THROW(check_number("2e-07", "lr"));
  EXPECT_THAT(test::error_of([] { check_number("fast", "lr"); }).message(),
              HasSubstr("lr=fast: not a number"));
  EXPECT_EQ(parse_str2bool("Yes"), true);
  EXPECT_EQ(parse_str2bool("f"), false);
  EXPECT_EQ(parse_str2bool("maybe"), std::nullopt);
}

TEST(AotInput, ArgsLastOccurrenceWins) {
  Args args("trainer argv", {"--mesh_fsdp=4", "--flag", "--no-other", "--mesh_fsdp=8", "--b=no"});
  EXPECT_EQ(args.integer("mesh_fsdp", 1), 8);
  EXPECT_EQ(args.integer("absent", 7), 7);
  EXPECT_TRUE(args.boolean("flag", false));
  EXPECT_FALSE(args.boolean("other", true));
  EXPECT_FALSE(args.boolean("b", true));
  EXPECT_TRUE(args.boolean("absent", true));
  Args bad("trainer argv", {"--n=x", "--b=maybe"});
  EXPECT_THAT(test::error_of([&] { bad.integer("n", 0); }).message(),
              HasSubstr("trainer argv --n=x: not an integer"));
  EXPECT_THAT(test::error_of([&] { bad.boolean("b", false); }).message(),
              HasSubstr("trainer argv --b=maybe: not a boolean"));
}

TEST(AotInput, ReadsTheBenchClient) {
  k8s::DryRun dryrun =
      k8s::parse_dryrun(read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt"), "launch_dryrun.txt");
  RenderOptions options;
  options.name = "abtest-bench";
  options.driver_source = "print('driver')\n";
  RenderResult bench = render_bench(dryrun, options);
  BenchClient client = read_bench_client(bench.bench);
  EXPECT_EQ(client.bench_name, "abtest-bench");
  EXPECT_FALSE(client.trainer_env.empty());
  for (const k8s::shell::Assignment& a : client.trainer_env) EXPECT_NE(a.name, "TRAINER_ARGV");
  EXPECT_TRUE(client.trainer.has("process_main"));
  EXPECT_TRUE(client.orchestrator.has("process_main"));
  EXPECT_EQ(trainer_slice_text(k8s::JobSetView(k8s::Document{bench.bench, 0})), "tpu7x:4x4x8");
}

TEST(AotInput, TheE2eTrainerIsNotABenchClient) {
  k8s::DryRun dryrun =
      k8s::parse_dryrun(read_file(RTB_TESTDATA_DIR "/launch_dryrun.txt"), "launch_dryrun.txt");
  const k8s::Document& trainer = *k8s::select_roles(dryrun, k8s::RoleMains{}).trainer;
  EXPECT_THAT(test::error_of([&] { read_bench_client(trainer.root); }).message(),
              HasSubstr("abtest-train is not a bench JobSet"));
}

}  // namespace
}  // namespace rtb::bench
