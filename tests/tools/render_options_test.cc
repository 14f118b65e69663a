// tools/common/render_options: the render knobs, the driver's settings declared from the driver
// settings table.
#include "common/render_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/embedded.h"
#include "rtb/base/compress.h"
#include "rtb/bench/driver_settings.h"
#include "rtb/bench/knobs.h"
#include "rtb/bench/render.h"
#include "test_util.h"

namespace rtb::tool {
namespace {

// The knobs after parsing `args` (the program name left out) and finish_render_options().
RenderKnobs finished(std::vector<std::string> args) {
  CLI::App app;
  RenderKnobs knobs;
  add_render_options(app, knobs, NameOption::kCheckedByCaller);
  args.insert(args.begin(), "render-bench");
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  finish_render_options(knobs, "print('driver')\n");
  return knobs;
}

std::string refusal_of(const std::vector<std::string>& args) {
  return test::error_of([&] { finished(args); }).message();
}

TEST(RenderOptions, EveryOptionOfTheDriverSettingsTableIsDeclared) {
  CLI::App app;
  RenderKnobs knobs;
  add_render_options(app, knobs, NameOption::kCheckedByCaller);
  int options = 0;
  for (const bench::DriverSetting& setting : bench::driver_settings()) {
    if (!setting.has_option()) continue;
    ++options;
    EXPECT_NE(app.get_option_no_throw(setting.option), nullptr) << setting.option;
  }
  EXPECT_GE(options, 14);
  std::string help = app.help();
  // The help is the table's meaning, with the default when the table has one.
  EXPECT_THAT(help, HasSubstr("optimizer steps to time (default: 5)"));
  // A choice shows its values as the bash completions read them.
  EXPECT_THAT(help, HasSubstr("--logp-gates TEXT:{on,off}"));
  EXPECT_THAT(help, HasSubstr("--stage-boundary TEXT:{auto,on,off}"));
}

// Every knob that takes a value, given before the DRYRUN, takes its value only (issue 28, item
// 2): a knob added to the table is covered here without a change to this test.
TEST(RenderOptions, NoKnobTakesTheDryRunAfterItsValue) {
  int knobs_with_values = 0;
  for (const bench::KnobSpec& spec : bench::render_knobs()) {
    if (spec.arity == bench::KnobArity::kFlag) continue;
    ++knobs_with_values;
    bool repeated = spec.arity == bench::KnobArity::kRepeated;
    std::vector<std::string> args = {spec.option, "v1", "dryrun.txt"};
    if (repeated) args.insert(args.end(), {spec.option, "v2"});
    args.insert(args.begin(), "render-bench");
    CLI::App app;
    RenderKnobs knobs;
    add_render_options(app, knobs, NameOption::kCheckedByCaller);
    std::vector<const char*> argv;
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    EXPECT_EQ(knobs.input, "dryrun.txt") << spec.option;
    std::vector<std::string> expected = {"v1"};
    if (repeated) expected.push_back("v2");
    EXPECT_EQ(knobs.given[spec.option].values, expected) << spec.option;
  }
  EXPECT_GE(knobs_with_values, 25);
}

TEST(RenderOptions, DriverSettingsAreParsedIntoTheRenderOptions) {
  RenderKnobs knobs = finished({"--steps",
                                "4",
                                "--micro-steps= 7 ",
                                "--seed=-3",
                                "--routing-scale",
                                "0.5",
                                "--logp-gates",
                                "OFF",
                                "--advantages",
                                "Zero",
                                "--pad-position",
                                "start",
                                "--pad-align",
                                "2048",
                                "--stage-boundary",
                                "on",
                                "--routing",
                                "off",
                                "--logps-pass",
                                "auto",
                                "--allow-fallbacks",
                                "--profile-window",
                                "3:2"});
  const bench::DriverSettings& d = knobs.options.driver;
  EXPECT_EQ(d.steps, 4);
  EXPECT_EQ(d.micro_steps, 7);
  EXPECT_EQ(d.seed, -3);
  EXPECT_EQ(d.routing_scale, 0.5);
  EXPECT_FALSE(d.logp_gates);
  EXPECT_EQ(d.advantages, "zero");
  EXPECT_EQ(d.pad_position, "start");
  EXPECT_EQ(d.pad_align, 2048);
  EXPECT_EQ(d.stage_boundary, "on");
  EXPECT_EQ(d.routing, "off");
  EXPECT_EQ(d.logps_pass, "auto");
  EXPECT_TRUE(d.allow_fallbacks);
  EXPECT_TRUE(d.other_settings.empty());
  EXPECT_EQ(knobs.options.profile_window, std::make_pair(3, 2));
  // Not given, or given blank: the defaults, and nothing written for the optional ones.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{},
        std::vector<std::string>{"--steps", " ", "--pad-align", "", "--logp-gates", "",
                                 "--profile-window", ""}}) {
    const bench::RenderOptions o = finished(args).options;
    EXPECT_EQ(o.driver.steps, 5);
    EXPECT_TRUE(o.driver.logp_gates);
    EXPECT_EQ(o.driver.pad_align, std::nullopt);
    EXPECT_EQ(o.driver.routing, std::nullopt);
    EXPECT_EQ(o.profile_window, std::nullopt);
  }
}

// A valid value of `setting` other than its default, and the text the driver should then read.
std::pair<std::string, std::string> non_default_value(const bench::DriverSetting& setting) {
  using bench::SettingKind;
  auto other = [&](std::vector<std::string> candidates) {
    for (const std::string& candidate : candidates) {
      if (candidate != setting.default_value) return candidate;
    }
    return std::string();
  };
  switch (setting.type) {
    case SettingKind::kInt: {
      std::int64_t low = setting.int_minimum.value_or(0);
      std::string value = other({std::to_string(low + 2), std::to_string(low + 3)});
      return {" " + value + " ", value};
    }
    case SettingKind::kFloat: {
      std::string value = other({"2.5", "3.5"});
      return {value, value};
    }
    case SettingKind::kChoice: {
      std::string value = other({setting.choices.rbegin(), setting.choices.rend()});
      std::string upper = value;
      for (char& c : upper) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
      return {upper, value};
    }
    case SettingKind::kPadAlign:
      return {"2048", "2048"};
    case SettingKind::kWindow:
      return {"3:2", "3:2"};
    default:
      return {"some-text", "some-text"};
  }
}

// Every setting of the table with an option reaches the driver's environment as the driver reads
// it: a row added to the table is covered here without a change to this test.
TEST(RenderOptions, EverySettingGivenToItsOptionIsWrittenForTheDriver) {
  for (const bench::DriverSetting& setting : bench::driver_settings()) {
    // --name is the JobSet's name (render_test), --routing-targets a FILE (render_bench_test.py),
    // --allow-fallbacks a flag (below).
    if (!setting.has_option() || setting.option == "--name" ||
        setting.option == "--routing-targets" || setting.option == "--allow-fallbacks") {
      continue;
    }
    auto [given, expected] = non_default_value(setting);
    RenderKnobs knobs = finished({setting.option + "=" + given});
    std::optional<std::string> written;
    for (const auto& [name, value] : bench::driver_environment(knobs.options, "--a", "--b")) {
      if (name == setting.name) written = value;
    }
    EXPECT_EQ(written, expected) << setting.option << " " << given;
  }
  bool fallbacks = false;
  for (const auto& [name, value] :
       bench::driver_environment(finished({"--allow-fallbacks"}).options, "--a", "--b")) {
    fallbacks |= name == "ALLOW_FALLBACKS" && value == "1";
  }
  EXPECT_TRUE(fallbacks);
}

TEST(RenderOptions, BadDriverSettingsAreRefusedInTheDriversWords) {
  test::expect_cases<std::string, std::vector<std::string>>(
      refusal_of,
      {{{"--steps", "0"}, "--steps 0: must be >= 1"},
       {{"--steps", "x"}, "--steps x: not an integer"},
       {{"--steps", "2147483648"}, "--steps 2147483648: out of range (at most 2147483647)"},
       {{"--micro-steps=-1"}, "--micro-steps -1: must be >= 1"},
       {{"--seed", "1.5"}, "--seed 1.5: not an integer"},
       {{"--routing-scale", "-1"}, "--routing-scale -1: must be >= 0"},
       {{"--routing-scale", "inf"}, "--routing-scale inf: must be finite"},
       {{"--routing-scale", "x"}, "--routing-scale x: not a number"},
       {{"--logp-gates", "maybe"}, "--logp-gates maybe: must be one of on|off"},
       {{"--advantages", "none"}, "--advantages none: must be one of random|zero"},
       {{"--pad-position", "middle"}, "--pad-position middle: must be one of end|start"},
       {{"--pad-align", "100"}, "--pad-align 100: must be a multiple of the segment alignment 64"},
       {{"--pad-align", "0"}, "--pad-align 0: must be >= 1"},
       {{"--stage-boundary", "sometimes"},
        "--stage-boundary sometimes: must be one of auto|on|off"},
       {{"--routing", "yes"}, "--routing yes: must be one of auto|on|off"},
       {{"--logps-pass", "1"}, "--logps-pass 1: must be one of auto|on|off"},
       {{"--profile-window", "5"},
        "--profile-window 5: expected START:COUNT (timed steps, 0-based start)"},
       {{"--profile-window=-1:2"}, "--profile-window -1:2: START must be >= 0"},
       {{"--profile-window", "1:0"}, "--profile-window 1:0: COUNT must be >= 1"}});
}

// The embedded driver's two forms are one driver: the packed one (what a render puts in the
// client script's arguments) unpacks to the text (what --print-driver prints and the tests run),
// and it is in base64_encode's lines, which the render cuts the arguments at.
TEST(RenderOptions, TheEmbeddedDriversPackedFormIsItsText) {
  const std::string_view packed = embedded::bench_driver_packed();
  const std::string compressed = base64_decode(packed);
  EXPECT_EQ(gzip_decompress(compressed), embedded::bench_driver());
  EXPECT_EQ(base64_encode(compressed), packed);
  RenderKnobs knobs;
  finish_render_options(knobs, embedded::bench_driver(), packed);
  EXPECT_EQ(knobs.options.driver_packed, packed);
  EXPECT_EQ(knobs.options.driver_source, embedded::bench_driver());
}

}  // namespace
}  // namespace rtb::tool
