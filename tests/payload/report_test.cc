#include "rtb/payload/report.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "payload/payload_test_util.h"
#include "rtb/payload/builder.h"
#include "rtb/payload/check.h"
#include "rtb/payload/tiles.h"
#include "test_util.h"

namespace rtb::payload {
namespace {

// One of the bench's rows at context 4.
TilesReport bench_tiles() {
  PayloadOptions layout;
  layout.rows = 1;
  layout.tokens = kBenchTokens;
  return count_layout_tiles(resolve_layout_options(layout, nullptr), test::bench_tile_settings());
}

TEST(PayloadReport, TilesTextAndJson) {
  TilesReport report = bench_tiles();
  std::string text = format_tiles_text("rows", report);
  EXPECT_THAT(text, HasSubstr("end    fwd        80      136      136      136      136\n"));
  EXPECT_THAT(text, HasSubstr("start  dkv       122      116      116      116      122\n"));
  EXPECT_THAT(text, HasSubstr("fwd 136 -> 125 (-8.1%), dkv 132 -> 122 (-7.6%)"));
  std::string json = format_tiles_json("a \"quoted\"\nname", report);
  EXPECT_THAT(json, HasSubstr("\"source\": \"a \\\"quoted\\\"\\nname\""));
  EXPECT_THAT(json, HasSubstr("\"end\": {\n    \"fwd\": [80, 136, 136, 136],"));
  EXPECT_THAT(json, HasSubstr("\"dkv\": [122, 116, 116, 116],"));
  EXPECT_THAT(json, HasSubstr("\"diagnostics\": []\n}"));
  EXPECT_EQ(json.back(), '\n');
  report.diagnostics = {{Severity::kWarning, "", "5 segments do not fit"}};
  EXPECT_THAT(format_tiles_json("rows", report),
              HasSubstr("{\"severity\": \"warning\", \"where\": null, \"message\": \"5 segments "
                        "do not fit\"}"));
  EXPECT_EQ(format_tiles_text("rows", report), text);  // stderr says it, not the table
}

Payload small_payload() {
  return build_payload(test::payload_options(/*rows=*/2, /*tokens=*/256, /*topk=*/2,
                                             /*experts=*/8, {1.0, 3.0}));
}

VerifyReport checks_of(const Payload& p, int ep) {
  VerifyOptions v;
  v.experts = 8;
  v.targets = p.targets;
  v.ep = ep;
  return verify_payload(p, v);
}

TEST(PayloadReport, BuildTextHasTheLayerTableAndChecks) {
  Payload p = small_payload();
  std::string text = format_build_text(p, checks_of(p, 2), "out.npz");
  EXPECT_THAT(text, HasSubstr("payload: 2 rows x 256 tokens, 2 layers, top-2 of 8 experts"));
  EXPECT_THAT(text, HasSubstr("written: out.npz ("));
  EXPECT_THAT(text, HasSubstr("ep2 max"));
  EXPECT_THAT(text, HasSubstr("    1    3.0000    3.0"));
  EXPECT_THAT(
      text, HasSubstr(fmt::format("checks: {} passed, 0 failed, 0 skipped", check_names().size())));
  std::string json = format_build_json(p, checks_of(p, 2), "");
  EXPECT_THAT(json, HasSubstr("\"output\": null,"));
  EXPECT_THAT(json, HasSubstr("\"targets\": [1, 3],"));
  EXPECT_THAT(json, HasSubstr("\"passed\": true\n}"));
}

TEST(PayloadReport, VerifyTextListsFailuresAndCountsTheRest) {
  Payload p = small_payload();
  for (std::int64_t t = 0; t < 10; ++t) p.completion_ids[t] = 0;
  VerifyOptions v;
  v.experts = 8;
  v.max_examples = 2;
  VerifyReport report = verify_payload(p, v);
  std::string text = format_verify_text("f.npz", report, "");
  EXPECT_THAT(text, HasSubstr("targets: none checked"));
  EXPECT_THAT(text, HasSubstr("token_ids        FAILED (10 failures)"));
  EXPECT_THAT(text, HasSubstr("      completion_ids[row 0, token 1] = 0"));
  EXPECT_THAT(text, HasSubstr("      ... and 8 more"));
  EXPECT_THAT(text, HasSubstr("routing_targets  skipped: no target table given"));
  std::string json = format_verify_json("f.npz", report, "");
  EXPECT_THAT(json, HasSubstr("\"targets_source\": null"));
  EXPECT_THAT(json, HasSubstr("\"passed\": false"));
  // Notes: "note:" lines in the text; `notes` (messages) and `diagnostics` in the JSON.
  report.diagnostics = {{Severity::kNote, "", "field 'x' is not part of the spec"}};
  EXPECT_THAT(format_verify_text("f.npz", report, ""),
              HasSubstr("note: field 'x' is not part of the spec\n"));
  json = format_verify_json("f.npz", report, "");
  EXPECT_THAT(json, HasSubstr("\"notes\": [\n    \"field 'x' is not part of the spec\"\n  ],"));
  EXPECT_THAT(json,
              HasSubstr("{\"severity\": \"note\", \"where\": null, \"message\": \"field 'x'"));
}

TEST(PayloadReport, SvgDrawsEveryLayerAndTheBuffer) {
  Payload p = small_payload();
  VerifyReport report = checks_of(p, 2);
  std::string svg = routing_load_svg("t <&>", report.per_layer, p.targets);
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("t &lt;&amp;&gt;"));
  EXPECT_THAT(svg, HasSubstr("layer 1: target 3.0000"));
  EXPECT_THAT(svg, HasSubstr("layer 1, rank 1:"));
  EXPECT_THAT(svg, HasSubstr("ragged buffer: 2.75 x mean rank load"));
  EXPECT_THAT(routing_load_svg("none", {}, {}), HasSubstr("no layers"));
  EXPECT_THAT(routing_load_svg("measured", report.per_layer, {}), Not(HasSubstr("target ")));
}

}  // namespace
}  // namespace rtb::payload
