// Measured against scheduled overlap: profile-report --hlo. Each device's op events are joined to
// the scheduled module's instructions by name (an event's name is the instruction's, as XLA's
// TPU profiles name them; a GPU kernel's `hlo_op` stat, SummaryOptions::hlo_op_names); for every
// async pair and synchronous collective that hlo-overlap judges (hlo/analysis.h), the time its done
// (the op itself when synchronous) took on the device in each step, beside the schedule's verdict.
//
// Every device plane is measured on its own (its steps, its waits); a pair whose measured verdict
// differs between devices is listed as a disagreement (one slow chip, a straggler's link).
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
  std::size_t index = 0;  // among the analysis's judged pairs (the same pair on every device)
  std::vector<std::int64_t> step_wait_ps;  // per step of the device
  double mean_wait_ps = 0;                 // per step
  double wait_per_execution_ps = 0;        // mean_wait_ps / executions
  bool measured_exposed = false;
  Agreement agreement = Agreement::kNotInCapture;
};

// "exposed", "hidden" or "not in the capture": what the device measured.
const char* measured_name(const PairMeasure& measure);

struct OverlapStep {
  std::int64_t number = 0;
  std::int64_t planned_hidden_measured_exposed = 0;  // pairs
  std::int64_t their_wait_ps = 0;
};

// The measurement on one device plane.
struct DeviceOverlap {
  std::string plane;
  std::string file;
  std::vector<PairMeasure> pairs;  // in the agreement order above
  std::vector<OverlapStep> steps;
};

// A pair whose measured verdict is not the same on every device: measured exposed on some,
// hidden (or not in the capture) on others.
struct Disagreement {
  hlo::Collective pair;
  // Per device, in the order of Overlap::devices: the index of its measure in that device's pairs.
  std::vector<std::size_t> measures;
};

struct Overlap {
  std::string hlo_file;
  std::string module;
  double min_wait_ps = 0;
  std::vector<DeviceOverlap> devices;  // every device plane, in the summary's order
  // Pairs the devices disagree on, in the first device's order of pairs.
  std::vector<Disagreement> disagreements;
};

// Measures every device of the summary. Throws rtb::Error when the summary has no device.
Overlap measure_overlap(const Summary& summary, const hlo::Analysis& analysis, double min_wait_ps);
// One device's measurement.
DeviceOverlap measure_device_overlap(const Device& device, const hlo::Analysis& analysis,
                                     double min_wait_ps);

std::string format_overlap_text(const Overlap& overlap);
// The value of rtb.profile-report/2's `overlap` (an object), written into `j`.
void write_overlap_json(json::Writer& j, const Overlap& overlap);

}  // namespace rtb::profile
