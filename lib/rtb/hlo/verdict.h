// The outcome of hlo-overlap on its analyses: one dump is a check (pass, or fail when it is
// truncated or over the exposed-bytes budget); two dumps are a comparison (same, or different
// when a per-kind total differs, and each dump is still held to the budget). The reasons are
// data, for the tool to log.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rtb/base/outcome.h"
#include "rtb/hlo/analysis.h"

namespace rtb::hlo {

struct CheckOptions {
  // Exposed collective bytes (weighted, Analysis::total_collectives) a dump may have; nullopt:
  // no budget (--fail-if-exposed-bytes).
  std::optional<std::int64_t> exposed_bytes_budget;
  // A single dump that ends inside a computation passes (--allow-truncated).
  bool allow_truncated = false;
};

struct OverBudget {
  std::string file;
  std::int64_t exposed_bytes = 0;
  std::int64_t budget = 0;
};

struct Verdict {
  // Two dumps: compare_differences(A, B) (report.h), one line per differing kind.
  std::vector<std::string> differences;
  // One dump: the file when it is truncated and that is not allowed. Two dumps are compared
  // as they are, so truncation alone does not fail them.
  std::optional<std::string> truncated;
  std::vector<OverBudget> over_budget;  // in the order of the analyses

  // kFail when any of the above is set, else kPass (bad input never gets this far: the
  // analysis throws).
  Outcome outcome() const;
};

// Judges one analysis (a check) or two (A = baseline, B = candidate: a comparison). Throws
// rtb::Error for any other number of analyses.
Verdict judge(const std::vector<Analysis>& analyses, const CheckOptions& options);

}  // namespace rtb::hlo
