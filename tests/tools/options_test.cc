// tools/common/options: options that take several values leave the positionals after them alone
// (issue 28, item 2).
#include "common/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"

namespace rtb::tool {
namespace {

// An app as a tool declares it: optional positionals (as render-bench's DRYRUN or bench-report's
// RUN), a repeatable option, a fixed-count one and a table row that stores a vector.
struct Parsed {
  CLI::App app;
  std::vector<std::string> files, flags, pair, keys;
  std::string plain;

  Parsed() {
    app.add_option("FILE", files, "inputs");
    add_repeatable_option(app, "--flag", flags, "KEY=VALUE: a flag");
    add_fixed_count_option(app, "--pair", pair, 2, "A B: two runs");
    add_plain_options(app, {{"--plain", &plain, "a text"}, {"--key", &keys, "KEY=VALUE: a key"}});
  }

  void parse(std::vector<std::string> args) {
    args.insert(args.begin(), "tool");
    std::vector<const char*> argv;
    for (const std::string& arg : args) argv.push_back(arg.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
  }
};

TEST(RepeatableOption, TakesOneValuePerUseAndLeavesThePositionals) {
  Parsed p;
  p.parse({"--flag", "a=1", "one.txt", "--flag=--b=2", "--key", "k=v", "two.txt", "--flag", "--c=3",
           "three.txt"});
  // A value that begins with - is taken as the value (`--flag --c=3`), as CLI11 takes any word
  // after an option that needs one.
  EXPECT_THAT(p.flags, ElementsAre("a=1", "--b=2", "--c=3"));
  EXPECT_THAT(p.keys, ElementsAre("k=v"));
  EXPECT_THAT(p.files, ElementsAre("one.txt", "two.txt", "three.txt"));
}

TEST(RepeatableOption, GivenOnceBeforeEveryPositional) {
  for (const char* option : {"--flag", "--key"}) {
    Parsed p;
    p.parse({option, "a=1", "one.txt", "two.txt"});
    EXPECT_THAT(p.files, ElementsAre("one.txt", "two.txt")) << option;
  }
}

TEST(RepeatableOption, NeedsAValue) {
  Parsed p;
  EXPECT_THROW(p.parse({"--flag"}), CLI::ArgumentMismatch);
}

TEST(FixedCountOption, TakesExactlyItsCountAndLeavesTheRest) {
  Parsed p;
  p.parse({"--pair", "a.log", "b.log", "c.log", "d.log"});
  EXPECT_THAT(p.pair, ElementsAre("a.log", "b.log"));
  EXPECT_THAT(p.files, ElementsAre("c.log", "d.log"));
}

TEST(FixedCountOption, FewerValuesOrASecondUseAreRefused) {
  Parsed short_of_one;
  EXPECT_THROW(short_of_one.parse({"--pair", "a.log", "--flag", "x"}), CLI::ArgumentMismatch);
  Parsed twice;
  EXPECT_THROW(twice.parse({"--pair", "a.log", "b.log", "--pair", "c.log", "d.log"}),
               CLI::ArgumentMismatch);
}

TEST(FixedCountOption, OfOneIsASingleValueOptionKeptInAVector) {
  CLI::App app;
  std::vector<std::string> name, files;
  app.add_option("FILE", files, "inputs");
  add_fixed_count_option(app, "--name", name, 1, "NAME");
  const char* argv[] = {"tool", "--name", "x", "in.txt"};
  app.parse(4, argv);
  EXPECT_THAT(name, ElementsAre("x"));
  EXPECT_THAT(files, ElementsAre("in.txt"));
  CLI::App again;
  std::vector<std::string> names;
  add_fixed_count_option(again, "--name", names, 1, "NAME");
  const char* twice[] = {"tool", "--name", "x", "--name", "y"};
  EXPECT_THROW(again.parse(5, twice), CLI::ArgumentMismatch);
}

TEST(SeveralValueOptions, HelpSaysWhichRepeatAndHowManyValuesTheOthersTake) {
  Parsed p;
  std::string help = p.app.help();
  EXPECT_THAT(help, HasSubstr("KEY=VALUE: a flag (repeatable)"));
  EXPECT_THAT(help, HasSubstr("KEY=VALUE: a key (repeatable)"));
  EXPECT_THAT(help, HasSubstr("--pair TEXT x 2"));
  EXPECT_THAT(help, Not(HasSubstr("A B: two runs (repeatable)")));
  // CLI11 marks an option that takes any number of words with "...": none here.
  EXPECT_THAT(help.substr(help.find("Options:")), Not(HasSubstr(" ...")));
  EXPECT_THAT(p.flags, IsEmpty());
}

}  // namespace
}  // namespace rtb::tool
