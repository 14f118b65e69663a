// A run's set-up as bench-report shows and compares it between arms: the staged step boundary,
// MoE dropless replays, the weights, the update path, the log-prob pass, how micro-batches were
// timed and the step's shape (issue 25). A verdict between two arms whose set-ups differ names
// the difference beside it; `--require-same-setup` turns a difference into a failure.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rtb/logs/steplog.h"

namespace rtb::logs::report {

// One item of a run's set-up. `compared` is what two arms must agree on; `shown` what the tables
// say. Both nullopt: the log does not say.
struct SetupItem {
  std::string key;  // "staging", "replays", "weights", "update", "logps", "mb_timing", "shape"
  std::optional<std::string> shown;
  std::optional<std::string> compared;
};

struct RunSetup {
  // The log carries issue 25's fields (a driver from then on). Runs whose logs do not show no
  // set-up, so that older logs print as before.
  bool logged = false;
  std::vector<SetupItem> items;  // in the order of kSetupKeys
  // Means over the steps used; nullopt unless every step used logs the figure.
  std::optional<double> boundary_free_step_s;  // an ESTIMATE (BENCH_STEP boundary_free_step_s)
  std::optional<double> train_step_s;          // the step minus its log-prob pass
  std::optional<double> fence_s;               // BENCH_SUMMARY fence_s
  std::optional<std::int64_t> replays;         // summed over replay_counted_steps
  std::int64_t replay_counted_steps = 0;
  // Which steps `replays` covers, for a sentence: "the 3 steps used" (BENCH_STEP replays of the
  // steps used), or "the 4 steps its BENCH_SUMMARY counted" (no step logs them).
  std::string replay_scope;

  const SetupItem* find(const std::string& key) const;
};

// The keys of a set-up, in order, and their labels ("staging", "log-prob pass", ...).
inline constexpr const char* kSetupKeys[] = {"staging", "replays",   "weights", "update",
                                             "logps",   "mb_timing", "shape"};
const char* setup_label(const std::string& key);

// The set-up of `log` over the steps `used`; `mb_timing` is how the run's micro-batch times were
// measured ("device", "dispatch", "mixed", "unlabelled"), empty when it has none.
RunSetup run_setup(const steplog::RunLog& log, const std::set<std::int64_t>& used,
                   const std::string& mb_timing);

// How two arms' set-ups compare.
struct SetupDifference {
  bool evaluated = false;            // at least one arm logs its set-up
  std::vector<std::string> differs;  // "staging on (4 steps staged) vs off", ...
  std::vector<std::string> unknown;  // "weights (ab-ctl does not log it)", ...
  // "same", "differs: staging off vs on, ...", "unknown: weights (x does not log it)", or both
  // joined by "; "; empty when not evaluated.
  std::string text() const;
};
SetupDifference compare_setups(const std::string& control_name, const RunSetup& control,
                               const std::string& run_name, const RunSetup& run);

}  // namespace rtb::logs::report
