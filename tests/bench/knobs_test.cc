// bench/knobs: the one table of render-bench's knobs, and how a value given to each is applied.
#include "rtb/bench/knobs.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "rtb/base/error.h"
#include "test_util.h"

namespace rtb::bench {
namespace {

RenderOptions applied(std::string_view option, const std::vector<std::string>& values) {
  const KnobSpec* spec = find_knob(option);
  if (spec == nullptr) ADD_FAILURE() << "no knob " << option;
  RenderOptions options;
  for (const std::string& value : values) apply_knob(*spec, value, options);
  return options;
}

std::string refusal_of(std::string_view option, const std::string& value) {
  return test::error_of([&] { applied(option, {value}); }).message();
}

TEST(KnobsTest, EveryKnobHasOneRowWithItsOptionHelpAndValueName) {
  std::set<std::string> options;
  std::set<Knob> knobs;
  for (const KnobSpec& spec : render_knobs()) {
    EXPECT_TRUE(options.insert(spec.option).second) << "twice: " << spec.option;
    EXPECT_EQ(spec.option.rfind("--", 0), 0u) << spec.option;
    EXPECT_FALSE(spec.help.empty()) << spec.option;
    EXPECT_EQ(spec.value_name.empty(), spec.arity == KnobArity::kFlag) << spec.option;
    EXPECT_EQ(spec.setting != nullptr, spec.knob == Knob::kSetting || spec.knob == Knob::kName ||
                                           spec.knob == Knob::kProfileWindow)
        << spec.option;
    if (spec.knob != Knob::kSetting) {
      EXPECT_TRUE(knobs.insert(spec.knob).second) << spec.option;
      EXPECT_EQ(&knob_spec(spec.knob), &spec);
      EXPECT_EQ(knob_option(spec.knob), spec.option);
    }
    EXPECT_EQ(find_knob(spec.option), &spec);
    // A knob either keeps its text as it is, in its field, or apply_knob parses it: never both.
    const std::set<Knob> parsed = {Knob::kLogpsChunk, Knob::kProfileWindow, Knob::kDumpHlo,
                                   Knob::kWeights,    Knob::kSetting,       Knob::kDriverEnv,
                                   Knob::kDriver};
    EXPECT_EQ(std::holds_alternative<std::monostate>(spec.field), parsed.contains(spec.knob))
        << spec.option;
  }
  // Every Knob but kSetting has its row.
  EXPECT_EQ(knobs.size(), static_cast<std::size_t>(Knob::kDriver));
  EXPECT_EQ(find_knob("--no-such-knob"), nullptr);
  // The driver's knobs are the driver settings table's rows with an option: none left out.
  for (const DriverSetting& setting : driver_settings()) {
    if (!setting.has_option()) continue;
    const KnobSpec* spec = find_knob(setting.option);
    ASSERT_NE(spec, nullptr) << setting.option;
    EXPECT_EQ(spec->setting, &setting);
  }
  EXPECT_EQ(find_knob("--allow-fallbacks")->arity, KnobArity::kFlag);
  EXPECT_EQ(find_knob("--logp-gates")->value_name, "TEXT:{on,off}");
  EXPECT_EQ(find_knob("--steps")->help.find("(default: 5)") != std::string::npos, true);
}

TEST(KnobsTest, ValuesGoToTheirFields) {
  EXPECT_EQ(applied("--name", {"a", "b"}).name, "b");
  EXPECT_EQ(applied("--namespace", {"ns"}).namespace_name, "ns");
  EXPECT_EQ(applied("--image", {"i:1"}).image, "i:1");
  EXPECT_EQ(applied("--output-prefix", {"gs://b"}).output_prefix, "gs://b");
  EXPECT_EQ(applied("--maxtext-flag", {"a=1", "b=2"}).maxtext_flags,
            (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(applied("--maxtext-replace", {"a=1"}).maxtext_replace, std::vector<std::string>{"a=1"});
  EXPECT_EQ(applied("--libtpu-flag", {"--xla_a=1"}).libtpu_flags,
            std::vector<std::string>{"--xla_a=1"});
  EXPECT_EQ(applied("--trainer-arg", {"--k=v"}).trainer_args, std::vector<std::string>{"--k=v"});
  EXPECT_EQ(applied("--trainer-arg-remove", {"--k"}).trainer_args_removed,
            std::vector<std::string>{"--k"});
  EXPECT_EQ(applied("--orch-arg", {"--k=v"}).orchestrator_args, std::vector<std::string>{"--k=v"});
  EXPECT_EQ(applied("--trainer-slice", {"tpu7x:4x4x4"}).trainer_slice, "tpu7x:4x4x4");
  EXPECT_EQ(applied("--logps-chunk", {" 4096 "}).logps_chunk, 4096);
  EXPECT_EQ(applied("--profile-window", {"3:2"}).profile_window, std::make_pair(3, 2));
  EXPECT_EQ(applied("--weights", {"checkpoint"}).weights, Weights::kCheckpoint);
  EXPECT_EQ(applied("--steps", {"4"}).driver.steps, 4);
  EXPECT_TRUE(applied("--allow-fallbacks", {""}).driver.allow_fallbacks);
  EXPECT_EQ(applied("--driver-env", {"K=a=b"}).driver.extra_env,
            (std::vector<std::pair<std::string, std::string>>{{"K", "a=b"}}));
  std::string driver = ::testing::TempDir() + "/knobs_driver.py";
  std::ofstream(driver) << "print('d')\n";
  EXPECT_EQ(applied("--driver", {driver}).driver_source, "print('d')\n");
}

TEST(KnobsTest, BadValuesAreRefusedInTheKnobsWords) {
  EXPECT_EQ(refusal_of("--logps-chunk", "x"), "--logps-chunk x: not an integer");
  EXPECT_EQ(refusal_of("--logps-chunk", "99999999999"), "--logps-chunk 99999999999: out of range");
  EXPECT_EQ(refusal_of("--weights", "zeros"), "--weights zeros: must be random or checkpoint");
  EXPECT_EQ(refusal_of("--steps", "0"), "--steps 0: must be >= 1");
  std::string empty = ::testing::TempDir() + "/knobs_empty.py";
  std::ofstream(empty).flush();
  EXPECT_EQ(refusal_of("--driver", empty), "--driver " + empty + ": the file is empty");
  EXPECT_EQ(test::error_of([] { fail_knob(Knob::kTrainerSlice, "tpu9:1", "why {}", 1); }).message(),
            "--trainer-slice tpu9:1: why 1");
}

TEST(KnobsTest, ProfileWindowAndDriverEnvFromTheirOptions) {
  EXPECT_EQ(parse_profile_window("3:2"), std::make_pair(3, 2));
  EXPECT_EQ(parse_profile_window(" 3 : 2 "), std::make_pair(3, 2));
  EXPECT_EQ(parse_profile_window(""), std::nullopt) << "blank: no window";
  for (const char* bad : {"3", "3:", ":2", "a:2", "3:2x", "3:2:1"}) {
    EXPECT_EQ(
        test::error_of([&] { parse_profile_window(bad); }).message(),
        fmt::format("--profile-window {}: expected START:COUNT (timed steps, 0-based start)", bad));
  }
  // The driver's words (bench/driver_settings.h).
  EXPECT_EQ(test::error_of([] { parse_profile_window("-1:2"); }).message(),
            "--profile-window -1:2: START must be >= 0");
  EXPECT_EQ(test::error_of([] { parse_profile_window("1:0"); }).message(),
            "--profile-window 1:0: COUNT must be >= 1");
  EXPECT_EQ(test::error_of([] { parse_profile_window("1:2147483648"); }).message(),
            "--profile-window 1:2147483648: out of range (at most 2147483647)");
  EXPECT_EQ(parse_driver_env("K=a=b"), std::make_pair(std::string("K"), std::string("a=b")));
  EXPECT_EQ(parse_driver_env("K="), std::make_pair(std::string("K"), std::string()));
  for (const char* bad : {"K", "=v", ""}) {
    EXPECT_EQ(test::error_of([&] { parse_driver_env(bad); }).message(),
              fmt::format("--driver-env {}: expected KEY=VALUE", bad));
  }
  EXPECT_EQ(parse_weights("random"), Weights::kRandom);
  EXPECT_EQ(parse_weights("checkpoint"), Weights::kCheckpoint);
}

}  // namespace
}  // namespace rtb::bench
