#include "rtb/hlo/verdict.h"

#include "rtb/base/error.h"
#include "rtb/hlo/report.h"

namespace rtb::hlo {

Outcome Verdict::outcome() const {
  return outcome_of(!differences.empty() || truncated.has_value() || !over_budget.empty());
}

Verdict judge(const std::vector<Analysis>& analyses, const CheckOptions& options) {
  if (analyses.size() != 1 && analyses.size() != 2) {
    fail("hlo-overlap judges one dump or two (A and B), not {}", analyses.size());
  }
  Verdict verdict;
  if (analyses.size() == 2) {
    verdict.differences = compare_differences(analyses[0], analyses[1]);
  } else if (analyses[0].truncated && !options.allow_truncated) {
    verdict.truncated = analyses[0].file;
  }
  if (options.exposed_bytes_budget) {
    for (const Analysis& a : analyses) {
      std::int64_t exposed = a.total_collectives.exposed_bytes;
      if (exposed > *options.exposed_bytes_budget) {
        verdict.over_budget.push_back({a.file, exposed, *options.exposed_bytes_budget});
      }
    }
  }
  return verdict;
}

}  // namespace rtb::hlo
