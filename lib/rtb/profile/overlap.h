// Measured against scheduled overlap: profile-report --hlo. The device's op events are joined to
// the scheduled module's instructions by name (an event's name is the instruction's, as XLA's
// TPU profiles name them; a GPU kernel's `hlo_op` stat, SummaryOptions::hlo_op_names); for every
// async pair and synchronous collective that hlo-overlap judges (hlo/analysis.h), the time its done
// (the op itself when synchronous) took on the device in each step, beside the schedule's verdict.
//
// - wait: the done's self time on the device, per step (all its executions in the step);
// - measured exposed: the mean wait per step, divided by the pair's executions per step (the
//   trip-count weight hlo-overlap gives it), is at least `min_wait_ps`;
// - agreement, the order in which pairs are listed: "planned hidden, measured exposed" first
//   (the schedule overlapped the pair, the device still waited), then "planned exposed,
//   measured hidden", then those that agree, then those whose done has no event ("not in the
//   capture"); within each, the longest mean wait first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rtb/base/json.h"
#include "rtb/hlo/analysis.h"
#include "rtb/profile/summary.h"

namespace rtb::profile {

enum class Agreement {
  kPlannedHiddenMeasuredExposed,
  kPlannedExposedMeasuredHidden,
  kAgree,
  kNotInCapture,
};
const char* agreement_name(Agreement agreement);

struct PairMeasure {
  hlo::Collective pair;
  std::vector<std::int64_t> step_wait_ps;  // per step of the device
  double mean_wait_ps = 0;                 // per step
  double wait_per_execution_ps = 0;        // mean_wait_ps / executions
  bool measured_exposed = false;
  Agreement agreement = Agreement::kNotInCapture;
};

struct OverlapStep {
  std::int64_t number = 0;
  std::int64_t planned_hidden_measured_exposed = 0;  // pairs
  std::int64_t their_wait_ps = 0;
};

struct Overlap {
  std::string hlo_file;
  std::string module;
  std::string plane;  // the device measured (the first)
  double min_wait_ps = 0;
  std::vector<PairMeasure> pairs;  // in the agreement order above
  std::vector<OverlapStep> steps;
};

// Throws rtb::Error when the summary has no device.
Overlap measure_overlap(const Summary& summary, const hlo::Analysis& analysis, double min_wait_ps);

std::string format_overlap_text(const Overlap& overlap);
// The value of rtb.profile-report/1's `overlap` (an object), written into `j`.
void write_overlap_json(json::Writer& j, const Overlap& overlap);

}  // namespace rtb::profile
