// What a check or a comparison concluded. The library reports an Outcome and never an exit code;
// the tools turn it into their exit code (tools/common/tool.h).
#pragma once

namespace rtb {

enum class Outcome {
  kPass,   // every check passed; for a comparison: no differences
  kFail,   // a check failed; for a comparison: differences found
  kError,  // the input could not be judged (bad input); the rtb::Error says why
};

// The exit code of an outcome (CONTRIBUTING.md: 0 pass or same, 1 failed check or differences,
// 2 error). The one mapping: the tools exit with it and JSON documents that carry "exit_code"
// print it.
constexpr int exit_code(Outcome outcome) {
  switch (outcome) {
    case Outcome::kPass:
      return 0;
    case Outcome::kFail:
      return 1;
    case Outcome::kError:
      break;
  }
  return 2;
}

// kFail when `failed`, else kPass: the outcome of a check that could judge its input.
constexpr Outcome outcome_of(bool failed) { return failed ? Outcome::kFail : Outcome::kPass; }

}  // namespace rtb
