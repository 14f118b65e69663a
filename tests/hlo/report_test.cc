// Tests of the hlo-overlap writers (hlo_report): the text report, --json, the A/B comparison
// and its verdict, and the --svg picture.
#include "rtb/hlo/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fixtures.h"
#include "rtb/base/error.h"
#include "rtb/hlo/analysis.h"
#include "test_util.h"

namespace rtb::hlo {
namespace {

using fixtures::fixture_path;
using fixtures::read_fixture;

// ---- writers ------------------------------------------------------------------------------------

TEST(HloReport, TextReportListsKindsComputationsTopAndUnpaired) {
  Analysis a = analyze_file(fixture_path("handwritten_while_trip_counts.hlo.txt"));
  ReportOptions options;
  options.top = 2;
  std::string text = format_text(a, options);
  EXPECT_THAT(text, HasSubstr("module while_trip_counts (scheduled), 9 computations"));
  EXPECT_THAT(text, HasSubstr("By kind"));
  EXPECT_THAT(text, HasSubstr("%inner_body"));
  EXPECT_THAT(text, HasSubstr(">=1"));  // the loop without known_trip_count
  EXPECT_THAT(text, HasSubstr("Top 2 exposed (by bytes x executions, of 4):"));
  EXPECT_THAT(text, HasSubstr("1. all-reduce %inner-ar in %inner_body"));
  EXPECT_THAT(text, HasSubstr("op_name: inner/all_reduce"));
  EXPECT_THAT(text, Not(HasSubstr("All entries")));
  options.list = true;
  EXPECT_THAT(format_text(a, options), HasSubstr("All entries"));

  Analysis unpaired = analyze_file(fixture_path("handwritten_unpaired.hlo.txt"));
  EXPECT_THAT(format_text(unpaired), HasSubstr("Unpaired (3):"));
  Analysis truncated = analyze_file(fixture_path("bad/truncated_mid_instruction.hlo.txt"));
  EXPECT_THAT(format_text(truncated), HasSubstr("TRUNCATED at line"));
}

TEST(HloReport, JsonFollowsTheDocumentedSchema) {
  Analysis a = analyze_file(fixture_path("handwritten_unpaired.hlo.txt"));
  YAML::Node doc = YAML::Load(format_json(a));  // JSON is YAML; yaml-cpp checks the syntax
  EXPECT_EQ(doc["schema"].as<std::string>(), "rtb.hlo-overlap/1");
  EXPECT_EQ(doc["module"].as<std::string>(), "unpaired");
  EXPECT_FALSE(doc["truncated"].as<bool>());
  ASSERT_EQ(doc["collectives"].size(), 4u);
  YAML::Node first = doc["collectives"][0];
  for (const char* key : {"kind", "category", "computation", "start", "done", "bytes", "exposed",
                          "async", "status", "executions", "window_instructions", "op_name"}) {
    EXPECT_TRUE(first[key].IsDefined()) << key;
  }
  EXPECT_TRUE(first["start"].IsNull());    // an unpaired done has no start
  EXPECT_TRUE(first["exposed"].IsNull());  // nor an exposure
  EXPECT_EQ(first["status"].as<std::string>(), "unpaired-done");
  YAML::Node ag = doc["collectives"][2];
  EXPECT_EQ(ag["kind"].as<std::string>(), "all-gather");
  EXPECT_TRUE(ag["exposed"].as<bool>());
  EXPECT_EQ(ag["bytes"].as<std::int64_t>(), 1024);
  EXPECT_EQ(doc["summary"]["all-gather"]["exposed_bytes"].as<std::int64_t>(), 1024);
  EXPECT_EQ(doc["summary"]["collective-permute"]["unpaired"].as<std::int64_t>(), 2);
  EXPECT_EQ(doc["total"]["instances"].as<std::int64_t>(), 4);
  EXPECT_EQ(doc["top_exposed"][0].as<int>(), 2);
}

TEST(HloReport, DiagnosticsAreTheNotesThenTheWarningsOfATruncatedOrUnscheduledDump) {
  Analysis truncated = analyze_file(fixture_path("bad/truncated_mid_instruction.hlo.txt"));
  std::vector<Diagnostic> all = diagnostics_of(truncated);
  ASSERT_EQ(all.size(), truncated.diagnostics.size() + 1);
  EXPECT_EQ(all.back().severity, Severity::kWarning);
  EXPECT_EQ(all.back().where, truncated.file + ":" + std::to_string(truncated.truncated_line));
  EXPECT_THAT(all.back().message, HasSubstr("truncated dump: "));
  YAML::Node doc = YAML::Load(format_json(truncated));
  ASSERT_EQ(doc["diagnostics"].size(), all.size());
  EXPECT_EQ(doc["diagnostics"][all.size() - 1]["severity"].as<std::string>(), "warning");
  EXPECT_EQ(doc["diagnostics"][all.size() - 1]["where"].as<std::string>(), all.back().where);
  // The notes keep their old form too (until the next schema version), with their lines.
  ASSERT_EQ(doc["warnings"].size(), truncated.diagnostics.size());

  Analysis unscheduled = analyze_file(fixture_path("xla_bench_hlo_llama31_405b_bf16_16x8.hlo.txt"));
  std::vector<Diagnostic> notes_then_warning = diagnostics_of(unscheduled);
  ASSERT_FALSE(notes_then_warning.empty());
  EXPECT_EQ(notes_then_warning.front().severity, Severity::kNote);
  EXPECT_EQ(notes_then_warning.back(),
            (Diagnostic{Severity::kWarning, unscheduled.file,
                        "the module is not scheduled; windows are indicative"}));
  YAML::Node unscheduled_doc = YAML::Load(format_json(unscheduled));
  ASSERT_GT(unscheduled_doc["warnings"].size(), 0u);
  EXPECT_EQ(unscheduled_doc["warnings"][0]["message"].as<std::string>(),
            unscheduled.diagnostics[0].message);
}

TEST(HloReport, JsonEscapesStringsAndInvalidUtf8) {
  std::string text = read_fixture("handwritten_multiline.hlo.txt");
  std::size_t at = text.find("jit(step)/layer");
  text.replace(at, 3, "\xff\xfe\x01");
  Analysis a = analyze_text(text, "odd\"name");
  std::string json = format_json(a);
  EXPECT_THAT(json, HasSubstr("\"file\": \"odd\\\"name\""));
  EXPECT_THAT(json, HasSubstr("\\ufffd\\ufffd\\u0001(step)/layer[0]/\\\"gather\\\" (x)"));
  YAML::Node doc = YAML::Load(json);
  EXPECT_EQ(doc["collectives"].size(), 2u);
}

TEST(HloReport, CompareShowsDeltasByKind) {
  Analysis a =
      analyze_file(fixture_path("latency_hiding_scheduler__AllGatherAsyncBalance.hlo.txt"));
  Analysis b = analyze_file(fixture_path("handwritten_async_all_to_all.hlo.txt"));
  std::string text = format_compare_text(a, b);
  EXPECT_THAT(text, HasSubstr("collectives exposed bytes"));
  EXPECT_THAT(text, HasSubstr("all-gather"));
  EXPECT_THAT(text, HasSubstr("all-to-all"));
  EXPECT_THAT(text, HasSubstr("-4.0 MiB"));  // 8 MiB exposed in A, 4 MiB in B
  YAML::Node doc = YAML::Load(format_compare_json(a, b));
  EXPECT_EQ(doc["schema"].as<std::string>(), "rtb.hlo-overlap-compare/1");
  EXPECT_EQ(doc["delta"]["total_collectives"]["exposed_bytes"].as<std::int64_t>(), -(4LL << 20));
  EXPECT_EQ(doc["delta"]["by_kind"]["all-gather"]["instances"].as<int>(), -2);
  EXPECT_EQ(doc["a"]["module"].as<std::string>(), "module");
}

// A/B of a schedule change: B is the all-to-all fixture with %dot.1 scheduled before the first
// async-start instead of inside its window. A: pair 1 hides %dot.1 (overlapped), pair 2 hides
// only a bitcast (exposed), 4 MiB each (bf16[4,1024,512] = 4*1024*512*2 bytes). B: both exposed.
TEST(HloReport, CompareDifferencesNameTheKindsThatChanged) {
  const std::string text = read_fixture("handwritten_async_all_to_all.hlo.txt");
  const std::string dot_line =
      "  %dot.1 = f32[256,256]{1,0} dot(%p1, %p1), lhs_contracting_dims={1}, "
      "rhs_contracting_dims={0}\n";
  std::string moved = text;
  std::size_t at = moved.find(dot_line);
  ASSERT_NE(at, std::string::npos);
  moved.erase(at, dot_line.size());
  moved.insert(moved.find("  %a2a-start ="), dot_line);
  Analysis a = analyze_text(text, "a.txt");
  Analysis b = analyze_text(moved, "b.txt");
  EXPECT_THAT(compare_differences(a, b),
              ElementsAre("all-to-all: overlapped 1 -> 0, exposed 1 -> 2, exposed bytes 4.0 MiB "
                          "-> 8.0 MiB"));
  EXPECT_THAT(format_compare_text(a, b), HasSubstr("\ndifferent: 1 kind differs\n  all-to-all: "));
  YAML::Node doc = YAML::Load(format_compare_json(a, b));
  EXPECT_FALSE(doc["same"].as<bool>());
  ASSERT_EQ(doc["differences"].size(), 1u);
  EXPECT_EQ(doc["delta"]["by_kind"]["all-to-all"]["exposed_bytes"].as<std::int64_t>(), 4 << 20);

  // Renaming every instruction (a recompile) changes nothing that counts.
  std::string renamed = text;
  for (std::size_t i = renamed.find("a2a-"); i != std::string::npos; i = renamed.find("a2a-", i)) {
    renamed.replace(i, 4, "x2x-");
  }
  Analysis c = analyze_text(renamed, "c.txt");
  EXPECT_TRUE(compare_differences(a, c).empty());
  EXPECT_THAT(format_compare_text(a, c), HasSubstr("\nsame: no per-kind total differs\n"));
  EXPECT_TRUE(YAML::Load(format_compare_json(a, c))["same"].as<bool>());
}

// A kind present on one side only is a difference and says so.
TEST(HloReport, CompareDifferencesOfKindsOnOneSide) {
  Analysis a =
      analyze_file(fixture_path("latency_hiding_scheduler__AllGatherAsyncBalance.hlo.txt"));
  Analysis b = analyze_file(fixture_path("handwritten_async_all_to_all.hlo.txt"));
  // A: 2 all-gather pairs of f32[2,8,256,256] (2*8*256*256*4 = 4 MiB each), no compute in either
  // window (each done follows its start); B: the two all-to-all pairs above.
  EXPECT_THAT(compare_differences(a, b),
              ElementsAre("all-gather: entries 2 -> 0, executions 2 -> 0, bytes 8.0 MiB -> 0 B, "
                          "exposed 2 -> 0, exposed bytes 8.0 MiB -> 0 B (only in A)",
                          "all-to-all: entries 0 -> 2, executions 0 -> 2, bytes 0 B -> 8.0 MiB, "
                          "overlapped 0 -> 1, exposed 0 -> 1, exposed bytes 0 B -> 4.0 MiB "
                          "(only in B)"));
  EXPECT_TRUE(compare_differences(a, a).empty());
}

TEST(HloReport, SvgDrawsTheBusiestComputation) {
  Options options;
  options.keep_schedule = true;
  Analysis a = analyze_file(fixture_path("handwritten_while_trip_counts.hlo.txt"), options);
  ASSERT_TRUE(a.schedule.has_value());
  EXPECT_EQ(a.schedule->computation, "main");
  EXPECT_EQ(a.schedule->instructions.size(), 15u);
  EXPECT_EQ(a.schedule->windows.size(), 3u);
  const ScheduledInstruction& outer = a.schedule->instructions[4];
  EXPECT_EQ(outer.name, "outer");
  EXPECT_TRUE(outer.compute);  // resolved through the loop bodies
  std::string svg = render_svg(a);
  EXPECT_THAT(svg, HasSubstr("<svg "));
  EXPECT_THAT(svg, HasSubstr("%main"));
  EXPECT_THAT(svg, HasSubstr("all-gather %ag-start -&gt; %ag-done: overlapped"));
  EXPECT_THAT(svg, HasSubstr("#4 %outer (while)"));
  Analysis without = analyze_file(fixture_path("handwritten_while_trip_counts.hlo.txt"));
  EXPECT_THROW(render_svg(without), Error);
}

TEST(HloReport, SvgStaysReadableForThousandsOfInstructions) {
  // A generated computation of 3000 instructions with 200 windows.
  std::string text =
      "HloModule big, is_scheduled=true\n\n%f (x: f32[8]) -> f32[8] {\n"
      "  ROOT %x = f32[8]{0} parameter(0)\n}\n\nENTRY %main (p: f32[8]) -> f32[8] {\n"
      "  %p = f32[8]{0} parameter(0)\n";
  int n = 1;
  for (int w = 0; w < 200; ++w) {
    text += "  %s" + std::to_string(w) + " = (f32[8]{0}, f32[32]{0}) all-gather-start(%p)\n";
    for (int k = 0; k < 13; ++k) {
      text += "  %i" + std::to_string(n++) +
              (k % 4 == 0 ? " = f32[8]{0} fusion(%p), calls=%f\n" : " = f32[8]{0} negate(%p)\n");
    }
    text +=
        "  %d" + std::to_string(w) + " = f32[32]{0} all-gather-done(%s" + std::to_string(w) + ")\n";
  }
  text += "  ROOT %r = f32[8]{0} negate(%p)\n}\n";
  Options options;
  options.keep_schedule = true;
  Analysis a = analyze_text(text, "big", options);
  ASSERT_TRUE(a.schedule.has_value());
  EXPECT_EQ(a.schedule->instructions.size(), 3002u);
  std::string svg = render_svg(a);
  EXPECT_LT(svg.size(), 2u << 20);                // a few hundred KB, not tens of MB
  EXPECT_THAT(svg, HasSubstr("width=\"1360\""));  // 400 instructions per row, 3 units each
}

}  // namespace
}  // namespace rtb::hlo
