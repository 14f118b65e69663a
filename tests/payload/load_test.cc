#include "rtb/payload/load.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "rtb/base/error.h"
#include "rtb/payload/npy.h"
#include "test_util.h"

namespace rtb::payload {
namespace {

namespace fs = std::filesystem;

double max_over_mean(const std::vector<std::int64_t>& loads) {
  double total = std::accumulate(loads.begin(), loads.end(), 0.0);
  return loads[0] / (total / loads.size());
}

TEST(LoadProfile, SumsExactlyAndHitsTheTarget) {
  for (double target : {1.0, 1.01, 1.3, 2.0, 4.5, 7.9491, 10.0758, 25.0, 51.2}) {
    std::vector<std::int64_t> loads = expert_load_profile(1000000, 512, 10, target);
    ASSERT_EQ(loads.size(), 512u);
    EXPECT_EQ(std::accumulate(loads.begin(), loads.end(), std::int64_t{0}), 10000000);
    EXPECT_TRUE(std::is_sorted(loads.rbegin(), loads.rend()));
    EXPECT_LE(loads[0], 1000000);
    EXPECT_NEAR(max_over_mean(loads), target, 1e-4 * target) << target;
  }
}

TEST(LoadProfile, UniformAtOneAndEveryTokenAtTheLimit) {
  std::vector<std::int64_t> uniform = expert_load_profile(1001, 8, 2, 1.0);
  EXPECT_LE(uniform.front() - uniform.back(), 1);
  std::vector<std::int64_t> full = expert_load_profile(1000, 8, 2, 4.0);  // E/K = 4
  EXPECT_EQ(full[0], 1000);
  EXPECT_THROW(expert_load_profile(1000, 8, 2, 4.1), Error);
  EXPECT_THROW(expert_load_profile(1000, 8, 2, 0.9), Error);
  EXPECT_THAT(expert_load_profile(0, 4, 1, 2.0), ElementsAre(0, 0, 0, 0));
  EXPECT_THAT(expert_load_profile(5, 1, 1, 1.0), ElementsAre(5));
}

// Smooth: neighbouring ranks differ by a steady factor, not one hot expert and a flat rest.
TEST(LoadProfile, DecaysSmoothlyOverRanks) {
  std::vector<std::int64_t> loads = expert_load_profile(4000000, 512, 10, 8.0);
  double beta = load_profile_exponent(512, 8.0);
  EXPECT_NEAR(beta, 8.0, 0.05);  // large E: max/mean ~ beta / (1 - exp(-beta))
  // Each rank is the exponential share of the one before, up to rounding to whole tokens.
  for (int r = 2; r < 512; ++r) {
    double expected = loads[1] * std::exp(-beta * (r - 1) / 511);
    EXPECT_NEAR(static_cast<double>(loads[r]), expected, 1.0 + 1e-6 * expected) << r;
  }
  EXPECT_GT(loads[511], 0);
  EXPECT_EQ(load_profile_exponent(512, 1.0), 0.0);
}

TEST(LoadProfile, ToleranceIsOnePercentOrOneToken) {
  EXPECT_DOUBLE_EQ(routing_target_tolerance(8.0, 76000.0), 0.08);
  EXPECT_DOUBLE_EQ(routing_target_tolerance(2.0, 4.0), 0.25);
}

TEST(LoadStats, PerExpertAndPerRank) {
  std::vector<std::int64_t> loads = {10, 2, 2, 2, 1, 1, 1, 1};  // 20 assignments, mean 2.5
  LoadStats s = summarize_loads(loads, 10, 2, 1.2);
  EXPECT_EQ(s.assignments, 20);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_EQ(s.max_load, 10);
  EXPECT_EQ(s.min_load, 1);
  EXPECT_EQ(s.hottest_expert, 0);
  EXPECT_DOUBLE_EQ(s.max_over_mean, 4.0);
  EXPECT_NEAR(s.cv, std::sqrt((56.25 + 3 * 0.25 + 4 * 2.25) / 8) / 2.5, 1e-12);
  EXPECT_THAT(s.rank_loads, ElementsAre(16, 4));
  EXPECT_DOUBLE_EQ(s.rank_max_over_mean, 1.6);
  EXPECT_EQ(s.rank_buffer, 12);  // 1.2 x 10
  EXPECT_EQ(s.overflow, 4);
  EXPECT_THROW(summarize_loads(loads, 10, 3, 1.0), Error);
  EXPECT_THROW(summarize_loads(loads, 10, 2, 0.0), Error);
}

class MeasureTest : public ::testing::Test {
 protected:
  test::TempDir temp_{"rtb_measure_test"};
  fs::path dir_ = temp_.path();
};

TEST_F(MeasureTest, TokensByLayersByTopkInt16) {
  // 4 tokens, 2 layers, top-2, 4 experts; token 3 is not a token (-1).
  std::vector<std::int16_t> routed = {0,  1,  2,  3,  //
                                      0,  2,  2,  3,  //
                                      0,  3,  2,  1,  //
                                      -1, -1, -1, -1};
  fs::path path = dir_ / "routed.npy";
  write_npy(path, DType::kInt16, {4, 2, 2}, std::as_bytes(std::span(routed)));
  MeasureOptions options;
  options.experts = 4;
  options.ep = 2;
  options.buffer_factor = 1.0;
  MeasureReport report = measure_routing(FileSource(path, FileAccess::kRandom), options);
  EXPECT_EQ(report.layers, 2);
  EXPECT_EQ(report.topk, 2);
  EXPECT_EQ(report.positions, 4);
  ASSERT_EQ(report.per_layer.size(), 2u);
  // Layer 0: experts 0,1 | 0,2 | 0,3: loads 3,1,1,1, mean 1.5.
  EXPECT_EQ(report.per_layer[0].tokens, 3);
  EXPECT_DOUBLE_EQ(report.per_layer[0].max_over_mean, 2.0);
  EXPECT_THAT(report.per_layer[0].rank_loads, ElementsAre(4, 2));
  EXPECT_EQ(report.per_layer[0].overflow, 1);
  // Layer 1: 2,3 | 2,3 | 2,1: loads 0,1,3,2.
  EXPECT_DOUBLE_EQ(report.per_layer[1].max_over_mean, 2.0);
  EXPECT_EQ(report.per_layer[1].hottest_expert, 2);
  EXPECT_EQ(report.repeated, 0);
  EXPECT_THAT(report.max_over_mean(), ElementsAre(2.0, 2.0));
}

TEST_F(MeasureTest, RowsByTokensInt32MemberOfAnNpz) {
  std::vector<std::int32_t> routed = {0, 1, 1, 2, 2, 0, -1, -1};  // [2, 2, 1, 2]
  std::vector<float> other = {1.0f};
  fs::path path = dir_ / "payload.npz";
  NpzWriter writer(path);
  writer.add<float>("completion_mask", {1}, other);
  writer.add<std::int32_t>("routed_experts", {2, 2, 1, 2}, routed);
  writer.finish();
  MeasureOptions options;
  options.experts = 3;
  MeasureReport report = measure_routing(FileSource(path, FileAccess::kRandom), options);
  EXPECT_EQ(report.array, "routed_experts");
  EXPECT_EQ(report.dtype, DType::kInt32);
  EXPECT_EQ(report.positions, 4);
  EXPECT_EQ(report.per_layer[0].tokens, 3);
  EXPECT_DOUBLE_EQ(report.per_layer[0].max_over_mean, 1.0);
  options.member = "nothing";
  // With two arrays the member must exist.
  EXPECT_THROW(measure_routing(FileSource(path, FileAccess::kRandom), options), Error);
}

// A real npz someone else wrote (testdata/SOURCES.md): no routed_experts, eleven other arrays.
TEST_F(MeasureTest, ARealNpzWithoutRoutedExpertsNamesItsMembers) {
  std::string path = test::testdata("npz_tahoma_test.npz");
  MeasureOptions options;
  options.experts = 16;
  Error error =
      test::error_of([&] { measure_routing(FileSource(path, FileAccess::kRandom), options); });
  EXPECT_EQ(error.file(), path);
  EXPECT_EQ(error.message(),
            "no member 'routed_experts' (members: int32_vec, float32_vec, int64_vec, "
            "float64_vec, int32_mat, float32_mat, int64_mat, float64_mat, int32_tensor, "
            "float32_tensor, meta.yml); name the routed-experts array with --member");
  // Its int32 [2, 2, 2] array, [[[1, 2], [3, 4]], [[5, 6], [7, 8]]], read as [N, L, K]: each
  // layer routes two tokens to four distinct experts of 16 (mean load 0.25, max 1).
  options.member = "int32_tensor";
  MeasureReport report = measure_routing(FileSource(path, FileAccess::kRandom), options);
  EXPECT_EQ(report.array, "int32_tensor");
  EXPECT_EQ(report.positions, 2);
  ASSERT_EQ(report.per_layer.size(), 2u);
  for (const LoadStats& layer : report.per_layer) {
    EXPECT_EQ(layer.tokens, 2);
    EXPECT_DOUBLE_EQ(layer.max_over_mean, 4.0);
  }
}

TEST_F(MeasureTest, AMissingMemberNamesWhatTheFileHolds) {
  auto message = [](const fs::path& path) {
    FileSource source(path, FileAccess::kRandom);
    return test::error_of([&] {
             require_member(source, list_arrays(source), "routed_experts", "what it means");
           })
        .message();
  };
  std::vector<std::int16_t> one = {1};
  fs::path npy = dir_ / "one.npy";
  write_npy(npy, DType::kInt16, {1}, std::as_bytes(std::span(one)));
  EXPECT_EQ(message(npy),
            "no member 'routed_experts' (an .npy file: one array, no members); what it means");
  // A long list is cut: the line stays readable.
  fs::path many = dir_ / "many.npz";
  NpzWriter writer(many);
  for (int i = 0; i < 20; ++i) writer.add<std::int16_t>("a" + std::to_string(i), {1}, one);
  writer.finish();
  EXPECT_EQ(message(many),
            "no member 'routed_experts' (members: a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, "
            "a11, a12, a13, a14, a15 and 4 more); what it means");
  FileSource source(many, FileAccess::kRandom);
  EXPECT_EQ(require_member(source, list_arrays(source), "a7", "unused").name, "a7");
}

TEST_F(MeasureTest, BadInputsAreNamed) {
  auto message = [&](DType dtype, std::vector<std::int64_t> shape,
                     const std::vector<std::int16_t>& values, int experts) {
    fs::path path = dir_ / "bad.npy";
    std::vector<std::byte> bytes(values.size() * 2);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    if (dtype == DType::kInt16) {
      write_npy(path, dtype, shape, bytes);
    } else {
      std::vector<float> f(values.begin(), values.end());
      write_npy(path, dtype, shape, std::as_bytes(std::span(f)));
    }
    MeasureOptions options;
    options.experts = experts;
    try {
      measure_routing(FileSource(path, FileAccess::kRandom), options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(message(DType::kInt16, {1, 2, 1, 2}, {0, 1, 5, 1}, 4),
              HasSubstr("array[row 0, token 1, layer 0, slot 0] = 5 is not an expert id"));
  EXPECT_THAT(message(DType::kInt16, {2, 1, 1}, {0, -3}, 4), HasSubstr("token 1, layer 0"));
  EXPECT_THAT(message(DType::kFloat32, {1, 1, 1}, {0}, 4), HasSubstr("is float32"));
  EXPECT_THAT(message(DType::kInt16, {4, 1}, {0, 1, 2, 3}, 4), HasSubstr("has shape [4, 1]"));
  EXPECT_THAT(message(DType::kInt16, {1, 1, 5}, {0, 1, 2, 3, 0}, 4), HasSubstr("K = 5"));
}

TEST_F(MeasureTest, RepeatedExpertsAreCounted) {
  std::vector<std::int16_t> routed = {1, 1, 0, 1};
  fs::path path = dir_ / "rep.npy";
  write_npy(path, DType::kInt16, {2, 1, 2}, std::as_bytes(std::span(routed)));
  MeasureOptions options;
  options.experts = 2;
  EXPECT_EQ(measure_routing(FileSource(path, FileAccess::kRandom), options).repeated, 1);
}

}  // namespace
}  // namespace rtb::payload
