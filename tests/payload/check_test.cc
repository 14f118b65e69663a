#include "rtb/payload/check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "payload/payload_test_util.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/base/outcome.h"
#include "rtb/payload/builder.h"
#include "rtb/payload/load.h"
#include "rtb/payload/report.h"
#include "test_util.h"

namespace rtb::payload {
namespace {

// Rows of 256 tokens, 200 real in 2 segments; 3 layers, top-2 of 8 experts.
PayloadOptions options() {
  PayloadOptions o = test::payload_options(/*rows=*/3, /*tokens=*/256, /*topk=*/2,
                                           /*experts=*/8, {1.0, 2.0, 3.0},
                                           /*real_len=*/200, /*segments=*/2);
  o.vocab = 500;
  o.seed = 3;
  return o;
}

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override { payload_ = build_payload(options()); }

  VerifyReport run(std::vector<ArrayInfo>* arrays_override = nullptr) {
    VerifyOptions v;
    v.experts = 8;
    v.vocab = 500;
    v.targets = targets_.empty() ? payload_.targets : targets_;
    v.max_examples = 3;
    if (arrays_override == nullptr) return verify_payload(payload_, v);
    PayloadView view = view_payload(payload_);
    *arrays_override = view.arrays;
    mutate_arrays_(*arrays_override);
    return verify_payload(*view.source, *arrays_override, v);
  }

  std::size_t cell(std::int64_t row, std::int64_t token) const {
    return static_cast<std::size_t>(row * 256 + token);
  }
  std::int16_t* experts(std::int64_t row, std::int64_t token, int layer) {
    return payload_.routed_experts.data() + (cell(row, token) * 3 + layer) * 2;
  }

  // Expects exactly `check` to fail, and its first example to contain `text`.
  void expect_only_failure(const VerifyReport& report, const std::string& check,
                           const std::string& text) {
    EXPECT_FALSE(report.passed());
    for (const CheckResult& c : report.checks) {
      if (c.name == check) {
        EXPECT_GT(c.failures, 0) << check;
        ASSERT_FALSE(c.examples.empty());
        EXPECT_THAT(c.examples[0], HasSubstr(text));
      } else {
        EXPECT_EQ(c.failures, 0) << c.name << ": " << (c.examples.empty() ? "" : c.examples[0]);
      }
    }
  }

  Payload payload_;
  std::vector<double> targets_;
  std::function<void(std::vector<ArrayInfo>&)> mutate_arrays_;
};

TEST_F(VerifyTest, ABuiltPayloadPassesAndReportsItsShape) {
  VerifyReport report = run();
  EXPECT_TRUE(report.passed());
  EXPECT_EQ(report.rows, 3);
  EXPECT_EQ(report.tokens, 256);
  EXPECT_EQ(report.layers, 3);
  EXPECT_EQ(report.topk, 2);
  EXPECT_TRUE(report.has_old_logps);
  EXPECT_EQ(report.real_tokens, 600);
  EXPECT_EQ(report.min_real_len, 200);
  ASSERT_EQ(report.per_layer.size(), 3u);
  EXPECT_NEAR(report.per_layer[2].max_over_mean, 3.0, 0.03);
  EXPECT_EQ(report.checks.size(), 12u);
}

// What `check-payload build` checks its payload with: the options it was built with, its
// targets, the payload_settings it will record, and its thread count (--threads used to reach
// the build only: the check ran on every core whatever it said).
TEST(BuildChecks, CarryTheBuildsOptionsSettingsAndThreads) {
  PayloadOptions o = options();
  o.threads = 3;
  o.max_prompt_length = 20;
  Payload p = build_payload(o, RoutingStorage::kOnDemand);
  VerifyOptions checks = checks_of_build(p);
  EXPECT_EQ(checks.threads, 3);
  EXPECT_EQ(checks.experts, 8);
  EXPECT_EQ(checks.vocab, 500);
  EXPECT_EQ(checks.targets, p.targets);
  EXPECT_EQ(checks.pad_position, p.options.pad_position);
  EXPECT_EQ(checks.pad_align, p.options.pad_align);
  EXPECT_EQ(checks.max_prompt_length, std::optional<std::int64_t>(20));
  ASSERT_TRUE(checks.recorded.has_value());
  EXPECT_EQ(checks.recorded->rows, 3);
  VerifyReport report = verify_payload(p, checks);
  EXPECT_TRUE(report.passed());
}

// The verdict verify and build return: kPass when every check passes (a skipped one too), kFail
// when one fails. Input that cannot be judged throws instead of giving a report.
TEST_F(VerifyTest, OutcomeIsPassOrFail) {
  EXPECT_EQ(run().outcome(), Outcome::kPass);
  VerifyOptions no_targets;
  no_targets.experts = 8;
  no_targets.vocab = 500;
  VerifyReport skipped = verify_payload(payload_, no_targets);
  ASSERT_TRUE(skipped.check("routing_targets")->skipped);
  EXPECT_EQ(skipped.outcome(), Outcome::kPass);
  payload_.completion_ids[cell(0, 0)] = 0;
  EXPECT_EQ(run().outcome(), Outcome::kFail);
  no_targets.pad_align = 100;  // options that cannot be checked against
  EXPECT_THROW(verify_payload(payload_, no_targets), Error);
}

TEST_F(VerifyTest, RepeatedExpertInATokenIsNamed) {
  std::int16_t* e = experts(1, 17, 2);
  e[1] = e[0];
  VerifyReport report = run();
  const CheckResult* routing = report.check("routing");
  ASSERT_NE(routing, nullptr);
  EXPECT_EQ(routing->failures, 1);
  EXPECT_THAT(routing->examples[0], HasSubstr("routed_experts[row 1, token 17, layer 2]"));
  EXPECT_THAT(routing->examples[0], HasSubstr("appears twice"));
}

TEST_F(VerifyTest, ExpertOutOfRangeIsNamed) {
  experts(0, 3, 1)[0] = 8;
  VerifyReport report = run();
  EXPECT_THAT(report.check("routing")->examples.at(0),
              HasSubstr("routed_experts[row 0, token 3, layer 1] = [8, "));
  EXPECT_THAT(report.check("routing")->examples.at(0), HasSubstr("not an expert in [0, 8)"));
}

TEST_F(VerifyTest, RoutingOnPaddingMustBeMinusOne) {
  experts(2, 250, 0)[1] = 4;
  expect_only_failure(run(), "padding", "routed_experts[row 2, token 250, layer 0] = [-1, 4]");
}

TEST_F(VerifyTest, NanAdvantageIsACheckFailure) {
  payload_.advantages[cell(0, 0)] = std::numeric_limits<float>::quiet_NaN();
  VerifyReport report = run();
  EXPECT_THAT(report.check("advantages")->examples.at(0),
              HasSubstr("advantages[row 0, token 0] = nan, expected a finite value"));
  payload_.advantages[cell(0, 0)] = payload_.advantages[cell(0, 1)];
  payload_.advantages[cell(0, 5)] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(run().check("advantages")->examples.at(0),
              HasSubstr("advantages[row 0, token 5] = nan but segment 1 starts with"));
}

TEST_F(VerifyTest, MaskTokenIdsAndLogps) {
  payload_.completion_mask[cell(1, 10)] = 0.5f;
  expect_only_failure(run(), "mask", "completion_mask[row 1, token 10] = 0.5, expected 1");
  payload_.completion_mask[cell(1, 10)] = 1.0f;
  payload_.completion_ids[cell(2, 0)] = 500;
  expect_only_failure(run(), "token_ids", "completion_ids[row 2, token 0] = 500");
  payload_.completion_ids[cell(2, 0)] = 1;
  payload_.old_per_token_logps[cell(0, 199)] = 0.25f;
  expect_only_failure(run(), "old_logps", "old_per_token_logps[row 0, token 199] = 0.25");
}

TEST_F(VerifyTest, SegmentPositionsAndAlignment) {
  payload_.segment_positions[cell(0, 1)] = 7;
  expect_only_failure(run(), "segments", "segment_positions[row 0, token 1] = 7, expected 1");
  payload_.segment_positions[cell(0, 1)] = 1;
  // Move row 1's second segment one token earlier: off the 64 grid.
  RowLayout layout = row_layout(payload_.options, 1);
  std::int64_t cut = layout.segment_starts[1];
  payload_.segment_ids[cell(1, cut - 1)] = 2;
  payload_.advantages[cell(1, cut - 1)] = payload_.advantages[cell(1, cut)];
  for (std::int64_t t = cut - 1; t < 200; ++t) {
    payload_.segment_positions[cell(1, t)] = static_cast<std::int32_t>(t - cut + 1);
  }
  expect_only_failure(run(), "segments", "not a multiple of 64");
}

TEST_F(VerifyTest, LayoutRowsAfterPaddingRowsAndOddStarts) {
  // Row 0 becomes a padding row while rows 1 and 2 stay real.
  for (std::int64_t t = 0; t < 256; ++t) {
    payload_.completion_ids[cell(0, t)] = 0;
    payload_.completion_mask[cell(0, t)] = 0;
    payload_.segment_ids[cell(0, t)] = 0;
    payload_.segment_positions[cell(0, t)] = 0;
    payload_.advantages[cell(0, t)] = 0;
    payload_.old_per_token_logps[cell(0, t)] = 0;
    for (int layer = 0; layer < 3; ++layer) experts(0, t, layer)[0] = experts(0, t, layer)[1] = -1;
  }
  targets_ = {1.0, 2.0, 3.0};
  VerifyReport report = run();
  EXPECT_THAT(report.check("layout")->examples.at(0),
              HasSubstr("row 1: has 200 real tokens after row 0 which has none"));
}

TEST_F(VerifyTest, TargetsAreCheckedPerLayer) {
  targets_ = {1.0, 2.5, 3.0};
  expect_only_failure(run(), "routing_targets", "layer 1: max/mean 2.0000");
  targets_ = {1.0, 2.0};
  expect_only_failure(run(), "routing_targets", "the target table has 2 layers");
}

TEST_F(VerifyTest, MissingFieldWrongDtypeAndWrongShape) {
  std::vector<ArrayInfo> arrays;
  mutate_arrays_ = [](std::vector<ArrayInfo>& a) {
    a.erase(std::remove_if(a.begin(), a.end(),
                           [](const ArrayInfo& i) { return i.name == "prompt_mask"; }),
            a.end());
  };
  expect_only_failure(run(&arrays), "fields", "prompt_mask: missing");
  mutate_arrays_ = [](std::vector<ArrayInfo>& a) {
    for (ArrayInfo& i : a) {
      if (i.name == "segment_positions") i.dtype = DType::kInt64;
    }
  };
  expect_only_failure(run(&arrays), "dtypes", "segment_positions: int64, expected int32");
  mutate_arrays_ = [](std::vector<ArrayInfo>& a) {
    for (ArrayInfo& i : a) {
      if (i.name == "prompt_ids") i.shape = {3, 1};
    }
  };
  expect_only_failure(run(&arrays), "shapes", "prompt_ids: shape [3, 1], expected [3, 0]");
}

TEST_F(VerifyTest, CountsEveryFailureButListsAFew) {
  for (std::int64_t t = 0; t < 200; ++t) payload_.completion_ids[cell(0, t)] = 0;
  VerifyReport report = run();
  EXPECT_EQ(report.check("token_ids")->failures, 200);
  EXPECT_EQ(report.check("token_ids")->examples.size(), 3u);
}

TEST_F(VerifyTest, WithoutSegmentsOrMaskContentChecksAreSkipped) {
  std::vector<ArrayInfo> arrays;
  mutate_arrays_ = [](std::vector<ArrayInfo>& a) {
    a.erase(std::remove_if(a.begin(), a.end(),
                           [](const ArrayInfo& i) {
                             return i.name == "segment_ids" || i.name == "completion_mask";
                           }),
            a.end());
  };
  VerifyReport report = run(&arrays);
  EXPECT_EQ(report.check("fields")->failures, 2);
  EXPECT_TRUE(report.check("routing")->skipped);
  EXPECT_TRUE(report.check("layout")->skipped);
}

// A real npz someone else wrote (testdata/SOURCES.md): eleven arrays, no routed_experts. It is no
// bench payload, so verify runs no check on it (every one would fail or pass vacuously) and says
// what it is instead: bad input (issue 28, item 4).
TEST(VerifyInput, AnNpzWithoutRoutedExpertsIsNoBenchPayload) {
  std::string path = test::testdata("npz_tahoma_test.npz");
  FileSource source(path, FileAccess::kRandom);
  std::vector<ArrayInfo> arrays = list_arrays(source);
  ASSERT_EQ(arrays.size(), 11u);
  Error error = test::error_of([&] { verify_payload(source, arrays, VerifyOptions{}); });
  EXPECT_EQ(error.file(), path);
  EXPECT_EQ(error.message(),
            "no member 'routed_experts' (members: int32_vec, float32_vec, int64_vec, "
            "float64_vec, int32_mat, float32_mat, int64_mat, float64_mat, int32_tensor, "
            "float32_tensor, meta.yml); not a bench payload (docs/payload-spec.md)");
}

// Layout v2 rules verify can tell from the arrays alone (no max_prompt_length known).
class PromptVerifyTest : public VerifyTest {
 protected:
  void SetUp() override {
    PayloadOptions o = options();
    o.max_prompt_length = 40;
    payload_ = build_payload(o);
    layout_ = row_layout(payload_.options, 0);
  }
  std::int64_t prompt() const { return layout_.prompt_lengths[0]; }  // row 0, segment 1
  RowLayout layout_;
};

TEST_F(PromptVerifyTest, APayloadWithPromptsPasses) {
  ASSERT_GE(prompt(), 1);
  VerifyReport report = run();
  EXPECT_TRUE(report.passed());
  EXPECT_EQ(report.real_tokens, 600);  // prompts are real tokens
}

TEST_F(PromptVerifyTest, MaskMustBePromptZerosThenCompletionOnes) {
  std::size_t hole = cell(0, prompt() + 3);  // a hole in the completion, values cleared
  payload_.completion_mask[hole] = 0.0f;
  payload_.advantages[hole] = 0.0f;
  payload_.old_per_token_logps[hole] = 0.0f;
  expect_only_failure(run(), "mask", "= 0 after 3 completion tokens of segment 1");
}

TEST_F(PromptVerifyTest, ASegmentNeedsACompletionToken) {
  RowLayout layout = row_layout(payload_.options, 1);
  std::int64_t end = layout.segment_starts[1];
  for (std::int64_t t = 0; t < end; ++t) {
    payload_.completion_mask[cell(1, t)] = 0.0f;
    payload_.advantages[cell(1, t)] = 0.0f;
    payload_.old_per_token_logps[cell(1, t)] = 0.0f;
  }
  expect_only_failure(run(), "mask", "segment 1 has no completion token");
}

TEST_F(PromptVerifyTest, PromptTokensCarryNoAdvantageOrLogProb) {
  payload_.advantages[cell(0, 0)] = 0.5f;
  expect_only_failure(run(), "advantages", "advantages[row 0, token 0] = 0.5 on a prompt token");
  payload_.advantages[cell(0, 0)] = 0.0f;
  payload_.old_per_token_logps[cell(0, 0)] = -3.0f;
  expect_only_failure(run(), "old_logps",
                      "old_per_token_logps[row 0, token 0] = -3 on a prompt token");
}

TEST_F(PromptVerifyTest, MaskOnPaddingIsZero) {
  payload_.completion_mask[cell(2, 230)] = 1.0f;
  expect_only_failure(run(), "mask", "completion_mask[row 2, token 230] = 1 on padding");
}

// Options resolve against the file's record: an option wins, else the record, else unknown.
TEST(ResolveVerifyOptions, OptionsOverrideTheRecord) {
  PayloadSettings recorded;
  recorded.experts = 16;
  recorded.vocab = 1000;
  recorded.pad_position = PadPosition::kStart;
  recorded.pad_align = 512;
  recorded.advantages = AdvantageMode::kZero;
  recorded.max_prompt_length = 64;
  recorded.routing_targets = std::vector<double>{1.5, 3.0};  // scaled by 0.5 from 2 and 5
  recorded.routing_scale = 0.5;
  recorded.routing_targets_source = "t.txt";
  std::string source;
  VerifyOptions o = resolve_verify_options({}, recorded, {}, &source);
  EXPECT_EQ(o.experts, 16);
  EXPECT_EQ(o.vocab, 1000);
  EXPECT_EQ(o.pad_position, PadPosition::kStart);
  EXPECT_EQ(o.pad_align, 512);
  EXPECT_EQ(o.advantages, AdvantageMode::kZero);
  EXPECT_EQ(o.max_prompt_length, 64);
  EXPECT_EQ(o.targets, (std::vector<double>{1.5, 3.0}));
  EXPECT_EQ(source, "t.txt (recorded in payload_settings)");
  for (const SettingSource& s : o.settings) EXPECT_EQ(s.from, "file") << s.name;

  VerifyFlags flags;
  flags.experts = 32;
  flags.pad_align = 64;
  flags.routing_scale = 1.0;  // the recorded table as given: 2 and 5
  o = resolve_verify_options(flags, recorded, {}, &source);
  EXPECT_EQ(o.experts, 32);
  EXPECT_EQ(o.pad_align, 64);
  EXPECT_EQ(o.pad_position, PadPosition::kStart);
  EXPECT_EQ(o.targets, (std::vector<double>{2.0, 5.0}));
  auto from = [&o](const std::string& name) {
    for (const SettingSource& s : o.settings) {
      if (s.name == name) return s.from;
    }
    return std::string("absent");
  };
  EXPECT_EQ(from("experts"), "option");
  EXPECT_EQ(from("pad_align"), "option");
  EXPECT_EQ(from("vocab"), "file");

  // No record (an older file): experts inferred later, no targets, no pad_align required.
  o = resolve_verify_options({}, std::nullopt, {}, &source);
  EXPECT_EQ(o.experts, 0);
  EXPECT_TRUE(o.targets.empty());
  EXPECT_EQ(source, "");
  EXPECT_FALSE(o.pad_align.has_value());
  EXPECT_FALSE(o.pad_position.has_value());
}

// Without the experts count, verify takes the largest expert id + 1 and says so.
TEST_F(VerifyTest, UnknownExpertsAreInferredFromTheRouting) {
  VerifyOptions v;
  v.vocab = 500;
  VerifyReport report = verify_payload(payload_, v);
  EXPECT_TRUE(report.passed());
  EXPECT_EQ(report.experts, 8);
  ASSERT_FALSE(report.diagnostics.empty());
  EXPECT_EQ(report.diagnostics.back().severity, Severity::kNote);
  EXPECT_THAT(report.diagnostics.back().message,
              HasSubstr("inferred from the largest expert id + 1"));
  EXPECT_TRUE(report.check("routing_targets")->skipped);
}

// The arrays must agree with what payload_settings records.
TEST_F(VerifyTest, ArraysDisagreeingWithTheRecordFail) {
  PayloadSettings recorded = parse_payload_settings(payload_.settings_json, "p");
  recorded.real_len = 201;
  recorded.segments = {3};
  VerifyOptions v;
  v.experts = 8;
  v.vocab = 500;
  v.recorded = recorded;
  VerifyReport report = verify_payload(payload_, v);
  EXPECT_THAT(report.check("layout")->examples.at(0),
              HasSubstr("200 real tokens, payload_settings records real_len 201"));
  EXPECT_THAT(report.check("segments")->examples.at(0),
              HasSubstr("2 segments, payload_settings records 3"));
  recorded = parse_payload_settings(payload_.settings_json, "p");
  recorded.rows = 4;
  recorded.old_logps = false;
  v.recorded = recorded;
  report = verify_payload(payload_, v);
  EXPECT_THAT(report.check("shapes")->examples.at(0),
              HasSubstr("payload_settings records rows 4, the arrays have 3"));
  EXPECT_THAT(report.check("fields")->examples.at(0), HasSubstr("records old_logps false"));
}

// --- The row checks run by several threads, with the SIMD or the portable kernels, on a source or
// in place: always the same report as one thread with the portable kernels reading the source.

// Breaks the payload of VerifyTest in many places across rows, so that checks fail in several
// rows and more often than the examples listed (the merge keeps the first ones in row order).
void break_in_many_places(Payload& p) {
  auto at = [&p](std::int64_t row, std::int64_t token, int layer) {
    return p.routed_experts.data() + ((row * 256 + token) * 3 + layer) * 2;
  };
  at(2, 250, 0)[1] = 4;                 // routing on padding (padding), row 2
  p.completion_ids[1 * 256 + 240] = 9;  // a token id on padding (padding), row 1
  at(0, 230, 2)[0] = 0;                 // routing on padding, row 0 (listed before row 1's)
  at(0, 5, 2)[1] = at(0, 5, 2)[0];      // a repeat in the last layer, after two counted layers
  at(1, 9, 0)[0] = 8;                   // out of range in the first layer
  at(1, 9, 1)[1] = at(1, 9, 1)[0];      // and a repeat in the next layer of the same token
  at(2, 17, 1)[0] = -1;                 // -1 on a real token
  for (std::int64_t row = 0; row < 3; ++row) {
    for (std::int64_t t = 100; t < 103; ++t) p.completion_ids[row * 256 + t] = 0;  // token_ids
  }
}

std::string report_json(const VerifyReport& report) {
  return format_verify_json("p.npz", report, "targets");
}

TEST_F(VerifyTest, ThreadsKernelsAndSourcesGiveTheSameReport) {
  break_in_many_places(payload_);
  VerifyOptions v;
  v.experts = 8;
  v.vocab = 500;
  v.targets = payload_.targets;
  v.max_examples = 2;
  v.threads = 1;
  v.portable = true;
  v.repeat_entries = 0;
  PayloadView view = view_payload(payload_);
  const VerifyReport reference = verify_payload(*view.source, view.arrays, v);
  ASSERT_FALSE(reference.passed());
  // Failures of one check come in row order, whichever thread found them.
  const CheckResult* padding = reference.check("padding");
  EXPECT_EQ(padding->failures, 3);
  ASSERT_EQ(padding->examples.size(), 2u);
  EXPECT_THAT(padding->examples[0], HasSubstr("routed_experts[row 0, token 230, layer 2]"));
  EXPECT_THAT(padding->examples[1], HasSubstr("completion_ids[row 1, token 240] = 9"));
  EXPECT_EQ(reference.check("token_ids")->failures, 9);
  EXPECT_EQ(reference.check("routing")->failures, 4);
  for (int threads : {1, 2, 3, 8}) {
    for (bool portable : {false, true}) {
      for (int repeat_entries : {0, 1, 5, -1}) {
        v.threads = threads;
        v.portable = portable;
        v.repeat_entries = repeat_entries;
        SCOPED_TRACE(testing::Message() << threads << " threads, portable " << portable << ", "
                                        << repeat_entries << " repeat entries");
        EXPECT_EQ(report_json(verify_payload(payload_, v)), report_json(reference));
        EXPECT_EQ(report_json(verify_payload(*view.source, view.arrays, v)),
                  report_json(reference));
      }
    }
  }
}

// The builder's routing repeats tokens (a tile's columns are the last tile's plus one); counting
// a repeat once and adding it later gives the loads of counting every token, whether the table
// holds every token or keeps replacing them. A token that repeats a broken one is a failure of
// its own each time.
TEST(VerifyRepeats, RepeatedTokensGiveTheSameReportAsCountingEach) {
  PayloadOptions o = test::payload_options(/*rows=*/6, /*tokens=*/1024, /*topk=*/3,
                                           /*experts=*/16, {1.0, 2.0, 3.0, 5.0});
  o.threads = 1;
  Payload p = build_payload(o);
  // The same broken token (expert 2 twice in layer 1) at three places of rows 0 and 4.
  const std::int64_t per_token = 4 * 3;
  for (std::int64_t cell : {std::int64_t{5}, std::int64_t{600}, std::int64_t{4 * 1024 + 7}}) {
    std::int16_t* token = p.routed_experts.data() + cell * per_token;
    for (std::int64_t slot = 0; slot < per_token; ++slot) token[slot] = slot % 3 + 3 * (slot / 3);
    token[3] = token[4] = 2;
  }
  VerifyOptions v;
  v.vocab = o.vocab;
  v.targets = p.targets;
  // The model's 16 experts, and none given (every int16 id counted, the count inferred).
  for (int experts : {16, 0}) {
    v.experts = experts;
    v.threads = 1;
    v.repeat_entries = 0;
    const VerifyReport reference = verify_payload(p, v);
    EXPECT_EQ(reference.check("routing")->failures, 3);
    ASSERT_EQ(reference.per_layer.size(), 4u);
    EXPECT_EQ(reference.per_layer[0].tokens, p.real_tokens - 3);
    EXPECT_EQ(reference.experts, 16);
    for (int threads : {1, 2}) {
      for (int repeat_entries : {1, 2, 64, 4096, -1}) {
        v.threads = threads;
        v.repeat_entries = repeat_entries;
        SCOPED_TRACE(testing::Message() << experts << " experts, " << threads << " threads, "
                                        << repeat_entries << " entries");
        EXPECT_EQ(report_json(verify_payload(p, v)), report_json(reference));
      }
    }
  }
}

// Routing with (almost) no repeats: the threads give up looking for them after a trial and count
// every token, with the same report.
TEST(VerifyRepeats, RoutingWithoutRepeatsGivesTheSameReport) {
  PayloadOptions o = test::payload_options(/*rows=*/4, /*tokens=*/2048, /*topk=*/2,
                                           /*experts=*/8, {1.0, 1.0, 1.0});
  o.threads = 1;
  Payload p = build_payload(o);
  // Each real token its own routing: token t lists experts (d, d + 1 + e) of layer l from the
  // digits of t in base 56 (the 56 ordered pairs of distinct experts of 8).
  const std::int64_t per_token = 3 * 2;
  for (std::int64_t cell = 0; cell < 4 * 2048; ++cell) {
    if (p.segment_ids[static_cast<std::size_t>(cell)] == 0) continue;
    std::int16_t* token = p.routed_experts.data() + cell * per_token;
    std::int64_t digits = cell;
    for (int layer = 0; layer < 3; ++layer, digits /= 56) {
      const int pair = static_cast<int>(digits % 56), first = pair / 7, other = pair % 7;
      token[2 * layer] = static_cast<std::int16_t>(first);
      token[2 * layer + 1] = static_cast<std::int16_t>(other >= first ? other + 1 : other);
    }
  }
  VerifyOptions v;
  v.experts = 8;
  v.vocab = o.vocab;
  v.threads = 1;
  v.repeat_entries = 0;
  const VerifyReport reference = verify_payload(p, v);
  EXPECT_TRUE(reference.check("routing")->failures == 0);
  for (int repeat_entries : {3, -1}) {
    v.repeat_entries = repeat_entries;
    EXPECT_EQ(report_json(verify_payload(p, v)), report_json(reference)) << repeat_entries;
  }
}

// A token with any malformed layer counts in no layer's loads: the layers counted before a repeat
// was found are taken back.
TEST_F(VerifyTest, LoadsCountOnlyWellFormedTokens) {
  break_in_many_places(payload_);
  LoadCounter counter(3, 2, 8);
  for (std::int64_t row = 0; row < 3; ++row) {
    for (std::int64_t t = 0; t < 256; ++t) {
      if (payload_.segment_ids[cell(row, t)] == 0) continue;
      const std::int16_t* token = experts(row, t, 0);
      bool ok = true;
      for (int layer = 0; layer < 3; ++layer) {
        std::int16_t a = token[2 * layer], b = token[2 * layer + 1];
        ok = ok && a >= 0 && a < 8 && b >= 0 && b < 8 && a != b;
      }
      if (ok) counter.add_token(token);
    }
  }
  for (int threads : {1, 3}) {
    VerifyOptions v;
    v.experts = 8;
    v.vocab = 500;
    v.threads = threads;
    VerifyReport report = verify_payload(payload_, v);
    ASSERT_EQ(report.per_layer.size(), 3u);
    for (int layer = 0; layer < 3; ++layer) {
      LoadStats expected = summarize_loads(counter.loads(layer), counter.tokens(layer), 1, 2.75);
      EXPECT_EQ(report.per_layer[layer].tokens, expected.tokens) << layer;
      EXPECT_EQ(report.per_layer[layer].assignments, expected.assignments) << layer;
      EXPECT_EQ(report.per_layer[layer].max_load, expected.max_load) << layer;
      EXPECT_EQ(report.per_layer[layer].min_load, expected.min_load) << layer;
      EXPECT_EQ(report.per_layer[layer].hottest_expert, expected.hottest_expert) << layer;
    }
  }
}

// A source that cannot be read from `limit` on, saying where.
class BrokenSource final : public ByteSource {
 public:
  BrokenSource(const ByteSource& inner, std::uint64_t limit) : inner_(inner), limit_(limit) {}
  const std::string& name() const override { return inner_.name(); }
  std::uint64_t size() const override { return inner_.size(); }
  void read_at(std::uint64_t offset, std::span<std::byte> out) const override {
    if (offset + out.size() > limit_) fail_at(name(), 0, "unreadable at {}", offset);
    inner_.read_at(offset, out);
  }

 private:
  const ByteSource& inner_;
  std::uint64_t limit_;
};

// Rows that cannot be read: the error of the first of them, whichever thread met it first.
TEST_F(VerifyTest, AnUnreadableRowGivesTheErrorOfTheFirst) {
  PayloadView view = view_payload(payload_);
  const ArrayInfo* routed = find_array(view.arrays, "routed_experts");
  ASSERT_NE(routed, nullptr);
  // Row 1 of the routing and everything after it is unreadable.
  BrokenSource broken(*view.source, routed->data_offset + routed->data_bytes / 3 + 64);
  VerifyOptions v;
  v.experts = 8;
  v.vocab = 500;
  v.threads = 1;
  std::string expected = test::what_of([&] { verify_payload(broken, view.arrays, v); });
  EXPECT_THAT(expected, HasSubstr("unreadable at"));
  for (int threads : {2, 3}) {
    v.threads = threads;
    EXPECT_EQ(test::what_of([&] { verify_payload(broken, view.arrays, v); }), expected) << threads;
  }
}

TEST(CheckNames, DocsNameEveryCheck) {
  std::string docs = read_file(RTB_TESTDATA_DIR "/../docs/check-payload.md");
  std::vector<std::string_view> names = check_names();
  EXPECT_GE(names.size(), 12u);
  for (std::string_view name : names)
    EXPECT_NE(docs.find("`" + std::string(name) + "`"), std::string::npos) << name;
}

}  // namespace
}  // namespace rtb::payload
