#include "rtb/base/stats.h"

#include <gtest/gtest.h>

#include "rtb/base/error.h"

namespace rtb::stats {
namespace {

TEST(Stats, MeanStddevAndCoefficientOfVariation) {
  std::vector<double> values = {2, 4, 4, 4, 5, 5, 7, 9};
  EXPECT_DOUBLE_EQ(mean(values), 5.0);
  EXPECT_DOUBLE_EQ(stddev(values), 2.0);
  EXPECT_DOUBLE_EQ(coefficient_of_variation(values), 0.4);
  std::vector<double> zeros = {0, 0};
  EXPECT_EQ(coefficient_of_variation(zeros), 0.0);
  EXPECT_EQ(mean({}), 0.0);
  EXPECT_EQ(stddev({}), 0.0);
}

TEST(Stats, QuantilesInterpolateLikeNumpy) {
  // numpy.quantile([1, 3, 2, 10], [0, 0.25, 0.5, 1]) = [1, 1.75, 2.5, 10]
  std::vector<double> values = {1, 3, 2, 10};
  EXPECT_DOUBLE_EQ(quantile(values, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile(values, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(median(values), 2.5);
  EXPECT_DOUBLE_EQ(quantile(values, 1.0), 10.0);
  EXPECT_DOUBLE_EQ(median({7}), 7.0);
  EXPECT_THROW(median({}), Error);
  EXPECT_THROW(quantile(values, 1.5), Error);
}

}  // namespace
}  // namespace rtb::stats
