#include "rtb/bench/driver_settings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rtb/base/error.h"
#include "rtb/bench/render.h"
#include "test_util.h"

namespace rtb::bench {
namespace {

// One setting of every kind, in the table's format.
constexpr std::string_view kEveryKind =
    "# one setting of every kind\n"
    "name\tkind\tdefault\toption\tmeaning\n"
    "AN_INT\tint\t0\t--an-int\tan integer\n"
    "AT_LEAST_ONE\tint>=1\t5\t--at-least-one\tat least 1\n"
    "AT_LEAST_MINUS_3\tint>=-3\t-\t-\tat least -3\n"
    "SCALE\tfloat>=0\t1\t--scale\ta number >= 0\n"
    "HALF\tfloat>=0.5\t-\t-\ta number >= 0.5\n"
    "GATES\tchoice:on|off\ton\t--gates\ton or off\n"
    "FLAG\tbool\t0\t--flag\ta boolean\n"
    "ALIGN\tpad_align\t-\t--align\ta multiple of 64\n"
    "WINDOW\twindow\t-\t--window\tSTART:COUNT\n"
    "ARGS\targv\t-\targv\tan argv\n"
    "TARGETS\ttargets\t-\t--targets\ttargets\n"
    "NOTE\ttext\t-\torch\tanything\n";

const DriverSetting& row(std::string_view name) {
  static const std::vector<DriverSetting> kRows = parse_driver_settings(kEveryKind, "kinds.tsv");
  for (const DriverSetting& setting : kRows) {
    if (setting.name == name) return setting;
  }
  throw Error("no test row " + std::string(name));
}

// refusal() of the test row `name` as a function of the value, "" for accepted.
auto reason_of(std::string_view name) {
  return [&setting = row(name)](const char* value) { return refusal(setting, value).value_or(""); };
}

TEST(DriverSettings, TheKindsAreParsed) {
  EXPECT_EQ(row("AN_INT").type, SettingKind::kInt);
  EXPECT_EQ(row("AN_INT").int_minimum, std::nullopt);
  EXPECT_EQ(row("AT_LEAST_ONE").int_minimum, 1);
  EXPECT_EQ(row("AT_LEAST_MINUS_3").int_minimum, -3);
  EXPECT_EQ(row("SCALE").type, SettingKind::kFloat);
  EXPECT_EQ(row("HALF").float_minimum, 0.5);
  EXPECT_EQ(row("GATES").type, SettingKind::kChoice);
  EXPECT_THAT(row("GATES").choices, ::testing::ElementsAre("on", "off"));
  EXPECT_EQ(row("FLAG").type, SettingKind::kBool);
  EXPECT_EQ(row("ALIGN").type, SettingKind::kPadAlign);
  EXPECT_EQ(row("WINDOW").type, SettingKind::kWindow);
  EXPECT_EQ(row("ARGS").type, SettingKind::kArgv);
  EXPECT_EQ(row("TARGETS").type, SettingKind::kTargets);
  EXPECT_EQ(row("NOTE").type, SettingKind::kText);
  EXPECT_EQ(row("AN_INT").line, 3);
  EXPECT_EQ(row("NOTE").line, 14);
  EXPECT_TRUE(row("AN_INT").has_option());
  EXPECT_FALSE(row("ARGS").has_option());
  EXPECT_FALSE(row("HALF").has_option());
  EXPECT_FALSE(row("NOTE").has_option());
}

// Python's int(text.strip(), 10): a sign, digits with single underscores between them, any size.
TEST(DriverSettings, IntegersAsPythonReadsThem) {
  test::expect_cases(reason_of("AN_INT"), {{"0", ""},
                                           {"-7", ""},
                                           {"+3", ""},
                                           {" 12\t", ""},
                                           {"007", ""},
                                           {"1_000", ""},
                                           {"99999999999999999999999", ""},
                                           {"-99999999999999999999999", ""},
                                           {"x", "not an integer"},
                                           {"1.5", "not an integer"},
                                           {"1e3", "not an integer"},
                                           {"0x10", "not an integer"},
                                           {"1 2", "not an integer"},
                                           {"1__0", "not an integer"},
                                           {"_1", "not an integer"},
                                           {"1_", "not an integer"},
                                           {"+", "not an integer"},
                                           {"--1", "not an integer"}});
  test::expect_cases(reason_of("AT_LEAST_ONE"), {{"1", ""},
                                                 {"99999999999999999999", ""},
                                                 {"0", "must be >= 1"},
                                                 {"-0", "must be >= 1"},
                                                 {"-5", "must be >= 1"},
                                                 {"-99999999999999999999", "must be >= 1"},
                                                 {"x", "not an integer"}});
  test::expect_cases(reason_of("AT_LEAST_MINUS_3"),
                     {{"-3", ""}, {"-4", "must be >= -3"}, {"0", ""}});
}

// Python's float(text.strip()), then finite, then the minimum printed as %g prints it.
TEST(DriverSettings, NumbersAsPythonReadsThem) {
  test::expect_cases(reason_of("SCALE"), {{"0", ""},
                                          {"1", ""},
                                          {"0.5", ""},
                                          {".5", ""},
                                          {"5.", ""},
                                          {"1e3", ""},
                                          {"1.E-3", ""},
                                          {"+2", ""},
                                          {"1_0.2_5", ""},
                                          {" 2 ", ""},
                                          {"-0", ""},
                                          {"1e-999", ""},
                                          {"-1e-999", ""},  // -0.0 is not below 0
                                          {"x", "not a number"},
                                          {"1..2", "not a number"},
                                          {".", "not a number"},
                                          {"e3", "not a number"},
                                          {"1e", "not a number"},
                                          {"1e+", "not a number"},
                                          {"_1", "not a number"},
                                          {"1_.5", "not a number"},
                                          {"0x10", "not a number"},
                                          {"nan(1)", "not a number"},
                                          {"in f", "not a number"},
                                          {"inf", "must be finite"},
                                          {"-Infinity", "must be finite"},
                                          {"+iNF", "must be finite"},
                                          {"NaN", "must be finite"},
                                          {"1e999", "must be finite"},
                                          {"-1e999", "must be finite"},
                                          {"1000e306", "must be finite"},
                                          {"-1", "must be >= 0"},
                                          {"-0.5", "must be >= 0"}});
  test::expect_cases(reason_of("HALF"),
                     {{"0.5", ""}, {"0.25", "must be >= 0.5"}, {"x", "not a number"}});
}

TEST(DriverSettings, ChoicesAndBooleansLowerCased) {
  test::expect_cases(reason_of("GATES"), {{"on", ""},
                                          {"OFF", ""},
                                          {" On ", ""},
                                          {"maybe", "must be one of on|off"},
                                          {"o n", "must be one of on|off"},
                                          {"1", "must be one of on|off"}});
  const char* kWords[] = {"1", "true", "yes", "on", "t", "y", "0", "false", "no", "off", "f", "n"};
  for (const char* word : kWords) {
    EXPECT_EQ(refusal(row("FLAG"), word), std::nullopt) << word;
    std::string upper(word);
    for (char& c : upper) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    EXPECT_EQ(refusal(row("FLAG"), " " + upper + " "), std::nullopt) << upper;
  }
  test::expect_cases(reason_of("FLAG"),
                     {{"2", "not a boolean (true/false, 1/0, yes/no, on/off)"},
                      {"truth", "not a boolean (true/false, 1/0, yes/no, on/off)"},
                      {"enabled", "not a boolean (true/false, 1/0, yes/no, on/off)"}});
}

TEST(DriverSettings, PadAlignIsAPositiveMultipleOf64) {
  test::expect_cases(reason_of("ALIGN"), {{"64", ""},
                                          {" 4096 ", ""},
                                          {"0064", ""},
                                          {"64000000000000000000000", ""},
                                          {"0", "must be >= 1"},
                                          {"-64", "must be >= 1"},
                                          {"x", "not an integer"},
                                          {"100", "must be a multiple of the segment alignment 64"},
                                          {"10000000000000000000001",
                                           "must be a multiple of the segment alignment 64"}});
}

TEST(DriverSettings, WindowIsStartColonCount) {
  const std::string kExpected = "expected START:COUNT (timed steps, 0-based start)";
  test::expect_cases(reason_of("WINDOW"), {{"3:2", ""},
                                           {" 3 : 2 ", ""},
                                           {"0:1", ""},
                                           {"-0:1", ""},
                                           {"99999999999999999999:1", ""},
                                           {"5", kExpected.c_str()},
                                           {"a:b", kExpected.c_str()},
                                           {"3:", kExpected.c_str()},
                                           {":2", kExpected.c_str()},
                                           {"3:2:1", kExpected.c_str()},
                                           {"+3:2", kExpected.c_str()},
                                           {"1_0:2", kExpected.c_str()},
                                           {"- 1:2", kExpected.c_str()},
                                           {"-1:2", "START must be >= 0"},
                                           {"-1:0", "START must be >= 0"},
                                           {"1:0", "COUNT must be >= 1"},
                                           {"1:-5", "COUNT must be >= 1"}});
}

TEST(DriverSettings, BlankIsUnsetAndArgvTargetsAndTextAreNotChecked) {
  for (std::string_view name : {"AN_INT", "AT_LEAST_ONE", "SCALE", "GATES", "FLAG", "ALIGN",
                                "WINDOW", "ARGS", "TARGETS", "NOTE"}) {
    for (const char* blank : {"", " ", "\t\n"}) {
      EXPECT_EQ(refusal(row(name), blank), std::nullopt) << name;
    }
  }
  for (std::string_view name : {"ARGS", "TARGETS", "NOTE"}) {
    EXPECT_EQ(refusal(row(name), "x y 'z"), std::nullopt) << name;
  }
}

TEST(DriverSettings, CheckedValuesNameTheOptionAndTheValueAsGiven) {
  auto message = [](std::string_view name, std::string_view value) {
    return test::error_of([&] { checked_setting(row(name), value); }).message();
  };
  EXPECT_EQ(message("AT_LEAST_ONE", "0"), "--at-least-one 0: must be >= 1");
  EXPECT_EQ(message("AT_LEAST_ONE", " x "), "--at-least-one  x : not an integer");
  EXPECT_EQ(message("SCALE", "inf"), "--scale inf: must be finite");
  EXPECT_EQ(message("GATES", "maybe"), "--gates maybe: must be one of on|off");
  EXPECT_EQ(message("ALIGN", "100"), "--align 100: must be a multiple of the segment alignment 64");
  EXPECT_EQ(message("WINDOW", "1:0"), "--window 1:0: COUNT must be >= 1");
  // What the driver reads: trimmed, choices and booleans lower-cased; blank is unset.
  EXPECT_EQ(checked_setting(row("GATES"), " OFF "), "off");
  EXPECT_EQ(checked_setting(row("FLAG"), "Yes"), "yes");
  EXPECT_EQ(checked_setting(row("AN_INT"), " 1_0 "), "1_0");
  EXPECT_EQ(checked_setting(row("AN_INT"), "  "), "");
}

TEST(DriverSettings, NumbersParsedAndHeldInRange) {
  EXPECT_EQ(int_setting(row("AN_INT"), " -12 "), -12);
  EXPECT_EQ(int_setting(row("AN_INT"), "1_000"), 1000);
  EXPECT_EQ(int_setting(row("AN_INT"), ""), std::nullopt);
  EXPECT_EQ(int_setting(row("AT_LEAST_ONE"), "2147483647", 2147483647), 2147483647);
  EXPECT_EQ(
      test::error_of([] { int_setting(row("AT_LEAST_ONE"), "2147483648", 2147483647); }).message(),
      "--at-least-one 2147483648: out of range (at most 2147483647)");
  EXPECT_EQ(test::error_of([] { int_setting(row("AN_INT"), "99999999999999999999"); }).message(),
            "--an-int 99999999999999999999: out of range (at most 9223372036854775807)");
  EXPECT_EQ(test::error_of([] { int_setting(row("AN_INT"), "-99999999999999999999"); }).message(),
            "--an-int -99999999999999999999: out of range (at least -9223372036854775808)");
  EXPECT_EQ(test::error_of([] { int_setting(row("AT_LEAST_ONE"), "0"); }).message(),
            "--at-least-one 0: must be >= 1");
  EXPECT_EQ(float_setting(row("SCALE"), "1_0.5e-1"), 1.05);
  EXPECT_EQ(float_setting(row("SCALE"), "1e-999"), 0.0);
  EXPECT_EQ(float_setting(row("SCALE"), " "), std::nullopt);
  EXPECT_EQ(window_setting(row("WINDOW"), " 3 : 2 "),
            std::make_pair(std::int64_t{3}, std::int64_t{2}));
  EXPECT_EQ(window_setting(row("WINDOW"), ""), std::nullopt);
  EXPECT_EQ(
      test::error_of([] { window_setting(row("WINDOW"), "3:2147483648", 2147483647); }).message(),
      "--window 3:2147483648: out of range (at most 2147483647)");
}

TEST(DriverSettings, AWindowEndsWithinTheTimedSteps) {
  EXPECT_EQ(window_beyond_steps({3, 2}, 5), std::nullopt);
  EXPECT_EQ(window_beyond_steps({0, 1}, 1), std::nullopt);
  EXPECT_EQ(window_beyond_steps({4, 2}, 5), "ends after the last timed step (STEPS=5: steps 0..4)");
  EXPECT_EQ(window_beyond_steps({1, 1}, 1), "ends after the last timed step (STEPS=1: steps 0..0)");
}

// A bad table is an internal error at its line.
TEST(DriverSettings, BadTablesAreInternalErrorsAtTheirLine) {
  const std::string header = "name\tkind\tdefault\toption\tmeaning\n";
  auto what = [&](const std::string& rows) {
    return test::what_of([&] { parse_driver_settings("# comment\n" + header + rows, "t.tsv"); });
  };
  test::expect_cases<std::string, std::string>(
      what,
      {{"A\tint\t0\t-\n",
        "t.tsv:3: internal error: the driver settings table: 4 tab-separated "
        "columns, expected 5"},
       {"A\tint\t0\t-\tm\textra\n",
        "t.tsv:3: internal error: the driver settings table: 6 "
        "tab-separated columns, expected 5"},
       {"A\tint\t\t-\tm\n",
        "t.tsv:3: internal error: the driver settings table: an empty column, "
        "or one with white space around it"},
       {"A\tint\t0\t-\tm \n",
        "t.tsv:3: internal error: the driver settings table: an empty "
        "column, or one with white space around it"},
       {"steps\tint\t0\t-\tm\n",
        "t.tsv:3: internal error: the driver settings table: 'steps' is "
        "not an environment variable name"},
       {"A\tint\t0\t-\tm\nA\tint\t0\t-\tm\n",
        "t.tsv:4: internal error: the driver settings table: A is given twice"},
       {"A\tint>1\t0\t-\tm\n",
        "t.tsv:3: internal error: the driver settings table: A: unknown kind 'int>1'"},
       {"A\tfloat\t0\t-\tm\n",
        "t.tsv:3: internal error: the driver settings table: A: unknown kind 'float'"},
       {"A\tfloat>=inf\t-\t-\tm\n",
        "t.tsv:3: internal error: the driver settings table: A: unknown kind 'float>=inf'"},
       {"A\tchoice:On|off\t-\t-\tm\n",
        "t.tsv:3: internal error: the driver settings table: A: unknown kind 'choice:On|off'"},
       {"A\tchoice:a||b\t-\t-\tm\n",
        "t.tsv:3: internal error: the driver settings table: A: unknown kind 'choice:a||b'"},
       {"A\tchoice:a|a\t-\t-\tm\n",
        "t.tsv:3: internal error: the driver settings table: A: unknown kind 'choice:a|a'"},
       {"A\tint\t0\tsteps\tm\n",
        "t.tsv:3: internal error: the driver settings table: A: option "
        "'steps' is neither --name, argv, orch, rollout, arm nor -"},
       {"A\tint\t0\t--Steps\tm\n",
        "t.tsv:3: internal error: the driver settings table: A: option "
        "'--Steps' is neither --name, argv, orch, rollout, arm nor -"},
       {"A\tint\t0\t--a\tm\nB\tint\t0\t--a\tm\n",
        "t.tsv:4: internal error: the driver settings "
        "table: B: option --a belongs to another "
        "setting too"},
       {"A\tint>=1\t0\t-\tm\n",
        "t.tsv:3: internal error: the driver settings table: A: default "
        "'0': must be >= 1"},
       {"A\tchoice:a|b\tc\t-\tm\n",
        "t.tsv:3: internal error: the driver settings table: A: "
        "default 'c': must be one of a|b"}});
  EXPECT_EQ(test::what_of([] { parse_driver_settings("# only a comment\n", "t.tsv"); }),
            "t.tsv: internal error: the driver settings table has no header line");
  EXPECT_EQ(test::what_of([] { parse_driver_settings("name\tkind\n", "t.tsv"); }),
            "t.tsv:1: internal error: the driver settings table: expected the header line of "
            "columns name, kind, default, option, meaning");
  // Two settings of the driver only (option "-", "orch", "argv") may share their option column.
  EXPECT_EQ(parse_driver_settings(header + "A\tint\t0\t-\tm\nB\tint\t0\t-\tm\n", "t.tsv").size(),
            2u);
}

// --- the embedded table -----------------------------------------------------------------------

TEST(DriverSettings, TheEmbeddedTableParsesAndEveryDefaultPassesItsOwnKind) {
  const std::vector<DriverSetting>& table = driver_settings();
  ASSERT_FALSE(table.empty());
  EXPECT_EQ(table.front().name, "TRAINER_ARGV");
  for (const DriverSetting& setting : table) {
    EXPECT_FALSE(setting.meaning.empty()) << setting.name;
    if (setting.default_value == "-") continue;
    EXPECT_EQ(refusal(setting, setting.default_value), std::nullopt) << setting.name;
    EXPECT_NE(setting.default_value.find_first_not_of(" \t"), std::string::npos)
        << setting.name << ": a default is not blank";
  }
}

TEST(DriverSettings, LookupByNameAndByOption) {
  const DriverSetting* steps = find_driver_setting("STEPS");
  ASSERT_NE(steps, nullptr);
  EXPECT_EQ(steps->option, "--steps");
  EXPECT_EQ(steps->kind, "int>=1");
  EXPECT_EQ(steps->default_value, "5");
  EXPECT_EQ(find_driver_setting_by_option("--steps"), steps);
  EXPECT_EQ(&driver_setting("STEPS"), steps);
  EXPECT_EQ(find_driver_setting("NO_SUCH_SETTING"), nullptr);
  EXPECT_EQ(find_driver_setting_by_option("--no-such-option"), nullptr);
  EXPECT_EQ(find_driver_setting_by_option("-"), nullptr) << "'-' is no option";
  EXPECT_EQ(find_driver_setting_by_option("orch"), nullptr);
  EXPECT_THAT(test::what_of([] { driver_setting("NO_SUCH_SETTING"); }),
              HasSubstr("internal error: no driver setting NO_SUCH_SETTING"));
  // Every option is a distinct --name, found again by its option.
  std::set<std::string> options;
  for (const DriverSetting& setting : driver_settings()) {
    if (!setting.has_option()) continue;
    EXPECT_TRUE(options.insert(setting.option).second) << setting.option;
    EXPECT_EQ(find_driver_setting_by_option(setting.option), &setting);
  }
}

// render-bench's DriverSettings start at the table's defaults: a render without driver options
// writes each setting that has a default as that default (the routing targets aside: render-bench
// writes its built-in table, the driver has none).
TEST(DriverSettings, RenderBenchDefaultsAreTheTables) {
  RenderOptions options;
  options.name = "abtest-bench";
  std::set<std::string> written;
  for (const auto& [name, value] : driver_environment(options, "--a", "--b")) {
    written.insert(name);
    const DriverSetting* setting = find_driver_setting(name);
    if (setting == nullptr || setting->default_value == "-") continue;
    EXPECT_EQ(value, setting->default_value) << name;
  }
  for (const char* name : {"STEPS", "MICRO_STEPS", "SEED", "ROUTING_SCALE", "LOGP_GATES",
                           "ADVANTAGES", "STAGE_BOUNDARY"}) {
    EXPECT_TRUE(written.count(name)) << name;
  }
}

}  // namespace
}  // namespace rtb::bench
