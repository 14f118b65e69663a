#include "rtb/k8s/line_diff.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "rtb/base/io.h"
#include "rtb/base/text.h"
#include "rtb/k8s/dryrun.h"
#include "rtb/k8s/yaml.h"
#include "test_util.h"

namespace rtb::k8s {
namespace {

std::vector<std::string> diff_lines(std::string_view a, std::string_view b, std::size_t context) {
  return format_line_diff(line_diff(a, b, context));
}

TEST(LineDiff, SameLinesGiveNoHunks) {
  EXPECT_THAT(line_diff("a\nb\n", "a\nb\n"), IsEmpty());
  EXPECT_THAT(line_diff("a\nb\n", "a\nb"), IsEmpty()) << "a final newline is not a line";
  EXPECT_THAT(line_diff("", ""), IsEmpty());
}

TEST(LineDiff, OneChangedLineWithContext) {
  EXPECT_THAT(diff_lines("1\n2\n3\n4\n5\n6\n7\n", "1\n2\n3\nfour\n5\n6\n7\n", 2),
              ElementsAre("@@ -2,5 +2,5 @@", "  2", "  3", "- 4", "+ four", "  5", "  6"));
  EXPECT_THAT(diff_lines("1\n2\n", "0\n1\n2\n", 1), ElementsAre("@@ -1,1 +1,2 @@", "+ 0", "  1"));
  EXPECT_THAT(diff_lines("a\n", "", 2), ElementsAre("@@ -1,1 +0,0 @@", "- a"));
}

TEST(LineDiff, DistantChangesAreSeparateHunksAndNearOnesMerge) {
  // Lines 1..20, with the lines in `changed` replaced by "x".
  auto numbers = [](std::vector<int> changed) {
    std::string text;
    for (int i = 1; i <= 20; ++i) {
      bool is_changed = std::find(changed.begin(), changed.end(), i) != changed.end();
      text.append(is_changed ? std::string("x") : std::to_string(i));
      text.push_back('\n');
    }
    return text;
  };
  std::vector<LineHunk> hunks = line_diff(numbers({}), numbers({3, 17}), 2);
  ASSERT_EQ(hunks.size(), 2u);
  EXPECT_EQ(hunks[0].old_start, 1u);
  EXPECT_EQ(hunks[1].old_start, 15u);
  EXPECT_EQ(line_diff(numbers({}), numbers({3, 7}), 2).size(), 1u)
      << "3 kept lines between: within 2 * context";
}

TEST(LineDiff, InsertionsAreFoundByCommonLines) {
  EXPECT_THAT(diff_lines("a\nb\nc\nd\n", "a\nx\nb\nc\ny\nd\n", 0),
              ElementsAre("@@ -1,0 +2,1 @@", "+ x", "@@ -3,0 +5,1 @@", "+ y"));
}

TEST(LineDiff, HugeMiddlesAreBoundedNotSearched) {
  std::string a, b;
  for (int i = 0; i < 3000; ++i) {
    std::string number = std::to_string(i);
    a.append("a").append(number).push_back('\n');
    b.append("b").append(number).push_back('\n');
  }
  std::vector<LineHunk> hunks = line_diff(a, b, 2);
  ASSERT_EQ(hunks.size(), 1u);
  EXPECT_EQ(hunks[0].old_count, 3000u);
  EXPECT_EQ(hunks[0].new_count, 3000u);
}

TEST(LineDiff, XpkScriptWithOneEditedLine) {
  // command[2] of xpk's super-slicing golden JobSet (testdata/SOURCES.md), the user command edited.
  DryRun render = parse_dryrun(
      read_file(test::testdata("diff_renders/xpk_super-slicing_at_254bbe3f.yaml")), "render");
  YAML::Node containers = yaml::descend(
      yaml::lookup(yaml::lookup(render.documents[0].root, "spec"), "replicatedJobs")[0],
      {"template", "spec", "template", "spec", "containers"});
  std::string script = yaml::lookup(containers[0], "command")[2].Scalar();
  ASSERT_EQ(split_lines(script).size(), 16u);
  std::string edited = script;
  edited.replace(edited.find("(bash hello)"), 12, "(bash hello --steps=20)");
  EXPECT_THAT(
      diff_lines(script, edited, 1),
      ElementsAre("@@ -4,3 +4,3 @@", "  ", "- (bash hello) & PID=$!;",
                  "+ (bash hello --steps=20) & PID=$!;", "  while kill -0 $PID 2>/dev/null;"));
}

TEST(EditScript, KeepsCommonEndsAlignsTheMiddleAndSaysWhenItCannot) {
  std::vector<std::string_view> a = {"x", "a", "b", "c", "y"}, b = {"x", "b", "d", "c", "y"};
  // Each edit as kind (= kept, - removed, + added), old index, new index.
  auto shown = [](const EditScript& script) {
    std::string out;
    for (const SequenceEdit& e : script.edits) {
      out += fmt::format("{}{}{} ", "=-+"[static_cast<int>(e.kind)], e.old_index, e.new_index);
    }
    return out;
  };
  EditScript script = edit_script(a, b, 100);
  EXPECT_TRUE(script.aligned);
  // x kept, a removed, b kept, d added (the removal first), c and y kept.
  EXPECT_EQ(shown(script), "=00 -11 =21 +32 =33 =44 ");
  // The middle, 2 x 2 items, needs 9 table cells: with 8 it stands removed, then added.
  EditScript coarse = edit_script(a, b, 8);
  EXPECT_FALSE(coarse.aligned);
  EXPECT_EQ(shown(coarse), "=00 -11 -21 +31 +32 =33 =44 ");
}

}  // namespace
}  // namespace rtb::k8s
