#include "rtb/payload_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "rtb/payload.h"

namespace rtb {
namespace {

using ::testing::HasSubstr;

PayloadOptions options() {
  PayloadOptions o;
  o.rows = 3;
  o.tokens = 256;
  o.real_len = 200;
  o.segments = 2;
  o.layers = 3;
  o.topk = 2;
  o.experts = 8;
  o.vocab = 500;
  o.routing_targets = {1.0, 2.0, 3.0};
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
    PayloadView view = view_payload(payload_);
    if (arrays_override != nullptr) {
      *arrays_override = view.arrays;
      mutate_arrays_(*arrays_override);
      return verify_payload(*view.source, *arrays_override, v);
    }
    return verify_payload(*view.source, view.arrays, v);
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

}  // namespace
}  // namespace rtb
