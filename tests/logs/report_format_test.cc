#include "rtb/logs/report_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace rtb::logs::report {
namespace {

TEST(ReportFormat, StepListsCollapseRuns) {
  EXPECT_EQ(compress({}), "none");
  EXPECT_EQ(compress({1, 2, 3, 5, 7, 8}), "1-3,5,7-8");
}

TEST(ReportFormat, SecondsKeepThreeDecimalsFromOneSecondUp) {
  EXPECT_EQ(seconds(83.2531), "83.253");
  EXPECT_EQ(seconds(0.0123456), "0.01235");
  EXPECT_EQ(seconds(0.0), "0");
  EXPECT_EQ(seconds(std::nan("")), "?");
  EXPECT_EQ(spread(0.1119, 83.25), "0.112");
  EXPECT_EQ(spread(0.0001234, 0.5), "0.0001234");
}

TEST(ReportFormat, SmallNumbersAndThroughputAsTheSeedWritesThem) {
  EXPECT_EQ(scientific(1.6e-4), "1.6e-4");
  EXPECT_EQ(scientific(2.0e-3), "2.0e-3");
  EXPECT_EQ(scientific(0.0), "0");
  EXPECT_EQ(scientific(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(grouped(3567.4), "3,567");
  EXPECT_EQ(grouped(-1234567), "-1,234,567");
  EXPECT_EQ(grouped(0.2), "0");
  EXPECT_EQ(percent(0.9), "-10.00%");
  EXPECT_EQ(percent(1.0), "+0.00%");
}

}  // namespace
}  // namespace rtb::logs::report
