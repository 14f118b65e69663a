#include "rtb/base/process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace rtb {
namespace {

TEST(RunProcess, ReturnsTheExitStatus) {
  EXPECT_EQ(run_process({"true"}), 0);
  EXPECT_EQ(run_process({"false"}), 1);
  EXPECT_EQ(run_process({"sh", "-c", "exit 7"}), 7);
}

TEST(RunProcess, PassesArgumentsVerbatim) {
  // $0 and $1 arrive as given: no shell splits or expands them.
  EXPECT_EQ(
      run_process({"sh", "-c", "test \"$0\" = 'a b' && test \"$1\" = '$HOME'", "a b", "$HOME"}), 0);
}

TEST(RunProcess, ASignalGives128PlusItsNumber) {
  EXPECT_EQ(run_process({"sh", "-c", "kill -TERM $$"}), 128 + 15);
}

TEST(RunProcess, AProgramThatCannotStartThrows) {
  Error error = test::error_of([] { run_process({"/nonexistent/program"}); });
  EXPECT_THAT(error.message(), HasSubstr("cannot start /nonexistent/program"));
  EXPECT_THAT(test::error_of([] { run_process({}); }).message(), HasSubstr("no program"));
}

TEST(RunQuiet, DiscardsOutputAndGives127ForAMissingProgram) {
  EXPECT_EQ(run_quiet({"sh", "-c", "echo noise; echo more >&2; exit 3"}), 3);
  EXPECT_EQ(run_quiet({"/nonexistent/python3", "-c", "pass"}), 127);
  EXPECT_EQ(run_quiet({}), 127);
}

}  // namespace
}  // namespace rtb
