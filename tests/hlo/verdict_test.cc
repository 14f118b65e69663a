// Tests of hlo-overlap's outcome (verdict.h): each way a check or a comparison passes or fails,
// and the reasons it gives.
#include "rtb/hlo/verdict.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rtb/base/error.h"

namespace rtb::hlo {
namespace {

// A scheduled module whose entry runs one synchronous all-reduce of `elements` f32 values:
// 4 * elements exposed collective bytes. Without the closing `}` the dump is truncated.
std::string module_text(int elements, bool complete = true) {
  std::string shape = "f32[" + std::to_string(elements) + "]{0}";
  std::string text =
      "HloModule m, is_scheduled=true\n\n"
      "%sum (x: f32[], y: f32[]) -> f32[] {\n"
      "  %x = f32[] parameter(0)\n"
      "  %y = f32[] parameter(1)\n"
      "  ROOT %s = f32[] add(%x, %y)\n"
      "}\n\n"
      "ENTRY %main (a: " +
      shape + ") -> " + shape + " {\n  %a = " + shape + " parameter(0)\n" + "  ROOT %r = " + shape +
      " all-reduce(%a), to_apply=%sum\n";
  return complete ? text + "}\n" : text;
}

Analysis analysis(const std::string& name, int elements, bool complete = true) {
  return analyze_text(module_text(elements, complete), name);
}

TEST(HloVerdict, OneCompleteDumpPasses) {
  Verdict verdict = judge({analysis("a.hlo", 8)}, {});
  EXPECT_EQ(verdict.outcome(), Outcome::kPass);
  EXPECT_TRUE(verdict.differences.empty());
  EXPECT_FALSE(verdict.truncated.has_value());
  EXPECT_TRUE(verdict.over_budget.empty());
}

TEST(HloVerdict, OneTruncatedDumpFailsUnlessAllowed) {
  std::vector<Analysis> truncated{analysis("t.hlo", 8, /*complete=*/false)};
  ASSERT_TRUE(truncated[0].truncated);
  Verdict verdict = judge(truncated, {});
  EXPECT_EQ(verdict.outcome(), Outcome::kFail);
  EXPECT_EQ(verdict.truncated, "t.hlo");
  Verdict allowed = judge(truncated, {std::nullopt, /*allow_truncated=*/true});
  EXPECT_EQ(allowed.outcome(), Outcome::kPass);
  EXPECT_FALSE(allowed.truncated.has_value());
}

TEST(HloVerdict, ExposedBytesOverTheBudgetFail) {
  std::vector<Analysis> one{analysis("a.hlo", 8)};
  ASSERT_EQ(one[0].total_collectives.exposed_bytes, 32);
  EXPECT_EQ(judge(one, {32}).outcome(), Outcome::kPass) << "at the budget is within it";
  Verdict over = judge(one, {31});
  EXPECT_EQ(over.outcome(), Outcome::kFail);
  ASSERT_EQ(over.over_budget.size(), 1u);
  EXPECT_EQ(over.over_budget[0].file, "a.hlo");
  EXPECT_EQ(over.over_budget[0].exposed_bytes, 32);
  EXPECT_EQ(over.over_budget[0].budget, 31);
}

TEST(HloVerdict, TwoDumpsAreSameOrDifferent) {
  Verdict same = judge({analysis("a.hlo", 8), analysis("b.hlo", 8)}, {});
  EXPECT_EQ(same.outcome(), Outcome::kPass);
  EXPECT_TRUE(same.differences.empty());

  Verdict different = judge({analysis("a.hlo", 8), analysis("b.hlo", 16)}, {});
  EXPECT_EQ(different.outcome(), Outcome::kFail);
  ASSERT_EQ(different.differences.size(), 1u);
  EXPECT_EQ(different.differences[0], "all-reduce: bytes 32 B -> 64 B, exposed bytes 32 B -> 64 B");
}

TEST(HloVerdict, TwoDumpsAreComparedAsTheyAreWhenTruncated) {
  Verdict verdict = judge({analysis("a.hlo", 8), analysis("b.hlo", 8, false)}, {});
  EXPECT_EQ(verdict.outcome(), Outcome::kPass);
  EXPECT_FALSE(verdict.truncated.has_value());
}

TEST(HloVerdict, TwoDumpsAreEachHeldToTheBudget) {
  Verdict verdict = judge({analysis("a.hlo", 16), analysis("b.hlo", 16)}, {40});
  EXPECT_EQ(verdict.outcome(), Outcome::kFail);
  EXPECT_TRUE(verdict.differences.empty());
  ASSERT_EQ(verdict.over_budget.size(), 2u);
  EXPECT_EQ(verdict.over_budget[0].file, "a.hlo");
  EXPECT_EQ(verdict.over_budget[1].file, "b.hlo");

  Verdict one = judge({analysis("a.hlo", 8), analysis("b.hlo", 16)}, {40});
  ASSERT_EQ(one.over_budget.size(), 1u);
  EXPECT_EQ(one.over_budget[0].file, "b.hlo");
  EXPECT_EQ(one.differences.size(), 1u);
}

TEST(HloVerdict, OnlyOneOrTwoDumpsCanBeJudged) {
  EXPECT_THROW(judge({}, {}), Error);
  EXPECT_THROW(judge({analysis("a", 8), analysis("b", 8), analysis("c", 8)}, {}), Error);
}

}  // namespace
}  // namespace rtb::hlo
