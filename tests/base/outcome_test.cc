#include "rtb/base/outcome.h"

#include <gtest/gtest.h>

namespace rtb {
namespace {

TEST(Outcome, ExitCodesFollowContributing) {
  EXPECT_EQ(exit_code(Outcome::kPass), 0);
  EXPECT_EQ(exit_code(Outcome::kFail), 1);
  EXPECT_EQ(exit_code(Outcome::kError), 2);
}

TEST(Outcome, OutcomeOfACheck) {
  EXPECT_EQ(outcome_of(false), Outcome::kPass);
  EXPECT_EQ(outcome_of(true), Outcome::kFail);
}

}  // namespace
}  // namespace rtb
