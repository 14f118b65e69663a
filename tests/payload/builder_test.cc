#include "rtb/payload/builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include "payload/payload_test_util.h"
#include "rtb/base/error.h"
#include "rtb/base/io.h"
#include "rtb/payload/check.h"
#include "rtb/payload/load.h"
#include "rtb/payload/routing.h"
#include "rtb/payload/settings.h"
#include "test_util.h"

namespace rtb::payload {
namespace {

// Rows of 512 tokens, 400 real in 3 segments; 4 layers, top-2 of 16 experts.
PayloadOptions small_options() {
  PayloadOptions o = test::payload_options(/*rows=*/3, /*tokens=*/512, /*topk=*/2,
                                           /*experts=*/16, {1.0, 1.5, 3.0, 8.0},
                                           /*real_len=*/400, /*segments=*/3);
  o.vocab = 1000;
  o.seed = 11;
  o.threads = 2;
  return o;
}

std::size_t cell(const PayloadOptions& o, std::int64_t row, std::int64_t token) {
  return static_cast<std::size_t>(row * o.tokens + token);
}

const std::int16_t* experts_at(const Payload& p, std::int64_t row, std::int64_t token, int layer) {
  const PayloadOptions& o = p.options;
  return p.routed_experts.data() +
         (cell(o, row, token) * o.layers + static_cast<std::size_t>(layer)) * o.topk;
}

VerifyReport verify(const Payload& p, VerifyOptions v = {}) {
  v.experts = p.options.experts;
  v.vocab = p.options.vocab;
  if (v.targets.empty()) v.targets = p.targets;
  return verify_payload(p, v);
}

std::string failures(const VerifyReport& report) {
  std::string out;
  for (const CheckResult& c : report.checks) {
    for (const std::string& e : c.examples) out += c.name + ": " + e + "\n";
  }
  return out;
}

TEST(PayloadOptions, DefaultsAndChecks) {
  EXPECT_EQ(default_real_length(65536), 60948);
  EXPECT_EQ(default_real_length(1), 1);
  PayloadOptions o = small_options();
  o.real_len = -1;
  o.final_rows = -1;
  PayloadOptions r = resolve_payload_options(o, nullptr);
  EXPECT_EQ(r.real_len, 512 - 36);                   // 512 * 4588 / 65536 = 35.84
  EXPECT_EQ(default_real_length(4096), 4096 - 287);  // 286.75 rounds up
  EXPECT_EQ(default_real_length(8192), 8192 - 574);  // 573.5 rounds half up
  EXPECT_EQ(r.final_rows, 3);
  EXPECT_GE(r.threads, 1);

  auto message = [](PayloadOptions bad) {
    try {
      resolve_payload_options(bad, nullptr);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  PayloadOptions bad = small_options();
  bad.pad_align = 100;
  EXPECT_THAT(message(bad), HasSubstr("--pad-align must be a positive multiple of"));
  bad = small_options();
  bad.real_len = 513;
  EXPECT_THAT(message(bad), HasSubstr("--real-len"));
  bad = small_options();
  bad.final_rows = 4;
  EXPECT_THAT(message(bad), HasSubstr("--final-rows"));
  bad = small_options();
  bad.routing_targets = {1.0, 2.0};
  EXPECT_THAT(message(bad), HasSubstr("2 targets but the model has 4 layers"));
  // CLI11 clamps a huge --tokens to INT64_MAX; the default real length must not overflow on it.
  bad = small_options();
  bad.tokens = std::numeric_limits<std::int64_t>::max();
  bad.real_len = -1;
  EXPECT_THAT(message(bad), HasSubstr("--tokens must be in 1..2147483647"));
  bad = small_options();
  bad.rows = std::int64_t{1} << 31;
  EXPECT_THAT(message(bad), HasSubstr("--rows must be in 1..2147483647"));
  bad = small_options();
  bad.routing_targets = {1.0, 2.0, 3.0, 8.5};  // 16 experts / top-2 = 8 at most
  EXPECT_THAT(message(bad), HasSubstr("layer 3"));
  bad = small_options();
  bad.routing_scale = -1;
  EXPECT_THAT(message(bad), HasSubstr("routing scale"));
  bad = small_options();
  bad.topk = 17;
  EXPECT_THAT(message(bad), HasSubstr("--topk"));
}

TEST(PayloadBuild, FieldsShapesAndPassesEveryCheck) {
  Payload p = build_payload(small_options());
  const PayloadOptions& o = p.options;
  EXPECT_EQ(p.completion_ids.size(), 3u * 512);
  EXPECT_EQ(p.routed_experts.size(), 3u * 512 * 4 * 2);
  EXPECT_EQ(p.real_tokens, 3 * 400);
  VerifyReport report = verify(p);
  EXPECT_TRUE(report.passed()) << failures(report);
  EXPECT_EQ(report.real_rows, 3);
  EXPECT_EQ(report.pad_position, "end (no row moves)");  // 112 padding tokens < pad_align
  for (const CheckResult& c : report.checks) EXPECT_FALSE(c.skipped) << c.name << c.skip_reason;
  // Real tokens: ids in [1, vocab), mask 1, negative log-probs; padding zero.
  for (std::int64_t row = 0; row < o.rows; ++row) {
    for (std::int64_t t = 0; t < o.tokens; ++t) {
      std::size_t c = cell(o, row, t);
      if (t < 400) {
        EXPECT_GE(p.completion_ids[c], 1);
        EXPECT_LT(p.completion_ids[c], 1000);
        EXPECT_EQ(p.completion_mask[c], 1.0f);
        EXPECT_LT(p.old_per_token_logps[c], 0.0f);
      } else {
        EXPECT_EQ(p.completion_ids[c], 0);
        EXPECT_EQ(p.completion_mask[c], 0.0f);
        EXPECT_EQ(experts_at(p, row, t, 3)[1], -1);
      }
    }
  }
}

TEST(PayloadBuild, EveryTokenHasDistinctExpertsAndLoadsHitTheTargets) {
  PayloadOptions o = small_options();
  o.rows = 4;
  o.tokens = 4096;
  o.real_len = 3000;  // 12,000 tokens: several routing tiles
  o.layers = 5;
  o.topk = 4;
  o.experts = 64;
  o.routing_targets = {1.0, 1.05, 2.5, 7.5, 16.0};  // 16 = E/K: one expert in every token
  Payload p = build_payload(o);
  LoadCounter counter(o.layers, o.topk, o.experts);
  for (std::int64_t row = 0; row < o.rows; ++row) {
    for (std::int64_t t = 0; t < o.real_len; ++t) {
      for (int layer = 0; layer < o.layers; ++layer) {
        const std::int16_t* e = experts_at(p, row, t, layer);
        std::set<int> distinct(e, e + o.topk);
        ASSERT_EQ(distinct.size(), static_cast<std::size_t>(o.topk));
        ASSERT_GE(*distinct.begin(), 0);
        ASSERT_LT(*distinct.rbegin(), o.experts);
      }
      counter.add_token(experts_at(p, row, t, 0));
    }
  }
  for (int layer = 0; layer < o.layers; ++layer) {
    LoadStats s = summarize_loads(counter.loads(layer), counter.tokens(layer), 1, 1.0);
    EXPECT_EQ(std::vector<std::int64_t>(counter.loads(layer).begin(), counter.loads(layer).end()),
              p.expert_loads[layer]);
    EXPECT_NEAR(s.max_over_mean, o.routing_targets[layer], 0.01 * o.routing_targets[layer])
        << "layer " << layer;
  }
  EXPECT_EQ(summarize_loads(counter.loads(4), 12000, 1, 1.0).max_load, 12000);
  // A token's experts are not listed in expert-id order (top-k order is by router weight).
  int ascending = 0;
  for (std::int64_t t = 0; t < o.real_len; ++t) {
    const std::int16_t* e = experts_at(p, 0, t, 3);
    ascending += std::is_sorted(e, e + o.topk);
  }
  EXPECT_LT(ascending, o.real_len / 8);
  // Uniform: every expert within one of the mean.
  LoadStats uniform = summarize_loads(counter.loads(0), 12000, 1, 1.0);
  EXPECT_LE(uniform.max_load - uniform.min_load, 1);
}

// Every row, and every 2,048-token slice, sees the whole load profile in proportion.
TEST(PayloadBuild, LoadsAreSpreadOverRowsAndChunks) {
  PayloadOptions o = small_options();
  o.rows = 8;
  o.tokens = 8192;
  o.real_len = 8192;
  o.segments = 1;
  o.layers = 1;
  o.topk = 4;
  o.experts = 32;
  o.routing_targets = {4.0};
  Payload p = build_payload(o);
  for (std::int64_t row = 0; row < o.rows; ++row) {
    for (std::int64_t chunk = 0; chunk < 4; ++chunk) {
      LoadCounter counter(1, o.topk, o.experts);
      for (std::int64_t t = chunk * 2048; t < (chunk + 1) * 2048; ++t) {
        counter.add_token(experts_at(p, row, t, 0));
      }
      LoadStats s = summarize_loads(counter.loads(0), 2048, 1, 1.0);
      EXPECT_NEAR(s.max_over_mean, 4.0, 0.05) << "row " << row << " chunk " << chunk;
    }
  }
}

TEST(PayloadBuild, DeterministicForASeedWhateverTheThreads) {
  PayloadOptions o = small_options();
  o.threads = 1;
  Payload one = build_payload(o);
  o.threads = 3;
  Payload three = build_payload(o);
  EXPECT_EQ(one.completion_ids, three.completion_ids);
  EXPECT_EQ(one.advantages, three.advantages);
  EXPECT_EQ(one.old_per_token_logps, three.old_per_token_logps);
  EXPECT_EQ(0, std::memcmp(one.routed_experts.data(), three.routed_experts.data(),
                           one.routed_experts.size() * 2));
  o.seed = 12;
  Payload other = build_payload(o);
  EXPECT_NE(one.completion_ids, other.completion_ids);
  EXPECT_NE(0, std::memcmp(one.routed_experts.data(), other.routed_experts.data(),
                           one.routed_experts.size() * 2));
}

// The layers' loads are planned by several threads: the same plan as one thread's, and a layer
// that cannot be planned is an error for the caller (not the end of the process).
TEST(PayloadBuild, ExpertLoadsPlannedByThreadsAndTheirErrors) {
  PayloadOptions o = small_options();
  o.threads = 1;
  const std::vector<double> targets(static_cast<std::size_t>(o.layers), 2.0);
  const auto one = plan_expert_loads(o, targets, 500);
  o.threads = 3;
  EXPECT_EQ(plan_expert_loads(o, targets, 500), one);
  std::vector<double> unreachable = targets;
  unreachable.back() = 1e9;  // max/mean above experts / top-k
  EXPECT_THAT(test::what_of([&] { plan_expert_loads(o, unreachable, 500); }),
              HasSubstr("routing target 1000000000 is outside"));
}

TEST(PayloadBuild, SegmentsOnTheGridAndFallbackForShortRows) {
  PayloadOptions o = small_options();
  o.segments = 5;
  for (std::int64_t row = 0; row < 3; ++row) {
    RowLayout layout = row_layout(resolve_payload_options(o, nullptr), row);
    ASSERT_EQ(layout.segment_starts.size(), 5u);
    EXPECT_EQ(layout.segment_starts[0], 0);
    for (std::int64_t start : layout.segment_starts) EXPECT_EQ(start % 64, 0);
  }
  // 100 real tokens have one grid point (64) but need 4 cuts: any distinct positions.
  o.real_len = 100;
  Payload p = build_payload(o);
  RowLayout layout = row_layout(p.options, 0);
  ASSERT_EQ(layout.segment_starts.size(), 5u);
  EXPECT_TRUE(std::is_sorted(layout.segment_starts.begin(), layout.segment_starts.end()));
  EXPECT_EQ(
      std::set<std::int64_t>(layout.segment_starts.begin(), layout.segment_starts.end()).size(),
      5u);
  EXPECT_TRUE(verify(p).passed()) << failures(verify(p));
  // More segments than tokens: clamped, with a warning, never a failure.
  o.real_len = 3;
  o.segments = 10;
  Payload tiny = build_payload(o);
  EXPECT_EQ(tiny.options.segments, 3);
  ASSERT_EQ(tiny.diagnostics.size(), 1u);
  EXPECT_EQ(tiny.diagnostics[0].severity, Severity::kWarning);
  EXPECT_THAT(tiny.diagnostics[0].message, HasSubstr("10 segments do not fit in 3 real tokens"));
  EXPECT_THAT(std::vector<std::int32_t>(tiny.segment_ids.begin(), tiny.segment_ids.begin() + 4),
              ElementsAre(1, 2, 3, 0));
}

TEST(PayloadBuild, AdvantagesOnePerSegmentOrZero) {
  PayloadOptions o = small_options();
  Payload p = build_payload(o);
  for (std::int64_t row = 0; row < o.rows; ++row) {
    RowLayout layout = row_layout(p.options, row);
    std::set<float> values;
    for (std::size_t s = 0; s < layout.segment_starts.size(); ++s) {
      std::int64_t begin = layout.segment_starts[s];
      std::int64_t end =
          s + 1 < layout.segment_starts.size() ? layout.segment_starts[s + 1] : layout.length;
      float first = p.advantages[cell(o, row, begin)];
      EXPECT_NE(first, 0.0f);
      for (std::int64_t t = begin; t < end; ++t) {
        EXPECT_EQ(p.advantages[cell(o, row, t)], first);
        EXPECT_EQ(p.segment_ids[cell(o, row, t)], static_cast<std::int32_t>(s + 1));
        EXPECT_EQ(p.segment_positions[cell(o, row, t)], t - begin);
      }
      values.insert(first);
    }
    EXPECT_EQ(values.size(), 3u);
  }
  o.advantages = AdvantageMode::kZero;
  o.old_logps = false;
  Payload zero = build_payload(o);
  EXPECT_TRUE(std::all_of(zero.advantages.begin(), zero.advantages.end(),
                          [](float a) { return a == 0.0f; }));
  EXPECT_TRUE(zero.old_per_token_logps.empty());
  VerifyOptions v;
  v.advantages = AdvantageMode::kZero;
  EXPECT_TRUE(verify(zero, v).passed());
  v.advantages = AdvantageMode::kRandom;
  EXPECT_EQ(verify(zero, v).check("advantages")->failures, 9);  // 3 segments x 3 rows
}

TEST(CheckPadAlign, APositiveMultipleOfTheSegmentAlignment) {
  EXPECT_NO_THROW(check_pad_align(kSegmentAlign));
  EXPECT_NO_THROW(check_pad_align(kDefaultPadAlign));
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-64}, std::int64_t{100}}) {
    try {
      check_pad_align(bad);
      ADD_FAILURE() << "accepted pad_align " << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.message(), HasSubstr("--pad-align must be a positive multiple of the segment "
                                         "alignment 64 (got " +
                                         std::to_string(bad) + ")"));
    }
  }
}

// Pad position start writes every row further right by its padding rounded down to pad_align;
// every per-token value moves with its token.
TEST(PayloadBuild, PadStartIsEndMovedRight) {
  PayloadOptions o = small_options();
  o.pad_align = 64;  // 112 padding tokens: move by 64
  Payload end = build_payload(o);
  o.pad_position = PadPosition::kStart;
  Payload start = build_payload(o);
  const std::int64_t shift = 64, per_token = o.layers * o.topk;
  for (std::int64_t row = 0; row < o.rows; ++row) {
    for (std::int64_t t = 0; t < o.tokens; ++t) {
      std::int64_t from = t - shift;
      std::size_t c = cell(o, row, t);
      if (from < 0 || from >= o.real_len) {
        EXPECT_EQ(start.segment_ids[c], 0);
        EXPECT_EQ(experts_at(start, row, t, 0)[0], -1);
        continue;
      }
      std::size_t e = cell(o, row, from);
      EXPECT_EQ(start.completion_ids[c], end.completion_ids[e]);
      EXPECT_EQ(start.segment_ids[c], end.segment_ids[e]);
      EXPECT_EQ(start.segment_positions[c], end.segment_positions[e]);
      EXPECT_EQ(start.advantages[c], end.advantages[e]);
      EXPECT_EQ(start.old_per_token_logps[c], end.old_per_token_logps[e]);
      EXPECT_EQ(0, std::memcmp(experts_at(start, row, t, 0), experts_at(end, row, from, 0),
                               per_token * 2));
    }
  }
  VerifyOptions v;
  v.pad_align = 64;
  VerifyReport report = verify(start, v);
  EXPECT_TRUE(report.passed()) << failures(report);
  EXPECT_EQ(report.pad_position, "start");
  v.pad_position = PadPosition::kEnd;
  EXPECT_GT(verify(start, v).check("layout")->failures, 0);
  // With the default pad_align (4096) 112 padding tokens are too few: the row stays put.
  o.pad_align = 4096;
  Payload unmoved = build_payload(o);
  EXPECT_EQ(unmoved.completion_ids, end.completion_ids);
}

TEST(PayloadBuild, FinalMicroBatchRowsArePadding) {
  PayloadOptions o = small_options();
  o.final_rows = 1;
  Payload p = build_payload(o);
  EXPECT_EQ(p.real_tokens, 400);
  for (std::int64_t row = 1; row < 3; ++row) {
    for (std::int64_t t = 0; t < o.tokens; ++t) {
      EXPECT_EQ(p.completion_mask[cell(o, row, t)], 0.0f);
      EXPECT_EQ(experts_at(p, row, t, 2)[0], -1);
    }
  }
  VerifyReport report = verify(p);
  EXPECT_TRUE(report.passed()) << failures(report);
  EXPECT_EQ(report.padding_rows, 2);
  // No real row at all: all padding, no routing, still a valid payload.
  o.final_rows = 0;
  Payload empty = build_payload(o);
  EXPECT_EQ(empty.real_tokens, 0);
  EXPECT_TRUE(verify(empty).passed());
  EXPECT_TRUE(verify(empty).check("routing_targets")->skipped);
}

TEST(PayloadBuild, WrittenFileHoldsEveryFieldAsBuilt) {
  Payload p = build_payload(small_options());
  test::TempDir dir("rtb_payload");
  std::filesystem::path path = dir / "p.npz";
  write_payload(p, path);
  FileSource source(path, FileAccess::kRandom);
  std::vector<ArrayInfo> arrays = list_arrays(source);
  std::vector<std::string> names;
  for (const ArrayInfo& a : arrays) names.push_back(a.name);
  EXPECT_EQ(names, payload_field_names(true));
  const ArrayInfo* routed = find_array(arrays, "routed_experts");
  EXPECT_THAT(routed->shape, ElementsAre(3, 512, 4, 2));
  std::vector<std::int16_t> routing(routed->count);
  read_elements(source, *routed, 0, std::span(routing));
  EXPECT_EQ(0, std::memcmp(routing.data(), p.routed_experts.data(), routing.size() * 2));
  std::vector<std::int32_t> ids(3 * 512);
  read_elements(source, *find_array(arrays, "completion_ids"), 0, std::span(ids));
  EXPECT_EQ(ids, p.completion_ids);
  EXPECT_THAT(find_array(arrays, "prompt_ids")->shape, ElementsAre(3, 0));
  EXPECT_EQ(find_array(arrays, "prompt_mask")->dtype, DType::kFloat32);
  VerifyOptions v;
  v.experts = 16;
  v.vocab = 1000;
  v.targets = p.targets;
  VerifyReport report = verify_payload(source, arrays, v);
  EXPECT_TRUE(report.passed()) << failures(report);
}

// Layout v2: a segment is a prompt (context only) then its completion; ids, segment ids,
// positions and routing cover both, mask, advantages and old log-probs only the completion.
TEST(PayloadBuild, PromptsLeadEachSegmentAndOnlyCompletionsCarryTheLoss) {
  PayloadOptions o = small_options();
  o.segments = 4;
  o.max_prompt_length = 50;
  o.real_len = 200;  // on the grid: segments of at least 64 tokens, prompts of 1..50
  Payload p = build_payload(o);
  std::set<std::int64_t> prompt_lengths;
  for (std::int64_t row = 0; row < o.rows; ++row) {
    RowLayout layout = row_layout(p.options, row);
    ASSERT_EQ(layout.prompt_lengths.size(), layout.segment_starts.size());
    for (std::size_t s = 0; s < layout.segment_starts.size(); ++s) {
      std::int64_t begin = layout.segment_starts[s];
      std::int64_t end =
          s + 1 < layout.segment_starts.size() ? layout.segment_starts[s + 1] : layout.length;
      std::int64_t prompt = layout.prompt_lengths[s];
      EXPECT_GE(prompt, 1);
      EXPECT_LE(prompt, std::min<std::int64_t>(50, end - begin - 1));
      prompt_lengths.insert(prompt);
      float advantage = p.advantages[cell(o, row, begin + prompt)];
      EXPECT_NE(advantage, 0.0f);
      for (std::int64_t t = begin; t < end; ++t) {
        std::size_t c = cell(o, row, t);
        bool completion = t - begin >= prompt;
        EXPECT_GE(p.completion_ids[c], 1);
        EXPECT_EQ(p.segment_ids[c], static_cast<std::int32_t>(s + 1));
        EXPECT_EQ(p.segment_positions[c], t - begin);
        EXPECT_EQ(p.completion_mask[c], completion ? 1.0f : 0.0f);
        EXPECT_EQ(p.advantages[c], completion ? advantage : 0.0f);
        if (completion) {
          EXPECT_LT(p.old_per_token_logps[c], 0.0f);
        } else {
          EXPECT_EQ(p.old_per_token_logps[c], 0.0f);
        }
        EXPECT_GE(experts_at(p, row, t, 0)[0], 0);  // routing on prompt tokens too
      }
    }
  }
  EXPECT_GT(prompt_lengths.size(), 3u);  // seeded draws, not one length
  VerifyOptions v;
  v.max_prompt_length = 50;
  VerifyReport report = verify(p, v);
  EXPECT_TRUE(report.passed()) << failures(report);
  // The routing is calibrated over every segment token, prompts included.
  EXPECT_EQ(p.real_tokens, 3 * 200);
  // A prompt longer than the recorded limit, or none where one is due, is a mask failure.
  v.max_prompt_length = 1;
  EXPECT_GT(verify(p, v).check("mask")->failures, 0);
  v.max_prompt_length = 0;
  EXPECT_GT(verify(p, v).check("mask")->failures, 0);
  // P = 0 is the old layout: every segment token is completion.
  o.max_prompt_length = 0;
  Payload whole = build_payload(o);
  for (std::int64_t t = 0; t < 200; ++t) EXPECT_EQ(whole.completion_mask[cell(o, 0, t)], 1.0f);
  EXPECT_EQ(whole.completion_ids, p.completion_ids);  // prompts change no id
  // A one-token segment keeps its token as completion.
  o.real_len = 3;
  o.segments = 3;
  o.max_prompt_length = 5;
  Payload tiny = build_payload(o);
  for (std::int64_t t = 0; t < 3; ++t) EXPECT_EQ(tiny.completion_mask[cell(o, 0, t)], 1.0f);
  EXPECT_TRUE(verify(tiny, v).passed());
}

TEST(PayloadBuild, NegativeMaxPromptLengthIsAnError) {
  PayloadOptions o = small_options();
  o.max_prompt_length = -1;
  EXPECT_THROW(resolve_payload_options(o, nullptr), Error);
}

// Every written file records how it was built, and the record reads back.
TEST(PayloadSettings, RecordedInTheFileAndReadBack) {
  PayloadOptions o = small_options();
  o.max_prompt_length = 32;
  o.pad_position = PadPosition::kStart;
  o.pad_align = 64;
  o.final_rows = 2;
  o.segments_given = true;
  o.routing_scale = 0.5;
  o.routing_targets_source = "my \"table\".txt";
  o.seed = 0xfedcba9876543210ULL;  // all 64 bits
  Payload p = build_payload(o);
  EXPECT_THAT(p.settings_json, HasSubstr(R"("format": "rtb.payload-settings/1")"));
  EXPECT_THAT(p.settings_json, HasSubstr(R"("builder": "check-payload")"));
  EXPECT_EQ(p.settings_json.find('\n'), std::string::npos);
  test::TempDir dir("rtb_settings");
  std::filesystem::path path = dir / "p.npz";
  write_payload(p, path);
  FileSource source(path, FileAccess::kRandom);
  std::vector<ArrayInfo> arrays = list_arrays(source);
  std::optional<PayloadSettings> s = read_payload_settings(source, arrays);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->builder, "check-payload");
  EXPECT_EQ(s->rows, 3);
  EXPECT_EQ(s->tokens, 512);
  EXPECT_EQ(s->layers, 4);
  EXPECT_EQ(s->topk, 2);
  EXPECT_EQ(s->experts, 16);
  EXPECT_EQ(s->vocab, 1000);
  EXPECT_EQ(s->pad_id, 0);
  EXPECT_EQ(s->real_len, 400);
  EXPECT_EQ(s->segments_of_row(0), 3);
  EXPECT_EQ(s->segments_rule, "option");
  EXPECT_EQ(s->max_prompt_length, 32);
  EXPECT_EQ(s->final_rows, 2);
  EXPECT_EQ(s->pad_position, PadPosition::kStart);
  EXPECT_EQ(s->pad_align, 64);
  EXPECT_EQ(s->advantages, AdvantageMode::kRandom);
  EXPECT_EQ(s->seed, 0xfedcba9876543210ULL);
  ASSERT_TRUE(s->routing_targets.has_value());
  EXPECT_EQ(*s->routing_targets, p.targets);  // scaled, as used
  EXPECT_EQ(s->routing_scale, 0.5);
  EXPECT_EQ(s->routing_targets_source, "my \"table\".txt");
  EXPECT_EQ(s->old_logps, true);
  // A regular micro-batch records final_rows null; the default segment count says so.
  o = small_options();
  Payload regular = build_payload(o);
  EXPECT_THAT(regular.settings_json, HasSubstr(R"("final_rows": null)"));
  EXPECT_THAT(regular.settings_json, HasSubstr(R"("segments_rule": "default")"));
}

TEST(PayloadSettings, DriverFormsAndBadRecords) {
  // The driver may record segments per row, and null targets (uniform routing).
  PayloadSettings s = parse_payload_settings(
      R"({"format":"rtb.payload-settings/1","builder":"bench_driver","segments":[3,2,0],)"
      R"("routing_targets":null,"final_rows":null,"seed":7})",
      "d.npz");
  EXPECT_EQ(s.builder, "bench_driver");
  EXPECT_TRUE(s.segments_per_row);
  EXPECT_EQ(s.segments_of_row(1), 2);
  EXPECT_FALSE(s.routing_targets.has_value());
  EXPECT_FALSE(s.final_rows.has_value());
  auto message = [](std::string_view json) {
    try {
      parse_payload_settings(json, "f.npz");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message("[1, 2]"), HasSubstr("not a JSON object"));
  EXPECT_THAT(message(R"({"format": "other/2"})"), HasSubstr("format 'other/2'"));
  EXPECT_THAT(message(R"({"format": "rtb.payload-settings/1", "rows": "3"})"),
              HasSubstr("\"rows\" must be an integer"));
  EXPECT_THAT(message(R"({"format": "rtb.payload-settings/1", "pad_position": "left"})"),
              HasSubstr("\"pad_position\" must be"));
  EXPECT_THAT(message("{not json"), HasSubstr("f.npz"));
  EXPECT_THAT(message("{not json"), HasSubstr("payload_settings is not valid JSON: column 2: "));
  // JSON, not YAML: an unquoted word or a YAML flow map is no JSON.
  EXPECT_THAT(message("{format: x}"), HasSubstr("not valid JSON"));
  const std::string head = R"({"format": "rtb.payload-settings/1", )";
  EXPECT_THAT(message(head + R"("rows": 3.0})"), HasSubstr("\"rows\" must be an integer"));
  EXPECT_THAT(message(head + R"("rows": 99999999999999999999})"),
              HasSubstr("\"rows\" must be an integer"));
  EXPECT_THAT(message(head + R"("builder": 3})"), HasSubstr("\"builder\" must be a string"));
  EXPECT_THAT(message(head + R"("old_logps": "true"})"), HasSubstr("must be true or false"));
  EXPECT_THAT(message(head + R"("routing_scale": NaN})"), HasSubstr("must be a number"));
  EXPECT_THAT(message(head + R"("seed": -1})"), HasSubstr("\"seed\" must be a non-negative"));
  EXPECT_THAT(message(head + R"("seed": 18446744073709551616})"), HasSubstr("\"seed\" must be"));
  // Seeds use all 64 bits.
  EXPECT_EQ(parse_payload_settings(head + R"("seed": 18446744073709551615})", "f.npz").seed,
            18446744073709551615ULL);
}

TEST(PayloadSettings, RecordedExpertsAreInt16Ids) {
  PayloadSettings s;
  EXPECT_EQ(recorded_experts(s), std::nullopt);
  s.experts = 32767;
  EXPECT_EQ(recorded_experts(s), 32767);
  s.experts = 32768;
  EXPECT_EQ(test::error_of([&] { recorded_experts(s); }).message(),
            "payload_settings records 32768 experts");
}

// measure's experts: the option, else the file's record, else the default.
TEST(PayloadSettings, MeasureExpertsFromOptionFileOrDefault) {
  test::TempDir dir("rtb_measure_experts");
  write_payload(build_payload(small_options()), dir / "p.npz");  // records 16 experts
  FileSource file(dir / "p.npz", FileAccess::kRandom);
  MeasureOptions defaults;
  ASSERT_EQ(defaults.experts, 512);
  MeasureOptions o = resolve_measure_options(file, defaults, 64);
  EXPECT_EQ(o.experts, 64);
  EXPECT_EQ(o.experts_from, "option");
  o = resolve_measure_options(file, defaults, std::nullopt);
  EXPECT_EQ(o.experts, 16);
  EXPECT_EQ(o.experts_from, "file");
  std::string npy = make_npy_header(DType::kInt16, {0, 1, 1});  // no payload_settings
  o = resolve_measure_options(MemorySource(npy, "r.npy"), defaults, std::nullopt);
  EXPECT_EQ(o.experts, 512);
  EXPECT_EQ(o.experts_from, "default");
  // With the option the file's settings are not read: a file measure cannot read fails later.
  MemorySource unreadable("not an array", "x.npz");
  EXPECT_EQ(resolve_measure_options(unreadable, defaults, 8).experts, 8);
  EXPECT_THROW(resolve_measure_options(unreadable, defaults, std::nullopt), Error);
}

TEST(LoadProfile, ProductionShapeHitsTheDefaultTableWithinOnePercent) {
  const std::int64_t tokens = 64 * 60948;
  for (double target : default_routing_targets()) {
    std::vector<std::int64_t> loads = expert_load_profile(tokens, 512, 10, target);
    std::vector<std::int64_t> planned(loads.begin(), loads.end());
    LoadStats s = summarize_loads(planned, tokens, 2, 2.75);
    EXPECT_EQ(s.assignments, tokens * 10);
    EXPECT_NEAR(s.max_over_mean, target, 0.01 * target);
    EXPECT_LE(s.max_load, tokens);
  }
}

// The routing made on demand, a window at a time, is the array build_payload writes: for any
// window, in any order (a window before the last one starts its tile again), across rows,
// tiles, padding rows and pad position "start".
TEST(PayloadBuild, RoutingCursorWritesAnyWindowAsTheArrayHasIt) {
  std::vector<PayloadOptions> cases;
  cases.push_back(small_options());
  PayloadOptions start = small_options();
  start.pad_position = PadPosition::kStart;
  start.pad_align = 64;
  start.final_rows = 2;  // a padding row last
  cases.push_back(start);
  PayloadOptions short_rows = small_options();
  short_rows.real_len = 100;  // tiles straddle rows
  short_rows.rows = 7;
  cases.push_back(short_rows);
  PayloadOptions none = small_options();
  none.final_rows = 0;  // all padding: no tiles
  cases.push_back(none);
  for (const PayloadOptions& o : cases) {
    Payload whole = build_payload(o);
    Payload lazy = build_payload(o, RoutingStorage::kOnDemand);
    EXPECT_EQ(lazy.routed_experts.size(), 0u);
    ASSERT_NE(lazy.routing, nullptr);
    EXPECT_EQ(lazy.completion_ids, whole.completion_ids);
    const std::int64_t per_token = std::int64_t{o.layers} * o.topk;
    const std::int64_t cells = o.rows * o.tokens;
    RoutingCursor cursor(lazy.routing);
    std::uint64_t state = 7;
    auto draw = [&](std::int64_t n) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(n));
    };
    // Ascending windows that cover everything, then random ones (backwards too).
    std::vector<std::pair<std::int64_t, std::int64_t>> windows;
    for (std::int64_t first = 0; first < cells; first += 109)
      windows.emplace_back(first, std::min<std::int64_t>(109, cells - first));
    for (int i = 0; i < 200; ++i) {
      std::int64_t first = draw(cells);
      windows.emplace_back(first, 1 + draw(std::min<std::int64_t>(cells - first, 700)));
    }
    windows.emplace_back(0, cells);
    for (const auto& [first, count] : windows) {
      std::vector<std::int16_t> out(static_cast<std::size_t>(count * per_token), 12345);
      cursor.write(first, out);
      ASSERT_EQ(0, std::memcmp(out.data(), whole.routed_experts.data() + first * per_token,
                               out.size() * 2))
          << "rows " << o.rows << " real_len " << o.real_len << " final_rows " << o.final_rows
          << ": window at cell " << first << " of " << count;
    }
    // The check of the payload made on demand reports what the check of the array reports.
    VerifyReport a = verify(whole), b = verify(lazy);
    EXPECT_EQ(failures(a), failures(b));
    EXPECT_EQ(a.per_layer.size(), b.per_layer.size());
    for (std::size_t layer = 0; layer < a.per_layer.size(); ++layer) {
      EXPECT_EQ(a.per_layer[layer].max_load, b.per_layer[layer].max_load) << layer;
    }
    EXPECT_EQ(a.real_tokens, b.real_tokens);
    // Read through the payload's byte view, the routing is made for each read.
    PayloadView view = view_payload(lazy);
    VerifyOptions v;
    v.experts = o.experts;
    v.vocab = o.vocab;
    v.targets = lazy.targets;
    VerifyReport c = verify_payload(*view.source, view.arrays, v);
    EXPECT_EQ(failures(a), failures(c));
    EXPECT_EQ(a.real_tokens, c.real_tokens);
  }
}

// A payload made on demand is written a chunk at a time: the file is the one its array makes.
TEST(PayloadBuild, APayloadMadeOnDemandWritesTheFileItsArrayWould) {
  PayloadOptions o = small_options();
  o.pad_position = PadPosition::kStart;
  o.pad_align = 64;
  o.final_rows = 2;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("rtb_builder_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  write_payload(build_payload(o), (dir / "whole.npz").string());
  write_payload(build_payload(o, RoutingStorage::kOnDemand), (dir / "lazy.npz").string());
  const std::string whole = read_file((dir / "whole.npz").string());
  const std::string lazy = read_file((dir / "lazy.npz").string());
  std::filesystem::remove_all(dir);
  EXPECT_GT(whole.size(), routing_bytes(o));
  EXPECT_TRUE(whole == lazy) << whole.size() << " against " << lazy.size() << " bytes";
}

}  // namespace
}  // namespace rtb::payload
