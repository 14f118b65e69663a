#include "rtb/payload/routing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "test_util.h"

namespace rtb::payload {
namespace {

using test::error_of;

TEST(ParseRoutingTargets, OneNumberPerLineWithCommentsAndBlankLines) {
  std::string text = "# measured\n\n1.5\n  2 # hot layer\n3e0\r\n\n";
  EXPECT_THAT(parse_routing_targets(text, "t.txt"), ElementsAre(1.5, 2.0, 3.0));
}

TEST(ParseRoutingTargets, LayerTargetLinesInAnyOrder) {
  std::string text = "2,3.25\n0, 1.0\n# c\n1 ,7\n";
  EXPECT_THAT(parse_routing_targets(text, "t.txt"), ElementsAre(1.0, 7.0, 3.25));
}

TEST(ParseRoutingTargets, SkipsCsvHeaderOfMeasuredTables) {
  std::string text = "layer,max_over_mean\n0,3.9452\n1,5.8123\n";
  EXPECT_THAT(parse_routing_targets(text, "t.csv"), ElementsAre(3.9452, 5.8123));
}

TEST(ParseRoutingTargets, InlineCommaSeparatedLine) {
  EXPECT_THAT(parse_routing_targets("1.5,2,1,10.25", "env"), ElementsAre(1.5, 2.0, 1.0, 10.25));
  // Two values: inline unless the first is layer 0 of a one-layer table.
  EXPECT_THAT(parse_routing_targets("1,2", "env"), ElementsAre(1.0, 2.0));
  EXPECT_THAT(parse_routing_targets("0,2.5\n", "f"), ElementsAre(2.5));
}

// A malformed table is an rtb::Error naming its source, the 1-based line (0: the table as a
// whole) and what is wrong.
struct MalformedTable {
  std::string text;
  std::string source;
  int line;
  std::string reason;
};

TEST(ParseRoutingTargets, MalformedTablesNameSourceLineAndReason) {
  const MalformedTable cases[] = {
      {"1.5\n\n2.x\n", "my.txt", 3, "'2.x' is not a number"},
      {"# x\n1.2\n0.99\n", "f", 3, "below 1"},
      {"1.5,0.5,2", "env", 1, "below 1"},
      {"1\nnan\n", "f", 2, "not finite"},
      {"1\ninf\n", "f", 2, "not finite"},
      {"1\n-inf\n", "f", 2, "not finite"},
      {"1\nNaN\n", "f", 2, "not finite"},
      {"1\ninfinity\n", "f", 2, "not finite"},
      {"1e999\n", "f", 1, "out of range"},
      {"0,1.5\n1,2\n0,3\n", "f", 3, "layer 0 given twice (first on line 1)"},
      {"0,1.5\n1,2\n3,3\n", "f", 0, "layer 2 is missing"},
      {"1,1.5\n2,2\n", "f", 0, "layer 0 is missing"},
      {"", "empty.txt", 0, "empty"},
      {"\n\n", "empty.txt", 0, "empty"},
      {"# only a comment\n", "empty.txt", 0, "empty"},
      {"layer,target\n", "empty.txt", 0, "empty"},
      {"0,1.5\n2\n", "f", 2, "mixes"},
      {"1,2,3\n4,5,6\n", "f", 1, "3 comma-separated values on a line of a multi-line table"},
      {"-1,2\n0,3\n", "f", 1, "not a layer index"},
      {"1.5,,2", "env", 1, "empty value"},
  };
  for (const MalformedTable& bad : cases) {
    Error e = error_of([&] { parse_routing_targets(bad.text, bad.source); });
    EXPECT_EQ(e.file(), bad.source) << bad.text;
    EXPECT_EQ(e.line(), bad.line) << bad.text;
    EXPECT_THAT(e.message(), HasSubstr(bad.reason)) << bad.text;
  }
}

TEST(ScaleRoutingTargets, StretchesAroundOne) {
  EXPECT_THAT(scale_routing_targets({1.0, 3.0, 5.5}, 0.5), ElementsAre(1.0, 2.0, 3.25));
  EXPECT_THAT(scale_routing_targets({4.0}, 0.0), ElementsAre(1.0));
  EXPECT_THAT(scale_routing_targets({4.0}, 2.0), ElementsAre(7.0));
  EXPECT_THROW(scale_routing_targets({2.0}, -0.1), Error);
  EXPECT_THROW(scale_routing_targets({2.0}, std::nan("")), Error);
  EXPECT_THROW(scale_routing_targets({2.0}, std::numeric_limits<double>::infinity()), Error);
}

TEST(CheckRoutingScale, FiniteAndNotNegative) {
  EXPECT_NO_THROW(check_routing_scale(0.0));
  EXPECT_NO_THROW(check_routing_scale(2.5));
  EXPECT_THAT(error_of([] { check_routing_scale(-1); }).message(),
              HasSubstr("routing scale -1 is invalid"));
  EXPECT_THROW(check_routing_scale(std::nan("")), Error);
  EXPECT_THROW(check_routing_scale(-std::numeric_limits<double>::infinity()), Error);
}

TEST(FormatRoutingTargets, InlineRoundTripsExactly) {
  std::vector<double> targets = {1.0, 0.1 + 1.0, 10.0 / 3.0, 7.9491, 51.2, 1.0000000000000002};
  std::string text = format_routing_targets_inline(targets);
  EXPECT_EQ(text.find(' '), std::string::npos);
  EXPECT_EQ(parse_routing_targets(text, "x"), targets);
  EXPECT_EQ(format_routing_targets_inline({1.5, 2.0}), "1.5,2");
}

TEST(FormatRoutingTargets, TableRoundTripsExactlyWithComments) {
  std::vector<double> targets = {3.9452, 10.0 / 7.0, 1.0};
  std::string text = format_routing_targets_table(targets, {"measured by test", "", "x"});
  EXPECT_THAT(text, HasSubstr("# measured by test\n#\n# x\n"));
  EXPECT_THAT(text, HasSubstr("0,3.9452\n"));
  EXPECT_EQ(parse_routing_targets(text, "x"), targets);
}

TEST(ValidateRoutingTargets, AcceptsReachableTables) {
  EXPECT_NO_THROW(validate_routing_targets({1.0, 51.2, 7.5}, 3, 512, 10));
  EXPECT_NO_THROW(validate_routing_targets({16.0}, 1, 128, 8));
}

TEST(ValidateRoutingTargets, CountMustMatchLayers) {
  Error e = error_of([] { validate_routing_targets({1.5, 2.0}, 60, 512, 10); });
  EXPECT_THAT(e.message(), HasSubstr("2 targets but the model has 60 layers"));
}

TEST(ValidateRoutingTargets, UnreachableTargetNamesTheLayer) {
  Error e = error_of([] { validate_routing_targets({2.0, 2.0, 51.3}, 3, 512, 10); });
  EXPECT_THAT(e.message(), HasSubstr("layer 2"));
  EXPECT_THAT(e.message(), HasSubstr("51.2"));
  Error small = error_of([] { validate_routing_targets({4.5}, 1, 8, 2); });
  EXPECT_THAT(small.message(), HasSubstr("layer 0"));
}

TEST(ValidateRoutingTargets, BelowOneNanAndBadModelAreRejected) {
  EXPECT_THAT(error_of([] {
                validate_routing_targets({2.0, 0.5}, 2, 8, 2);
              }).message(),
              HasSubstr("layer 1"));
  EXPECT_THAT(error_of([] { validate_routing_targets({std::nan("")}, 1, 8, 2); }).message(),
              HasSubstr("not finite"));
  EXPECT_THROW(validate_routing_targets({1.0}, 1, 8, 9), Error);
  EXPECT_THROW(validate_routing_targets({1.0}, 1, 0, 1), Error);
  EXPECT_THROW(validate_routing_targets({}, 0, 8, 2), Error);
}

TEST(DefaultRoutingTable, EmbeddedTextEqualsTheDataFile) {
  std::string file =
      read_file(std::string(RTB_TESTDATA_DIR) + "/../data/routing/qwen3.5-397b-a17b.txt");
  EXPECT_EQ(default_routing_table_text(), file)
      << "the build must embed data/routing/qwen3.5-397b-a17b.txt verbatim";
}

TEST(DefaultRoutingTable, FitsQwen35AndSaysItIsAnExtrapolation) {
  std::vector<double> targets = default_routing_targets();
  ASSERT_EQ(targets.size(), 60u);
  EXPECT_NO_THROW(validate_routing_targets(targets, 60, 512, 10));
  std::string_view text = default_routing_table_text();
  EXPECT_NE(text.find("NOT MEASURED"), std::string_view::npos);
  EXPECT_NE(text.find("check-payload measure"), std::string_view::npos);
}

// The derivation written in the table's comments, redone here on the copied source table.
TEST(DefaultRoutingTable, ReproducesItsDocumentedDerivation) {
  std::vector<double> measured = parse_routing_targets(
      read_file(std::string(RTB_TESTDATA_DIR) + "/routing_qwen3-30b-a3b-base_max_over_mean.csv"),
      "qwen3-30b");
  ASSERT_EQ(measured.size(), 48u);
  std::vector<double> targets = default_routing_targets();
  for (int layer = 0; layer < 60; ++layer) {
    double x = layer * (measured.size() - 1) / 59.0;
    std::size_t i = std::min(static_cast<std::size_t>(x), measured.size() - 2);
    double expected = measured[i] + (x - i) * (measured[i + 1] - measured[i]);
    EXPECT_NEAR(targets[layer], expected, 0.5e-4 + 1e-12) << "layer " << layer;
  }
}

}  // namespace
}  // namespace rtb::payload
